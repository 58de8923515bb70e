-- Every statement of a batch reaches its rows by key. Its plans (and the
-- foreign-key checks it fires) are cached per connection from their first
-- runs, often while the tables are nearly empty and a whole scan is the
-- cheapest plan; kept as the tables grow, such a plan reads every session
-- again and again (measured: sequential scans of `sessions` under the
-- batch function, most of them for the event log's robot id). Inside the
-- function the planner takes an index wherever one serves. CREATE OR
-- REPLACE FUNCTION resets it: a migration that re-creates the function
-- says `SET enable_seqscan = off` again (a test checks it is set).
ALTER FUNCTION clutchcall_commit_batch(TEXT, BIGINT, JSONB) SET enable_seqscan = off;
