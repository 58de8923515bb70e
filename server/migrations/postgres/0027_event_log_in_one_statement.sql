-- A batch writes its event log records with one statement (issue "Engine
-- v3": a statement per table per batch). Until now each record was an
-- insert of its own after the batch's counter update: four records and
-- their counter a call, five statements run by the function, each with
-- its executor start and its session's robot looked up. `log_events`
-- takes the batch's count from the org's counter row and inserts all the
-- records in one statement. The function again, with that branch; the
-- others stay for an instance of the build before (rolling deploys).
CREATE OR REPLACE FUNCTION clutchcall_commit_batch(p_org_id TEXT, p_epoch BIGINT, p_steps JSONB) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    held BIGINT;
    step JSONB;
    v JSONB;
    changed BIGINT;
BEGIN
    SELECT epoch INTO held FROM org_leases WHERE org_id = p_org_id FOR SHARE;
    IF held IS DISTINCT FROM p_epoch THEN
        RAISE EXCEPTION 'the org % was taken over', p_org_id USING ERRCODE = 'CC001';
    END IF;
    FOR step IN SELECT value FROM jsonb_array_elements(p_steps) LOOP
        v := step->'v';
        CASE step->>'s'
        WHEN 'open_session' THEN
            INSERT INTO sessions (id, org_id, robot_id, skill, pop, raised_at, queued_at, client_id, booking_id, planned_end_at)
            VALUES (v->>0, v->>1, v->>2, v->>3, v->>4, (v->>5)::BIGINT, (v->>6)::BIGINT, v->>7, v->>8, (v->>9)::BIGINT);
        WHEN 'queue' THEN
            UPDATE sessions SET queued_at = (v->>0)::BIGINT WHERE id = v->>1 AND queued_at IS NULL;
        WHEN 'offer' THEN
            INSERT INTO offers (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at)
            VALUES (v->>0, v->>1, v->>2, v->>3, (v->>4)::BIGINT, (v->>5)::BIGINT, (v->>6)::BIGINT);
        WHEN 'leave_queue' THEN
            UPDATE sessions SET queued_at = NULL WHERE id = v->>0;
        WHEN 'close_offer' THEN
            UPDATE offers SET status = v->>0, answered_at = (v->>1)::BIGINT
            WHERE org_id = v->>2 AND session_id = v->>3 AND operator_id = v->>4 AND status = 'open';
        WHEN 'start' THEN
            UPDATE sessions SET lifecycle = 'ACTIVE', operator_id = v->>0, operator_region = v->>1, rtt_ms = (v->>2)::BIGINT,
                started_at = (v->>3)::BIGINT, queued_at = NULL, planned_end_at = (v->>6)::BIGINT
            WHERE org_id = v->>4 AND id = v->>5 AND lifecycle = 'PENDING';
        WHEN 'end' THEN
            UPDATE sessions SET lifecycle = v->>0, ended_at = (v->>1)::BIGINT, end_reason = v->>2, queued_at = NULL
            WHERE org_id = v->>3 AND id = v->>4 AND lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED');
        WHEN 'steer' THEN
            UPDATE sessions SET lifecycle = v->>0 WHERE org_id = v->>1 AND id = v->>2 AND lifecycle = v->>3;
        WHEN 'switch' THEN
            UPDATE sessions SET operator_id = v->>0, operator_region = v->>1, rtt_ms = (v->>2)::BIGINT
            WHERE org_id = v->>3 AND id = v->>4 AND lifecycle IN ('ACTIVE', 'PAUSED') AND operator_id IS NOT DISTINCT FROM v->>5;
        WHEN 'activity' THEN
            INSERT INTO activity_events (org_id, session_id, kind, at, operator_id, detail)
            VALUES (v->>0, v->>1, v->>2, (v->>3)::BIGINT, v->>4, v->>5);
        WHEN 'record' THEN
            INSERT INTO dispatch_records (org_id, session_id, at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates)
            VALUES (v->>0, v->>1, (v->>2)::BIGINT, v->>3, v->>4, v->>5, v->>6, (v->>7)::BIGINT, v->>8);
        WHEN 'log_events' THEN
            -- The batch's records at once: one counter update takes their
            -- ids, one insert writes them (each its id counted back from
            -- the new last), each with its session's robot. (The robot is
            -- a subquery by key: a join is planned for the records' default
            -- estimate, a hundred, and reads every session.)
            WITH taken AS (
                INSERT INTO org_event_counters (org_id, last) VALUES (v->>0, (v->>1)::BIGINT)
                ON CONFLICT (org_id) DO UPDATE SET last = org_event_counters.last + (v->>1)::BIGINT
                RETURNING last
            )
            INSERT INTO org_events (org_id, id, at, kind, session_id, robot_id, data)
            SELECT v->>0, taken.last - r.later, r.at, r.kind, r.session_id,
                   (SELECT robot_id FROM sessions WHERE id = r.session_id), r.data
            FROM taken, jsonb_to_recordset(v->2) AS r(at BIGINT, kind TEXT, session_id TEXT, data TEXT, later BIGINT);
        WHEN 'bump_event' THEN
            INSERT INTO org_event_counters (org_id, last) VALUES (v->>0, 1)
            ON CONFLICT (org_id) DO UPDATE SET last = org_event_counters.last + 1;
        WHEN 'bump_events' THEN
            INSERT INTO org_event_counters (org_id, last) VALUES (v->>0, (v->>1)::BIGINT)
            ON CONFLICT (org_id) DO UPDATE SET last = org_event_counters.last + (v->>1)::BIGINT;
        WHEN 'log_event_at' THEN
            INSERT INTO org_events (org_id, id, at, kind, session_id, robot_id, data)
            SELECT v->>0, c.last - (v->>5)::BIGINT, (v->>1)::BIGINT, v->>2, v->>3, (SELECT robot_id FROM sessions WHERE id = v->>3), v->>4
            FROM org_event_counters c WHERE c.org_id = v->>0;
        WHEN 'log_event' THEN
            INSERT INTO org_events (org_id, id, at, kind, session_id, robot_id, data)
            SELECT v->>0, c.last, (v->>1)::BIGINT, v->>2, v->>3, (SELECT robot_id FROM sessions WHERE id = v->>3), v->>4
            FROM org_event_counters c WHERE c.org_id = v->>0;
        ELSE
            RAISE EXCEPTION 'unknown statement %', step->>'s' USING ERRCODE = 'CC002';
        END CASE;
        GET DIAGNOSTICS changed = ROW_COUNT;
        IF step->>'one' IS NOT NULL THEN
            IF changed <> 1 THEN
                RAISE EXCEPTION 'the database disagrees with the engine: %', step->>'one' USING ERRCODE = 'CC002';
            END IF;
        END IF;
    END LOOP;
END
$$;
-- As 0024: re-creating the function resets its settings.
ALTER FUNCTION clutchcall_commit_batch(TEXT, BIGINT, JSONB) SET enable_seqscan = off;
