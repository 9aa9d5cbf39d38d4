-- Input rejected at ingest: each invalid line or message that a Kafka worker
-- sent to the dead-letter topic or a back-fill skipped, so that billing can say
-- a period has rejected input. ts/ts_ms are the sample's own time when its ts
-- could be read, else the time it was rejected. source is its position
-- (kafka:TOPIC/PARTITION/OFFSET[#LINE], file:PATH:LINE): a replay writes the
-- same source again, merges collapse such rows, and readers count
-- uniqExact(source), so at-least-once delivery never inflates the count.
CREATE TABLE IF NOT EXISTS rejects (
    ts          DateTime('UTC'),
    ts_ms       Int64,
    source      String,
    reason      {{LC_STRING}},
    error       String,
    ingested_at DateTime('UTC')
) ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(ts)
ORDER BY (ts_ms, source)
