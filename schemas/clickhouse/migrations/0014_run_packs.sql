-- Run packs (schemas.RunPack): the occupancy and idle runs of one project
-- whose start falls on one UTC day, as one batch wrote them, in one binary
-- String, inserted with the batch's runs (one more INSERT per batch). A usage
-- read of a project decodes its few dozen packs instead of reading its
-- thousands of run rows (reads.PackedRuns). A batch retried after a failed
-- insert inserts its packs again: readers union the runs, so repeats are
-- harmless, as they are for run rows. min_ms and max_ms are the smallest
-- start and the largest end of the pack's runs.
CREATE TABLE IF NOT EXISTS run_packs (
    day         Date,
    project     String,
    min_ms      Int64,
    max_ms      Int64,
    runs        String
) ENGINE = MergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (project, day)
