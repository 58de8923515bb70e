-- Rate limits kept in the database (issue "Scale out"). One instance keeps
-- its limits in memory; the table is here so that both backends share one
-- store (and its tests).
CREATE TABLE rate_limits (
    limit_key TEXT PRIMARY KEY,
    tat INTEGER NOT NULL,
    -- The nonce of the request that last took from the budget: a refused
    -- one learns it was refused in the same statement.
    taken_by INTEGER NOT NULL
);
