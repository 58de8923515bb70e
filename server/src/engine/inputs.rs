//! Operator input (a cockpit's actions; rule L07: it resets the session's
//! inactivity chain) reaches each org's dispatcher as one request per
//! `INPUTS_EVERY`, whatever the number of sessions: noted without waiting
//! (the relay's socket reads its next action at once), taken in a batch.
//! In cluster mode a batch for an org dispatched elsewhere is one request
//! over NATS, not one per session: those came due together every quarter
//! second and the relay's frames across instances queued behind them.

use super::request::OperatorInput;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

/// How often noted input goes to the dispatchers: at most ten requests a
/// second per org, and a session's input is at most this late to its
/// inactivity chain (the relay reports each session's at most every 250
/// ms, `relay::channel::INPUT_REPORT_MS`; a warning comes after minutes).
pub const INPUTS_EVERY: Duration = Duration::from_millis(100);

/// Input noted since the last batch, by org; and the orgs whose batch is
/// on its way (one at a time: a dispatcher that stalls gets one batch when
/// it is back, holding everything noted meanwhile, not a pile of them).
#[derive(Default)]
pub(super) struct InputsNoted(Mutex<Noted>);

#[derive(Default)]
struct Noted {
    waiting: HashMap<String, HashSet<OperatorInput>>,
    in_flight: HashSet<String>,
}

impl InputsNoted {
    pub fn note(&self, org_id: &str, operator_id: &str, session_id: &str) {
        let input = OperatorInput { operator_id: operator_id.to_string(), session_id: session_id.to_string() };
        self.0.lock().expect("inputs lock").waiting.entry(org_id.to_string()).or_default().insert(input);
    }

    /// The batches to send now: each org's input noted, unless its last
    /// batch is still on its way (then it waits for the next). Each org
    /// taken is on its way until `sent`.
    pub fn take(&self) -> Vec<(String, Vec<OperatorInput>)> {
        let mut noted = self.0.lock().expect("inputs lock");
        let Noted { waiting, in_flight } = &mut *noted;
        let ready: Vec<String> = waiting.keys().filter(|org| !in_flight.contains(*org)).cloned().collect();
        ready
            .into_iter()
            .filter_map(|org_id| {
                let inputs = waiting.remove(&org_id)?;
                in_flight.insert(org_id.clone());
                Some((org_id, inputs.into_iter().collect()))
            })
            .collect()
    }

    /// The org's batch was answered (or refused): its next may go.
    pub fn sent(&self, org_id: &str) {
        self.0.lock().expect("inputs lock").in_flight.remove(org_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_batched_by_org_once_per_session_and_operator_one_batch_at_a_time() {
        let noted = InputsNoted::default();
        noted.note("o1", "asha", "s1");
        noted.note("o1", "asha", "s1");
        // (Just after a handover: the old holder's input is not the new one's.)
        noted.note("o1", "bo", "s1");
        noted.note("o1", "bo", "s2");
        noted.note("o2", "cy", "s3");
        let sorted = |batches: Vec<(String, Vec<OperatorInput>)>| {
            let mut out: Vec<(String, Vec<(String, String)>)> = batches
                .into_iter()
                .map(|(org, inputs)| {
                    let mut inputs: Vec<(String, String)> = inputs.into_iter().map(|i| (i.session_id, i.operator_id)).collect();
                    inputs.sort();
                    (org, inputs)
                })
                .collect();
            out.sort();
            out
        };
        let pair = |s: &str, o: &str| (s.to_string(), o.to_string());
        assert_eq!(
            sorted(noted.take()),
            [("o1".to_string(), vec![pair("s1", "asha"), pair("s1", "bo"), pair("s2", "bo")]), ("o2".to_string(), vec![pair("s3", "cy")])]
        );
        assert!(noted.take().is_empty(), "taken once");
        // o1's batch is still on its way: what is noted meanwhile waits for it.
        noted.note("o1", "asha", "s1");
        noted.note("o2", "cy", "s3");
        noted.sent("o2");
        assert_eq!(sorted(noted.take()), [("o2".to_string(), vec![pair("s3", "cy")])]);
        noted.note("o1", "bo", "s2");
        noted.sent("o1");
        assert_eq!(sorted(noted.take()), [("o1".to_string(), vec![pair("s1", "asha"), pair("s2", "bo")])]);
    }
}
