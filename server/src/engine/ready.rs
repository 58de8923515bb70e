//! The ready index: for each pool tier, skill and PoP, the operators who
//! could take a call there, ordered as the ACD ranks them (effective RTT,
//! then longest waiting, then smaller id). A claim walks one ordered set
//! from its head instead of copying and sorting the pool; `rank_pool` in
//! `domain::dispatch` stays the oracle the tests compare it with.

use domain::dispatch::{effective_rtt, within_ceiling, LinkFloors, PoolSource, Verdict};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Which pool an operator is in (seed 000, rules A07/A08).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Broadcasting readiness from a Ready screen.
    Live,
    /// On the roster only: `ready` without a Ready screen, or attached.
    Roster,
}

/// Ranking order: lowest RTT, longest waiting, smaller id (A06, D01).
type Rank = (u32, i64, String);

/// One operator as the index needs them.
pub struct Entry<'a> {
    pub operator_id: &'a str,
    pub tier: Tier,
    pub region: &'a str,
    pub skills: &'a [String],
    pub since: i64,
    pub measured: &'a BTreeMap<String, u32>,
}

struct Placed {
    tier: Tier,
    skills: Vec<String>,
    /// (skill, pop, rank) of every set the operator is in.
    keys: Vec<(String, String, Rank)>,
}

#[derive(Default)]
pub struct ReadyIndex {
    sets: HashMap<(Tier, String, String), BTreeSet<Rank>>,
    placed: HashMap<String, Placed>,
    /// Operators per tier, and per (tier, skill): the counters a dispatch
    /// record's "omitted" figures come from, kept up to date, never scanned.
    per_tier: HashMap<Tier, usize>,
    per_skill: HashMap<(Tier, String), usize>,
}

/// One operator the walk looked at (borrowed from the index: a claim is
/// read, recorded and dropped within one decision).
#[derive(Clone, Debug, PartialEq)]
pub struct Looked<'a> {
    pub operator_id: &'a str,
    pub rtt_ms: u32,
    pub verdict: Verdict,
}

/// What a claim found.
#[derive(Debug, PartialEq)]
pub struct Claim<'a> {
    pub source: PoolSource,
    pub chosen: Option<(&'a str, u32)>,
    /// The chosen operator and those around them, in rank order, at most
    /// `RECORDED_CANDIDATES`.
    pub looked: Vec<Looked<'a>>,
    /// Verdict counts of the operators of the pool not in `looked`, by
    /// the verdict's stored name.
    pub omitted: BTreeMap<&'static str, usize>,
}

impl ReadyIndex {
    /// Puts the operator in the index (or moves them), replacing any
    /// earlier place. Only PoPs with an effective RTT are indexed.
    pub fn upsert(&mut self, entry: Entry<'_>, floors: &LinkFloors) {
        self.remove(entry.operator_id);
        let mut pops: BTreeSet<&str> = floors.pops_from(entry.region).collect();
        pops.extend(entry.measured.keys().map(String::as_str));
        let mut keys = Vec::new();
        for pop in pops {
            let Some(rtt) = effective_rtt(entry.measured.get(pop).copied(), floors.floor(entry.region, pop)) else { continue };
            for skill in entry.skills {
                let rank = (rtt, entry.since, entry.operator_id.to_string());
                self.sets.entry((entry.tier, skill.clone(), pop.to_string())).or_default().insert(rank.clone());
                keys.push((skill.clone(), pop.to_string(), rank));
            }
        }
        *self.per_tier.entry(entry.tier).or_default() += 1;
        for skill in entry.skills {
            *self.per_skill.entry((entry.tier, skill.clone())).or_default() += 1;
        }
        self.placed.insert(entry.operator_id.to_string(), Placed { tier: entry.tier, skills: entry.skills.to_vec(), keys });
    }

