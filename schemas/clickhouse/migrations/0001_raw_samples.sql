-- Raw samples, one row per received sample, for audit, idle analysis and
-- dashboards. Partitioned by UTC month of ts. ReplacingMergeTree collapses exact
-- replays of a sample (same instance, start, holder) when parts merge; readers
-- that need exact counts use FINAL. The TTL placeholder becomes a raw retention
-- on servers that support TTL (>= 19.6) when one is configured.
CREATE TABLE IF NOT EXISTS raw_samples (
    ts              DateTime('UTC'),
    start_ms        Int64,
    interval_ms     Int64,
    node            {{LC_STRING}},
    gpu_uuid        String,
    gpu_model       {{LC_STRING}},
    instance_id     String,
    profile         {{LC_STRING}},
    project         {{LC_STRING}},
    user            String,
    util            Nullable(Float64),
    mem_used_bytes  Int64,
    mem_total_bytes Int64,
    processes       Int64,
    util_source     {{LC_STRING}},
    ingested_at     DateTime('UTC')
) ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (instance_id, start_ms, project, user)
{{RAW_TTL}}
