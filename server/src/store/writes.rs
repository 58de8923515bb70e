//! The statements that apply each write of the engine's journal
//! (`journal::Write`), decided once for both backends. SQLite's batch
//! writer (sqlite_writer.rs) prepares their text once on its own
//! connection; PostgreSQL runs them by name inside one function call per
//! batch (the function of migration postgres/0027_event_log_in_one_statement.sql,
//! which replaced 0023's, 0019's and 0016's, holds the same statements,
//! `END`'s condition written as a list, and writes a batch's event log
//! records with one statement).

/// A statement's name (what PostgreSQL's batch function knows it by) and
/// its text (`$N` placeholders).
#[derive(Debug)]
pub(super) struct Sql {
    pub name: &'static str,
    pub text: &'static str,
}

pub(super) const OPEN_SESSION: Sql = Sql {
    name: "open_session",
    text: "INSERT INTO sessions (id, org_id, robot_id, skill, pop, raised_at, queued_at, client_id, booking_id, planned_end_at) \
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
};

pub(super) const QUEUE: Sql = Sql {
    name: "queue",
    text: "UPDATE sessions SET queued_at = $1 WHERE id = $2 AND queued_at IS NULL",
};

pub(super) const OFFER: Sql = Sql {
    name: "offer",
    text: "INSERT INTO offers (id, org_id, session_id, operator_id, rtt_ms, offered_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
};

pub(super) const LEAVE_QUEUE: Sql = Sql {
    name: "leave_queue",
    text: "UPDATE sessions SET queued_at = NULL WHERE id = $1",
};

pub(super) const CLOSE_OFFER: Sql = Sql {
    name: "close_offer",
    text: "UPDATE offers SET status = $1, answered_at = $2 \
           WHERE org_id = $3 AND session_id = $4 AND operator_id = $5 AND status = 'open'",
};

pub(super) const START: Sql = Sql {
    name: "start",
    text: "UPDATE sessions SET lifecycle = 'ACTIVE', operator_id = $1, operator_region = $2, rtt_ms = $3, \
           started_at = $4, queued_at = NULL, planned_end_at = $7 WHERE org_id = $5 AND id = $6 AND lifecycle = 'PENDING'",
};

/// (PostgreSQL's batch function says "open" as the list of open states:
/// the same sessions; `open_lifecycle!` says why SQLite's text does not.)
pub(super) const END: Sql = Sql {
    name: "end",
    text: concat!(
        "UPDATE sessions SET lifecycle = $1, ended_at = $2, end_reason = $3, queued_at = NULL WHERE org_id = $4 AND id = $5 AND ",
        open_lifecycle!()
    ),
};

pub(super) const STEER: Sql = Sql {
    name: "steer",
    text: "UPDATE sessions SET lifecycle = $1 WHERE org_id = $2 AND id = $3 AND lifecycle = $4",
};

/// `IS NOT DISTINCT FROM`: an admin may hand over a session nobody held.
pub(super) const SWITCH: Sql = Sql {
    name: "switch",
    text: "UPDATE sessions SET operator_id = $1, operator_region = $2, rtt_ms = $3 \
           WHERE org_id = $4 AND id = $5 AND lifecycle IN ('ACTIVE', 'PAUSED') AND operator_id IS NOT DISTINCT FROM $6",
};

/// Every activity event of a write (SESSION_START, SESSION_END, PAUSE, …).
pub(super) const ACTIVITY: Sql = Sql {
    name: "activity",
    text: "INSERT INTO activity_events (org_id, session_id, kind, at, operator_id, detail) VALUES ($1, $2, $3, $4, $5, $6)",
};

pub(super) const RECORD: Sql = Sql {
    name: "record",
    text: "INSERT INTO dispatch_records (org_id, session_id, at, trigger, pool_source, outcome, operator_id, rtt_ms, candidates) \
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
};

/// The org's next `$2` event ids, taken at once for a batch's records
/// (migration sqlite/0015_event_log.sql): the row stays locked until the
/// batch commits, so ids are seen in order.
pub(super) const BUMP_EVENTS: Sql = Sql {
    name: "bump_events",
    text: "INSERT INTO org_event_counters (org_id, last) VALUES ($1, $2) \
           ON CONFLICT (org_id) DO UPDATE SET last = org_event_counters.last + $2",
};

