-- Fill run_packs from the runs written before version 14, once: done in Go by
-- the migration runner (ingest/clickhouse, fillPacks), which reads occupancy
-- and idle_spans one month at a time and inserts their packs; SQL cannot
-- encode a pack. Running it again inserts repeats, which readers absorb.
SELECT 1
