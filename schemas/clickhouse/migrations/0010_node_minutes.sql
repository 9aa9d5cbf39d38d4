-- Node activity for the data-quality check (silent nodes), written by ingest
-- with each batch's raw samples (ingest.Activity): one row per UTC minute
-- (minute_ms = start_ms - start_ms % 60000, ts its DateTime) in which a sample
-- of the node starts. A replay inserts the same rows again; merges collapse
-- them and readers GROUP BY (minute_ms, node) instead of trusting merges.
-- Nodes × minutes, a few hundred times smaller than raw_samples, so the check
-- no longer scans the month's raw partition. Kept as long as raw samples.
CREATE TABLE IF NOT EXISTS node_minutes (
    ts        DateTime('UTC'),
    minute_ms Int64,
    node      {{LC_STRING}}
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (minute_ms, node)
{{RAW_TTL}}