/// A log record under one of the ids just taken (`$6`: how many of them
/// come after it), with its session's robot. One row of VALUES, not
/// `INSERT … SELECT`: SQLite gives a statement that may write several rows
/// a journal of its own, and each record after a batch's first copied the
/// event log's page into it (BENCHMARKS.md, Engine v3 nineteenth part).
/// Were the counter's row missing, the id would be NULL and the batch
/// refused, not the record dropped.
pub(super) const LOG_EVENT: Sql = Sql {
    name: "log_event_at",
    text: "INSERT INTO org_events (org_id, id, at, kind, session_id, robot_id, data) \
           VALUES ($1, (SELECT c.last FROM org_event_counters c WHERE c.org_id = $1) - $6, $2, $3, $4, \
                   (SELECT robot_id FROM sessions WHERE id = $4), $5)",
};

/// Every statement, for the tests that check each one's values and explain it on SQLite.
#[cfg(test)]
pub(super) const ALL: [&Sql; 13] =
    [&OPEN_SESSION, &QUEUE, &OFFER, &LEAVE_QUEUE, &CLOSE_OFFER, &START, &END, &STEER, &SWITCH, &ACTIVITY, &RECORD, &BUMP_EVENTS, &LOG_EVENT];

use super::journal::{NewSession, Write};
use super::StoreError;
use std::borrow::Cow;

/// A value bound to a statement. Each kind keeps its SQL type when NULL
/// (PostgreSQL types every parameter).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value<'a> {
    Text(Option<Cow<'a, str>>),
    Int(Option<i64>),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(text: &'a str) -> Self {
        Value::Text(Some(Cow::Borrowed(text)))
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(text: &'a String) -> Self {
        Value::Text(Some(Cow::Borrowed(text)))
    }
}

impl<'a> From<&'a Option<String>> for Value<'a> {
    fn from(text: &'a Option<String>) -> Self {
        Value::Text(text.as_deref().map(Cow::Borrowed))
    }
}

impl From<String> for Value<'_> {
    fn from(text: String) -> Self {
        Value::Text(Some(Cow::Owned(text)))
    }
}

impl From<i64> for Value<'_> {
    fn from(n: i64) -> Self {
        Value::Int(Some(n))
    }
}

impl From<u32> for Value<'_> {
    fn from(n: u32) -> Self {
        Value::Int(Some(i64::from(n)))
    }
}

impl From<Option<i64>> for Value<'_> {
    fn from(n: Option<i64>) -> Self {
        Value::Int(n)
    }
}

/// One statement of a write, with what it must have changed.
#[derive(Debug)]
pub(super) struct Statement<'a> {
    pub sql: &'static Sql,
    pub values: Vec<Value<'a>>,
    /// Set where the statement must change exactly one row: otherwise the
    /// database and the engine disagree (what, for the error).
    pub changes_one: Option<&'static str>,
}

fn run<'a>(sql: &'static Sql, values: Vec<Value<'a>>) -> Statement<'a> {
    Statement { sql, values, changes_one: None }
}

fn change_one<'a>(sql: &'static Sql, values: Vec<Value<'a>>, otherwise: &'static str) -> Statement<'a> {
    Statement { sql, values, changes_one: Some(otherwise) }
}

/// A new session's row, with its queue time when it is queued at once.
fn open_session(s: &NewSession, queued_at: Option<i64>) -> Statement<'_> {
    run(
        &OPEN_SESSION,
        vec![(&s.id).into(), (&s.org_id).into(), (&s.robot_id).into(), (&s.skill).into(), (&s.pop).into(), s.raised_at.into(),
             queued_at.into(), (&s.client_id).into(), (&s.booking_id).into(), s.planned_end_at.into()],
    )
}

/// A record of the org's event log a write makes: org, session, at, event.
pub(super) type Logged<'a> = (&'a str, &'a str, i64, domain::event_log::LogEvent);

/// The statements that apply a batch, in order: each write's, except that
/// a call raised and queued at once (nobody could take it) is one INSERT.
pub(super) fn batch(writes: &[Write]) -> Vec<Statement<'_>> {
    let (mut out, log) = changes_then_log(writes);
    out.extend(logged(&log));
    out
}

