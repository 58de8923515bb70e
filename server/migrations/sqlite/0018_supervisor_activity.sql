-- An admin's live view is logged in the session's activity
-- (SUPERVISOR_JOINED, SUPERVISOR_LEFT): the kind's CHECK grows. SQLite
-- changes a CHECK by rebuilding the table; nothing refers to it.
CREATE TABLE activity_events_v18 (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    kind         TEXT NOT NULL CHECK (kind IN ('SESSION_START', 'SESSION_END', 'PAUSE', 'RESUME',
                   'ACTIVITY_CHECK', 'INACTIVITY_WARNING', 'INACTIVITY_STOP', 'OPERATOR_SWITCH', 'ERROR',
                   'SUPERVISOR_JOINED', 'SUPERVISOR_LEFT')),
    at           INTEGER NOT NULL,
    operator_id  TEXT,
    detail       TEXT
);
INSERT INTO activity_events_v18 (id, org_id, session_id, kind, at, operator_id, detail)
    SELECT id, org_id, session_id, kind, at, operator_id, detail FROM activity_events;
DROP TABLE activity_events;
ALTER TABLE activity_events_v18 RENAME TO activity_events;
CREATE INDEX activity_events_by_session ON activity_events(session_id, id);
