-- no-transaction
-- As sqlite/0022, rule D09's index of open sessions says "open" as "not
-- closed", so that the reads of a robot's open session, whose text both
-- backends share, find it on both (a partial index serves only a read
-- whose condition implies the index's). PostgreSQL evaluates either form
-- cheaply; the change is for SQLite's sake. Led by the robot, as 0017 made
-- it. In three steps, each outside a transaction and alone in its file (a
-- file of several statements runs as one transaction, where CONCURRENTLY
-- is refused), so that no step holds `sessions` against the reads and
-- writes of instances still running (a rolling upgrade, as 0029): this
-- one builds the new index beside the old (the uniqueness is held by both
-- meanwhile); 0031 drops the old; 0032 gives the new one the old name.
-- A build that fails leaves an invalid index under the new name: this
-- migration then fails again (no IF NOT EXISTS) until it is dropped.
CREATE UNIQUE INDEX CONCURRENTLY sessions_not_closed_per_robot ON sessions(robot_id, org_id)
    WHERE lifecycle NOT IN ('COMPLETED', 'CANCELLED');
