-- Three pages a batch's WAL need not hold (issue "Engine v3"). A commit
-- writes one WAL frame for each page it changed, and those frames are a
-- third of the dispatch thread (BENCHMARKS.md, Engine v3 fifteenth part).
-- Counted in the WAL of a full-cycle run (seventeenth part), a batch
-- wrote 17.5 pages, of them:
-- - 1.3 for the event log's key (`org_id`, `id`), kept beside its rows:
--   the log becomes a table WITHOUT ROWID, its rows stored in its key's
--   order, one b-tree instead of two. Its rows are small (a record's data
--   is a few dozen bytes), as such a table wants;
-- - 1.2 for `org_events_by_at`: retention walks each org's log from its
--   oldest record by the key instead (store/event_log.rs, `prune_events`);
--   no other read takes it;
-- - 1.0 for `sqlite_sequence`: `activity_events` and `dispatch_records`
--   lose AUTOINCREMENT. Nothing deletes their rows, so a plain integer key
--   (the largest plus one) gives the ids AUTOINCREMENT gave and never
--   reuses one.
-- The activity's kinds are checked with `=` and OR: SQLite checks an IN
-- list of three or more constants by building a temporary b-tree of it at
-- every insert.
-- Nothing refers to these three tables, so each is rebuilt and renamed.

CREATE TABLE org_events_v24 (
    org_id     TEXT NOT NULL REFERENCES orgs(id),
    id         INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    session_id TEXT,
    robot_id   TEXT,
    -- The type's fields, JSON (domain::event_log::LogEvent's data).
    data       TEXT NOT NULL,
    PRIMARY KEY (org_id, id)
) WITHOUT ROWID;
INSERT INTO org_events_v24 (org_id, id, at, kind, session_id, robot_id, data)
    SELECT org_id, id, at, kind, session_id, robot_id, data FROM org_events;
DROP TABLE org_events;
ALTER TABLE org_events_v24 RENAME TO org_events;

CREATE TABLE activity_events_v24 (
    id           INTEGER PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    kind         TEXT NOT NULL CHECK (kind = 'SESSION_START' OR kind = 'SESSION_END' OR kind = 'PAUSE'
                   OR kind = 'RESUME' OR kind = 'ACTIVITY_CHECK' OR kind = 'INACTIVITY_WARNING'
                   OR kind = 'INACTIVITY_STOP' OR kind = 'OPERATOR_SWITCH' OR kind = 'ERROR'
                   OR kind = 'SUPERVISOR_JOINED' OR kind = 'SUPERVISOR_LEFT'),
    at           INTEGER NOT NULL,
    operator_id  TEXT,
    detail       TEXT
);
INSERT INTO activity_events_v24 (id, org_id, session_id, kind, at, operator_id, detail)
    SELECT id, org_id, session_id, kind, at, operator_id, detail FROM activity_events;
DROP TABLE activity_events;
ALTER TABLE activity_events_v24 RENAME TO activity_events;
CREATE INDEX activity_events_by_session ON activity_events(session_id, id);

CREATE TABLE dispatch_records_v24 (
    id           INTEGER PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    at           INTEGER NOT NULL,
    trigger      TEXT NOT NULL,
    pool_source  TEXT NOT NULL,
    outcome      TEXT NOT NULL CHECK (outcome IN ('offered', 'queued')),
    operator_id  TEXT,
    rtt_ms       INTEGER,
    candidates   TEXT NOT NULL
);
INSERT INTO dispatch_records_v24 (id, org_id, session_id, at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates)
    SELECT id, org_id, session_id, at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates FROM dispatch_records;
DROP TABLE dispatch_records;
ALTER TABLE dispatch_records_v24 RENAME TO dispatch_records;
CREATE INDEX dispatch_records_by_session ON dispatch_records(session_id, id);
