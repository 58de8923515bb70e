-- A cycle's hot rows are born and die within seconds, and PostgreSQL keeps
-- an index entry for every version of a row until vacuum removes it
-- (issue "Engine v3": throughput fell over a run). offers_by_org_status
-- (org_id, status) collected a dead 'open' entry for every offer ever
-- answered, and an offer's close could be planned through it: every close
-- then walked all of them. The open offers of an org are now indexed only
-- while open (their reads are a restart's and the board's); a close finds
-- its row through offers_one_open_per_session.
DROP INDEX offers_by_org_status;
CREATE INDEX offers_open_by_org ON offers(org_id) WHERE status = 'open';

-- Vacuum the tables a cycle writes after 2 % of their rows changed rather
-- than the default 20 %: as they grow, the default waits ever longer.
ALTER TABLE offers SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE sessions SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
