//! Operator input (a cockpit's actions; rule L07: it resets the session's
//! inactivity chain) reaches each org's dispatcher as one request per
//! `INPUTS_EVERY`, whatever the number of sessions: noted without waiting
//! (the relay's socket reads its next action at once), taken in a batch.
//! In cluster mode a batch for an org dispatched elsewhere is one request
//! over NATS, not one per session: those came due together every quarter
//! second and the relay's frames across instances queued behind them.

use super::request::OperatorInput;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How often noted input goes to the dispatchers: at most ten requests a
/// second per org, and a session's input is at most this late to its
/// inactivity chain (the relay reports each session's at most every 250
/// ms, `relay::channel::INPUT_REPORT_MS`; a warning comes after minutes).
pub const INPUTS_EVERY: Duration = Duration::from_millis(100);

/// Input noted since the last batch: by org, each session's operator.
#[derive(Default)]
pub(super) struct InputsNoted(Mutex<HashMap<String, HashMap<String, String>>>);

impl InputsNoted {
    pub fn note(&self, org_id: &str, operator_id: &str, session_id: &str) {
        let mut noted = self.0.lock().expect("inputs lock");
        noted.entry(org_id.to_string()).or_default().insert(session_id.to_string(), operator_id.to_string());
    }

    /// Everything noted, by org, as the batches to send.
    pub fn take(&self) -> Vec<(String, Vec<OperatorInput>)> {
        let noted = std::mem::take(&mut *self.0.lock().expect("inputs lock"));
        noted
            .into_iter()
            .map(|(org_id, sessions)| (org_id, sessions.into_iter().map(|(session_id, operator_id)| OperatorInput { operator_id, session_id }).collect()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_batched_by_org_once_per_session() {
        let noted = InputsNoted::default();
        noted.note("o1", "asha", "s1");
        noted.note("o1", "asha", "s1");
        noted.note("o1", "bo", "s2");
        noted.note("o2", "cy", "s3");
        let mut batches = noted.take();
        batches.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, inputs) in &mut batches {
            inputs.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        }
        let sessions: Vec<(String, Vec<&str>)> = batches.iter().map(|(org, inputs)| (org.clone(), inputs.iter().map(|i| i.session_id.as_str()).collect())).collect();
        assert_eq!(sessions, [("o1".to_string(), vec!["s1", "s2"]), ("o2".to_string(), vec!["s3"])]);
        assert!(noted.take().is_empty(), "taken once");
    }
}
