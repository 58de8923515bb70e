//! What the ACD records of its decisions: what prompted one, where it put
//! the call, the offer's end, and who it considered (kept in the dispatch
//! record, shown on the session detail).

use super::{Candidate, PoolSource, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What prompted a dispatch decision (stored with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Raised,
    Declined,
    Expired,
    OperatorOffline,
    OperatorReady,
    Recovered,
    /// A waiting call's RTT ceiling rose or was lifted (rule A16).
    CeilingRelaxed,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Raised => "raised",
            Trigger::Declined => "declined",
            Trigger::Expired => "expired",
            Trigger::OperatorOffline => "operator_offline",
            Trigger::OperatorReady => "operator_ready",
            Trigger::Recovered => "recovered",
            Trigger::CeilingRelaxed => "ceiling_relaxed",
        }
    }
}

/// How an offer row ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferStatus {
    Accepted,
    Declined,
    Expired,
    Withdrawn,
}

impl OfferStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OfferStatus::Accepted => "accepted",
            OfferStatus::Declined => "declined",
            OfferStatus::Expired => "expired",
            OfferStatus::Withdrawn => "withdrawn",
        }
    }

    pub fn ring_end(self) -> crate::ring::OfferEnd {
        match self {
            OfferStatus::Accepted => crate::ring::OfferEnd::Accepted,
            OfferStatus::Declined => crate::ring::OfferEnd::Declined,
            OfferStatus::Expired => crate::ring::OfferEnd::Expired,
            OfferStatus::Withdrawn => crate::ring::OfferEnd::Withdrawn,
        }
    }
}

/// Where a decision put the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Offered,
    Queued,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Offered => "offered",
            Outcome::Queued => "queued",
        }
    }
}

/// Candidates kept in full in a dispatch record; the rest are counted.
pub const RECORDED_CANDIDATES: usize = 20;

/// What a dispatch record keeps of a ranking: the first
/// `RECORDED_CANDIDATES` in rank order (the chosen one first) in full, and
/// how many of the rest had each verdict, so a pool of thousands does not
/// write thousands of rows per call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateSummary {
    pub candidates: Vec<Candidate>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub omitted: BTreeMap<String, usize>,
    /// The call's RTT ceiling when it was decided (rule A15), if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_ms: Option<u32>,
}

/// A `CandidateSummary` as it is written, from borrowed parts: the engine
/// writes one with every decision, and need not copy twenty ids and names
/// to do so. The same JSON (a test compares the two byte for byte).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateSummaryRef<'a> {
    pub candidates: Vec<CandidateRef<'a>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub omitted: BTreeMap<&'static str, usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_ms: Option<u32>,
}

/// A ranked candidate (`Candidate` without `state`, which only the
/// not-in-pool have, and the index holds only operators in the pool).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateRef<'a> {
    pub operator_id: &'a str,
    pub name: &'a str,
    pub rtt_ms: Option<u32>,
    pub verdict: Verdict,
}

/// One dispatch decision of a call, as the session detail shows it: what
/// prompted it, where it put the call, and who was considered with their
/// RTT and verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DispatchDecision {
    pub at_ms: i64,
    pub trigger: Trigger,
    pub pool_source: PoolSource,
    pub outcome: Outcome,
    pub operator_id: Option<String>,
    pub rtt_ms: Option<u32>,
    pub considered: CandidateSummary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_written_from_borrowed_parts_is_the_summarys_own_json() {
        let owned = CandidateSummary {
            candidates: vec![
                Candidate { operator_id: "op-1".into(), name: "Ada \"A\"".into(), rtt_ms: Some(40), verdict: Verdict::Chosen, state: None },
                Candidate { operator_id: "op-2".into(), name: "Grace".into(), rtt_ms: Some(55), verdict: Verdict::Busy, state: None },
            ],
            omitted: BTreeMap::from([("outranked".to_string(), 3), ("no_rtt".to_string(), 1)]),
            ceiling_ms: Some(120),
        };
        let borrowed = CandidateSummaryRef {
            candidates: owned
                .candidates
                .iter()
                .map(|c| CandidateRef { operator_id: &c.operator_id, name: &c.name, rtt_ms: c.rtt_ms, verdict: c.verdict })
                .collect(),
            omitted: BTreeMap::from([(Verdict::Outranked.as_str(), 3), (Verdict::NoRtt.as_str(), 1)]),
            ceiling_ms: Some(120),
        };
        assert_eq!(serde_json::to_string(&borrowed).unwrap(), serde_json::to_string(&owned).unwrap());
        let bare = CandidateSummaryRef { candidates: Vec::new(), omitted: BTreeMap::new(), ceiling_ms: None };
        let empty = CandidateSummary { candidates: Vec::new(), omitted: BTreeMap::new(), ceiling_ms: None };
        assert_eq!(serde_json::to_string(&bare).unwrap(), serde_json::to_string(&empty).unwrap());
    }
}
