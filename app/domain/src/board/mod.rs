//! The rules of the operations wallboard and the admin overview (seed 000):
//! which sessions are live, their order, the counters, the display
//! thresholds and the link-health rows. Pure functions, unit-tested here,
//! used by the server (snapshots, `/metrics`) and the browser alike.

mod snapshot;

pub use snapshot::{split_by_ceiling, utc_midnight, AnswerSpeed, AnsweredOffer, OpsBoard, QueueDepth, PROMPT_ANSWER_MS};

use crate::events::{AuditAction, AuditEntry};
use crate::models::{LifecycleState, LinkFloor, PresenceState, RegistryStatus, SafetyState, SessionRecord};
use serde::{Deserialize, Serialize};

/// Rule W04: the sessions needing a human look come first.
pub const CARD_ORDER: [SafetyState; 6] = [
    SafetyState::ProtectiveStop,
    SafetyState::Diverged,
    SafetyState::Degraded,
    SafetyState::Armed,
    SafetyState::Safe,
    SafetyState::Boot,
];

/// Rule W05: the header's count chips, shown at 0 too.
pub const CHIP_STATES: [SafetyState; 4] =
    [SafetyState::Armed, SafetyState::Degraded, SafetyState::Diverged, SafetyState::ProtectiveStop];

/// Rule W08.
pub const RTT_WARN_MS: u32 = 320;
/// Rule W09.
pub const DIVERGENCE_WARN_DEG: f64 = 8.0;
pub const DIVERGENCE_ALARM_DEG: f64 = 15.0;
/// Rule O06: a matched RTT above this is highlighted on the overview.
pub const MATCHED_RTT_WARN_MS: u32 = 250;
/// Rule O04's window.
pub const ESTOP_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

/// Sessions attached now: ACTIVE or PAUSED (DESIGN "States"). PENDING calls
/// are queue figures, never cards.
pub fn is_live(lifecycle: LifecycleState) -> bool {
    matches!(lifecycle, LifecycleState::Active | LifecycleState::Paused)
}

fn rank(state: SafetyState) -> usize {
    CARD_ORDER.iter().position(|s| *s == state).unwrap_or(CARD_ORDER.len())
}

/// Rule W04, ties longest running first (then id, so the order is total).
pub fn order_cards(sessions: &mut [SessionRecord]) {
    sessions.sort_by(|a, b| {
        rank(a.state)
            .cmp(&rank(b.state))
            .then(a.started_at.unwrap_or(i64::MAX).cmp(&b.started_at.unwrap_or(i64::MAX)))
            .then(a.id.cmp(&b.id))
    });
}

/// Rule W07: the states the wallboard treats as alarms.
pub fn is_alarm(state: SafetyState) -> bool {
    matches!(state, SafetyState::ProtectiveStop | SafetyState::Diverged)
}

/// Rule W06: one colour token per state (a CSS class), the same on the
/// wallboard pills and the overview's table.
pub fn state_token(state: SafetyState) -> &'static str {
    match state {
        SafetyState::Boot => "state-boot",
        SafetyState::Safe => "state-safe",
        SafetyState::Armed => "state-armed",
        SafetyState::Degraded => "state-degraded",
        SafetyState::Diverged => "state-diverged",
        SafetyState::ProtectiveStop => "state-protective-stop",
    }
}

/// Rule W06: one one-line meaning per state (seed 000's words).
pub fn state_meaning(state: SafetyState) -> &'static str {
    match state {
        SafetyState::Boot => "Edge agent starting. Not yet holding a safety posture.",
        SafetyState::Safe => "Holding position — not armed.",
        SafetyState::Armed => "Live under operator control.",
        SafetyState::Degraded => "Velocity-scaled because the link is poor.",
        SafetyState::Diverged => "The arm is not tracking the commanded pose.",
        SafetyState::ProtectiveStop => "Latched stop, awaiting clear.",
    }
}

/// The card's hint: rule W11's wording for a latched stop.
pub fn state_hint(state: SafetyState) -> &'static str {
    match state {
        SafetyState::ProtectiveStop => "latched, awaiting clear",
        other => state_meaning(other),
    }
}

/// How a number on a card is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Normal,
    Warning,
    /// In a state's colour (divergence past 15° takes DIVERGED's).
    State(SafetyState),
}

