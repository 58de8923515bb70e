-- A cycle's hot rows are born and die within seconds, and PostgreSQL keeps
-- an index entry for every version of a row until vacuum removes it
-- (issue "Engine v3": throughput fell from 159 to 57 cycles/s over 13
-- minutes, on a PostgreSQL whose autovacuum is off). The batch function's
-- statements are planned once per connection for any parameters (a
-- generic plan), and without statistics the planner took, for a row named
-- by its org and its id, indexes that lead with the org: every close,
-- start and end then walked the org's rows and their dead versions, each
-- costing more than the one before (BENCHMARKS.md, Engine v3). So no index
-- the hot path touches leads with the org alone where a more selective key
-- can lead; and `Store::maintain` vacuums and analyzes the call tables
-- itself when autovacuum is off.

-- The org's offers by status: a close was planned through it, walking one
-- dead 'open' entry per offer answered since the last vacuum. A restart's
-- read of the org's open offers walks offers_one_open_per_operator, which
-- holds only open offers (of every org).
DROP INDEX offers_by_org_status;

-- Rule D09 and the robot's history, led by the robot.
DROP INDEX sessions_one_open_per_robot;
CREATE UNIQUE INDEX sessions_one_open_per_robot ON sessions(robot_id, org_id)
    WHERE lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED');
DROP INDEX sessions_by_robot;
CREATE INDEX sessions_by_robot ON sessions(robot_id, org_id, lifecycle);

-- A client's sessions, led by the client; calls without one are not in it.
DROP INDEX sessions_by_client;
CREATE INDEX sessions_by_client ON sessions(client_id, org_id) WHERE client_id IS NOT NULL;

-- Vacuum the tables a cycle writes after 2 % of their rows changed rather
-- than the default 20 %: as they grow, the default waits ever longer.
ALTER TABLE offers SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE sessions SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
