-- Every safety-state change of a session (seed 000), for the session
-- detail's timeline: telemetry moves, operator E-stops and clears, each
-- written in the transaction that changes the state.
CREATE TABLE safety_transitions (
    id BIGSERIAL PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES orgs(id),
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    at          BIGINT NOT NULL,
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL
);
CREATE INDEX safety_transitions_by_session ON safety_transitions(session_id, id);