impl Tone {
    pub fn class(self) -> &'static str {
        match self {
            Tone::Normal => "tone-normal",
            Tone::Warning => "tone-warning",
            Tone::State(state) => state_token(state),
        }
    }
}

/// Rule W08.
pub fn rtt_tone(rtt_ms: Option<u32>) -> Tone {
    match rtt_ms {
        Some(ms) if ms > RTT_WARN_MS => Tone::Warning,
        _ => Tone::Normal,
    }
}

/// Rule W09.
pub fn divergence_tone(divergence_deg: Option<f64>) -> Tone {
    match divergence_deg {
        Some(d) if d > DIVERGENCE_ALARM_DEG => Tone::State(SafetyState::Diverged),
        Some(d) if d > DIVERGENCE_WARN_DEG => Tone::Warning,
        _ => Tone::Normal,
    }
}

/// Rule W10.
pub fn velocity_tone(velocity_scale: Option<f64>) -> Tone {
    match velocity_scale {
        Some(v) if v < 1.0 => Tone::Warning,
        _ => Tone::Normal,
    }
}

/// Rule W10: the velocity scale as a rounded percentage of full speed.
/// A divergence, `12.3°`.
pub fn degrees(divergence_deg: f64) -> String {
    format!("{}°", crate::rules::fixed(divergence_deg, 1))
}

pub fn velocity_percent(velocity_scale: f64) -> String {
    format!("{}%", (velocity_scale * 100.0).round() as i64)
}

/// Rule O06.
pub fn matched_rtt_tone(rtt_ms: u32) -> Tone {
    if rtt_ms > MATCHED_RTT_WARN_MS {
        Tone::Warning
    } else {
        Tone::Normal
    }
}

/// Rule W14: the registry chip when the robot is not heartbeating.
pub fn registry_chip(status: RegistryStatus) -> Option<String> {
    (status != RegistryStatus::Online).then(|| format!("robot {}", status.as_str()))
}

/// Rules W05 and O05: every state with its count, zeros included, in card
/// order. The counts sum to the number of sessions given.
pub fn state_counts(sessions: &[SessionRecord]) -> Vec<(SafetyState, usize)> {
    CARD_ORDER.iter().map(|&state| (state, sessions.iter().filter(|s| s.state == state).count())).collect()
}

/// Rule O03: operators whose presence is `ready` or attached (`on_call`).
pub fn operators_available(presences: impl IntoIterator<Item = PresenceState>) -> usize {
    presences.into_iter().filter(|p| matches!(p, PresenceState::Ready | PresenceState::OnCall)).count()
}

/// Rule O04: operator-initiated stops in the trailing 24 h.
pub fn estops_24h(audit: &[AuditEntry], now_ms: i64) -> usize {
    audit.iter().filter(|a| a.action == AuditAction::OperatorEstop && a.at_ms > now_ms - ESTOP_WINDOW_MS && a.at_ms <= now_ms).count()
}

/// The overview's four headline metrics (seed 000, rules O01–O04).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Headline {
    pub live_sessions: usize,
    pub robots_online: usize,
    pub robots_total: usize,
    pub operators_available: usize,
    pub estops_24h: usize,
}

/// A PoP as seed 000 labels it.
pub fn pop_label(pop: &str) -> String {
    match pop {
        "us-east" => "US-East (Virginia)".into(),
        "us-west" => "US-West (Oregon)".into(),
        "uk-london" => "UK (London)".into(),
        other => other.to_string(),
    }
}

/// One row of the link-health table (rule W16).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkRow {
    /// `BLR → US-East (Virginia)`.
    pub path: String,
    pub region: String,
    pub pop: String,
    pub floor_ms: u32,
    pub note: Option<String>,
    /// Live sessions on this path now.
    pub riding: usize,
}

/// Rule W16: each path with its floor and note, and how many live sessions
/// ride it; busiest first, then by path.
pub fn link_rows(floors: &[LinkFloor], live: &[SessionRecord]) -> Vec<LinkRow> {
    let mut rows: Vec<LinkRow> = floors
        .iter()
        .map(|f| LinkRow {
            path: format!("{} → {}", f.region, pop_label(&f.pop)),
            region: f.region.clone(),
            pop: f.pop.clone(),
            floor_ms: f.floor_ms,
            note: f.note.clone(),
            riding: live.iter().filter(|s| s.region.as_deref() == Some(f.region.as_str()) && s.pop == f.pop).count(),
        })
        .collect();
    rows.sort_by(|a, b| b.riding.cmp(&a.riding).then(a.path.cmp(&b.path)));
    rows
}

