-- As postgres/0029: `sessions_by_robot` (org, robot, state) is read by no
-- query (a robot's sessions are read for its open one, which
-- `sessions_one_open_per_robot` holds), and cost every new session and
-- every change of state a page of the WAL (three frames a cycle of 51,
-- BENCHMARKS.md, Engine v3 ninth part).
DROP INDEX sessions_by_robot;
