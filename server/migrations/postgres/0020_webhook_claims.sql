-- Webhook deliveries run on one instance per endpoint at a time: see
-- sqlite/0016_webhook_claims.sql.
ALTER TABLE webhook_endpoints ADD COLUMN claimed_by TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN claimed_until BIGINT;
