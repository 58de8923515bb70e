-- Rate limits shared by the instances of a cluster (issue "Scale out"):
-- sign-in throttles, the robot token's request limit and write quotas, one
-- row per key with its GCRA arrival time (Unix ms). Unlogged: a budget
-- need not survive a database crash, and every request must not wait for
-- the write-ahead log.
CREATE UNLOGGED TABLE rate_limits (
    limit_key TEXT PRIMARY KEY,
    tat BIGINT NOT NULL,
    -- The nonce of the request that last took from the budget: a refused
    -- one learns it was refused in the same statement.
    taken_by BIGINT NOT NULL
);
