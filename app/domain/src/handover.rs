//! Handing a live session to another operator (seed 001 "operator
//! switch", rule L08): who may take it, what the handing operator hears
//! back, and who was in control at any time, read from the activity log.

use crate::dispatch::{rank_pool, Candidate, LinkFloors, Presence, Verdict};
use crate::lifecycle::{ActivityEntry, ActivityKind};
use serde::{Deserialize, Serialize};

/// How a handover offer ended, as the handing operator is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoverOutcome {
    /// The offer rings for the chosen operator.
    Ringing,
    /// They took control.
    Accepted,
    Declined,
    /// The offer's window passed unanswered (or they went away).
    Missed,
    /// The session ended (or the server restarted) while it rang.
    Withdrawn,
}

impl HandoverOutcome {
    pub fn sentence(self, to_name: &str) -> String {
        match self {
            HandoverOutcome::Ringing => format!("Offered to {to_name}: waiting for them to accept."),
            HandoverOutcome::Accepted => format!("{to_name} took control."),
            HandoverOutcome::Declined => format!("{to_name} declined the handover: you keep control."),
            HandoverOutcome::Missed => format!("{to_name} did not answer the handover: you keep control."),
            HandoverOutcome::Withdrawn => format!("The handover to {to_name} was withdrawn: you keep control."),
        }
    }
}

/// What the handing operator's console hears about their handover offer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoverNotice {
    pub session_id: String,
    pub to_operator_id: String,
    pub to_name: String,
    pub outcome: HandoverOutcome,
}

/// Operators the session may be handed to: ready (no offer ringing),
/// certified for the session's skill, with an RTT to the robot's PoP, not
/// the operator in control; best first, ranked exactly as the ACD ranks a
/// call (rules A06, A10, D01).
pub fn handover_candidates(pop: &str, skill: &str, ready: &[Presence], floors: &LinkFloors, in_control: Option<&str>) -> Vec<Candidate> {
    let exclude: Vec<String> = in_control.map(str::to_string).into_iter().collect();
    rank_pool(pop, skill, ready, floors, &exclude)
        .into_iter()
        .filter(|c| matches!(c.verdict, Verdict::Chosen | Verdict::Outranked))
        .collect()
}

/// One stretch of control of a session (rule L08).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlSpan {
    pub operator_id: String,
    pub operator_name: Option<String>,
    pub from_ms: i64,
    /// `None` while they still hold it.
    pub to_ms: Option<i64>,
}

/// Who was in control when, from the activity log alone: SESSION_START
/// gives control to its operator, each OPERATOR_SWITCH to the new one,
/// SESSION_END takes it from whoever holds it.
pub fn control_spans(log: &[ActivityEntry]) -> Vec<ControlSpan> {
    let mut spans: Vec<ControlSpan> = Vec::new();
    for entry in log {
        match entry.kind {
            ActivityKind::SessionStart | ActivityKind::OperatorSwitch => {
                if let Some(open) = spans.last_mut().filter(|s| s.to_ms.is_none()) {
                    open.to_ms = Some(entry.at_ms);
                }
                if let Some(operator_id) = &entry.operator_id {
                    spans.push(ControlSpan {
                        operator_id: operator_id.clone(),
                        operator_name: entry.operator_name.clone(),
                        from_ms: entry.at_ms,
                        to_ms: None,
                    });
                }
            }
            ActivityKind::SessionEnd => {
                if let Some(open) = spans.last_mut().filter(|s| s.to_ms.is_none()) {
                    open.to_ms = Some(entry.at_ms);
                }
            }
            _ => {}
        }
    }
    spans
}

/// Who held the session at `at_ms`, if anyone.
pub fn in_control_at(spans: &[ControlSpan], at_ms: i64) -> Option<&ControlSpan> {
    spans.iter().find(|s| s.from_ms <= at_ms && s.to_ms.is_none_or(|end| at_ms < end))
}

