-- A credit note is a document: the voided invoice's lines negated, its
-- total, currency and reference, stored with its SHA-256 like an invoice's
-- (empty for credit notes issued before this migration) (PostgreSQL).
ALTER TABLE ledger_credit_notes ADD COLUMN document BYTEA;
ALTER TABLE ledger_credit_notes ADD COLUMN sha256 TEXT NOT NULL DEFAULT '';
