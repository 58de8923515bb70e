-- Rule D09's index of open sessions (one per robot) says "open" as "not
-- closed" (issue "Engine v3"). SQLite evaluates `lifecycle IN (a, b, c)`
-- (a list of three values or more; two are compared one by one) by
-- building a temporary b-tree of the list each time a statement runs, and
-- it evaluates a partial index's condition for every row a statement
-- writes, before and after: with the CHECK on `lifecycle`, a session's
-- start built three such trees and its end four (its own condition too),
-- each a pager opened and a page allocated and freed (BENCHMARKS.md, Engine
-- v3 fourteenth part). `NOT IN` the two closed states holds the same
-- sessions (the CHECK allows five states; `lifecycle` is NOT NULL) and
-- costs two comparisons. The reads of a robot's open session say it the
-- same way (`open_lifecycle_read!`, store/mod.rs), or SQLite would not take this
-- index for them. Replaced in the migration's transaction: the uniqueness
-- never lapses.
DROP INDEX sessions_one_open_per_robot;
CREATE UNIQUE INDEX sessions_one_open_per_robot ON sessions(org_id, robot_id)
    WHERE lifecycle NOT IN ('COMPLETED', 'CANCELLED');
