-- no-transaction
-- 0030's second step: the index of open sessions written as a list of the
-- open states goes; 0030's holds the same sessions, unique as it was.
DROP INDEX CONCURRENTLY IF EXISTS sessions_one_open_per_robot;
