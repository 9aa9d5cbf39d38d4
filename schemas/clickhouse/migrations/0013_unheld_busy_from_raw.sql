-- Fill unheld_busy from the raw samples written before version 12, once
-- (running it again inserts rows that FINAL collapses, see 0012).
INSERT INTO unheld_busy (ts, start_ms, instance_id, user, node, interval_ms, processes, util, ingested_at)
SELECT ts, start_ms, instance_id, user, node, interval_ms, processes, util, ingested_at
FROM raw_samples
WHERE project = '' AND (processes > 0 OR util > 0)
