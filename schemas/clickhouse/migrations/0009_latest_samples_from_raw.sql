-- Fill latest_samples for stores written before version 8: per instance, its
-- latest held raw sample of the last two days (older holdings are over; an
-- instance held again gets its row from ingest). The ts bound keeps the read
-- to the current partitions. Running it again is harmless: an older row loses
-- to a newer one (see 0008).
INSERT INTO latest_samples (instance_id, start_ms, interval_ms, node, gpu_uuid, gpu_model, profile, project, user, util, util_known, processes, holder_ref)
SELECT instance_id, max(start_ms), argMax(interval_ms, start_ms), argMax(node, start_ms), argMax(gpu_uuid, start_ms),
       argMax(gpu_model, start_ms), argMax(profile, start_ms), argMax(project, start_ms), argMax(user, start_ms),
       argMax(ifNull(util, 0), start_ms), argMax(isNotNull(util), start_ms), argMax(processes, start_ms), argMax(holder_ref, start_ms)
FROM raw_samples
WHERE ts >= now() - INTERVAL 2 DAY AND project != ''
GROUP BY instance_id