/// The wallboard's filters, kept in the URL (`?site=…&pop=…&state=…`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoardFilter {
    pub site: Option<String>,
    pub pop: Option<String>,
    pub state: Option<SafetyState>,
}

impl BoardFilter {
    pub fn matches(&self, s: &SessionRecord) -> bool {
        self.site.as_ref().is_none_or(|site| *site == s.site)
            && self.pop.as_ref().is_none_or(|pop| *pop == s.pop)
            && self.state.is_none_or(|state| state == s.state)
    }

    /// The query string for these filters (empty when none).
    pub fn to_query(&self) -> String {
        let mut parts = Vec::new();
        if let Some(site) = &self.site {
            parts.push(format!("site={}", crate::rules::url_encode(site)));
        }
        if let Some(pop) = &self.pop {
            parts.push(format!("pop={}", crate::rules::url_encode(pop)));
        }
        if let Some(state) = self.state {
            parts.push(format!("state={}", state.as_str()));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("?{}", parts.join("&"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, state: SafetyState, started_at: i64) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            robot: format!("r-{id}"),
            robot_model: "UR10e".into(),
            site: "Leeds Hub".into(),
            pop: "uk-london".into(),
            skill: "pick-place".into(),
            lifecycle: LifecycleState::Active,
            state,
            operator_id: Some("u-tom".into()),
            operator_name: Some("Tom Whitfield".into()),
            region: Some("Manchester".into()),
            raised_at: started_at - 1_000,
            started_at: Some(started_at),
            ended_at: None,
            rtt_ms: Some(180),
            divergence_deg: Some(0.5),
            velocity_scale: Some(1.0),
            client_id: None,
            client_name: None,
            planned_end_at: None,
        }
    }

    #[test]
    fn w04_cards_go_protective_stop_diverged_degraded_armed_safe_boot_longest_running_first() {
        let mut cards = vec![
            session("boot", SafetyState::Boot, 1),
            session("armed-new", SafetyState::Armed, 50),
            session("safe", SafetyState::Safe, 2),
            session("stop", SafetyState::ProtectiveStop, 90),
            session("armed-old", SafetyState::Armed, 10),
            session("diverged", SafetyState::Diverged, 70),
            session("degraded", SafetyState::Degraded, 80),
        ];
        order_cards(&mut cards);
        let ids: Vec<&str> = cards.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["stop", "diverged", "degraded", "armed-old", "armed-new", "safe", "boot"]);
    }

    #[test]
    fn w05_o05_counts_show_zero_states_and_sum_to_the_live_sessions() {
        let live = vec![session("a", SafetyState::Armed, 1), session("b", SafetyState::Armed, 2), session("c", SafetyState::Diverged, 3)];
        let counts = state_counts(&live);
        assert_eq!(counts.len(), 6, "every state, zeros included");
        assert_eq!(counts.iter().map(|(_, n)| n).sum::<usize>(), live.len(), "rows sum to Live sessions");
        assert!(counts.contains(&(SafetyState::ProtectiveStop, 0)));
        assert!(counts.contains(&(SafetyState::Armed, 2)));
        assert_eq!(CHIP_STATES.len(), 4);
        assert!(state_counts(&[]).iter().all(|(_, n)| *n == 0));
    }

    #[test]
    fn w06_each_state_has_one_token_and_one_meaning() {
        let tokens: std::collections::BTreeSet<_> = SafetyState::ALL.iter().map(|s| state_token(*s)).collect();
        let meanings: std::collections::BTreeSet<_> = SafetyState::ALL.iter().map(|s| state_meaning(*s)).collect();
        assert_eq!((tokens.len(), meanings.len()), (6, 6));
    }

    #[test]
    fn w07_w11_alarms_are_protective_stop_and_diverged_and_the_stop_reads_latched() {
        let alarms: Vec<_> = SafetyState::ALL.into_iter().filter(|s| is_alarm(*s)).collect();
        assert_eq!(alarms, [SafetyState::Diverged, SafetyState::ProtectiveStop]);
        assert_eq!(state_hint(SafetyState::ProtectiveStop), "latched, awaiting clear");
    }

