-- Every ACD decision: the call, the pool it drew from, each candidate with
-- its RTT and verdict (JSON array), and the outcome.
CREATE TABLE dispatch_records (
    id           BIGSERIAL PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    at           BIGINT NOT NULL,
    trigger      TEXT NOT NULL,
    pool_source  TEXT NOT NULL,
    outcome      TEXT NOT NULL CHECK (outcome IN ('offered', 'queued')),
    operator_id  TEXT,
    rtt_ms       BIGINT,
    candidates   TEXT NOT NULL
);
CREATE INDEX dispatch_records_by_session ON dispatch_records(session_id, id);

-- The queue: a PENDING session with queued_at set waits for an operator
-- (set when queued, cleared when offered or ended). By skill, oldest first.
CREATE INDEX sessions_queue ON sessions(org_id, skill, raised_at, id) WHERE queued_at IS NOT NULL;
CREATE INDEX sessions_by_robot ON sessions(robot_id, lifecycle);
CREATE INDEX offers_by_session ON offers(session_id);
