-- Idle-candidate runs: held samples that are idle under SOME catalog, merged only
-- when they touch and have the same utilisation signature (util_known, util), so
-- that a run is idle under a given threshold either entirely or not at all:
--   util_known = 0: util was null and processes = 0 (idle for every catalog);
--   util_known = 1: util < 1 (idle when util < the project's threshold).
-- Samples with null util and processes > 0 are never idle and are not stored here.
CREATE TABLE IF NOT EXISTS idle_runs (
    start       DateTime('UTC'),
    project     {{LC_STRING}},
    user        String,
    instance_id String,
    gpu_model   {{LC_STRING}},
    profile     {{LC_STRING}},
    util_known  UInt8,
    util        Float64,
    start_ms    Int64,
    end_ms      Int64
) ENGINE = ReplacingMergeTree(end_ms)
PARTITION BY toYYYYMM(start)
ORDER BY (project, user, instance_id, gpu_model, profile, util_known, util, start_ms)
