-- Idle-candidate runs by utilisation class (replaces idle_runs, see 0005).
-- Held samples that are idle under SOME catalog, merged when they touch or
-- overlap and fall in the same class:
--   class 0: util null and processes = 0 (idle for every catalog);
--   class 1..5: util known in [0, 0.05), [0.05, 0.10), [0.10, 0.20),
--               [0.20, 0.50), [0.50, 1); min_util/max_util are the extremes of
--               the run's samples.
-- Under a threshold T a run is idle entirely when max_util < T and not at all
-- when min_util >= T; otherwise (T not a class bound) the reader decides from
-- the run's raw samples. Growing runs are rewritten with the same start and a
-- later end; min_util and max_util are part of the sorting key, so that a merge
-- only ever drops a row that a kept row with the same utilisation range covers.
-- Samples with null util and processes > 0, or util >= 1, are never idle and are
-- not stored here. Runs are cut at UTC month boundaries, like occupancy.
CREATE TABLE IF NOT EXISTS idle_spans (
    start       DateTime('UTC'),
    project     {{LC_STRING}},
    user        String,
    instance_id String,
    gpu_model   {{LC_STRING}},
    profile     {{LC_STRING}},
    class       UInt8,
    min_util    Float64,
    max_util    Float64,
    start_ms    Int64,
    end_ms      Int64
) ENGINE = ReplacingMergeTree(end_ms)
PARTITION BY toYYYYMM(start)
ORDER BY (project, user, instance_id, gpu_model, profile, class, start_ms, min_util, max_util)
