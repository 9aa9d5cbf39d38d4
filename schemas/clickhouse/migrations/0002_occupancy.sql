-- Occupancy rollups: per key (project, user, instance_id, gpu_model, profile) the
-- union of its samples' intervals, merged only where samples touch or overlap
-- (gaps are never bridged at ingest: the tolerance is a catalog setting). A run
-- that grows is written again with the same start and a later end; the version
-- column end_ms makes ReplacingMergeTree keep the longest, and readers take
-- max(end_ms) per (key, start_ms) instead of trusting merges. Runs are cut at UTC
-- month boundaries, so every row lies in the partition of its start.
CREATE TABLE IF NOT EXISTS occupancy (
    start       DateTime('UTC'),
    project     {{LC_STRING}},
    user        String,
    instance_id String,
    gpu_model   {{LC_STRING}},
    profile     {{LC_STRING}},
    start_ms    Int64,
    end_ms      Int64
) ENGINE = ReplacingMergeTree(end_ms)
PARTITION BY toYYYYMM(start)
ORDER BY (project, user, instance_id, gpu_model, profile, start_ms)
