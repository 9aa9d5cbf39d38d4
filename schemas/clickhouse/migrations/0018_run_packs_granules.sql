-- Recreate run_packs with index granules of 16 rows: a pack is a few kB, and
-- with the default 8 192 rows a granule held every project's packs of a month,
-- so a read of one project read and decompressed them all. Done in Go by the
-- migration runner (ingest/clickhouse, regranulePacks): a new table is filled
-- from the old one and renamed into its place, the packs written to the old
-- one meanwhile are copied over, and the old table is dropped. Running it
-- again, after a crash at any step, finishes what was left.
SELECT 1
