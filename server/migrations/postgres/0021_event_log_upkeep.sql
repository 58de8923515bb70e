-- See sqlite/0017_event_log_upkeep.sql.
ALTER TABLE robots ADD COLUMN offline_logged_for BIGINT;
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (endpoint_id, event_id);
CREATE INDEX webhook_deliveries_by_at ON webhook_deliveries (at);