    pub fn remove(&mut self, operator_id: &str) {
        let Some(placed) = self.placed.remove(operator_id) else { return };
        for (skill, pop, rank) in placed.keys {
            let key = (placed.tier, skill, pop);
            if let Some(set) = self.sets.get_mut(&key) {
                set.remove(&rank);
                if set.is_empty() {
                    self.sets.remove(&key);
                }
            }
        }
        if let Some(n) = self.per_tier.get_mut(&placed.tier) {
            *n -= 1;
        }
        for skill in placed.skills {
            if let Some(n) = self.per_skill.get_mut(&(placed.tier, skill)) {
                *n -= 1;
            }
        }
    }

    /// Operators in the index, any tier.
    pub fn len(&self) -> usize {
        self.placed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.placed.is_empty()
    }

    /// The pool the seed's order picks: live readiness whenever anyone
    /// broadcasts it, else the roster.
    pub fn pool(&self) -> (PoolSource, Tier) {
        if self.per_tier.get(&Tier::Live).copied().unwrap_or(0) > 0 {
            (PoolSource::LiveReadiness, Tier::Live)
        } else {
            (PoolSource::RosterFallback, Tier::Roster)
        }
    }

    /// Whether anyone in the current pool holds `skill` (cheap pre-check
    /// before walking queued calls).
    pub fn serves_skill(&self, skill: &str) -> bool {
        let (_, tier) = self.pool();
        self.per_skill.get(&(tier, skill.to_string())).copied().unwrap_or(0) > 0
    }

    /// The best operator for a call at `pop` needing `skill`, within the
    /// call's RTT `ceiling` if it has one (rule A15). `skip` says why an
    /// indexed operator cannot take this call (busy elsewhere, in cool-off
    /// for it); `others` is how many known operators are outside the index
    /// altogether (for the record's counts).
    pub fn claim(&self, pop: &str, skill: &str, ceiling: Option<u32>, others: usize, mut skip: impl FnMut(&str) -> Option<Verdict>) -> Claim<'_> {
        let (source, tier) = self.pool();
        let set = self.sets.get(&(tier, skill.to_string(), pop.to_string()));
        let mut looked = Vec::with_capacity(set.map_or(0, |set| set.len().min(domain::dispatch::RECORDED_CANDIDATES)));
        let mut chosen = None;
        let mut omitted: BTreeMap<&'static str, usize> = BTreeMap::new();
        let (mut walked, mut beyond) = (0, false);
        for (rtt, _, id) in set.into_iter().flatten() {
            // Ranked by RTT: from the first operator above the ceiling on,
            // nobody can be chosen any more.
            beyond = beyond || !within_ceiling(*rtt, ceiling);
            if (chosen.is_some() || beyond) && looked.len() >= domain::dispatch::RECORDED_CANDIDATES {
                break;
            }
            walked += 1;
            let verdict = match skip(id) {
                _ if beyond => Verdict::AboveRttCeiling,
                Some(v) => v,
                None if chosen.is_none() => {
                    chosen = Some((id.as_str(), *rtt));
                    Verdict::Chosen
                }
                None => Verdict::Outranked,
            };
            if looked.len() < domain::dispatch::RECORDED_CANDIDATES {
                looked.push(Looked { operator_id: id, rtt_ms: *rtt, verdict });
            } else {
                *omitted.entry(verdict.as_str()).or_default() += 1;
            }
        }
        let ranked = set.map_or(0, BTreeSet::len);
        // Those not walked: all above the ceiling once the walk reached it,
        // else those past it counted in the ordered set.
        let unwalked_above = match (set, ceiling) {
            _ if beyond => ranked - walked,
            (Some(set), Some(c)) => set.range((c.saturating_add(1), i64::MIN, String::new())..).count(),
            _ => 0,
        };
        let in_tier = self.per_tier.get(&tier).copied().unwrap_or(0);
        let certified = self.per_skill.get(&(tier, skill.to_string())).copied().unwrap_or(0);
        let mut count = |verdict: Verdict, n: usize| {
            if n > 0 {
                *omitted.entry(verdict.as_str()).or_default() += n;
            }
        };
        count(Verdict::AboveRttCeiling, unwalked_above);
        count(Verdict::Outranked, ranked - walked - unwalked_above);
        count(Verdict::NoRtt, certified.saturating_sub(ranked));
        count(Verdict::Uncertified, in_tier - certified);
        count(Verdict::NotInPool, others + self.placed.len() - in_tier);
        Claim { source, chosen, looked, omitted }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::dispatch::{assemble_pool, rank_pool_within, PoolEntry, Presence};
    use domain::models::{LinkFloor, PresenceState};
    use domain::presence::{in_live_pool, in_roster_pool};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    const REGIONS: [&str; 4] = ["BLR", "Manchester", "Austin", "Lagos"];
    const POPS: [&str; 3] = ["us-east", "us-west", "uk-london"];
    const SKILLS: [&str; 3] = ["pick-place", "welding", "inspection"];

