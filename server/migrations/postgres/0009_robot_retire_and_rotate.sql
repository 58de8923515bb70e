-- Directory administration: a retired robot leaves the fleet (its token
-- stops working, it no longer counts) but its sessions keep their history;
-- the registry shows when a robot's token was last rotated.
ALTER TABLE robots ADD COLUMN retired_at BIGINT;
ALTER TABLE robots ADD COLUMN token_rotated_at BIGINT;
