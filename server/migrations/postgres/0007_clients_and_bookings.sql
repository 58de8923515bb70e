-- Clients (seed 001): the party whose work the robots do. A third
-- membership role; a client (or an admin for it) books a robot for a time
-- window; a session raised during a booking belongs to its client and ends
-- at the booking's end unless extended (rule L13).
ALTER TABLE memberships DROP CONSTRAINT memberships_role_check;
ALTER TABLE memberships ADD CONSTRAINT memberships_role_check CHECK (role IN ('admin', 'operator', 'client'));

CREATE TABLE bookings (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL REFERENCES orgs(id),
    robot_id      TEXT NOT NULL,
    client_id     TEXT NOT NULL REFERENCES users(id),
    starts_at     BIGINT NOT NULL,
    ends_at       BIGINT NOT NULL,
    created_by    TEXT NOT NULL REFERENCES users(id),
    created_at    BIGINT NOT NULL,
    cancelled_at  BIGINT,
    CHECK (ends_at > starts_at)
);
CREATE INDEX bookings_by_robot ON bookings(org_id, robot_id, starts_at);
CREATE INDEX bookings_by_client ON bookings(org_id, client_id, starts_at);

ALTER TABLE sessions ADD COLUMN client_id TEXT REFERENCES users(id);
ALTER TABLE sessions ADD COLUMN booking_id TEXT;
ALTER TABLE sessions ADD COLUMN planned_end_at BIGINT;
CREATE INDEX sessions_by_client ON sessions(org_id, client_id);
