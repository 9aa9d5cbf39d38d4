-- The watch: alerts with their deliveries (an outbox), releases,
-- exemptions and budgets (SQLite).

-- Alerts: one per natural key (kind, instance and idle streak start, or
-- budget scope, subject, period and threshold), inserted before anything
-- is sent, so that a restart or a second replica never sends one twice.
CREATE TABLE ledger_alerts (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	natural_key     TEXT    NOT NULL UNIQUE,
	kind            TEXT    NOT NULL,
	project         TEXT    NOT NULL DEFAULT '',
	user_name       TEXT    NOT NULL DEFAULT '',
	instance_id     TEXT    NOT NULL DEFAULT '',
	streak_start_ms INTEGER NOT NULL DEFAULT 0,
	budget_id       INTEGER NOT NULL DEFAULT 0,
	period          TEXT    NOT NULL DEFAULT '',
	threshold       INTEGER NOT NULL DEFAULT 0,
	facts_json      TEXT    NOT NULL DEFAULT '{}',
	created_ms      INTEGER NOT NULL,
	acked_by        TEXT    NOT NULL DEFAULT '',
	acked_ms        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX ledger_alerts_project ON ledger_alerts (project, id);
CREATE INDEX ledger_alerts_user ON ledger_alerts (user_name, id);
CREATE INDEX ledger_alerts_created ON ledger_alerts (created_ms);

-- Deliveries of an alert: one per channel and recipient, written with the
-- alert (pending) and sent by the delivery loop with backoff.
CREATE TABLE ledger_deliveries (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	alert_id        INTEGER NOT NULL REFERENCES ledger_alerts (id),
	channel         TEXT    NOT NULL,
	recipient       TEXT    NOT NULL,
	payload_json    TEXT    NOT NULL,
	status          TEXT    NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_ms INTEGER NOT NULL,
	last_error      TEXT    NOT NULL DEFAULT '',
	created_ms      INTEGER NOT NULL,
	updated_ms      INTEGER NOT NULL,
	sent_ms         INTEGER NOT NULL DEFAULT 0,
	UNIQUE (alert_id, channel, recipient)
);
CREATE INDEX ledger_deliveries_due ON ledger_deliveries (status, next_attempt_ms);

-- Releases: one per natural key (instance and idle streak start), inserted
-- pending before the release is attempted.
CREATE TABLE ledger_releases (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	natural_key     TEXT    NOT NULL UNIQUE,
	instance_id     TEXT    NOT NULL,
	node            TEXT    NOT NULL DEFAULT '',
	project         TEXT    NOT NULL DEFAULT '',
	user_name       TEXT    NOT NULL DEFAULT '',
	streak_start_ms INTEGER NOT NULL,
	dry_run         INTEGER NOT NULL DEFAULT 0,
	status          TEXT    NOT NULL CHECK (status IN ('pending', 'done', 'dry_run', 'failed')),
	action          TEXT    NOT NULL DEFAULT '',
	evidence_json   TEXT    NOT NULL DEFAULT '{}',
	attempts        INTEGER NOT NULL DEFAULT 0,
	last_error      TEXT    NOT NULL DEFAULT '',
	retry_ms        INTEGER NOT NULL DEFAULT 0,
	created_ms      INTEGER NOT NULL,
	updated_ms      INTEGER NOT NULL
);
CREATE INDEX ledger_releases_project ON ledger_releases (project, id);
CREATE INDEX ledger_releases_instance ON ledger_releases (instance_id, id);

-- Exemptions from idle warnings and releases: a project, optionally one
-- student and one instance, until a time.
CREATE TABLE ledger_exemptions (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	project     TEXT    NOT NULL,
	user_name   TEXT    NOT NULL DEFAULT '',
	instance_id TEXT    NOT NULL DEFAULT '',
	until_ms    INTEGER NOT NULL,
	reason      TEXT    NOT NULL,
	granted_by  TEXT    NOT NULL,
	created_ms  INTEGER NOT NULL,
	revoked_by  TEXT    NOT NULL DEFAULT '',
	revoked_ms  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX ledger_exemptions_project ON ledger_exemptions (project, id);
CREATE INDEX ledger_exemptions_until ON ledger_exemptions (until_ms);

-- Budgets (配额): one per scope, project, student, period kind and unit.
CREATE TABLE ledger_budgets (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	scope           TEXT    NOT NULL CHECK (scope IN ('project', 'student')),
	project         TEXT    NOT NULL,
	user_name       TEXT    NOT NULL DEFAULT '',
	period_kind     TEXT    NOT NULL CHECK (period_kind IN ('month', 'term')),
	unit            TEXT    NOT NULL CHECK (unit IN ('money', 'card_hours')),
	limit_value     TEXT    NOT NULL,
	thresholds_json TEXT    NOT NULL,
	action          TEXT    NOT NULL CHECK (action IN ('warn', 'release')),
	created_by      TEXT    NOT NULL,
	created_ms      INTEGER NOT NULL,
	updated_ms      INTEGER NOT NULL,
	UNIQUE (scope, project, user_name, period_kind, unit)
);
