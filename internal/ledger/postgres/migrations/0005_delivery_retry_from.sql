-- Deliveries are retried for a horizon (watch.delivery_retry_for) counted
-- from retry_from_ms: when the delivery was first due, or when an admin
-- re-sent it after it failed for good.
ALTER TABLE ledger_deliveries ADD COLUMN retry_from_ms BIGINT NOT NULL DEFAULT 0;
UPDATE ledger_deliveries SET retry_from_ms = GREATEST(created_ms, next_attempt_ms) WHERE attempts = 0 AND status = 'pending';
UPDATE ledger_deliveries SET retry_from_ms = created_ms WHERE retry_from_ms = 0;
