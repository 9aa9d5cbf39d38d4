-- Unattributed usage for the data-quality check, written by ingest with each
-- batch's raw samples (ingest.Activity): the unheld samples (project '') that
-- an idle threshold above 0 may call busy (processes > 0 or util > 0), with
-- the columns the check reads. Few (usage that nobody holds), with the raw
-- sample's identity and version, so that readers collapse replays with FINAL
-- as they do raw_samples'. A threshold of 0 (every unheld sample of known
-- util busy) is answered from raw_samples. Kept as long as raw samples.
CREATE TABLE IF NOT EXISTS unheld_busy (
    ts          DateTime('UTC'),
    start_ms    Int64,
    instance_id String,
    user        String,
    node        {{LC_STRING}},
    interval_ms Int64,
    processes   Int64,
    util        Nullable(Float64),
    ingested_at DateTime('UTC')
) ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (instance_id, start_ms, user)
{{RAW_TTL}}
