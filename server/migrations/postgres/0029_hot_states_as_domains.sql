-- The states of the rows every call writes (a session's lifecycle and
-- safety state, an offer's status, an activity event's kind, a dispatch
-- record's outcome) are checked by domains instead of table CHECKs
-- (issue "Engine v3"). Same values, same refusals.
--
-- Why: PostgreSQL turns a table's CHECK constraints into expressions again
-- for every statement that writes the table (ExecRelCheck parses and
-- plans each constraint once per executor run, even inside a function
-- whose plans are cached), and every UPDATE of a session checks both of
-- its states whatever it changed. That was ~7 % of the backends' time in
-- the full cycle (BENCHMARKS.md, Engine v3 eighth part). A domain's
-- constraint is kept compiled in the type cache: measured here, 100,000
-- one-row writes to a table with the two session CHECKs took 1.19 s, with
-- the same two as domains 0.44–0.50 s, with no check at all 0.43–0.45 s.
--
-- Clients see no change: a domain column reads as its base type (the row
-- description names `text`), and text parameters are assigned to it as
-- before. Changing a column to a domain with a constraint rewrites its
-- table under lock, as the migrations before this one build their indexes.
-- To add a value later: ALTER DOMAIN … DROP CONSTRAINT, then ADD
-- CONSTRAINT … NOT VALID and VALIDATE CONSTRAINT (0018 did the same for
-- the activity kind's CHECK).

CREATE DOMAIN session_lifecycle AS TEXT
    CONSTRAINT session_lifecycle_check CHECK (VALUE IN ('PENDING', 'ACTIVE', 'PAUSED', 'COMPLETED', 'CANCELLED'));
CREATE DOMAIN session_safety_state AS TEXT
    CONSTRAINT session_safety_state_check CHECK (VALUE IN ('BOOT', 'SAFE', 'ARMED', 'DEGRADED', 'DIVERGED', 'PROTECTIVE_STOP'));
CREATE DOMAIN offer_status AS TEXT
    CONSTRAINT offer_status_check CHECK (VALUE IN ('open', 'accepted', 'declined', 'expired', 'withdrawn'));
CREATE DOMAIN activity_kind AS TEXT
    CONSTRAINT activity_kind_check CHECK (VALUE IN ('SESSION_START', 'SESSION_END', 'PAUSE', 'RESUME', 'ACTIVITY_CHECK',
        'INACTIVITY_WARNING', 'INACTIVITY_STOP', 'OPERATOR_SWITCH', 'ERROR', 'SUPERVISOR_JOINED', 'SUPERVISOR_LEFT'));
CREATE DOMAIN dispatch_outcome AS TEXT
    CONSTRAINT dispatch_outcome_check CHECK (VALUE IN ('offered', 'queued'));

ALTER TABLE sessions
    DROP CONSTRAINT sessions_lifecycle_check,
    DROP CONSTRAINT sessions_safety_state_check,
    ALTER COLUMN lifecycle TYPE session_lifecycle,
    ALTER COLUMN safety_state TYPE session_safety_state;
ALTER TABLE offers
    DROP CONSTRAINT offers_status_check,
    ALTER COLUMN status TYPE offer_status;
ALTER TABLE activity_events
    DROP CONSTRAINT activity_events_kind_check,
    ALTER COLUMN kind TYPE activity_kind;
ALTER TABLE dispatch_records
    DROP CONSTRAINT dispatch_records_outcome_check,
    ALTER COLUMN outcome TYPE dispatch_outcome;
