//! The presence roster's rules (seed 003, rules R01–R12): one row per
//! operator, its label and secondary line, the header counters and the
//! filters. Pure, used by the server function and the browser.

use crate::models::PresenceState;
use serde::{Deserialize, Serialize};

/// Seed 003's polling interval (rule R09); pushes come in between.
pub const ROSTER_POLL_MS: u32 = 8_000;
/// Rule R12.
pub const EMPTY_ROSTER: &str = "Agents appear here when they sign in";
/// Rows drawn at once; the rest are a page away (5,000 operators stay fluid).
pub const PAGE_ROWS: usize = 50;

/// The org's roster as of a moment (rule R01: one org).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roster {
    pub rows: Vec<RosterRow>,
    pub as_of_ms: i64,
}

/// One operator (rule R02: keyed on the agent id, a current snapshot).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RosterRow {
    pub agent_id: String,
    pub display_name: Option<String>,
    /// Searchable, never displayed.
    pub email: Option<String>,
    pub external_agent_id: Option<String>,
    /// `agent` when absent (rule R06).
    pub kind: Option<String>,
    pub state: PresenceState,
    pub state_since_ms: Option<i64>,
    pub current_call_id: Option<String>,
    pub aux_reason: Option<String>,
    /// Clients' ratings (rule L10); `None` before the first.
    #[serde(default)]
    pub score: Option<crate::rating::OperatorScore>,
}

/// Rule R06: display name, then external id, then the raw agent id.
pub fn label(row: &RosterRow) -> &str {
    row.display_name
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .or(row.external_agent_id.as_deref().filter(|s| !s.trim().is_empty()))
        .unwrap_or(&row.agent_id)
}

/// Rules R04 and R06: `kind`, then `· call <id>` (ringing, on call) or the
/// aux reason; acw shows neither.
pub fn secondary_line(row: &RosterRow) -> String {
    let kind = row.kind.as_deref().filter(|k| !k.is_empty()).unwrap_or("agent");
    match row.state {
        PresenceState::Ringing | PresenceState::OnCall => match &row.current_call_id {
            Some(call) => format!("{kind} · call {call}"),
            None => kind.to_string(),
        },
        PresenceState::Aux => match &row.aux_reason {
            Some(reason) => format!("{kind} · {reason}"),
            None => kind.to_string(),
        },
        _ => kind.to_string(),
    }
}

/// How a state is drawn (rule R03).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Badge {
    /// `ok`, `warn` or `muted`.
    pub tone: &'static str,
    /// The animated live pill (ringing and on call only).
    pub live: bool,
}

pub fn badge(state: PresenceState) -> Badge {
    match state {
        PresenceState::Ready => Badge { tone: "ok", live: false },
        PresenceState::Ringing | PresenceState::OnCall => Badge { tone: "warn", live: true },
        PresenceState::Acw => Badge { tone: "warn", live: false },
        PresenceState::Aux | PresenceState::Offline => Badge { tone: "muted", live: false },
    }
}

/// Rule R10's header counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub online: usize,
    pub ready: usize,
    pub on_call: usize,
    pub aux: usize,
}

/// Rule R10: from the full roster, before filters; online is every row
/// that is not offline; no ringing or acw counter.
pub fn counters(rows: &[RosterRow]) -> Counters {
    let count = |state: PresenceState| rows.iter().filter(|r| r.state == state).count();
    Counters {
        online: rows.iter().filter(|r| r.state != PresenceState::Offline).count(),
        ready: count(PresenceState::Ready),
        on_call: count(PresenceState::OnCall),
        aux: count(PresenceState::Aux),
    }
}

