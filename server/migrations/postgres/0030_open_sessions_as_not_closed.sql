-- As sqlite/0022, rule D09's index of open sessions says "open" as "not
-- closed", so that the reads of a robot's open session, whose text both
-- backends share, find it on both (a partial index serves only a read
-- whose condition implies the index's). PostgreSQL evaluates either form
-- cheaply; the change is for SQLite's sake. Led by the robot, as 0017 made
-- it. Replaced in one transaction, so the uniqueness never lapses; the
-- build reads `sessions` once while it holds the table's reads and writes
-- back (as 0028 did). Not CONCURRENTLY: that build waits for every older
-- snapshot, among them those of other instances waiting for the migrator's
-- advisory lock, which wait for it (a deadlock when instances start
-- together), and a failed one leaves an invalid index behind.
DROP INDEX sessions_one_open_per_robot;
CREATE UNIQUE INDEX sessions_one_open_per_robot ON sessions(robot_id, org_id)
    WHERE lifecycle NOT IN ('COMPLETED', 'CANCELLED');
