-- Webhook deliveries run on one instance per endpoint at a time: the
-- instance that claims the endpoint (until `claimed_until`, renewed while
-- it runs) delivers its events in order; another takes over when the claim
-- lapses. A cursor move is fenced on the claim (`claimed_by`).
ALTER TABLE webhook_endpoints ADD COLUMN claimed_by TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN claimed_until INTEGER;
