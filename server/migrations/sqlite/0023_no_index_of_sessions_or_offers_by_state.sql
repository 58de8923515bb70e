-- Three indexes no read needs (issue "Engine v3"), as PostgreSQL dropped
-- theirs (postgres/0017, 0028). Each cost the batches that write it a page
-- of the WAL per commit, and the commit's WAL frames are a third of the
-- dispatch thread (BENCHMARKS.md, Engine v3 fifteenth part):
-- - `sessions_by_org_lifecycle`: every new session, start, end, pause and
--   resume;
-- - `offers_by_org_status`: every offer and every answer;
-- - `sessions_queue`: every queued call, as it queues and as it leaves.
-- The reads they served are of open sessions (a desk's load, the live
-- board, the queue depths): they now also say "open" as rule D09's index
-- says it (`open_lifecycle!`, store/mod.rs) and walk that index, the org's
-- open sessions only (test `dispatch::the_desk_and_the_board_read_open_sessions_only`).
-- The desk's load of the org's open offers walks the index of open offers
-- (of every org, at most one an operator), as PostgreSQL's does.
DROP INDEX sessions_by_org_lifecycle;
DROP INDEX offers_by_org_status;
DROP INDEX sessions_queue;
