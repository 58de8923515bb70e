//! What the screens read, assembled: the directory, a robot, a session and
//! its log, chat-free history and rating, a client's sessions, the
//! overview's board, the roster and an operator's profile. Reads only; the
//! changes people make go through the other services and the engine.

use crate::clock::now_ms;
use crate::store::{OperatorRecord, RobotRecord, SharedStore};
use domain::board::{AnswerSpeed, OpsBoard, QueueDepth};
use app::error::AppError;
use domain::models::{Directory, Operator, Robot, SessionRecord};
use domain::roster::{Roster, RosterRow};
use domain::rules::{registry_status, skill_of, skills_of};
use std::collections::HashMap;
use std::sync::Arc;

use super::store_failed as internal;

pub struct OrgViews {
    store: SharedStore,
    /// Presences live in the engine.
    engine: Arc<crate::engine::Engine>,
    /// The relay's counts, for the wallboard's relay panel.
    relay: Arc<crate::relay::Relay>,
}

impl OrgViews {
    pub fn new(store: SharedStore, engine: Arc<crate::engine::Engine>, relay: Arc<crate::relay::Relay>) -> OrgViews {
        OrgViews { store, engine, relay }
    }

    /// Every org's id (the metrics' scrape walks them all).
    pub async fn org_ids(&self) -> Result<Vec<String>, AppError> {
        self.store.org_ids().await.map_err(internal)
    }

    /// The org's operator scores (rule L10), by operator.
    async fn scores(&self, org_id: &str) -> Result<Scores, AppError> {
        Ok(scores_of(self.store.operator_scores(org_id).await.map_err(internal)?))
    }

    pub async fn directory(&self, org_id: &str) -> Result<Directory, AppError> {
        let now = now_ms();
        let org_name = self.store.org_name(org_id).await.map_err(internal)?.ok_or(AppError::NotFound("Organisation".into()))?;
        let robots = self.store.robots(org_id).await.map_err(internal)?;
        let operators = self.store.operators(org_id).await.map_err(internal)?;
        let scores = self.scores(org_id).await?;
        let live: HashMap<String, String> = self.store.live_sessions(org_id).await.map_err(internal)?.into_iter().map(|s| (s.robot_id, s.id)).collect();
        Ok(Directory {
            org_name,
            robots: robots
                .into_iter()
                .map(|r| {
                    let live_session = live.get(&r.id).cloned();
                    Robot { live_session, ..robot_view(r, now) }
                })
                .collect(),
            operators: operators.into_iter().map(|o| operator_view(o, &scores)).collect(),
            as_of_ms: now,
        })
    }

    pub async fn robot(&self, org_id: &str, robot_id: &str) -> Result<Robot, AppError> {
        match self.store.robot(org_id, robot_id).await.map_err(internal)? {
            Some(r) => Ok(robot_view(r, now_ms())),
            None => Err(AppError::NotFound(format!("Robot {robot_id}"))),
        }
    }

    pub async fn session(&self, org_id: &str, session_id: &str) -> Result<domain::models::SessionRecord, AppError> {
        match self.store.session(org_id, session_id).await.map_err(internal)? {
            Some(row) => row.record().map_err(internal),
            None => Err(AppError::NotFound(format!("Session {session_id}"))),
        }
    }

    /// The org's robots as a booking form offers them: id, "model · site".
    pub async fn bookable_robots(&self, org_id: &str) -> Result<Vec<(String, String)>, AppError> {
        Ok(self.store.robots(org_id).await.map_err(internal)?.into_iter().map(|r| (r.id, format!("{} · {}", r.model, r.site))).collect())
    }

    pub async fn client_sessions(&self, org_id: &str, client_id: Option<&str>) -> Result<domain::booking::ClientSessions, AppError> {
        const SHOWN: i64 = 100;
        let rows = self.store.client_sessions(org_id, client_id, SHOWN).await.map_err(internal)?;
        let (mut live, mut past, mut billed) = (Vec::new(), Vec::new(), Vec::new());
        for row in rows {
            let session = row.record().map_err(internal)?;
            if session.lifecycle.is_open() {
                live.push(session);
                continue;
            }
            let billable_ms = self.session_activity(org_id, &session.id).await?.billable_ms;
            billed.push((session.started_at.unwrap_or(session.raised_at), billable_ms));
            let rating = self.session_rating(org_id, &session.id).await?;
            past.push(domain::booking::PastSession { session, billable_ms, rating });
        }
        Ok(domain::booking::ClientSessions { live, past, months: domain::booking::monthly_billable(&billed) })
    }

