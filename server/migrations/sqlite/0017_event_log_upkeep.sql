-- `robot.offline` is logged once per silence, however many instances
-- notice it: the heartbeat it was logged for is kept on the robot, and the
-- row's update decides who logs.
ALTER TABLE robots ADD COLUMN offline_logged_for INTEGER;
-- A webhook's attempts at one event are counted when a retry starts.
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (endpoint_id, event_id);
-- The delivery log is pruned with the event log's retention.
CREATE INDEX webhook_deliveries_by_at ON webhook_deliveries (at);
