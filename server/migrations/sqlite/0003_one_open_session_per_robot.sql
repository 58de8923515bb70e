-- Rule D09: one open session (PENDING, ACTIVE or PAUSED) per robot, held by
-- the database itself, so no second instance or stray write can open two.
CREATE UNIQUE INDEX sessions_one_open_per_robot ON sessions(robot_id)
    WHERE lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED');
-- The engine reloads an org's answered offers for cool-offs (rule D08).
CREATE INDEX offers_by_org_status ON offers(org_id, status);
