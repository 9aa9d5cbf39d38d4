-- Sessions of people signed in through the site's identity provider, and
-- the login attempts of redirect sign-ins between leaving for the provider
-- and coming back (PostgreSQL). A session is kept by the SHA-256 of its
-- secret, an attempt by the SHA-256 of its state: never what the browser
-- presents.

CREATE TABLE ledger_sessions (
	id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	hash         BYTEA  NOT NULL UNIQUE,
	person       TEXT   NOT NULL,
	name         TEXT   NOT NULL DEFAULT '',
	grants_json  TEXT   NOT NULL,
	active       BIGINT NOT NULL DEFAULT 0 CHECK (active >= 0),
	csrf         TEXT   NOT NULL,
	logout_hint  TEXT   NOT NULL DEFAULT '',
	created_ms   BIGINT NOT NULL,
	last_seen_ms BIGINT NOT NULL,
	idle_ms      BIGINT NOT NULL CHECK (idle_ms > 0),
	expires_ms   BIGINT NOT NULL,
	ended_ms     BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE ledger_login_attempts (
	state_hash BYTEA  PRIMARY KEY,
	provider   TEXT   NOT NULL,
	nonce      TEXT   NOT NULL DEFAULT '',
	verifier   TEXT   NOT NULL DEFAULT '',
	return_to  TEXT   NOT NULL DEFAULT '',
	created_ms BIGINT NOT NULL,
	expires_ms BIGINT NOT NULL
);
-- Expired attempts are deleted on every BeginLogin.
CREATE INDEX ledger_login_attempts_expires ON ledger_login_attempts (expires_ms);
