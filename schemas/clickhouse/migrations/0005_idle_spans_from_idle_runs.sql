-- Carry the idle runs written before version 4 over to idle_spans: a run of one
-- exact utilisation is a class run with min_util = max_util = util. Re-running
-- this copy is harmless (the reader takes max(end_ms) per run start). From here
-- on ingest writes and billing reads idle_spans only; idle_runs is kept as it was
-- (drop it by hand once no older ingest version writes to it).
INSERT INTO idle_spans (start, project, user, instance_id, gpu_model, profile, class, min_util, max_util, start_ms, end_ms)
SELECT start, project, user, instance_id, gpu_model, profile,
       multiIf(util_known = 0, 0, util < 0.05, 1, util < 0.10, 2, util < 0.20, 3, util < 0.50, 4, 5),
       util, util, start_ms, end_ms
FROM idle_runs
WHERE util_known = 0 OR util < 1
