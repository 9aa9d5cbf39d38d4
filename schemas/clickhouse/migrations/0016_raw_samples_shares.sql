-- A share of a card (the sample's share_kind, share_mem, share_cores: a vGPU
-- instance, a HAMi allocation, time-sliced replicas): the kind ('' on whole
-- cards and MIG slices) and the share's fractions of the card's memory and
-- compute, in (0, 1], NULL when the sample has none (as util). Not part of the
-- sorting key: the instance id already names the share. Rows written before
-- this migration read as no share. One ALTER with three actions, applied as
-- one change of the table's metadata; the runner skips it when share_kind is
-- already there (ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS).
ALTER TABLE raw_samples
    ADD COLUMN share_kind {{LC_STRING}} DEFAULT '' AFTER holder_ref,
    ADD COLUMN share_mem Nullable(Float64) AFTER share_kind,
    ADD COLUMN share_cores Nullable(Float64) AFTER share_mem
