-- As postgres/0028: the org's sessions by state for the open ones only, and
-- by the time they were raised for the board's day (which walked the
-- org's whole history). SQLite plans a read by id on the primary key
-- either way; the two stores keep the same indexes.
DROP INDEX sessions_by_org_lifecycle;
CREATE INDEX sessions_open_by_org ON sessions(org_id, lifecycle)
    WHERE lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED');
CREATE INDEX sessions_by_org_day ON sessions(org_id, raised_at)
    WHERE raised_at IS NOT NULL;
