//! The ACD's pure rules (seed 000 "How the ACD picks an operator", DESIGN
//! "The ACD"): which operators form the pool, and which of them wins.
//! The engine in `server` owns state and I/O; every decision it takes is
//! one of these functions.

use crate::models::{LinkFloor, PresenceState};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;

mod ceiling;
mod record;
pub use ceiling::*;
pub use record::*;

/// One operator as the ACD's selector sees them. Seed 000: "Each presence
/// carries operatorId, name, available, region, certs (skill names), since".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Presence {
    pub operator_id: String,
    pub name: String,
    /// False while the operator holds an unanswered offer (never two offers).
    pub available: bool,
    pub region: String,
    /// Skill names (`pick-place`), not full certification strings.
    pub certs: Vec<String>,
    /// Unix ms since the operator has been in their current state: the
    /// longest-waiting operator wins an RTT tie.
    pub since: i64,
    /// RTT the operator's console measured to each PoP, in ms.
    #[serde(default)]
    pub measured_rtt_ms: BTreeMap<String, u32>,
}

/// What the ACD knows of one operator when it assembles the pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolEntry {
    pub presence: Presence,
    pub state: PresenceState,
    /// Broadcasting readiness live from a Ready screen (in any tab).
    pub live_ready: bool,
}

/// Where the pool came from (recorded with every dispatch decision).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolSource {
    /// Operators broadcasting readiness from the Ready screen.
    LiveReadiness,
    /// Nobody broadcasts readiness: operators whose presence is `ready` or
    /// attached (`on_call`).
    RosterFallback,
}

/// Seed 000 pool order (rules A07, A08): live readiness first; only when
/// nobody broadcasts readiness, the roster of operators whose presence is
/// `ready` or attached. The source is chosen before the certification
/// filter, exactly as the seed orders it.
pub fn assemble_pool(entries: &[PoolEntry]) -> (PoolSource, Vec<Presence>) {
    let live: Vec<Presence> = entries
        .iter()
        .filter(|e| e.live_ready && e.state == PresenceState::Ready)
        .map(|e| e.presence.clone())
        .collect();
    if !live.is_empty() {
        return (PoolSource::LiveReadiness, live);
    }
    let roster = entries
        .iter()
        .filter(|e| matches!(e.state, PresenceState::Ready | PresenceState::OnCall))
        .map(|e| e.presence.clone())
        .collect();
    (PoolSource::RosterFallback, roster)
}

impl PoolSource {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolSource::LiveReadiness => "live_readiness",
            PoolSource::RosterFallback => "roster_fallback",
        }
    }
}

/// Propagation floors by (operator region, robot PoP).
#[derive(Clone, Debug, Default)]
pub struct LinkFloors {
    /// region → PoP → floor ms (looked up per candidate per call: no allocation).
    floors: BTreeMap<String, BTreeMap<String, u32>>,
}

impl LinkFloors {
    pub fn new(floors: impl IntoIterator<Item = LinkFloor>) -> Self {
        let mut table: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
        for f in floors {
            table.entry(f.region).or_default().insert(f.pop, f.floor_ms);
        }
        LinkFloors { floors: table }
    }

    pub fn floor(&self, region: &str, pop: &str) -> Option<u32> {
        self.floors.get(region)?.get(pop).copied()
    }

    /// The PoPs with a known floor from `region`.
    pub fn pops_from<'a>(&'a self, region: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.floors.get(region).into_iter().flat_map(|pops| pops.keys().map(String::as_str))
    }
}

/// Longest note of a link-health path.
pub const MAX_FLOOR_NOTE_CHARS: usize = 120;

/// What is wrong with a link-health path an admin enters (rule W16): region
/// and PoP are short names, the floor a plausible RTT.
pub fn floor_problem(f: &LinkFloor) -> Option<String> {
    let name_ok = |s: &str| !s.is_empty() && s.chars().count() <= crate::rules::MAX_POP_CHARS && !s.chars().any(char::is_whitespace);
    if !name_ok(&f.region) {
        return Some(format!("region must be 1–{} characters without spaces", crate::rules::MAX_POP_CHARS));
    }
    if !name_ok(&f.pop) {
        return Some(format!("PoP must be 1–{} characters without spaces", crate::rules::MAX_POP_CHARS));
    }
    if f.floor_ms > MAX_RTT_MS {
        return Some(format!("floor must be 0–{MAX_RTT_MS} ms"));
    }
    if f.note.as_deref().is_some_and(|n| n.chars().count() > MAX_FLOOR_NOTE_CHARS) {
        return Some(format!("note must be at most {MAX_FLOOR_NOTE_CHARS} characters"));
    }
    None
}

