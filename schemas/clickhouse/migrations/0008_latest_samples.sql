-- The latest held sample of every instance: what "held now" starts from
-- (who holds it, since when it was last seen, its utilisation, how to reach
-- the holder), without reading raw_samples by time, which scans the month's
-- whole partition. Ingest inserts, with each batch's runs, the latest held
-- sample of each key that got a newer one; a replay of older samples inserts
-- none, and one that does (a restarted worker) inserts an older row, which
-- loses: the version column start_ms makes merges keep the row with the
-- greatest start, and readers take argMax(…, start_ms) per instance instead of
-- trusting merges. Small (instances × inserts not yet merged), so neither
-- partitioned nor given a TTL. util is 0 when util_known = 0 (not Nullable:
-- argMax skips NULLs, which would report an older sample's util).
CREATE TABLE IF NOT EXISTS latest_samples (
    instance_id String,
    start_ms    Int64,
    interval_ms Int64,
    node        {{LC_STRING}},
    gpu_uuid    String,
    gpu_model   {{LC_STRING}},
    profile     {{LC_STRING}},
    project     {{LC_STRING}},
    user        String,
    util        Float64,
    util_known  UInt8,
    processes   Int64,
    holder_ref  String
) ENGINE = ReplacingMergeTree(start_ms)
ORDER BY instance_id
