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

/// A verdict's name as stored (`chosen`, `outranked`, …).
pub fn verdict_name(verdict: Verdict) -> String {
    serde_json::to_value(verdict).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

pub fn summarise(mut ranked: Vec<Candidate>) -> CandidateSummary {
    let rest = if ranked.len() > RECORDED_CANDIDATES { ranked.split_off(RECORDED_CANDIDATES) } else { Vec::new() };
    let mut omitted = BTreeMap::new();
    for c in rest {
        *omitted.entry(verdict_name(c.verdict)).or_insert(0) += 1;
    }
    CandidateSummary { candidates: ranked, omitted, ceiling_ms: None }
}