/// Whether an admin may remove the path `region → pop` from the org's
/// `floors` (rule W16): it must be one of them, and an org keeps at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorRemoval {
    Allowed,
    NotFound,
    LastPath,
}

pub fn floor_removal(floors: &[LinkFloor], region: &str, pop: &str) -> FloorRemoval {
    if !floors.iter().any(|f| f.region == region && f.pop == pop) {
        FloorRemoval::NotFound
    } else if floors.len() == 1 {
        FloorRemoval::LastPath
    } else {
        FloorRemoval::Allowed
    }
}

/// With no floor for the path, a measurement below this is not believed
/// (a console reporting 0 ms would otherwise win every call).
pub const MIN_UNFLOORED_RTT_MS: u32 = 5;
/// No teleoperation link is measured above this; larger is a broken probe.
pub const MAX_RTT_MS: u32 = 10_000;

/// Whether a console's RTT report may be kept: never above `MAX_RTT_MS`,
/// and below `MIN_UNFLOORED_RTT_MS` only where a floor bounds it anyway.
pub fn plausible_rtt(measured_ms: u32, floor_ms: Option<u32>) -> bool {
    measured_ms <= MAX_RTT_MS && (floor_ms.is_some() || measured_ms >= MIN_UNFLOORED_RTT_MS)
}

/// RTT used for ranking (rule D02): the propagation floor is a lower bound,
/// so `max(measured, floor)`; the floor alone when nothing was measured; the
/// measurement alone on a path with no known floor.
pub fn effective_rtt(measured: Option<u32>, floor: Option<u32>) -> Option<u32> {
    match (measured, floor) {
        (Some(m), Some(f)) => Some(m.max(f)),
        (None, f) => f,
        (m, None) => m,
    }
}

/// Why an operator was or was not chosen for a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Chosen,
    /// Certified and available, but another ranked ahead.
    Outranked,
    /// Does not hold the call's skill (hard filter, before RTT).
    Uncertified,
    /// Holds an unanswered offer.
    Busy,
    /// No floor and no measurement for this region → PoP: cannot be ranked.
    NoRtt,
    /// Declined or missed this very call already.
    AlreadyOffered,
    /// Not in the pool (offline, aux, wrap-up …); `state` says which.
    NotInPool,
    /// Certified, but further from the robot's PoP than the call's RTT
    /// ceiling allows while it holds (rule A15).
    AboveRttCeiling,
}

impl Verdict {
    /// Its name as stored (`chosen`, `above_rtt_ceiling`, …): the dispatch
    /// record's counts are keyed by it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Chosen => "chosen",
            Verdict::Outranked => "outranked",
            Verdict::Uncertified => "uncertified",
            Verdict::Busy => "busy",
            Verdict::NoRtt => "no_rtt",
            Verdict::AlreadyOffered => "already_offered",
            Verdict::NotInPool => "not_in_pool",
            Verdict::AboveRttCeiling => "above_rtt_ceiling",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub operator_id: String,
    pub name: String,
    pub rtt_ms: Option<u32>,
    pub verdict: Verdict,
    /// For `NotInPool`: the presence that kept the operator out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PresenceState>,
}

/// Ranks the pool for a call at `pop` needing `skill` and says why each
/// operator was or was not chosen. The winner, if any, comes first, then
/// the outranked in rank order, then everyone excluded.
/// Order: certification (hard filter) → lowest RTT → longest waiting
/// (`since`) → smaller operator id (rules A06, A10, D01).
pub fn rank_pool(pop: &str, skill: &str, pool: &[Presence], floors: &LinkFloors, exclude: &[String]) -> Vec<Candidate> {
    rank_pool_within(pop, skill, pool, floors, exclude, None)
}

