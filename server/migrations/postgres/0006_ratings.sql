-- The client's rating of the operator after a COMPLETED session (rule L10):
-- 1–5 stars with feedback, once per session; it feeds the operator's score.
CREATE TABLE ratings (
    session_id   TEXT PRIMARY KEY REFERENCES sessions(id),
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    operator_id  TEXT NOT NULL REFERENCES users(id),
    stars        BIGINT NOT NULL CHECK (stars BETWEEN 1 AND 5),
    feedback     TEXT NOT NULL DEFAULT '',
    rated_by     TEXT NOT NULL REFERENCES users(id),
    at           BIGINT NOT NULL
);
CREATE INDEX ratings_by_operator ON ratings(org_id, operator_id);
