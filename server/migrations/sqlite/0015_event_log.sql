-- The org's event log for integrators (issue "Integrators and supervisors"):
-- an outbox, written in the same transaction as each change it records.
-- Ids are 1, 2, 3… per org in commit order: the counter row is updated in
-- the recording transaction, so a transaction that takes the next id holds
-- it until it commits and a reader never sees id n+1 before id n.
CREATE TABLE org_event_counters (
    org_id TEXT PRIMARY KEY REFERENCES orgs(id),
    last   INTEGER NOT NULL
);

CREATE TABLE org_events (
    org_id     TEXT NOT NULL REFERENCES orgs(id),
    id         INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    session_id TEXT,
    robot_id   TEXT,
    -- The type's fields, JSON (domain::event_log::LogEvent's data).
    data       TEXT NOT NULL,
    PRIMARY KEY (org_id, id)
);
-- Retention deletes by age.
CREATE INDEX org_events_by_at ON org_events (at);

-- Org API keys for integrations: only the hash is kept; the key is shown
-- once. `scopes` is a space-separated list (today: events:read).
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES orgs(id),
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    -- The key's last four characters, to tell keys apart on the screen.
    hint         TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    created_by   TEXT,
    revoked_at   INTEGER
);
CREATE INDEX api_keys_by_org ON api_keys (org_id);

-- Webhook endpoints: each gets the org's events of its types, in order,
-- from `delivered_id` on. The signing secret is kept as it is (it signs
-- every delivery) and shown once.
CREATE TABLE webhook_endpoints (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL REFERENCES orgs(id),
    url             TEXT NOT NULL,
    -- Space-separated event types; empty: every type.
    types           TEXT NOT NULL,
    secret          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    created_by      TEXT,
    -- The last event id delivered (or skipped as not wanted).
    delivered_id    INTEGER NOT NULL,
    -- Since when deliveries fail (NULL while they succeed).
    failing_since   INTEGER,
    disabled_at     INTEGER,
    disabled_reason TEXT,
    removed_at      INTEGER
);
CREATE INDEX webhook_endpoints_by_org ON webhook_endpoints (org_id);

-- Every delivery attempt, for the admin's delivery log.
CREATE TABLE webhook_deliveries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id      TEXT NOT NULL,
    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id),
    event_id    INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    -- The HTTP status, or NULL when no answer came (error says why).
    status      INTEGER,
    latency_ms  INTEGER NOT NULL,
    error       TEXT,
    resend      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, id);