    #[test]
    fn w08_w09_w10_display_thresholds() {
        assert_eq!(rtt_tone(Some(320)), Tone::Normal);
        assert_eq!(rtt_tone(Some(321)), Tone::Warning);
        assert_eq!(rtt_tone(None), Tone::Normal);
        assert_eq!(divergence_tone(Some(8.0)), Tone::Normal);
        assert_eq!(divergence_tone(Some(8.1)), Tone::Warning);
        assert_eq!(divergence_tone(Some(15.0)), Tone::Warning);
        assert_eq!(divergence_tone(Some(15.1)), Tone::State(SafetyState::Diverged));
        assert_eq!(velocity_tone(Some(1.0)), Tone::Normal);
        assert_eq!(velocity_tone(Some(0.99)), Tone::Warning);
        assert_eq!(velocity_percent(0.456), "46%");
        assert_eq!(velocity_percent(1.0), "100%");
    }

    #[test]
    fn w14_a_robot_not_online_gets_a_chip() {
        assert_eq!(registry_chip(RegistryStatus::Offline).as_deref(), Some("robot offline"));
        assert_eq!(registry_chip(RegistryStatus::Online), None);
    }

    #[test]
    fn w16_link_rows_are_labelled_like_the_seed_and_count_the_sessions_riding_them() {
        let floors = vec![
            LinkFloor { region: "BLR".into(), pop: "us-east".into(), floor_ms: 275, note: Some("QUIC buys jitter and recovery, not propagation".into()) },
            LinkFloor { region: "Manchester".into(), pop: "uk-london".into(), floor_ms: 177, note: Some("Shortest glass reach".into()) },
        ];
        let rows = link_rows(&floors, &[session("a", SafetyState::Armed, 1)]);
        assert_eq!(rows[0].path, "Manchester → UK (London)");
        assert_eq!((rows[0].riding, rows[0].floor_ms), (1, 177));
        assert_eq!(rows[1].path, "BLR → US-East (Virginia)");
        assert_eq!(rows[1].riding, 0);
    }

    #[test]
    fn o01_only_active_and_paused_sessions_are_live() {
        let live: Vec<_> = LifecycleState::ALL.into_iter().filter(|l| is_live(*l)).collect();
        assert_eq!(live, [LifecycleState::Active, LifecycleState::Paused]);
    }

    #[test]
    fn o03_available_operators_are_ready_or_attached() {
        use PresenceState::*;
        assert_eq!(operators_available([Ready, OnCall, Ringing, Acw, Aux, Offline, Ready]), 3);
    }

    #[test]
    fn o04_estops_count_operator_stops_in_the_trailing_day_only() {
        let entry = |action: AuditAction, at_ms: i64| AuditEntry {
            at_ms,
            actor_kind: crate::events::ActorKind::User,
            actor_id: Some("u-tom".into()),
            action,
            session_id: None,
            robot_id: None,
            detail: None,
        };
        let now = 10 * ESTOP_WINDOW_MS;
        let audit = vec![
            entry(AuditAction::OperatorEstop, now - 1_000),
            entry(AuditAction::OperatorEstop, now - ESTOP_WINDOW_MS), // exactly a day ago: out
            entry(AuditAction::ProtectiveStop, now - 1_000),        // not operator-initiated
            entry(AuditAction::OperatorEstop, now - ESTOP_WINDOW_MS + 1),
        ];
        assert_eq!(estops_24h(&audit, now), 2);
    }

    #[test]
    fn o06_a_matched_rtt_above_250_is_highlighted() {
        assert_eq!(matched_rtt_tone(250), Tone::Normal);
        assert_eq!(matched_rtt_tone(251), Tone::Warning);
    }

    #[test]
    fn filters_narrow_the_grid_and_round_trip_through_the_url() {
        let filter = BoardFilter { site: Some("Leeds Hub".into()), pop: None, state: Some(SafetyState::Armed) };
        assert!(filter.matches(&session("a", SafetyState::Armed, 1)));
        assert!(!filter.matches(&session("b", SafetyState::Safe, 1)));
        assert_eq!(filter.to_query(), "?site=Leeds%20Hub&state=ARMED");
        assert_eq!(BoardFilter::default().to_query(), "");
    }
}
