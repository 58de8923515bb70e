-- Robot ids are unique within an org, not across orgs: registering an id
-- another org uses must neither collide nor reveal that it exists.
--
-- SQLite cannot change a primary key or a foreign key in place, and sqlx
-- runs each migration inside a transaction, where foreign keys cannot be
-- switched off. So every table on the path is rebuilt as a new copy that
-- already points at the new copies, children are dropped before their
-- parents (no row is ever orphaned), and the copies take the old names
-- (a rename rewrites the references to it).

CREATE TABLE robots_v4 (
    id                 TEXT NOT NULL,
    org_id             TEXT NOT NULL REFERENCES orgs(id),
    model              TEXT NOT NULL,
    site               TEXT NOT NULL,
    pop                TEXT NOT NULL,
    req_cert           TEXT NOT NULL,
    token_hash         TEXT NOT NULL UNIQUE,
    last_heartbeat_at  INTEGER,
    created_at         INTEGER NOT NULL,
    PRIMARY KEY (org_id, id)
);
INSERT INTO robots_v4 (id, org_id, model, site, pop, req_cert, token_hash, last_heartbeat_at, created_at)
    SELECT id, org_id, model, site, pop, req_cert, token_hash, last_heartbeat_at, created_at FROM robots;

CREATE TABLE sessions_v4 (
    id               TEXT PRIMARY KEY,
    org_id           TEXT NOT NULL REFERENCES orgs(id),
    robot_id         TEXT NOT NULL,
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
    end_reason       TEXT,
    FOREIGN KEY (org_id, robot_id) REFERENCES robots_v4(org_id, id)
);
INSERT INTO sessions_v4 (id, org_id, robot_id, skill, pop, lifecycle, safety_state, operator_id, operator_region,
                         rtt_ms, divergence_deg, velocity_scale, raised_at, queued_at, started_at, ended_at, end_reason)
    SELECT id, org_id, robot_id, skill, pop, lifecycle, safety_state, operator_id, operator_region,
           rtt_ms, divergence_deg, velocity_scale, raised_at, queued_at, started_at, ended_at, end_reason FROM sessions;

CREATE TABLE offers_v4 (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions_v4(id),
    operator_id  TEXT NOT NULL REFERENCES users(id),
    rtt_ms       INTEGER NOT NULL,
    offered_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT 'open'
                 CHECK (status IN ('open', 'accepted', 'declined', 'expired', 'withdrawn')),
    answered_at  INTEGER
);
INSERT INTO offers_v4 (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at, status, answered_at)
    SELECT id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at, status, answered_at FROM offers;

CREATE TABLE activity_events_v4 (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions_v4(id),
    kind         TEXT NOT NULL CHECK (kind IN ('SESSION_START', 'SESSION_END', 'PAUSE', 'RESUME',
                   'ACTIVITY_CHECK', 'INACTIVITY_WARNING', 'INACTIVITY_STOP', 'OPERATOR_SWITCH', 'ERROR')),
    at           INTEGER NOT NULL,
    operator_id  TEXT,
    detail       TEXT
);
INSERT INTO activity_events_v4 (id, org_id, session_id, kind, at, operator_id, detail)
    SELECT id, org_id, session_id, kind, at, operator_id, detail FROM activity_events;

CREATE TABLE dispatch_records_v4 (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions_v4(id),
    at           INTEGER NOT NULL,
    trigger      TEXT NOT NULL,
    pool_source  TEXT NOT NULL,
    outcome      TEXT NOT NULL CHECK (outcome IN ('offered', 'queued')),
    operator_id  TEXT,
    rtt_ms       INTEGER,
    candidates   TEXT NOT NULL
);
INSERT INTO dispatch_records_v4 (id, org_id, session_id, at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates)
    SELECT id, org_id, session_id, at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates FROM dispatch_records;

-- Children first, so no row is ever without its parent.
DROP TABLE dispatch_records;
DROP TABLE activity_events;
DROP TABLE offers;
DROP TABLE sessions;
DROP TABLE robots;

ALTER TABLE robots_v4 RENAME TO robots;
ALTER TABLE sessions_v4 RENAME TO sessions;
ALTER TABLE offers_v4 RENAME TO offers;
ALTER TABLE activity_events_v4 RENAME TO activity_events;
ALTER TABLE dispatch_records_v4 RENAME TO dispatch_records;

CREATE INDEX robots_by_org ON robots(org_id);
CREATE INDEX sessions_by_org_lifecycle ON sessions(org_id, lifecycle);
CREATE INDEX sessions_queue ON sessions(org_id, skill, raised_at, id) WHERE queued_at IS NOT NULL;
CREATE INDEX sessions_by_robot ON sessions(org_id, robot_id, lifecycle);
-- Rule D09, per robot of an org.
CREATE UNIQUE INDEX sessions_one_open_per_robot ON sessions(org_id, robot_id)
    WHERE lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED');
CREATE UNIQUE INDEX offers_one_open_per_operator ON offers(operator_id) WHERE status = 'open';
CREATE UNIQUE INDEX offers_one_open_per_session ON offers(session_id) WHERE status = 'open';
CREATE INDEX offers_by_session ON offers(session_id);
CREATE INDEX offers_by_org_status ON offers(org_id, status);
CREATE INDEX activity_events_by_session ON activity_events(session_id, id);
CREATE INDEX dispatch_records_by_session ON dispatch_records(session_id, id);
