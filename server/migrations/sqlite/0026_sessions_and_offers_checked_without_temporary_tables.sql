-- Sessions and offers check their states with `=` and OR (issue "Engine
-- v3"). SQLite checks an IN list of three or more constants by building
-- a temporary b-tree of it (opened, filled, closed, with a page cache of
-- its own) every time a statement runs: a new session built two (its
-- lifecycle and its safety state), a new offer one, and each change of a
-- session's or an offer's state one (BENCHMARKS.md, Engine v3 nineteenth
-- part). The states allowed are the same.
--
-- SQLite changes a CHECK only by rebuilding the table. Nothing refers to
-- offers: it is copied, dropped and replaced by its copy (as in 0024).
-- Seven tables refer to sessions, and sqlx runs a migration in a
-- transaction, where foreign keys cannot be switched off. Dropping a table
-- deletes its rows first, and every child row then lacks its session: the
-- drop fails at once, or, with the check deferred to the commit, counts
-- each such row as a violation. Only rows inserted into a table named
-- sessions count them back (a copy renamed to sessions would not, and the
-- commit would fail). So the rows are put aside in a plain table, sessions
-- is dropped and made again under its name, and the rows (with their
-- rowids) go back: the commit finds no child without its session. Every
-- child table has an index on its session, so each count is a probe.
-- (`defer_foreign_keys` ends with the transaction.)

PRAGMA defer_foreign_keys = ON;

CREATE TABLE sessions_v25_rows AS
    SELECT rowid AS row_id, id, org_id, robot_id, skill, pop, lifecycle, safety_state, operator_id, operator_region,
           rtt_ms, divergence_deg, velocity_scale, raised_at, queued_at, started_at, ended_at, end_reason,
           client_id, booking_id, planned_end_at
    FROM sessions;
DROP TABLE sessions;

CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    org_id           TEXT NOT NULL REFERENCES orgs(id),
    robot_id         TEXT NOT NULL,
    skill            TEXT NOT NULL,
    pop              TEXT NOT NULL,
    lifecycle        TEXT NOT NULL DEFAULT 'PENDING'
                     CHECK (lifecycle = 'PENDING' OR lifecycle = 'ACTIVE' OR lifecycle = 'PAUSED'
                       OR lifecycle = 'COMPLETED' OR lifecycle = 'CANCELLED'),
    safety_state     TEXT NOT NULL DEFAULT 'BOOT'
                     CHECK (safety_state = 'BOOT' OR safety_state = 'SAFE' OR safety_state = 'ARMED'
                       OR safety_state = 'DEGRADED' OR safety_state = 'DIVERGED' OR safety_state = 'PROTECTIVE_STOP'),
    operator_id      TEXT REFERENCES users(id),
    operator_region  TEXT,
    rtt_ms           INTEGER,
    divergence_deg   REAL,
    velocity_scale   REAL,
    raised_at        INTEGER NOT NULL,
    queued_at        INTEGER,
    started_at       INTEGER,
    ended_at         INTEGER,
    end_reason       TEXT,
    client_id        TEXT REFERENCES users(id),
    booking_id       TEXT,
    planned_end_at   INTEGER,
    FOREIGN KEY (org_id, robot_id) REFERENCES robots(org_id, id)
);
INSERT INTO sessions (rowid, id, org_id, robot_id, skill, pop, lifecycle, safety_state, operator_id, operator_region,
                      rtt_ms, divergence_deg, velocity_scale, raised_at, queued_at, started_at, ended_at, end_reason,
                      client_id, booking_id, planned_end_at)
    SELECT row_id, id, org_id, robot_id, skill, pop, lifecycle, safety_state, operator_id, operator_region,
           rtt_ms, divergence_deg, velocity_scale, raised_at, queued_at, started_at, ended_at, end_reason,
           client_id, booking_id, planned_end_at
    FROM sessions_v25_rows;
DROP TABLE sessions_v25_rows;
CREATE INDEX sessions_by_org_day ON sessions(org_id, raised_at) WHERE raised_at IS NOT NULL;
CREATE UNIQUE INDEX sessions_one_open_per_robot ON sessions(org_id, robot_id)
    WHERE lifecycle NOT IN ('COMPLETED', 'CANCELLED');
CREATE INDEX sessions_by_client ON sessions(org_id, client_id) WHERE client_id IS NOT NULL;

CREATE TABLE offers_v26 (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    operator_id  TEXT NOT NULL REFERENCES users(id),
    rtt_ms       INTEGER NOT NULL,
    offered_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT 'open'
                 CHECK (status = 'open' OR status = 'accepted' OR status = 'declined'
                   OR status = 'expired' OR status = 'withdrawn'),
    answered_at  INTEGER
);
INSERT INTO offers_v26 (rowid, id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at, status, answered_at)
    SELECT rowid, id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at, status, answered_at FROM offers;
DROP TABLE offers;
ALTER TABLE offers_v26 RENAME TO offers;
CREATE UNIQUE INDEX offers_one_open_per_operator ON offers(operator_id) WHERE status = 'open';
CREATE UNIQUE INDEX offers_one_open_per_session ON offers(session_id) WHERE status = 'open';
CREATE INDEX offers_by_session ON offers(session_id);
