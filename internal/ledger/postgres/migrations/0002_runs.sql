-- The roster, billing runs and export runs (PostgreSQL).

-- Students per project; a student ID may be in several projects (courses).
CREATE TABLE ledger_students (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	project    TEXT    NOT NULL,
	user_name  TEXT    NOT NULL,
	name       TEXT    NOT NULL DEFAULT '',
	email      TEXT    NOT NULL DEFAULT '',
	im         TEXT    NOT NULL DEFAULT '',
	updated_ms BIGINT  NOT NULL,
	UNIQUE (project, user_name)
);
CREATE INDEX ledger_students_user ON ledger_students (user_name, id);

-- Billing runs of a period with their report (JSON text).
CREATE TABLE ledger_billing_runs (
	id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	period          TEXT    NOT NULL,
	actor           TEXT    NOT NULL,
	catalog_version BIGINT  NOT NULL REFERENCES ledger_catalog_versions (version),
	data_cutoff_ms  BIGINT  NOT NULL,
	report          TEXT    NOT NULL,
	created_ms      BIGINT  NOT NULL
);
CREATE INDEX ledger_billing_runs_period ON ledger_billing_runs (period, id);

-- Export runs: one per period and target, inserted before the export is
-- made (an outbox), so that a period is never exported or sent twice.
CREATE TABLE ledger_export_runs (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	period     TEXT    NOT NULL,
	target     TEXT    NOT NULL,
	status     TEXT    NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
	files_json TEXT    NOT NULL DEFAULT '[]',
	attempts   BIGINT  NOT NULL DEFAULT 0,
	last_error TEXT    NOT NULL DEFAULT '',
	created_ms BIGINT  NOT NULL,
	updated_ms BIGINT  NOT NULL,
	done_ms    BIGINT  NOT NULL DEFAULT 0,
	UNIQUE (period, target)
);
