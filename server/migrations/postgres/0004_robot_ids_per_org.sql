-- Robot ids are unique within an org, not across orgs: registering an id
-- another org uses must neither collide nor reveal that it exists.
ALTER TABLE sessions DROP CONSTRAINT sessions_robot_id_fkey;
ALTER TABLE robots DROP CONSTRAINT robots_pkey;
ALTER TABLE robots ADD PRIMARY KEY (org_id, id);
ALTER TABLE sessions ADD CONSTRAINT sessions_robot_fkey FOREIGN KEY (org_id, robot_id) REFERENCES robots (org_id, id);

-- Rule D09 per robot of an org.
DROP INDEX sessions_one_open_per_robot;
CREATE UNIQUE INDEX sessions_one_open_per_robot ON sessions(org_id, robot_id)
    WHERE lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED');
DROP INDEX sessions_by_robot;
CREATE INDEX sessions_by_robot ON sessions(org_id, robot_id, lifecycle);
