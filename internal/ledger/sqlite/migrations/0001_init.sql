-- The ledger's first schema (SQLite). Tables are prefixed ledger_ so that
-- the usage store may share the file. Times are Unix milliseconds (UTC).

CREATE TABLE ledger_catalog_versions (
	version    INTEGER PRIMARY KEY,
	content    BLOB    NOT NULL,
	sha256     TEXT    NOT NULL,
	created_by TEXT    NOT NULL,
	created_ms INTEGER NOT NULL
);

CREATE TABLE ledger_invoices (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	project         TEXT    NOT NULL,
	period          TEXT    NOT NULL,
	revision        INTEGER NOT NULL CHECK (revision >= 1),
	status          TEXT    NOT NULL CHECK (status IN ('draft', 'finalized', 'void')),
	number          TEXT,
	number_year     INTEGER,
	number_seq      INTEGER,
	document        BLOB    NOT NULL,
	sha256          TEXT    NOT NULL,
	catalog_version INTEGER NOT NULL REFERENCES ledger_catalog_versions (version),
	data_cutoff_ms  INTEGER NOT NULL,
	created_by      TEXT    NOT NULL,
	created_ms      INTEGER NOT NULL,
	updated_ms      INTEGER NOT NULL,
	finalized_by    TEXT    NOT NULL DEFAULT '',
	finalized_ms    INTEGER NOT NULL DEFAULT 0,
	voided_by       TEXT    NOT NULL DEFAULT '',
	voided_ms       INTEGER NOT NULL DEFAULT 0,
	void_reason     TEXT    NOT NULL DEFAULT '',
	-- The natural key.
	UNIQUE (project, period, revision),
	UNIQUE (number),
	UNIQUE (number_year, number_seq),
	CHECK ((status = 'draft') = (number IS NULL))
);
-- At most one invoice of a project and period is not void.
CREATE UNIQUE INDEX ledger_invoices_live ON ledger_invoices (project, period) WHERE status <> 'void';

-- The last invoice number given out per year of finalization.
CREATE TABLE ledger_invoice_counters (
	year INTEGER PRIMARY KEY,
	last INTEGER NOT NULL
);

CREATE TABLE ledger_credit_notes (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	invoice_id INTEGER NOT NULL REFERENCES ledger_invoices (id),
	seq        INTEGER NOT NULL CHECK (seq >= 1),
	number     TEXT    NOT NULL UNIQUE,
	reason     TEXT    NOT NULL,
	created_by TEXT    NOT NULL,
	created_ms INTEGER NOT NULL,
	UNIQUE (invoice_id, seq)
);

CREATE TABLE ledger_tokens (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	hash       BLOB    NOT NULL UNIQUE,
	role       TEXT    NOT NULL CHECK (role IN ('admin', 'finance', 'lead', 'student')),
	project    TEXT    NOT NULL DEFAULT '',
	user_name  TEXT    NOT NULL DEFAULT '',
	name       TEXT    NOT NULL DEFAULT '',
	created_by TEXT    NOT NULL,
	created_ms INTEGER NOT NULL,
	expires_ms INTEGER NOT NULL,
	revoked_by TEXT    NOT NULL DEFAULT '',
	revoked_ms INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE ledger_audit (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	at_ms       INTEGER NOT NULL,
	actor       TEXT    NOT NULL,
	action      TEXT    NOT NULL,
	object      TEXT    NOT NULL,
	before_json TEXT,
	after_json  TEXT
);
CREATE INDEX ledger_audit_object ON ledger_audit (object, id);
CREATE INDEX ledger_audit_actor ON ledger_audit (actor, id);
CREATE INDEX ledger_audit_at ON ledger_audit (at_ms);

-- Named locks: a transaction writes the row to queue other writers of the
-- same name behind it until it ends ("catalog", "invoice/<project>/<period>").
CREATE TABLE ledger_locks (
	name TEXT PRIMARY KEY
);

-- Leader leases of the watchers.
CREATE TABLE ledger_leases (
	name       TEXT    PRIMARY KEY,
	holder     TEXT    NOT NULL,
	expires_ms INTEGER NOT NULL
);
