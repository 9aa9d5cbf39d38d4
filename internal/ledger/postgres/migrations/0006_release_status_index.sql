-- The watcher lists the pending releases every cycle, and a billing run the
-- done or failed ones changed since its period began: by status, then time
-- changed, instead of a scan of every release ever made.
CREATE INDEX ledger_releases_status ON ledger_releases (status, updated_ms);
