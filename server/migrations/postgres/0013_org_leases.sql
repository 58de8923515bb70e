-- Which instance dispatches each org, and since when (issue "Scale out").
-- An instance holds an org while its lease is unexpired and renews it every
-- second; another takes it only once it has expired, and every takeover
-- increments the epoch. Every batch the dispatcher commits first reads the
-- org's epoch (FOR SHARE, so a takeover waits for the batch) and commits
-- only when it is still the one it took: an owner that was paused or cut
-- off past its lease can write nothing after the takeover (rule D13).
-- Times are the database's, in Unix ms, so instances' clocks never matter.
CREATE TABLE org_leases (
    org_id      TEXT PRIMARY KEY REFERENCES orgs(id),
    owner       TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