    fn floors() -> LinkFloors {
        let mut rows = Vec::new();
        for (i, region) in REGIONS[..3].iter().enumerate() {
            for (j, pop) in POPS.iter().enumerate() {
                rows.push(LinkFloor { region: region.to_string(), pop: pop.to_string(), floor_ms: (100 + 37 * i + 11 * j) as u32, note: None });
            }
        }
        LinkFloors::new(rows)
    }

    fn tier_of(state: PresenceState, live: bool) -> Option<Tier> {
        if in_live_pool(state, live) {
            Some(Tier::Live)
        } else if in_roster_pool(state) {
            Some(Tier::Roster)
        } else {
            None
        }
    }

    /// Property: on random pools, the index picks exactly the operator (and
    /// RTT) that the seed's oracle `rank_pool` picks.
    #[test]
    fn a06_d01_a15_the_index_agrees_with_rank_pool_on_random_pools_with_and_without_a_ceiling() {
        let floors = floors();
        for seed in 0..400u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let n = rng.gen_range(0..40);
            let mut entries = Vec::new();
            for i in 0..n {
                let mut measured = BTreeMap::new();
                for pop in POPS {
                    if rng.gen_bool(0.3) {
                        measured.insert(pop.to_string(), rng.gen_range(50..400));
                    }
                }
                let certs: Vec<String> = SKILLS.iter().filter(|_| rng.gen_bool(0.5)).map(|s| s.to_string()).collect();
                entries.push(PoolEntry {
                    presence: Presence {
                        operator_id: format!("op-{i:02}"),
                        name: String::new(),
                        available: rng.gen_bool(0.85),
                        region: REGIONS[rng.gen_range(0..REGIONS.len())].to_string(),
                        certs,
                        since: rng.gen_range(0..5),
                        measured_rtt_ms: measured,
                    },
                    state: PresenceState::ALL[rng.gen_range(0..PresenceState::ALL.len())],
                    live_ready: rng.gen_bool(0.3),
                });
            }
            let exclude: Vec<String> = entries.iter().filter(|_| rng.gen_bool(0.1)).map(|e| e.presence.operator_id.clone()).collect();
            let mut index = ReadyIndex::default();
            let mut others = 0;
            for e in &entries {
                match tier_of(e.state, e.live_ready) {
                    Some(tier) => index.upsert(
                        Entry {
                            operator_id: &e.presence.operator_id,
                            tier,
                            region: &e.presence.region,
                            skills: &e.presence.certs,
                            since: e.presence.since,
                            measured: &e.presence.measured_rtt_ms,
                        },
                        &floors,
                    ),
                    None => others += 1,
                }
            }
            let (source, pool) = assemble_pool(&entries);
            let ceiling = rng.gen_bool(0.5).then(|| rng.gen_range(90..260));
            for pop in POPS {
                for skill in SKILLS {
                    let oracle = rank_pool_within(pop, skill, &pool, &floors, &exclude, ceiling)
                        .into_iter()
                        .find(|c| c.verdict == Verdict::Chosen)
                        .map(|c| (c.operator_id, c.rtt_ms.unwrap()));
                    let claim = index.claim(pop, skill, ceiling, others, |id| {
                        let e = entries.iter().find(|e| e.presence.operator_id == id).unwrap();
                        if !e.presence.available {
                            Some(Verdict::Busy)
                        } else if exclude.iter().any(|x| x == id) {
                            Some(Verdict::AlreadyOffered)
                        } else {
                            None
                        }
                    });
                    assert_eq!(claim.chosen.map(|(id, rtt)| (id.to_string(), rtt)), oracle, "seed {seed}, {skill} at {pop}");
                    if !pool.is_empty() {
                        assert_eq!(claim.source, source, "seed {seed}");
                    }
                    let total: usize = claim.looked.len() + claim.omitted.values().sum::<usize>();
                    assert_eq!(total, entries.len(), "every known operator is accounted for, seed {seed}");
                    let above = pool
                        .iter()
                        .filter(|p| p.certs.iter().any(|c| c == skill))
                        .filter_map(|p| effective_rtt(p.measured_rtt_ms.get(pop).copied(), floors.floor(&p.region, pop)))
                        .filter(|rtt| !within_ceiling(*rtt, ceiling))
                        .count();
                    let said_above = claim.looked.iter().filter(|l| l.verdict == Verdict::AboveRttCeiling).count()
                        + claim.omitted.get("above_rtt_ceiling").copied().unwrap_or(0);
                    assert_eq!(said_above, above, "every certified operator above the ceiling is said so, seed {seed}");
                }
            }
        }
    }

    /// A dispatch record keeps the best `RECORDED_CANDIDATES` the walk
    /// looked at, in rank order from the chosen one, and counts the rest of
    /// the pool by verdict (what the session detail shows).
    #[test]
    fn a_record_keeps_the_best_candidates_and_counts_the_rest() {
        let floors = floors();
        let (certified, welding, measured) = (vec!["pick-place".to_string()], vec!["welding".to_string()], BTreeMap::new());
        let ids: Vec<String> = (0..50).map(|i| format!("op-{i:02}")).collect();
        let mut index = ReadyIndex::default();
        for (since, id) in ids.iter().enumerate() {
            index.upsert(Entry { operator_id: id, tier: Tier::Live, region: "BLR", skills: &certified, since: since as i64, measured: &measured }, &floors);
        }
        index.upsert(Entry { operator_id: "welder", tier: Tier::Live, region: "BLR", skills: &welding, since: 0, measured: &measured }, &floors);

        let claim = index.claim("us-east", "pick-place", None, 0, |_| None);
        assert_eq!(claim.looked.len(), domain::dispatch::RECORDED_CANDIDATES);
        assert_eq!((claim.looked[0].operator_id, claim.looked[0].verdict), ("op-00", Verdict::Chosen), "the longest ready, at equal RTT");
        assert!(claim.looked[1..].iter().all(|l| l.verdict == Verdict::Outranked));
        assert_eq!(claim.omitted, BTreeMap::from([("outranked", 30), ("uncertified", 1)]));

        let mut small = ReadyIndex::default();
        for (since, id) in ids[..3].iter().enumerate() {
            small.upsert(Entry { operator_id: id, tier: Tier::Live, region: "BLR", skills: &certified, since: since as i64, measured: &measured }, &floors);
        }
        let claim = small.claim("us-east", "pick-place", None, 0, |_| None);
        assert_eq!(claim.looked.len(), 3);
        assert!(claim.omitted.is_empty());
    }

    #[test]
    fn moving_an_operator_replaces_their_place() {
        let floors = floors();
        let skills = vec!["welding".to_string()];
        let measured = BTreeMap::new();
        let mut index = ReadyIndex::default();
        let entry = |tier, since| Entry { operator_id: "a", tier, region: "BLR", skills: &skills, since, measured: &measured };
        index.upsert(entry(Tier::Live, 1), &floors);
        index.upsert(entry(Tier::Roster, 2), &floors);
        assert_eq!(index.pool().1, Tier::Roster, "no one is live any more");
        assert_eq!(index.claim("us-east", "welding", None, 0, |_| None).chosen, Some(("a", 100)));
        index.remove("a");
        assert!(index.sets.is_empty() && !index.serves_skill("welding"));
    }
}