    pub async fn dispatch_decisions(&self, org_id: &str, session_id: &str) -> Result<Vec<domain::dispatch::DispatchDecision>, AppError> {
        let rows = self.store.dispatch_records(org_id, session_id).await.map_err(internal)?;
        rows.into_iter().map(|r| r.decision().map_err(internal)).collect()
    }

    pub async fn session_rating(&self, org_id: &str, session_id: &str) -> Result<Option<domain::rating::SessionRating>, AppError> {
        let row = self.store.rating(org_id, session_id).await.map_err(internal)?;
        Ok(row.map(|r| domain::rating::SessionRating {
            stars: u8::try_from(r.stars).unwrap_or(0),
            feedback: r.feedback,
            rated_by_name: r.rated_by_name,
            at_ms: r.at,
        }))
    }

    pub async fn session_activity(&self, org_id: &str, session_id: &str) -> Result<domain::lifecycle::SessionActivity, AppError> {
        let rows = self.store.activity_log(org_id, session_id).await.map_err(internal)?;
        let entries = rows.into_iter().map(|r| r.entry().map_err(internal)).collect::<Result<Vec<_>, _>>()?;
        Ok(domain::lifecycle::SessionActivity::new(entries, now_ms()))
    }

    pub async fn state_history(&self, org_id: &str, session: &SessionRecord) -> Result<domain::timeline::StateHistory, AppError> {
        let (activity, changes) =
            tokio::try_join!(self.session_activity(org_id, &session.id), async { self.store.safety_history(org_id, &session.id).await.map_err(internal) })?;
        let changes: Vec<(i64, domain::models::SafetyState)> =
            changes.into_iter().filter_map(|(at, to)| domain::models::SafetyState::parse(&to).map(|s| (at, s))).collect();
        Ok(domain::timeline::StateHistory {
            lifecycle: domain::timeline::lifecycle_spans(session.raised_at, &activity.entries),
            safety: domain::timeline::safety_spans(session.raised_at, &changes),
            until_ms: session.ended_at.unwrap_or(activity.as_of_ms),
        })
    }

    pub async fn ops_board(&self, org_id: &str) -> Result<OpsBoard, AppError> {
        let now = now_ms();
        // Independent reads: in parallel, not one round trip after another
        // (every push reloads this picture on every admin screen).
        let s = &self.store;
        let since = domain::board::utc_midnight(now);
        let (org_name, live, robots, operators, audit, queue, floors, speed, scores, ceilings, answered) = tokio::try_join!(
            s.org_name(org_id),
            s.live_sessions(org_id),
            s.robots(org_id),
            s.operators(org_id),
            s.recent_audit(org_id, now - domain::board::ESTOP_WINDOW_MS, 200),
            s.queue_depths(org_id),
            s.org_link_floors(org_id),
            s.answer_speed(org_id, since),
            s.operator_scores(org_id),
            s.org_rtt_ceilings(org_id),
            s.answered_offers(org_id, since),
        )
        .map_err(internal)?;
        let org_name = org_name.ok_or(AppError::NotFound("Organisation".into()))?;
        let scores = scores_of(scores);
        let live = live.into_iter().map(|row| row.record()).collect::<Result<Vec<_>, _>>().map_err(internal)?;
        let count = |n: Option<i64>| n.unwrap_or(0).max(0) as usize;
        let answered: Vec<domain::board::AnsweredOffer> = answered
            .into_iter()
            .map(|(skill, raised_at_ms, offered_at_ms)| domain::board::AnsweredOffer { skill, raised_at_ms, offered_at_ms })
            .collect();
        let (answered_first_ceiling, answered_after_relaxing) = domain::board::split_by_ceiling(&ceilings, &answered);
        let today = AnswerSpeed {
            answered: count(speed.answered),
            answer_ms_total: speed.answer_ms_total.unwrap_or(0),
            answered_within_20s: count(speed.within_20s),
            withdrawn: count(speed.withdrawn),
            abandoned: count(speed.abandoned),
            answered_first_ceiling,
            answered_after_relaxing,
        };
        let presences = self.engine.presences(org_id).await.iter().map(|p| p.roster_update()).collect();
        Ok(OpsBoard {
            org_name,
            live,
            robots: robots.into_iter().map(|r| robot_view(r, now)).collect(),
            operators: operators.into_iter().map(|o| operator_view(o, &scores)).collect(),
            presences,
            audit: audit.into_iter().map(Into::into).collect(),
            floors,
            ceilings,
            queue: queue
                .into_iter()
                .map(|q| QueueDepth { skill: q.skill, waiting: q.waiting.max(0) as usize, oldest_raised_at_ms: q.oldest_raised_at })
                .collect(),
            today,
            relay: self.relay.stats(org_id),
            disabled_webhooks: self.store.webhooks(org_id).await.map_err(internal)?.into_iter().filter(|h| h.disabled_at.is_some()).map(|h| h.url).collect(),
            as_of_ms: now,
        })
    }

