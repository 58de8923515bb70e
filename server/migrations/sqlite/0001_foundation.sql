-- ClutchCall schema, SQLite flavour. Times are Unix milliseconds (INTEGER).
-- Kept column-for-column equal to ../postgres/0001_foundation.sql.

CREATE TABLE orgs (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    email          TEXT NOT NULL UNIQUE,
    display_name   TEXT NOT NULL,
    external_id    TEXT,
    password_hash  TEXT NOT NULL,
    created_at     INTEGER NOT NULL
);

CREATE TABLE memberships (
    org_id   TEXT NOT NULL REFERENCES orgs(id),
    user_id  TEXT NOT NULL REFERENCES users(id),
    role     TEXT NOT NULL CHECK (role IN ('admin', 'operator')),
    -- The earliest-joined org is the user's home: where a sign-in starts.
    joined_at  INTEGER NOT NULL,
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX memberships_by_user ON memberships(user_id);

CREATE TABLE operator_profiles (
    org_id   TEXT NOT NULL REFERENCES orgs(id),
    user_id  TEXT NOT NULL REFERENCES users(id),
    region   TEXT NOT NULL,
    PRIMARY KEY (org_id, user_id)
);

-- Full certification strings as held, e.g. 'pick-place · tier-2'.
CREATE TABLE operator_certifications (
    org_id         TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    certification  TEXT NOT NULL,
    PRIMARY KEY (org_id, user_id, certification),
    FOREIGN KEY (org_id, user_id) REFERENCES operator_profiles(org_id, user_id)
);

CREATE TABLE robots (
    id                 TEXT PRIMARY KEY,
    org_id             TEXT NOT NULL REFERENCES orgs(id),
    model              TEXT NOT NULL,
    site               TEXT NOT NULL,
    pop                TEXT NOT NULL,
    req_cert           TEXT NOT NULL,
    token_hash         TEXT NOT NULL UNIQUE,
    last_heartbeat_at  INTEGER,
    created_at         INTEGER NOT NULL
);
CREATE INDEX robots_by_org ON robots(org_id);

CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    org_id           TEXT NOT NULL REFERENCES orgs(id),
    robot_id         TEXT NOT NULL REFERENCES robots(id),
    skill            TEXT NOT NULL,
    pop              TEXT NOT NULL,
    lifecycle        TEXT NOT NULL DEFAULT 'PENDING'
                     CHECK (lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED', 'COMPLETED', 'CANCELLED')),
    safety_state     TEXT NOT NULL DEFAULT 'BOOT'
                     CHECK (safety_state IN ('BOOT', 'SAFE', 'ARMED', 'DEGRADED', 'DIVERGED', 'PROTECTIVE_STOP')),
    operator_id      TEXT REFERENCES users(id),
    operator_region  TEXT,
    rtt_ms           INTEGER,
    divergence_deg   REAL,
    velocity_scale   REAL,
    raised_at        INTEGER NOT NULL,
    queued_at        INTEGER,
    started_at       INTEGER,
    ended_at         INTEGER,
    end_reason       TEXT
);
CREATE INDEX sessions_by_org_lifecycle ON sessions(org_id, lifecycle);

CREATE TABLE offers (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    operator_id  TEXT NOT NULL REFERENCES users(id),
    rtt_ms       INTEGER NOT NULL,
    offered_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT 'open'
                 CHECK (status IN ('open', 'accepted', 'declined', 'expired', 'withdrawn')),
    answered_at  INTEGER
);
-- One open offer per operator and per session, enforced by the database.
CREATE UNIQUE INDEX offers_one_open_per_operator ON offers(operator_id) WHERE status = 'open';
CREATE UNIQUE INDEX offers_one_open_per_session ON offers(session_id) WHERE status = 'open';

CREATE TABLE activity_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    kind         TEXT NOT NULL CHECK (kind IN ('SESSION_START', 'SESSION_END', 'PAUSE', 'RESUME',
                   'ACTIVITY_CHECK', 'INACTIVITY_WARNING', 'INACTIVITY_STOP', 'OPERATOR_SWITCH', 'ERROR')),
    at           INTEGER NOT NULL,
    operator_id  TEXT,
    detail       TEXT
);
CREATE INDEX activity_events_by_session ON activity_events(session_id, id);

CREATE TABLE audit_records (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id      TEXT NOT NULL REFERENCES orgs(id),
    at          INTEGER NOT NULL,
    actor_kind  TEXT NOT NULL CHECK (actor_kind IN ('user', 'robot', 'system')),
    actor_id    TEXT,
    action      TEXT NOT NULL,
    session_id  TEXT,
    robot_id    TEXT,
    detail      TEXT
);
CREATE INDEX audit_records_by_org_time ON audit_records(org_id, at);

CREATE TABLE chat_messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    author_id    TEXT NOT NULL,
    author_role  TEXT NOT NULL CHECK (author_role IN ('client', 'operator')),
    body         TEXT NOT NULL,
    at           INTEGER NOT NULL
);
CREATE INDEX chat_messages_by_session ON chat_messages(session_id, id);

-- Propagation floor of an operator region → robot PoP path (seed 000).
CREATE TABLE link_floors (
    region    TEXT NOT NULL,
    pop       TEXT NOT NULL,
    floor_ms  INTEGER NOT NULL CHECK (floor_ms >= 0),
    note      TEXT,
    PRIMARY KEY (region, pop)
);

CREATE TABLE web_sessions (
    token_hash    TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id),
    org_id        TEXT REFERENCES orgs(id),
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
CREATE INDEX web_sessions_by_user ON web_sessions(user_id);
