-- The cluster's name on NATS (issue "Scale out"). The instances on one
-- database are one cluster, and every subject they use starts with this
-- id, so two deployments (or two test databases) sharing one NATS server
-- never hear each other's events, revocations or requests. Made once, by
-- this migration.
CREATE TABLE cluster_identity (
    singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    id        TEXT NOT NULL
);
INSERT INTO cluster_identity (id) VALUES (left(md5(random()::text || clock_timestamp()::text), 16));
