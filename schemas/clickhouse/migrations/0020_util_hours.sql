-- The efficiency reads' hourly sums (reads.Occupancy, reads.UtilHeatmap),
-- computed from raw_samples FINAL by the writer for the UTC hours that have
-- ended (ingest/clickhouse, RefreshHourlySums), so that a read of a month sums
-- nodes × hours rows instead of every sample. One computation of a set of
-- hours writes its rows (marker 0: the sums of one node, GPU model and hour,
-- as UtilSQL groups them) and then one marker row per hour (marker 1), all
-- under one compute_id (the server's unix time at its start in the high 32
-- bits, random low bits). Readers use, per hour, the computation with the
-- highest compute_id that has its marker, and only when no sample of that
-- hour was written since it started (sample_hours); every other hour is read
-- from the raw samples. A replay never changes a sum: an hour it writes to is
-- computed again, from the deduplicated samples. Rows of older computations
-- are never read. Kept as long as raw samples.
CREATE TABLE IF NOT EXISTS util_hours (
    ts                 DateTime('UTC'),
    bucket_ms          Int64,
    compute_id         UInt64,
    marker             UInt8,
    node               {{LC_STRING}},
    gpu_model          {{LC_STRING}},
    seen_ms            Int64,
    held_ms            Int64,
    measured_ms        Int64,
    held_unmeasured_ms Int64,
    util_ms            Float64
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (bucket_ms, compute_id, marker, node, gpu_model)
{{RAW_TTL}}
