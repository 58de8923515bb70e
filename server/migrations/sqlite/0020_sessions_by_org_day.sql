-- As postgres/0028, the board's day (answer speed, answers within the RTT
-- ceilings) by the org's sessions raised since midnight: it walked the
-- org's whole history. SQLite plans a read by id on the primary key, and
-- takes a partial index only for a query that repeats its condition (or,
-- for `x IS NOT NULL`, compares x, as the board's day does), so the org's
-- sessions by state keep their whole index here.
CREATE INDEX sessions_by_org_day ON sessions(org_id, raised_at)
    WHERE raised_at IS NOT NULL;
