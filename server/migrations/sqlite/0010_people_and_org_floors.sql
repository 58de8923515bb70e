-- Directory administration of people and link floors.
--
-- An invited or imported person's account exists before they have a
-- password: `password_hash = ''` means "not set yet" and never signs in.
-- An operator profile can be made inactive (never dispatched to).
ALTER TABLE operator_profiles ADD COLUMN active INTEGER NOT NULL DEFAULT 1;

-- One-time set-password / join links, valid 24 h. Only the token's hash is
-- kept. The membership the link grants travels with it, so a person who
-- already has an account joins only when they open it signed in.
CREATE TABLE invitations (
    token_hash      TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL REFERENCES orgs(id),
    email           TEXT NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'client')),
    display_name    TEXT NOT NULL,
    external_id     TEXT,
    region          TEXT,
    -- Full certification strings joined with ';'.
    certifications  TEXT NOT NULL DEFAULT '',
    invited_by      TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    used_at         INTEGER
);
CREATE INDEX invitations_by_org ON invitations(org_id, expires_at);

-- Each org's own region → PoP floors, editable by its admins; `link_floors`
-- stays as the defaults a new org starts from (the seed's three paths).
CREATE TABLE org_link_floors (
    org_id    TEXT NOT NULL REFERENCES orgs(id),
    region    TEXT NOT NULL,
    pop       TEXT NOT NULL,
    floor_ms  INTEGER NOT NULL CHECK (floor_ms >= 0),
    note      TEXT,
    PRIMARY KEY (org_id, region, pop)
);
INSERT INTO org_link_floors (org_id, region, pop, floor_ms, note)
    SELECT o.id, f.region, f.pop, f.floor_ms, f.note FROM orgs o CROSS JOIN link_floors f;