/// Why an admin may not take control of a live session themselves (issue
/// "Integrators and supervisors", part 2: a take-over is a handover to
/// oneself that needs no accept), in a sentence; `None`: they may.
/// `admin_skills`: the skills of the admin's operator profile in the org
/// (`None`: they have none).
pub fn take_over_problem(admin_id: &str, admin_skills: Option<&[String]>, skill: &str, in_control: Option<&str>, handover_ringing: bool) -> Option<String> {
    if in_control == Some(admin_id) {
        return Some("You are already in control of this session.".into());
    }
    if !admin_skills.is_some_and(|skills| skills.iter().any(|s| s == skill)) {
        return Some(format!("Only an admin certified for {skill} may take control; from the live view you may E-stop."));
    }
    if handover_ringing {
        return Some("A handover is ringing: take control once it is answered or missed.".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_certified_admin_not_already_in_control_takes_over_and_not_over_a_ringing_handover() {
        let skills = vec!["inspection".to_string()];
        assert_eq!(take_over_problem("dana", Some(&skills), "inspection", Some("asha"), false), None);
        assert!(take_over_problem("dana", Some(&skills), "welding", Some("asha"), false).unwrap().contains("certified for welding"));
        assert!(take_over_problem("dana", None, "inspection", Some("asha"), false).is_some(), "no operator profile");
        assert!(take_over_problem("dana", Some(&skills), "inspection", Some("dana"), false).unwrap().contains("already in control"));
        assert!(take_over_problem("dana", Some(&skills), "inspection", Some("asha"), true).unwrap().contains("ringing"));
    }
    use crate::models::LinkFloor;

    fn entry(kind: ActivityKind, at_ms: i64, operator: Option<&str>) -> ActivityEntry {
        ActivityEntry { at_ms, kind, operator_id: operator.map(str::to_string), operator_name: None, detail: None }
    }

    fn ready(id: &str, region: &str, certs: &[&str], since: i64) -> Presence {
        Presence {
            operator_id: id.into(),
            name: id.to_uppercase(),
            available: true,
            region: region.into(),
            certs: certs.iter().map(|c| c.to_string()).collect(),
            since,
            measured_rtt_ms: Default::default(),
        }
    }

    #[test]
    fn l08_control_spans_say_who_held_the_session_at_any_time() {
        use ActivityKind::*;
        let log = [
            entry(SessionStart, 1_000, Some("ada")),
            entry(ActivityCheck, 2_000, None),
            entry(Pause, 3_000, Some("ada")),
            entry(OperatorSwitch, 4_000, Some("grace")),
            entry(Resume, 5_000, Some("grace")),
            entry(OperatorSwitch, 6_000, Some("linus")),
            entry(SessionEnd, 9_000, Some("linus")),
        ];
        let spans = control_spans(&log);
        let held: Vec<(&str, i64, Option<i64>)> = spans.iter().map(|s| (s.operator_id.as_str(), s.from_ms, s.to_ms)).collect();
        assert_eq!(held, vec![("ada", 1_000, Some(4_000)), ("grace", 4_000, Some(6_000)), ("linus", 6_000, Some(9_000))]);
        assert_eq!(in_control_at(&spans, 3_999).map(|s| s.operator_id.as_str()), Some("ada"));
        assert_eq!(in_control_at(&spans, 4_000).map(|s| s.operator_id.as_str()), Some("grace"), "the switch hands over at its instant");
        assert_eq!(in_control_at(&spans, 8_999).map(|s| s.operator_id.as_str()), Some("linus"));
        assert!(in_control_at(&spans, 9_000).is_none() && in_control_at(&spans, 999).is_none());
        let live = control_spans(&log[..5]);
        assert_eq!(live.last().map(|s| (s.operator_id.as_str(), s.to_ms)), Some(("grace", None)), "still in control");
    }

    #[test]
    fn l08_handover_goes_to_ready_certified_operators_best_first_never_the_holder() {
        let floors = LinkFloors::new([
            LinkFloor { region: "BLR".into(), pop: "us-east".into(), floor_ms: 110, note: None },
            LinkFloor { region: "NYC".into(), pop: "us-east".into(), floor_ms: 12, note: None },
        ]);
        let pool = [
            ready("ada", "NYC", &["pick-place"], 10),
            ready("grace", "BLR", &["pick-place"], 5),
            ready("linus", "NYC", &["welding"], 1),
            ready("ken", "NYC", &["pick-place"], 20),
            ready("mars", "MARS", &["pick-place"], 1),
        ];
        let ids: Vec<String> = handover_candidates("us-east", "pick-place", &pool, &floors, Some("ada")).into_iter().map(|c| c.operator_id).collect();
        assert_eq!(ids, vec!["ken", "grace"], "the holder, the uncertified and the unrankable are left out; lowest RTT first");
    }
}
