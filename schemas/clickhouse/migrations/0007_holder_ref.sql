-- How to reach the workload that held the instance (the sample's holder_ref:
-- k8s:<namespace>/<pod>, slurm:<jobid>, pid:<pid>; empty when unknown), read by
-- automatic release. It is not part of the sorting key: a replay with another
-- reference is the same sample, and FINAL keeps the latest row's reference.
-- Rows written before this migration read as ''. ClickHouse 18.16 has no
-- ADD COLUMN IF NOT EXISTS: the runner skips this statement when the column
-- is already there.
ALTER TABLE raw_samples ADD COLUMN holder_ref String DEFAULT '' AFTER util_source
