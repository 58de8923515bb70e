-- Places held against a cap across a cluster's instances (issue "Scale
-- out"): one row per open socket of a person, a robot or an API key, or
-- per running dataset export of an org, so that a cap holds however they
-- are spread over the instances. A place belongs to the instance run that
-- took it; each run says it is alive until `until_ms` (Unix ms), and the
-- places of a run that stopped saying so (killed, cut off) stop counting.
-- Unlogged: nothing here need survive a database crash.
CREATE UNLOGGED TABLE place_runs (
    run TEXT PRIMARY KEY,
    until_ms BIGINT NOT NULL
);
CREATE UNLOGGED TABLE held_places (
    holder TEXT NOT NULL,
    place TEXT NOT NULL,
    run TEXT NOT NULL,
    PRIMARY KEY (holder, place)
);
CREATE INDEX held_places_by_run ON held_places (run);
