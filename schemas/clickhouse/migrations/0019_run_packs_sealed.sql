-- Seal the run packs written before packs were sealed (schemas.RunPack,
-- version 2: the version-1 bytes as one LZ4 block, about a fifth of their
-- size), so that a read of a project reads and receives a fifth as many
-- bytes. ClickHouse 18.16 cannot rewrite a value in place, and SQL cannot
-- encode a pack, so this is done in Go by the migration runner
-- (ingest/clickhouse, resealPacks), as 0018 was: a new table is filled with
-- the sealed packs and renamed into place, the packs written to the old one
-- meanwhile are sealed and copied over, and the old table is dropped.
-- Running it again, after a crash at any step, finishes what was left.
SELECT 1
