-- Clients (seed 001): the party whose work the robots do. A third
-- membership role; a client (or an admin for it) books a robot for a time
-- window; a session raised during a booking belongs to its client and ends
-- at the booking's end unless extended (rule L13). SQLite cannot change a
-- CHECK in place, so memberships is rebuilt with its rows.
CREATE TABLE memberships_v7 (
    org_id     TEXT NOT NULL REFERENCES orgs(id),
    user_id    TEXT NOT NULL REFERENCES users(id),
    role       TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'client')),
    joined_at  INTEGER NOT NULL,
    PRIMARY KEY (org_id, user_id)
);
INSERT INTO memberships_v7 (org_id, user_id, role, joined_at) SELECT org_id, user_id, role, joined_at FROM memberships;
DROP TABLE memberships;
ALTER TABLE memberships_v7 RENAME TO memberships;
CREATE INDEX memberships_by_user ON memberships(user_id);

CREATE TABLE bookings (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL REFERENCES orgs(id),
    robot_id      TEXT NOT NULL,
    client_id     TEXT NOT NULL REFERENCES users(id),
    starts_at     INTEGER NOT NULL,
    ends_at       INTEGER NOT NULL,
    created_by    TEXT NOT NULL REFERENCES users(id),
    created_at    INTEGER NOT NULL,
    cancelled_at  INTEGER,
    CHECK (ends_at > starts_at)
);
CREATE INDEX bookings_by_robot ON bookings(org_id, robot_id, starts_at);
CREATE INDEX bookings_by_client ON bookings(org_id, client_id, starts_at);

ALTER TABLE sessions ADD COLUMN client_id TEXT REFERENCES users(id);
ALTER TABLE sessions ADD COLUMN booking_id TEXT;
ALTER TABLE sessions ADD COLUMN planned_end_at INTEGER;
CREATE INDEX sessions_by_client ON sessions(org_id, client_id);
