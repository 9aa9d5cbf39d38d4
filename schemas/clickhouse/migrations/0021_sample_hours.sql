-- Which UTC hours received raw samples, and when: the writer inserts one row
-- per hour of a batch once the batch's raw insert was acknowledged
-- (bucket_ms = the hour's start in ms, ts its DateTime, writer the writing
-- process), written_at taken by the server. An hour of util_hours is used
-- only while no row here is newer than its computation (see 0020). Merges
-- keep the newest row per hour and writer; readers take max(written_at).
CREATE TABLE IF NOT EXISTS sample_hours (
    ts         DateTime('UTC'),
    bucket_ms  Int64,
    writer     String,
    written_at DateTime('UTC') DEFAULT now()
) ENGINE = ReplacingMergeTree(written_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (bucket_ms, writer)
{{RAW_TTL}}
