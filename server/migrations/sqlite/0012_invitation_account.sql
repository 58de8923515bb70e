-- An invitation sets a password only for the account it created itself
-- (issue "Hardening II", finding 1: any org's link could set the password
-- of any account still without one). `account_id` names that account; it
-- is NULL when the email had an account already, whose owner then signs
-- in to join.
ALTER TABLE invitations ADD COLUMN account_id TEXT;
CREATE INDEX invitations_by_account ON invitations(org_id, account_id);

-- Open invitations written before: the account made in the same
-- transaction (same instant, no password, a member of the inviting org).
UPDATE invitations SET account_id = (
    SELECT u.id FROM users u
    JOIN memberships m ON m.user_id = u.id AND m.org_id = invitations.org_id
    WHERE u.email = invitations.email AND u.password_hash = '' AND u.created_at = invitations.created_at
)
WHERE used_at IS NULL;
-- (A pending person removed from the org since keeps NULL: their account
-- belongs to no org, and any later link may set its password.)