/// `rank_pool` for a call whose RTT ceiling is `ceiling` (rule A15): a
/// certified operator above it is `AboveRttCeiling` (whatever else keeps
/// them from the call), listed with those excluded.
pub fn rank_pool_within(pop: &str, skill: &str, pool: &[Presence], floors: &LinkFloors, exclude: &[String], ceiling: Option<u32>) -> Vec<Candidate> {
    let mut eligible: Vec<(&Presence, u32)> = Vec::new();
    let mut excluded: Vec<Candidate> = Vec::new();
    for p in pool {
        let rtt = effective_rtt(p.measured_rtt_ms.get(pop).copied(), floors.floor(&p.region, pop));
        // Rule A15: a certified operator above the ceiling is said to be
        // so whatever else keeps them from the call (as the engine's index).
        let verdict = if !p.certs.iter().any(|c| c == skill) {
            Some(Verdict::Uncertified)
        } else if rtt.is_some_and(|rtt| !within_ceiling(rtt, ceiling)) {
            Some(Verdict::AboveRttCeiling)
        } else if !p.available {
            Some(Verdict::Busy)
        } else if exclude.contains(&p.operator_id) {
            Some(Verdict::AlreadyOffered)
        } else if rtt.is_none() {
            Some(Verdict::NoRtt)
        } else {
            None
        };
        match (verdict, rtt) {
            (None, Some(rtt)) => eligible.push((p, rtt)),
            (verdict, rtt) => excluded.push(Candidate {
                operator_id: p.operator_id.clone(),
                name: p.name.clone(),
                rtt_ms: rtt,
                verdict: verdict.unwrap_or(Verdict::NoRtt),
                state: None,
            }),
        }
    }
    eligible.sort_by(|(a, a_rtt), (b, b_rtt)| compare_claims((a, *a_rtt), (b, *b_rtt)));
    let mut ranked: Vec<Candidate> = eligible
        .into_iter()
        .enumerate()
        .map(|(i, (p, rtt))| Candidate {
            operator_id: p.operator_id.clone(),
            name: p.name.clone(),
            rtt_ms: Some(rtt),
            verdict: if i == 0 { Verdict::Chosen } else { Verdict::Outranked },
            state: None,
        })
        .collect();
    ranked.extend(excluded);
    ranked
}

fn compare_claims((a, a_rtt): (&Presence, u32), (b, b_rtt): (&Presence, u32)) -> Ordering {
    a_rtt
        .cmp(&b_rtt)
        .then(a.since.cmp(&b.since))
        .then_with(|| a.operator_id.cmp(&b.operator_id))
}

