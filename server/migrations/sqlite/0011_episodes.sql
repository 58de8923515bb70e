-- Datasets (seed 001 "Session data becomes training data", rules L11, L12).
-- One episode per COMPLETED session that recorded frames, in the dataset of
-- its robot's environment (site). The frames stay in files under the data
-- directory; this row is the episode's metadata.
CREATE TABLE episodes (
    session_id     TEXT PRIMARY KEY REFERENCES sessions(id),
    org_id         TEXT NOT NULL REFERENCES orgs(id),
    environment    TEXT NOT NULL,
    -- Within (org, environment), from 0, in the order episodes were made.
    episode_index  INTEGER NOT NULL,
    robot_id       TEXT NOT NULL,
    operator_id    TEXT,
    client_id      TEXT,
    task           TEXT NOT NULL,
    fps            INTEGER NOT NULL,
    frames         INTEGER NOT NULL,
    duration_ms    INTEGER NOT NULL,
    -- Camera names, joined with ';'.
    cameras        TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    UNIQUE (org_id, environment, episode_index)
);
CREATE INDEX episodes_by_client ON episodes(org_id, client_id);

-- What the client wants done in a booked session: the episode's task.
ALTER TABLE bookings ADD COLUMN task TEXT;
