//! Rule L10: after COMPLETED, the session's client (the org's admins for a
//! session without a client) rates the operator 1–5 stars with feedback,
//! once; the ratings make the operator's score, shown wherever operators
//! are listed. No rating on CANCELLED.

use crate::models::LifecycleState;
use serde::{Deserialize, Serialize};

pub const MAX_FEEDBACK_CHARS: usize = 1_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRating {
    pub stars: u8,
    pub feedback: String,
    pub rated_by_name: String,
    pub at_ms: i64,
}

pub use crate::models::OperatorScore;

/// Why this rating cannot be given, if it cannot: the session's state
/// first, then the rating itself.
pub fn rating_problem(lifecycle: LifecycleState, already_rated: bool, stars: u8, feedback: &str) -> Option<String> {
    if lifecycle != LifecycleState::Completed {
        return Some(format!("Only a COMPLETED session is rated; this one is {}.", lifecycle.as_str()));
    }
    if already_rated {
        return Some(ALREADY_RATED.into());
    }
    rating_input_problem(stars, feedback)
}

pub const ALREADY_RATED: &str = "This session has been rated already.";

/// Why the stars or feedback themselves are not acceptable, if they are not.
pub fn rating_input_problem(stars: u8, feedback: &str) -> Option<String> {
    if !(1..=5).contains(&stars) {
        return Some("Give 1 to 5 stars.".into());
    }
    if feedback.chars().count() > MAX_FEEDBACK_CHARS {
        return Some(format!("Keep the feedback under {MAX_FEEDBACK_CHARS} characters."));
    }
    None
}

/// Who rates the operator of `session`: its client, or an admin of the
/// org (who can do everything a client can). Never the operator alone.
pub fn may_rate(role: crate::models::Role, user_id: &str, session: &crate::models::SessionRecord) -> bool {
    session.client_id.as_deref() == Some(user_id) || role == crate::models::Role::Admin
}

#[cfg(test)]
mod tests {
    use super::*;
    use LifecycleState as L;

    #[test]
    fn l10_the_client_or_an_admin_rates_never_the_operator_or_another_client() {
        use crate::models::Role;
        let mut session: crate::models::SessionRecord = serde_json::from_value(serde_json::json!({
            "id": "ses-1", "robot": "uk-pick-01", "robotModel": "FR3", "site": "Leeds", "pop": "uk-london", "skill": "pick-place",
            "lifecycle": "COMPLETED", "state": "SAFE", "operatorId": "u-asha", "operatorName": "Asha", "region": "BLR",
            "raisedAt": "2026-11-30T10:00:00Z", "startedAt": null, "endedAt": null, "rttMs": null, "divergenceDeg": null,
            "velocityScale": null, "clientId": "u-kofi"
        }))
        .unwrap();
        assert!(may_rate(Role::Client, "u-kofi", &session));
        assert!(!may_rate(Role::Client, "u-other", &session), "another client");
        assert!(!may_rate(Role::Operator, "u-asha", &session), "the operator never rates themself");
        assert!(may_rate(Role::Admin, "u-dana", &session));
        session.client_id = None;
        assert!(may_rate(Role::Admin, "u-dana", &session) && !may_rate(Role::Client, "u-kofi", &session));
    }

    #[test]
    fn l10_only_a_completed_session_is_rated_once_with_one_to_five_stars() {
        assert_eq!(rating_problem(L::Completed, false, 5, "smooth"), None);
        assert!(rating_problem(L::Cancelled, false, 5, "").is_some(), "no rating on CANCELLED");
        assert!(rating_problem(L::Active, false, 5, "").is_some());
        assert!(rating_problem(L::Completed, true, 4, "").is_some(), "once");
        assert!(rating_problem(L::Completed, false, 0, "").is_some() && rating_problem(L::Completed, false, 6, "").is_some());
        assert!(rating_problem(L::Completed, false, 3, &"x".repeat(MAX_FEEDBACK_CHARS + 1)).is_some());
        assert_eq!(OperatorScore::label(Some(OperatorScore::new(4.25, 4))), "4.3 ★ (4)");
        assert_eq!(OperatorScore::label(Some(OperatorScore::new(5.0, 1))), "5.0 ★ (1)");
        assert_eq!(OperatorScore::label(None), "—");
    }
}