/// The seed's selector: the lowest-RTT operator certified for `skill`, with
/// the RTT that ranked them, or nothing (the call is queued).
pub fn claim_lowest_rtt<'a>(pop: &str, skill: &str, pool: &'a [Presence], floors: &LinkFloors) -> Option<(&'a Presence, u32)> {
    let chosen = rank_pool(pop, skill, pool, floors, &[]).into_iter().find(|c| c.verdict == Verdict::Chosen)?;
    let presence = pool.iter().find(|p| p.operator_id == chosen.operator_id)?;
    Some((presence, chosen.rtt_ms?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_verdicts_stored_name_is_its_serialised_name() {
        use super::Verdict::{self, *};
        // A new verdict breaks this match: add it to the list below too.
        let _every = |verdict: Verdict| match verdict {
            Chosen | Outranked | Uncertified | Busy | NoRtt | AlreadyOffered | NotInPool | AboveRttCeiling => (),
        };
        for verdict in [Chosen, Outranked, Uncertified, Busy, NoRtt, AlreadyOffered, NotInPool, AboveRttCeiling] {
            assert_eq!(serde_json::to_value(verdict).unwrap(), verdict.as_str());
        }
    }

    #[test]
    fn an_rtt_below_the_minimum_counts_only_where_a_floor_bounds_it() {
        assert!(!plausible_rtt(0, None), "0 ms with no floor would win every call");
        assert!(!plausible_rtt(MIN_UNFLOORED_RTT_MS - 1, None));
        assert!(plausible_rtt(MIN_UNFLOORED_RTT_MS, None));
        assert!(plausible_rtt(0, Some(12)), "the floor lifts it to 12 ms anyway");
        assert!(!plausible_rtt(MAX_RTT_MS + 1, Some(12)));
    }

    use super::*;

    fn presence(id: &str, region: &str, certs: &[&str], since: i64) -> Presence {
        Presence {
            operator_id: id.into(),
            name: id.to_uppercase(),
            available: true,
            region: region.into(),
            certs: certs.iter().map(|c| c.to_string()).collect(),
            since,
            measured_rtt_ms: BTreeMap::new(),
        }
    }

    fn floors() -> LinkFloors {
        LinkFloors::new([
            LinkFloor { region: "BLR".into(), pop: "us-east".into(), floor_ms: 275, note: None },
            LinkFloor { region: "BLR".into(), pop: "us-west".into(), floor_ms: 238, note: None },
            LinkFloor { region: "Manchester".into(), pop: "us-east".into(), floor_ms: 205, note: None },
            LinkFloor { region: "Austin".into(), pop: "us-east".into(), floor_ms: 96, note: None },
        ])
    }

    fn entry(p: Presence, state: PresenceState, live: bool) -> PoolEntry {
        PoolEntry { presence: p, state, live_ready: live }
    }

    #[test]
    fn a06_claim_lowest_rtt_returns_the_nearest_certified_operator() {
        let pool = vec![
            presence("blr", "BLR", &["pick-place"], 0),
            presence("man", "Manchester", &["pick-place"], 0),
        ];
        let (winner, rtt) = claim_lowest_rtt("us-east", "pick-place", &pool, &floors()).unwrap();
        assert_eq!((winner.operator_id.as_str(), rtt), ("man", 205));
    }

    #[test]
    fn a06_claim_lowest_rtt_returns_nothing_when_nobody_is_certified() {
        let pool = vec![presence("blr", "BLR", &["welding"], 0)];
        assert!(claim_lowest_rtt("us-east", "pick-place", &pool, &floors()).is_none());
        assert!(claim_lowest_rtt("us-east", "pick-place", &[], &floors()).is_none());
    }

    #[test]
    fn a10_certification_is_a_hard_filter_before_rtt() {
        // Austin is far nearer to us-east but lacks the skill.
        let pool = vec![
            presence("austin", "Austin", &["palletize"], 0),
            presence("blr", "BLR", &["pick-place", "welding"], 0),
        ];
        let (winner, rtt) = claim_lowest_rtt("us-east", "pick-place", &pool, &floors()).unwrap();
        assert_eq!((winner.operator_id.as_str(), rtt), ("blr", 275));
        // Exact match: a skill that merely starts the same does not count.
        let pool = vec![presence("austin", "Austin", &["pick"], 0)];
        assert!(claim_lowest_rtt("us-east", "pick-place", &pool, &floors()).is_none());
    }

    #[test]
    fn d01_ties_go_to_the_longest_waiting_then_the_smaller_id() {
        let pool = vec![
            presence("b", "BLR", &["pick-place"], 2_000),
            presence("c", "BLR", &["pick-place"], 1_000),
            presence("a", "BLR", &["pick-place"], 2_000),
        ];
        let ranked = rank_pool("us-east", "pick-place", &pool, &floors(), &[]);
        let order: Vec<&str> = ranked.iter().map(|c| c.operator_id.as_str()).collect();
        assert_eq!(order, vec!["c", "a", "b"]);
        assert_eq!(ranked[0].verdict, Verdict::Chosen);
        assert!(ranked[1..].iter().all(|c| c.verdict == Verdict::Outranked));
    }

    #[test]
    fn d02_floor_is_a_lower_bound_on_measured_rtt() {
        assert_eq!(effective_rtt(Some(120), Some(275)), Some(275), "no measurement beats physics");
        assert_eq!(effective_rtt(Some(300), Some(275)), Some(300));
        assert_eq!(effective_rtt(None, Some(238)), Some(238), "floor alone when unmeasured");
        assert_eq!(effective_rtt(Some(80), None), Some(80));
        assert_eq!(effective_rtt(None, None), None);

        // In ranking: a measured 300 ms from Manchester loses to BLR's floor-only 275 ms.
        let mut man = presence("man", "Manchester", &["pick-place"], 0);
        man.measured_rtt_ms.insert("us-east".into(), 300);
        let pool = vec![man, presence("blr", "BLR", &["pick-place"], 0)];
        let (winner, rtt) = claim_lowest_rtt("us-east", "pick-place", &pool, &floors()).unwrap();
        assert_eq!((winner.operator_id.as_str(), rtt), ("blr", 275));
    }

    #[test]
    fn d05_an_operator_holding_an_offer_is_never_chosen() {
        let mut busy = presence("austin", "Austin", &["pick-place"], 0);
        busy.available = false;
        let pool = vec![busy, presence("blr", "BLR", &["pick-place"], 0)];
        let ranked = rank_pool("us-east", "pick-place", &pool, &floors(), &[]);
        assert_eq!(ranked[0].operator_id, "blr");
        assert_eq!(ranked.iter().find(|c| c.operator_id == "austin").unwrap().verdict, Verdict::Busy);
    }

    #[test]
    fn operators_who_already_answered_a_call_are_excluded_from_it() {
        let pool = vec![presence("austin", "Austin", &["pick-place"], 0), presence("blr", "BLR", &["pick-place"], 0)];
        let ranked = rank_pool("us-east", "pick-place", &pool, &floors(), &["austin".to_string()]);
        assert_eq!(ranked[0].operator_id, "blr");
        assert_eq!(ranked[1].verdict, Verdict::AlreadyOffered);
    }

    #[test]
    fn an_operator_with_no_path_data_cannot_be_ranked() {
        let pool = vec![presence("x", "Lagos", &["pick-place"], 0)];
        let ranked = rank_pool("us-east", "pick-place", &pool, &floors(), &[]);
        assert_eq!(ranked[0].verdict, Verdict::NoRtt);
    }

    #[test]
    fn a07_live_readiness_is_preferred_over_the_roster() {
        let entries = vec![
            entry(presence("roster", "Austin", &["pick-place"], 0), PresenceState::Ready, false),
            entry(presence("live", "BLR", &["pick-place"], 0), PresenceState::Ready, true),
        ];
        let (source, pool) = assemble_pool(&entries);
        assert_eq!(source, PoolSource::LiveReadiness);
        let ids: Vec<&str> = pool.iter().map(|p| p.operator_id.as_str()).collect();
        assert_eq!(ids, vec!["live"], "the nearer roster operator is not in the pool");
    }

    #[test]
    fn a08_roster_fallback_only_when_nobody_broadcasts_readiness() {
        let entries = vec![
            entry(presence("ready", "BLR", &["pick-place"], 0), PresenceState::Ready, false),
            entry(presence("attached", "BLR", &["pick-place"], 0), PresenceState::OnCall, false),
            entry(presence("aux", "BLR", &["pick-place"], 0), PresenceState::Aux, false),
            entry(presence("acw", "BLR", &["pick-place"], 0), PresenceState::Acw, false),
            entry(presence("ringing", "BLR", &["pick-place"], 0), PresenceState::Ringing, false),
            entry(presence("offline", "BLR", &["pick-place"], 0), PresenceState::Offline, false),
        ];
        let (source, pool) = assemble_pool(&entries);
        assert_eq!(source, PoolSource::RosterFallback);
        let ids: Vec<&str> = pool.iter().map(|p| p.operator_id.as_str()).collect();
        assert_eq!(ids, vec!["ready", "attached"]);
    }

    #[test]
    fn a09_presence_serialises_with_the_seed_field_names() {
        let json = serde_json::to_value(presence("op-1", "BLR", &["pick-place"], 42)).unwrap();
        for field in ["operatorId", "name", "available", "region", "certs", "since"] {
            assert!(json.get(field).is_some(), "missing {field}: {json}");
        }
        assert_eq!(json["certs"], serde_json::json!(["pick-place"]));
    }
    #[test]
    fn w16_an_org_keeps_at_least_one_path() {
        let path = |region: &str, pop: &str| LinkFloor { region: region.into(), pop: pop.into(), floor_ms: 20, note: None };
        let two = [path("uk", "lhr"), path("de", "fra")];
        assert_eq!(floor_removal(&two, "uk", "lhr"), FloorRemoval::Allowed);
        assert_eq!(floor_removal(&two, "uk", "fra"), FloorRemoval::NotFound);
        assert_eq!(floor_removal(&two[..1], "uk", "lhr"), FloorRemoval::LastPath);
    }

}
