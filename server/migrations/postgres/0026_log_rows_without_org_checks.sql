-- The rows a call's batch appends (its offers, activity events, dispatch
-- records and event-log records) no longer check their org against `orgs`
-- (issue "Engine v3"). PostgreSQL checks a foreign key by locking the
-- referenced row (FOR KEY SHARE): every batch of an org locked the org's
-- one row about eight times a call, through a trigger each (measured: nine
-- index scans of `orgs` a call, for two thousand rows written a second).
-- The org is checked once where it matters, on the session (sessions keep
-- their org, robot and operator keys); offers, activity events and
-- dispatch records also name their session, which is checked, and are
-- written only by the batch, for sessions of the org it holds the lease
-- of. An event-log record takes its id from its org's counter row
-- (`org_event_counters`, which keeps its org key), by the batch or by
-- `log_event`, so its org exists. Orgs are never deleted.
ALTER TABLE offers DROP CONSTRAINT offers_org_id_fkey;
ALTER TABLE activity_events DROP CONSTRAINT activity_events_org_id_fkey;
ALTER TABLE dispatch_records DROP CONSTRAINT dispatch_records_org_id_fkey;
ALTER TABLE org_events DROP CONSTRAINT org_events_org_id_fkey;