    pub async fn roster(&self, org_id: &str) -> Result<Roster, AppError> {
        let operators = self.store.operators(org_id).await.map_err(internal)?;
        let scores = self.scores(org_id).await?;
        let mut presences: std::collections::HashMap<String, crate::engine::OperatorPresence> =
            self.engine.presences(org_id).await.into_iter().map(|p| (p.operator_id.clone(), p)).collect();
        // Identity from the directory, state from the engine; an operator
        // the engine has no presence for is offline (never connected).
        let rows = operators
            .into_iter()
            .map(|o| {
                let live = presences.remove(&o.user_id);
                let score = scores.get(&o.user_id).copied();
                RosterRow {
                    agent_id: o.user_id,
                    display_name: Some(o.display_name),
                    email: Some(o.email),
                    external_agent_id: o.external_id,
                    kind: None,
                    state: live.as_ref().map_or(domain::models::PresenceState::Offline, |p| p.state),
                    state_since_ms: live.as_ref().map(|p| p.since).filter(|&since| since > 0),
                    current_call_id: live.as_ref().and_then(|p| p.current_call.clone()),
                    aux_reason: live.and_then(|p| p.aux_reason),
                    score,
                }
            })
            .collect();
        Ok(Roster { rows, as_of_ms: now_ms() })
    }

    pub async fn operator_profile(&self, org_id: &str, user_id: &str) -> Result<Operator, AppError> {
        match self.store.operator(org_id, user_id).await.map_err(internal)? {
            Some(o) => Ok(operator_view(o, &self.scores(org_id).await?)),
            None => Err(AppError::NotFound("Your operator profile in this organisation".into())),
        }
    }
}

pub(crate) fn robot_view(r: RobotRecord, now: i64) -> Robot {
    Robot {
        skill: skill_of(&r.req_cert).unwrap_or_default().to_string(),
        status: registry_status(r.last_heartbeat_at, now),
        id: r.id,
        model: r.model,
        site: r.site,
        pop: r.pop,
        req_cert: r.req_cert,
        last_heartbeat_ms: r.last_heartbeat_at,
        token_rotated_ms: r.token_rotated_at,
        live_session: None,
    }
}

type Scores = HashMap<String, domain::rating::OperatorScore>;

fn scores_of(rows: Vec<crate::store::ScoreRow>) -> Scores {
    rows.into_iter().map(|r| (r.operator_id, domain::rating::OperatorScore::new(r.average, u32::try_from(r.count).unwrap_or(0)))).collect()
}

fn operator_view(o: OperatorRecord, scores: &Scores) -> Operator {
    Operator {
        score: scores.get(&o.user_id).copied(),
        skills: skills_of(&o.certifications),
        id: o.user_id,
        display_name: o.display_name,
        email: o.email,
        external_id: o.external_id,
        role: o.role,
        region: o.region,
        certifications: o.certifications,
    }
}