/// Rule R11's search text of a row: display name, email and external id
/// joined, lower-cased. The browser builds it once per load, so a keystroke
/// only scans.
pub fn search_text(row: &RosterRow) -> String {
    [row.display_name.as_deref(), row.email.as_deref(), row.external_agent_id.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Rule R11: the state matches exactly; the search is a case-insensitive
/// substring of display name, email and external id joined (so a query may
/// span fields; the raw agent id never matches); both must hold.
pub fn matches(row: &RosterRow, state: Option<PresenceState>, query: &str) -> bool {
    let query = query.trim().to_lowercase();
    state.is_none_or(|s| s == row.state) && (query.is_empty() || search_text(row).contains(&query))
}

/// Rule R11 over a loaded roster whose `texts` are its rows' [`search_text`]:
/// the positions of the matching rows, in roster order.
pub fn matching_rows(rows: &[RosterRow], texts: &[String], state: Option<PresenceState>, query: &str) -> Vec<usize> {
    let query = query.trim().to_lowercase();
    rows.iter()
        .zip(texts)
        .enumerate()
        .filter(|(_, (row, text))| state.is_none_or(|s| s == row.state) && (query.is_empty() || text.contains(&query)))
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use PresenceState::*;

    fn row(id: &str, name: Option<&str>, external: Option<&str>, state: PresenceState) -> RosterRow {
        RosterRow {
            agent_id: id.into(),
            display_name: name.map(Into::into),
            email: Some(format!("{id}@northstar.example")),
            external_agent_id: external.map(Into::into),
            kind: None,
            state,
            state_since_ms: Some(1),
            current_call_id: None,
            aux_reason: None,
            score: None,
        }
    }

    #[test]
    fn r06_label_falls_back_from_name_to_external_id_to_agent_id_and_kind_defaults_to_agent() {
        assert_eq!(label(&row("u-1", Some("Asha Rao"), Some("NS-1"), Ready)), "Asha Rao");
        assert_eq!(label(&row("u-1", None, Some("NS-1"), Ready)), "NS-1");
        assert_eq!(label(&row("u-1", Some(" "), None, Ready)), "u-1");
        assert_eq!(secondary_line(&row("u-1", None, None, Ready)), "agent");
    }

    #[test]
    fn r03_r04_live_pills_only_for_ringing_and_on_call_which_show_their_call() {
        let live: Vec<_> = PresenceState::ALL.into_iter().filter(|s| badge(*s).live).collect();
        assert_eq!(live, [Ringing, OnCall]);
        assert_eq!(badge(Ready).tone, "ok");
        assert_eq!((badge(Acw).tone, badge(Aux).tone, badge(Offline).tone), ("warn", "muted", "muted"));
        let mut on_call = row("u-1", Some("A"), None, OnCall);
        on_call.current_call_id = Some("ses-9".into());
        assert_eq!(secondary_line(&on_call), "agent · call ses-9");
        let mut aux = row("u-1", Some("A"), None, Aux);
        aux.aux_reason = Some("break".into());
        assert_eq!(secondary_line(&aux), "agent · break");
        let mut acw = row("u-1", Some("A"), None, Acw);
        acw.current_call_id = Some("ses-9".into());
        acw.aux_reason = Some("x".into());
        assert_eq!(secondary_line(&acw), "agent", "acw shows neither");
    }

    #[test]
    fn r10_counters_come_from_the_whole_roster_and_online_is_every_row_not_offline() {
        let rows = vec![
            row("a", None, None, Ready),
            row("b", None, None, Ringing),
            row("c", None, None, OnCall),
            row("d", None, None, Acw),
            row("e", None, None, Aux),
            row("f", None, None, Offline),
        ];
        assert_eq!(counters(&rows), Counters { online: 5, ready: 1, on_call: 1, aux: 1 });
        assert_eq!(counters(&[]), Counters::default());
    }

    #[test]
    fn r11_search_spans_name_email_and_external_id_never_the_agent_id_and_ands_with_state() {
        let asha = row("u-asha", Some("Asha Rao"), Some("NS-0101"), Ready);
        assert!(matches(&asha, None, "ASHA"));
        assert!(matches(&asha, None, "rao u-asha@north"), "a query may span fields");
        assert!(matches(&asha, None, "ns-0101"));
        let no_email = RosterRow { email: None, ..row("u-zed", Some("Z"), None, Ready) };
        assert!(!matches(&no_email, None, "u-zed"), "the raw agent id does not match");
        assert!(matches(&asha, Some(Ready), "asha"));
        assert!(!matches(&asha, Some(Aux), "asha"), "state AND search");
        assert!(!matches(&asha, Some(OnCall), ""), "the state matches exactly");
    }

    #[test]
    fn r11_the_prepared_filter_agrees_with_matches() {
        let rows = vec![
            row("u-asha", Some("Asha Rao"), Some("NS-0101"), Ready),
            row("u-bo", Some("Bo Chen"), None, Aux),
            row("u-cy", None, Some("NS-0202"), Ready),
        ];
        let texts: Vec<_> = rows.iter().map(search_text).collect();
        for (state, query) in [(None, ""), (None, "NS-0"), (Some(Ready), " ns "), (Some(Aux), "bo"), (None, "u-cy")] {
            let expected: Vec<_> = (0..rows.len()).filter(|&i| matches(&rows[i], state, query)).collect();
            assert_eq!(matching_rows(&rows, &texts, state, query), expected, "{state:?} {query:?}");
        }
    }

    #[test]
    fn r12_the_empty_roster_says_when_agents_appear() {
        assert_eq!(EMPTY_ROSTER, "Agents appear here when they sign in");
    }
}
