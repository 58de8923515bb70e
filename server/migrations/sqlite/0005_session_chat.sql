-- The session chat (rule L09) is also the org's admins': authors may be
-- admins too. SQLite cannot change a CHECK in place, so the (so far unused)
-- table is rebuilt with its rows.
CREATE TABLE chat_messages_v5 (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    author_id    TEXT NOT NULL,
    author_role  TEXT NOT NULL CHECK (author_role IN ('client', 'operator', 'admin')),
    body         TEXT NOT NULL,
    at           INTEGER NOT NULL
);
INSERT INTO chat_messages_v5 (id, org_id, session_id, author_id, author_role, body, at)
    SELECT id, org_id, session_id, author_id, author_role, body, at FROM chat_messages;
DROP TABLE chat_messages;
ALTER TABLE chat_messages_v5 RENAME TO chat_messages;
CREATE INDEX chat_messages_by_session ON chat_messages(session_id, id);
