-- As postgres/0029: no read needs `sessions_by_robot` (org, robot,
-- state): a robot's sessions are read for its open one, which
-- `sessions_one_open_per_robot` serves (SQLite took this index for that
-- read until now). It cost every new session and every change of state a
-- page of the WAL (3.3 frames a cycle of 51, BENCHMARKS.md, Engine v3
-- ninth and tenth parts).
DROP INDEX sessions_by_robot;
