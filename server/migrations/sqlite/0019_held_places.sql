-- Places held against a cap across a cluster's instances (issue "Scale
-- out"). One instance counts its sockets and exports in memory; the tables
-- are here so that both backends share one store (and its tests).
CREATE TABLE place_runs (
    run TEXT PRIMARY KEY,
    until_ms INTEGER NOT NULL
);
CREATE TABLE held_places (
    holder TEXT NOT NULL,
    place TEXT NOT NULL,
    run TEXT NOT NULL,
    PRIMARY KEY (holder, place)
);
CREATE INDEX held_places_by_run ON held_places (run);
