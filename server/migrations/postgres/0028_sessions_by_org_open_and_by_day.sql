-- No index of sessions leads with the org for a read that names a session
-- by its id (issue "Engine v3"; 0017 did this for the others). A session's
-- read by org and id (`WHERE s.org_id = $1 AND s.id = $2`, after an
-- accept, an end, a safety change) is planned once per connection, often
-- while the table is nearly empty: then the org's index and the primary
-- key cost the same, and the planner could take `sessions_by_org_lifecycle`,
-- walking every session the org ever had, and their dead versions, to find
-- one (measured: 500 index entries read a call half a minute into a run,
-- until an ANALYZE replanned it).
--
-- The org's sessions by state are needed for the open ones only (a desk's
-- load, the live board, the queue): the index holds those alone, so a read
-- that names no state cannot take it. The batch's updates of one session,
-- and an extension's read and update (store/booking.rs), do name its state
-- and may still take it: they then walk the org's open sessions only
-- (measured for the batch: 1.1 entries a call).
DROP INDEX sessions_by_org_lifecycle;
CREATE INDEX sessions_open_by_org ON sessions(org_id, lifecycle)
    WHERE lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED');

-- The board's day (answer speed, answers within the RTT ceilings) reads the
-- org's sessions raised since midnight; it walked the org's whole history.
-- `raised_at` is never NULL: the predicate is there so that only a query
-- comparing `raised_at` can use the index (a comparison implies it), never
-- a read by id. A client's page of calls without a client says
-- `raised_at >= 0` for that (store/booking.rs).
CREATE INDEX sessions_by_org_day ON sessions(org_id, raised_at)
    WHERE raised_at IS NOT NULL;
