-- RTT ceilings per skill (rules A15–A17): an org may keep operators whose
-- round trip to the robot's PoP is too long off a skill's calls; a waiting
-- call's ceiling rises by step_ms every every_s seconds and is lifted
-- lifted_after_s seconds after the raise.
CREATE TABLE org_rtt_ceilings (
    org_id          TEXT NOT NULL REFERENCES orgs(id),
    skill           TEXT NOT NULL,
    ceiling_ms      BIGINT  NOT NULL CHECK (ceiling_ms > 0),
    step_ms         BIGINT  NOT NULL CHECK (step_ms >= 0),
    every_s         BIGINT  NOT NULL CHECK (every_s > 0),
    lifted_after_s  BIGINT  NOT NULL CHECK (lifted_after_s > 0),
    PRIMARY KEY (org_id, skill)
);
