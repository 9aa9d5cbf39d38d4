-- The share fields of the latest held samples (see 0016), returned with
-- them by "held now". The fractions are 0 when absent, not Nullable, for the
-- reason util is not (0008): argMax skips NULLs and would report an older
-- sample's share. Rows written before read as no share; skipped by the runner
-- when share_kind is already there.
ALTER TABLE latest_samples
    ADD COLUMN share_kind {{LC_STRING}} DEFAULT '' AFTER holder_ref,
    ADD COLUMN share_mem Float64 DEFAULT 0 AFTER share_kind,
    ADD COLUMN share_cores Float64 DEFAULT 0 AFTER share_mem
