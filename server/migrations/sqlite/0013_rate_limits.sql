-- Rate limits kept in the database (issue "Scale out"). One instance keeps
-- its limits in memory; the table is here so that both backends share one
-- store (and its tests).
CREATE TABLE rate_limits (
    limit_key TEXT PRIMARY KEY,
    tat INTEGER NOT NULL
);
