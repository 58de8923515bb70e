-- An admin's live view is logged in the session's activity
-- (SUPERVISOR_JOINED, SUPERVISOR_LEFT): the kind's CHECK grows. Added NOT
-- VALID, then validated: the check of existing rows does not block writes.
ALTER TABLE activity_events DROP CONSTRAINT activity_events_kind_check;
ALTER TABLE activity_events ADD CONSTRAINT activity_events_kind_check CHECK (kind IN ('SESSION_START', 'SESSION_END', 'PAUSE', 'RESUME',
    'ACTIVITY_CHECK', 'INACTIVITY_WARNING', 'INACTIVITY_STOP', 'OPERATOR_SWITCH', 'ERROR', 'SUPERVISOR_JOINED', 'SUPERVISOR_LEFT')) NOT VALID;
ALTER TABLE activity_events VALIDATE CONSTRAINT activity_events_kind_check;