/// A batch's statements other than its event log's, in order, and the
/// records it logs, in the writes' order. The log is written last: the
/// org's counter row is then locked only after every other row the batch
/// touches, as in every other transaction that logs (store/event_log.rs),
/// so no two of them wait on each other in a circle.
fn changes_then_log(writes: &[Write]) -> (Vec<Statement<'_>>, Vec<Logged<'_>>) {
    let mut out = Vec::with_capacity(writes.len() + writes.len() / 2);
    let mut log = Vec::new();
    let mut rest = writes.iter().peekable();
    while let Some(write) = rest.next() {
        if let (Write::OpenSession(s), Some(queue @ Write::Queue { session_id, at, .. })) = (write, rest.peek()) {
            if *session_id == s.id {
                out.push(open_session(s, Some(*at)));
                log.extend(write.logged());
                log.extend(queue.logged());
                rest.next();
                continue;
            }
        }
        out.extend(statements(write));
        log.extend(write.logged());
    }
    (out, log)
}

/// The statements that record a batch's records in the org's event log
/// (one org per batch): one counter update for all, then each record.
pub(super) fn logged(records: &[Logged<'_>]) -> Vec<Statement<'static>> {
    let Some((org_id, ..)) = records.first() else { return Vec::new() };
    let org: Value<'static> = org_id.to_string().into();
    let count = records.len() as i64;
    let mut steps = vec![run(&BUMP_EVENTS, vec![org.clone(), count.into()])];
    for (i, (_, session_id, at, event)) in records.iter().enumerate() {
        let after = count - 1 - i as i64;
        steps.push(run(
            &LOG_EVENT,
            vec![org.clone(), (*at).into(), event.kind().into(), session_id.to_string().into(), event.data().into(), after.into()],
        ));
    }
    steps
}

/// The statements that apply `write`, in order.
pub(super) fn statements(write: &Write) -> Vec<Statement<'_>> {
    let none = || Value::Text(None);
    match write {
        Write::OpenSession(s) => vec![open_session(s, None)],
        Write::Queue { session_id, at, .. } => vec![run(&QUEUE, vec![(*at).into(), session_id.into()])],
        Write::Offer { org_id, session_id, offer, from_queue } => {
            let mut steps = vec![run(
                &OFFER,
                vec![(&offer.id).into(), org_id.into(), session_id.into(), (&offer.operator_id).into(), offer.rtt_ms.into(),
                     offer.offered_at.into(), offer.expires_at.into()],
            )];
            if *from_queue {
                steps.push(run(&LEAVE_QUEUE, vec![session_id.into()]));
            }
            steps
        }
        Write::CloseOffer { org_id, session_id, operator_id, status, at } => vec![change_one(
            &CLOSE_OFFER,
            vec![status.as_str().into(), (*at).into(), org_id.into(), session_id.into(), operator_id.into()],
            "no such open offer",
        )],
        Write::Start { org_id, session_id, operator_id, region, rtt_ms, planned_end_at, at } => vec![
            change_one(
                &START,
                vec![operator_id.into(), region.into(), (*rtt_ms).into(), (*at).into(), org_id.into(), session_id.into(), (*planned_end_at).into()],
                "session not pending",
            ),
            run(&ACTIVITY, vec![org_id.into(), session_id.into(), "SESSION_START".into(), (*at).into(), operator_id.into(), none()]),
        ],
        Write::End { org_id, session_id, to, reason, attached, at } => vec![
            change_one(
                &END,
                vec![to.as_str().into(), (*at).into(), reason.into(), org_id.into(), session_id.into()],
                "session not open",
            ),
            run(
                &ACTIVITY,
                vec![org_id.into(), session_id.into(), "SESSION_END".into(), (*at).into(), attached.into(), format!("{} · {reason}", to.as_str()).into()],
            ),
        ],
        Write::Activity { org_id, session_id, kind, operator_id, detail, at } => vec![run(
            &ACTIVITY,
            vec![org_id.into(), session_id.into(), kind.as_str().into(), (*at).into(), operator_id.into(), detail.into()],
        )],
        Write::Steer { org_id, session_id, from, to, kind, operator_id, at } => vec![
            change_one(
                &STEER,
                vec![to.as_str().into(), org_id.into(), session_id.into(), from.as_str().into()],
                "session not in the state the engine holds",
            ),
            run(&ACTIVITY, vec![org_id.into(), session_id.into(), kind.as_str().into(), (*at).into(), operator_id.into(), none()]),
        ],
        Write::Switch { org_id, session_id, from, to, region, rtt_ms, detail, at } => vec![
            change_one(
                &SWITCH,
                vec![to.into(), region.into(), (*rtt_ms).into(), org_id.into(), session_id.into(), from.into()],
                "session not held by the operator the engine holds",
            ),
            run(&ACTIVITY, vec![org_id.into(), session_id.into(), "OPERATOR_SWITCH".into(), (*at).into(), to.into(), detail.into()]),
        ],
        Write::Record { org_id, session_id, record } => vec![run(
            &RECORD,
            vec![org_id.into(), session_id.into(), record.at.into(), record.trigger.as_str().into(), record.pool_source.as_str().into(),
                 record.outcome.as_str().into(), (&record.operator_id).into(), record.rtt_ms.map(i64::from).into(), (&record.candidates).into()],
        )],
    }
}

/// A write that changed nothing where the engine expected one row.
pub(super) fn diverged(what: &str) -> StoreError {
    StoreError::Database(sqlx::Error::Protocol(format!("the database disagrees with the engine: {what}")))
}

/// The batch as PostgreSQL's batch function reads it (migration
/// postgres/0027_event_log_in_one_statement.sql): a step per statement,
/// each by its name with its values, then the event log's records as one
/// step (`log_events`: the org, the count, the records), which the function
/// writes with one statement, where SQLite runs `logged`'s one by one.
pub(super) fn as_json(writes: &[Write]) -> String {
    let (changes, log) = changes_then_log(writes);
    let mut steps: Vec<serde_json::Value> = changes
        .iter()
        .map(|statement| {
            let values: Vec<serde_json::Value> = statement
                .values
                .iter()
                .map(|value| match value {
                    Value::Text(text) => serde_json::json!(text),
                    Value::Int(n) => serde_json::json!(n),
                })
                .collect();
            serde_json::json!({ "s": statement.sql.name, "v": values, "one": statement.changes_one })
        })
        .collect();
    if let Some((org_id, ..)) = log.first() {
        let count = log.len();
        let records: Vec<serde_json::Value> = log
            .iter()
            .enumerate()
            .map(|(i, (_, session_id, at, event))| {
                // Its id: the count back from the counter's new last.
                let later = count - 1 - i;
                serde_json::json!({ "at": at, "kind": event.kind(), "session_id": session_id, "data": event.data(), "later": later })
            })
            .collect();
        steps.push(serde_json::json!({ "s": LOG_EVENTS, "v": [org_id, count, records] }));
    }
    serde_json::Value::Array(steps).to_string()
}

/// The batch function's step that writes a batch's event log records.
const LOG_EVENTS: &str = "log_events";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::journal::{DispatchRecord, NewOffer, NewSession};
    use domain::dispatch::{OfferStatus, Outcome, PoolSource, Trigger};
    use domain::lifecycle::ActivityKind;
    use domain::models::LifecycleState;

    /// One write of every kind, with every statement `statements` can give.
    fn every_write() -> Vec<Write> {
        let (org_id, session_id) = ("org".to_string(), "ses".to_string());
        let offer = NewOffer { id: "off".into(), operator_id: "op".into(), rtt_ms: 40, offered_at: 1, expires_at: 2 };
        let record = DispatchRecord {
            at: 1, trigger: Trigger::Raised, pool_source: PoolSource::LiveReadiness, outcome: Outcome::Offered,
            operator_id: Some("op".into()), rtt_ms: Some(40), candidates: "[]".into(),
        };
        vec![
            Write::OpenSession(NewSession {
                id: session_id.clone(), org_id: org_id.clone(), robot_id: "r".into(), skill: "s".into(), pop: "p".into(), raised_at: 1,
                client_id: None, booking_id: None, planned_end_at: None,
            }),
            Write::Queue { org_id: org_id.clone(), session_id: session_id.clone(), at: 1 },
            Write::Offer { org_id: org_id.clone(), session_id: session_id.clone(), offer, from_queue: true },
            Write::CloseOffer { org_id: org_id.clone(), session_id: session_id.clone(), operator_id: "op".into(), status: OfferStatus::Accepted, at: 2 },
            Write::Start { org_id: org_id.clone(), session_id: session_id.clone(), operator_id: "op".into(), region: "BLR".into(), rtt_ms: 40, planned_end_at: 9, at: 2 },
            Write::Steer { org_id: org_id.clone(), session_id: session_id.clone(), from: LifecycleState::Active, to: LifecycleState::Paused, kind: ActivityKind::Pause, operator_id: None, at: 3 },
            Write::Switch { org_id: org_id.clone(), session_id: session_id.clone(), from: None, to: "op2".into(), region: "MAN".into(), rtt_ms: 50, detail: None, at: 4 },
            Write::Activity { org_id: org_id.clone(), session_id: session_id.clone(), kind: ActivityKind::ActivityCheck, operator_id: None, detail: None, at: 5 },
            Write::End { org_id: org_id.clone(), session_id: session_id.clone(), to: LifecycleState::Completed, reason: "done".into(), attached: None, at: 6 },
            Write::Record { org_id, session_id, record },
        ]
    }

    /// The highest `$N` a statement's text names.
    fn placeholders(text: &str) -> usize {
        text.split('$').skip(1).filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()).max().unwrap_or(0)
    }

    #[test]
    fn every_statement_binds_as_many_values_as_its_text_names() {
        let writes = every_write();
        let mut seen: Vec<&str> = Vec::new();
        let records: Vec<_> = writes.iter().filter_map(Write::logged).collect();
        for statement in writes.iter().flat_map(statements).chain(logged(&records)) {
            assert_eq!(statement.values.len(), placeholders(statement.sql.text), "{}", statement.sql.name);
            seen.push(statement.sql.name);
        }
        for sql in ALL {
            assert!(seen.contains(&sql.name), "no write uses {}", sql.name);
        }
    }

    /// SQLite opens a statement journal for an insert whose rows come from
    /// a SELECT (it may write several and fail halfway), and copies into it
    /// each page the batch had already changed before the statement writes
    /// it: the event log's page, once a record after the first. Every
    /// insert of a batch is one row of VALUES.
    #[test]
    fn no_batch_insert_takes_its_rows_from_a_select() {
        for sql in ALL {
            let words: Vec<&str> = sql.text.split_whitespace().collect();
            if words[0] == "INSERT" {
                let values = words.iter().position(|w| *w == "VALUES");
                let select = words.iter().position(|w| w.trim_start_matches('(') == "SELECT");
                assert!(values.is_some_and(|v| select.is_none_or(|s| s > v)), "{}: {}", sql.name, sql.text);
            }
        }
    }

    /// The batch function as the latest migration that creates it.
    const BATCH_FUNCTION: &str = include_str!("../../migrations/postgres/0027_event_log_in_one_statement.sql");

    /// PostgreSQL applies the statements by name (migration 0027): every
    /// name here is a branch there, with as many values as the text binds,
    /// and so is the event log's one step.
    #[test]
    fn postgres_batch_function_knows_every_statement() {
        let function = BATCH_FUNCTION;
        assert!(function.contains(&format!("WHEN '{LOG_EVENTS}' THEN")), "no branch for {LOG_EVENTS}");
        for sql in ALL {
            let branch = format!("WHEN '{}' THEN", sql.name);
            let start = function.find(&branch).unwrap_or_else(|| panic!("no branch for {}", sql.name));
            let body = &function[start + branch.len()..];
            let body = &body[..body.find("WHEN '").or_else(|| body.find("ELSE")).expect("branch end")];
            let highest = body.split("v->>").skip(1).filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse::<usize>().ok()).max();
            assert_eq!(highest.map(|n| n + 1).unwrap_or(0), placeholders(sql.text), "{}", sql.name);
        }
    }

    #[test]
    fn a_batch_goes_to_postgres_in_order_as_json() {
        let json: serde_json::Value = serde_json::from_str(&as_json(&every_write()[2..])).unwrap();
        let names: Vec<&str> = json.as_array().unwrap().iter().map(|s| s["s"].as_str().unwrap()).collect();
        assert_eq!(names[..5], ["offer", "leave_queue", "close_offer", "start", "activity"]);
        // The event log's records come last, as one step (the counter row
        // is locked after every other row, as in every transaction that logs).
        assert_eq!(names.iter().filter(|n| **n == LOG_EVENTS).count(), 1, "{names:?}");
        assert!(!names.contains(&"bump_events") && !names.contains(&"log_event_at"), "{names:?}");
        let log = &json[names.len() - 1];
        assert_eq!(log["s"], LOG_EVENTS);
        assert_eq!(log["v"][0], "org");
        let records = log["v"][2].as_array().unwrap();
        let logged = every_write()[2..].iter().filter_map(Write::logged).count();
        assert!(logged > 1);
        assert_eq!(records.len(), logged);
        assert_eq!(log["v"][1], logged as i64, "the counter moves by the batch's count");
        assert_eq!(records[0]["later"], logged as i64 - 1, "the first record's id is the count back from the new last");
        assert_eq!(records[logged - 1]["later"], 0, "the last record takes the new last");
        assert_eq!(records[0]["kind"], "call.offered");
        assert_eq!(records[0]["session_id"], "ses");
        assert!(records[0]["data"].is_string(), "the record's data as its JSON text");
        assert_eq!(json[2]["one"], "no such open offer");
        assert_eq!(json[1]["one"], serde_json::Value::Null);
        assert_eq!(json[0]["v"][4], 40);
    }

    /// What SQLite runs and what PostgreSQL is sent log the same records:
    /// the same time, kind, session, data and place among the batch's ids.
    #[test]
    fn both_backends_log_a_batchs_records_alike() {
        let writes = every_write();
        let json: serde_json::Value = serde_json::from_str(&as_json(&writes)).unwrap();
        let text = |v: &serde_json::Value| v.as_str().unwrap().to_string();
        let sent: Vec<(i64, String, String, String, i64)> = json.as_array().unwrap().last().unwrap()["v"][2]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["at"].as_i64().unwrap(), text(&r["kind"]), text(&r["session_id"]), text(&r["data"]), r["later"].as_i64().unwrap()))
            .collect();
        let run: Vec<(i64, String, String, String, i64)> = batch(&writes)
            .into_iter()
            .filter(|s| s.sql.name == LOG_EVENT.name)
            .map(|s| match &s.values[1..] {
                [Value::Int(Some(at)), Value::Text(Some(kind)), Value::Text(Some(session)), Value::Text(Some(data)), Value::Int(Some(later))] => {
                    (*at, kind.to_string(), session.to_string(), data.to_string(), *later)
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(run.len() > 1);
        assert_eq!(sent, run);
    }

    #[test]
    fn a_call_raised_and_queued_at_once_is_one_insert_with_its_queue_time() {
        let writes = every_write();
        // Not counting the event log's statements (both events are logged).
        let changes = |writes: &[Write]| -> Vec<&'static str> {
            batch(writes).into_iter().map(|s| s.sql.name).filter(|n| !["bump_events", "log_event_at"].contains(n)).collect()
        };
        let statements = batch(&writes[..2]);
        assert_eq!(changes(&writes[..2]), ["open_session"]);
        assert_eq!(statements[0].values[6], Value::Int(Some(1)));
        let logged: Vec<&Value> = statements.iter().filter(|s| s.sql.name == "log_event_at").map(|s| &s.values[2]).collect();
        assert_eq!(logged, [&Value::from("call.raised"), &Value::from("call.queued")]);
        // Queued later (another session's write in between, or another
        // session altogether): the queue write stays its own.
        let other = Write::Queue { org_id: "org".into(), session_id: "another".into(), at: 1 };
        assert_eq!(changes(&[writes[0].clone(), other]).len(), 2);
        assert_eq!(changes(&[writes[0].clone(), writes[9].clone(), writes[1].clone()]).len(), 3);
    }
}
