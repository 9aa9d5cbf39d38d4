-- Students' requests for an exemption from the idle policy (one instance or
-- all of theirs, until a time, with a reason), and the decision of the
-- project's lead (or admin, finance): granted (exemption_id is the
-- exemption created) or refused (answer is why). The watcher tells both
-- sides; updated_ms is what its pass reads.
CREATE TABLE ledger_exemption_requests (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	project      TEXT    NOT NULL,
	user_name    TEXT    NOT NULL,
	instance_id  TEXT    NOT NULL DEFAULT '',
	until_ms     INTEGER NOT NULL,
	reason       TEXT    NOT NULL,
	status       TEXT    NOT NULL CHECK (status IN ('pending', 'granted', 'refused')),
	requested_by TEXT    NOT NULL,
	created_ms   INTEGER NOT NULL,
	decided_by   TEXT    NOT NULL DEFAULT '',
	decided_ms   INTEGER NOT NULL DEFAULT 0,
	answer       TEXT    NOT NULL DEFAULT '',
	exemption_id INTEGER NOT NULL DEFAULT 0,
	updated_ms   INTEGER NOT NULL
);
CREATE INDEX ledger_exemption_requests_project ON ledger_exemption_requests (project, id);
CREATE INDEX ledger_exemption_requests_updated ON ledger_exemption_requests (updated_ms);
