-- Three indexes no read needs (issue "Engine v3"). Each cost the batches
-- that write it a page of the WAL per commit, and the commit's WAL frames
-- are a third of the dispatch thread (BENCHMARKS.md, Engine v3 fifteenth
-- and sixteenth parts):
-- - `sessions_by_org_lifecycle`: every new session, start, end, pause and
--   resume (PostgreSQL dropped its own in postgres/0028);
-- - `offers_by_org_status`: every offer and every answer (postgres/0017);
-- - `sessions_queue`: every queued call, as it queues and as it leaves
--   (PostgreSQL keeps its own).
-- The reads they served are of open sessions (a desk's load, the live
-- board, the queue depths): they now also say "open" as rule D09's index
-- says it (`open_lifecycle!`, store/mod.rs) and search that index by the
-- org, its open sessions only (test
-- `store::dispatch::tests::the_desk_and_the_board_read_open_sessions_only`).
-- So the org's sessions by state no longer keep a whole index, as 0020's
-- comment said they did. The desk's load of the org's open offers walks
-- the index of open offers (of every org, at most one an operator), as
-- PostgreSQL's does.
DROP INDEX sessions_by_org_lifecycle;
DROP INDEX offers_by_org_status;
DROP INDEX sessions_queue;
