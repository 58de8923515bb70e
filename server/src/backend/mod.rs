//! The server's side of `app::functions::backend::Backend`: what the server
//! functions may ask for, answered from the store.

mod answers;
mod people;
pub use people::{DatasetsBackend, PeopleBackend};

use std::collections::HashMap;
use answers::{booking_refused, directory_refused, internal, membership, operator_view, refused, robot_view, safety_answer, scores_of, Scores};
use crate::auth::{new_token, token_hash};
use crate::clock::now_ms;
use crate::services::passwords::PasswordChecker;
use crate::services::{OpenTabs, SignInThrottle, Write};
use crate::store::SharedStore;
use app::error::AppError;
use app::board::{AnswerSpeed, OpsBoard, QueueDepth};
use app::roster::{Roster, RosterRow};
use app::functions::backend::Backend;
use app::models::{CurrentUser, Directory, LifecycleState, Operator, OrgMembership, Robot, SessionRecord};
use app::rules::normalize_email;
use app::session_cookie::SessionCookie;
use async_trait::async_trait;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// A sign-in lasts one long shift.
pub const WEB_SESSION_TTL_MS: i64 = 12 * 60 * 60 * 1000;

/// Checked when the email is unknown, so a wrong email costs the same time
/// as a wrong password and the answer does not tell which it was.
fn dummy_hash() -> String {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| crate::auth::hash_password(&new_token())).clone()
}

/// The services the backend hands people's changes to.
pub struct Services {
    pub sessions: Arc<crate::services::SessionService>,
    pub bookings: Arc<crate::services::BookingService>,
    pub robots: Arc<crate::services::RobotRegistry>,
    pub relay: Arc<crate::relay::Relay>,
    /// argon2 work (sign-in checks, new passwords) on its own few threads.
    pub passwords: Arc<PasswordChecker>,
    pub quotas: Arc<crate::services::Quotas>,
}

pub struct ServerBackend {
    store: SharedStore,
    /// Presences live in the engine.
    engine: Arc<crate::engine::Engine>,
    /// Safety changes made by people (E-stop, clear).
    sessions: Arc<crate::services::SessionService>,
    bookings: Arc<crate::services::BookingService>,
    /// Directory changes of robots (edit, retire, rotate).
    robots: Arc<crate::services::RobotRegistry>,
    /// The relay's counts, for the wallboard's relay panel.
    relay: Arc<crate::relay::Relay>,
    throttle: Arc<SignInThrottle>,
    passwords: Arc<PasswordChecker>,
    quotas: Arc<crate::services::Quotas>,
    tabs: Arc<OpenTabs>,
    cookie: SessionCookie,
}

impl ServerBackend {
    pub fn new(
        store: SharedStore,
        engine: Arc<crate::engine::Engine>,
        services: Services,
        throttle: Arc<SignInThrottle>,
        tabs: Arc<OpenTabs>,
        cookie: SessionCookie,
    ) -> Self {
        let Services { sessions, bookings, robots, relay, passwords, quotas } = services;
        ServerBackend { store, engine, sessions, bookings, robots, relay, throttle, passwords, quotas, tabs, cookie }
    }

    /// The org's operator scores (rule L10), by operator.
    async fn scores(&self, org_id: &str) -> Result<Scores, AppError> {
        Ok(scores_of(self.store.operator_scores(org_id).await.map_err(internal)?))
    }

    async fn current_user(&self, user_id: &str, org_id: Option<&str>) -> Result<Option<CurrentUser>, AppError> {
        let Some(user) = self.store.user_by_id(user_id).await.map_err(internal)? else {
            return Ok(None);
        };
        let memberships: Vec<OrgMembership> =
            self.store.memberships(user_id).await.map_err(internal)?.into_iter().map(membership).collect();
        // A session keeps its org only while the user still belongs to it.
        let selected_org = org_id.and_then(|id| memberships.iter().find(|m| m.org_id == id).cloned());
        Ok(Some(CurrentUser {
            user_id: user.id,
            email: user.email,
            display_name: user.display_name,
            memberships,
            selected_org,
        }))
    }
}

#[async_trait]
impl Backend for ServerBackend {
    async fn sign_in(&self, email: &str, password: &str, client: Option<IpAddr>) -> Result<(String, CurrentUser), AppError> {
        let email = normalize_email(email);
        // Without a peer address (never over TCP) all such attempts share one limit.
        let client = client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        // The attempt is counted before the password is checked: parallel
        // guesses cannot pass a check that is recorded only afterwards.
        if let Err(wait) = self.throttle.admit(client, &email) {
            tracing::info!(%client, "sign-in attempts over the limit");
            return Err(AppError::TooManyAttempts(wait.as_secs().max(1)));
        }
        let user = self.store.user_by_email(&email).await.map_err(internal)?;
        let known_hash = user.as_ref().map(|u| u.password_hash.clone());
        let password = password.to_string();
        // argon2 is deliberately slow (and 19 MiB a check): on its own threads.
        let verified = self
            .passwords
            .verify(password, known_hash.unwrap_or_else(dummy_hash))
            .await
            .map_err(|_| AppError::Busy)?;
        let user = match user {
            Some(user) if verified => user,
            // The email stays out of the info log: it may be a person's.
            Some(user) => {
                tracing::info!(%client, user = %user.id, "sign-in refused: wrong password");
                return Err(AppError::BadCredentials);
            }
            None => {
                tracing::info!(%client, "sign-in refused: unknown email");
                return Err(AppError::BadCredentials);
            }
        };
        // Work starts in the home org; the top bar switches.
        let home_org = self.store.home_org(&user.id).await.map_err(internal)?;
        let org_id = home_org.as_deref();
        let token = new_token();
        let now = now_ms();
        self.store
            .create_web_session(&token_hash(&token), &user.id, org_id, now, now + WEB_SESSION_TTL_MS)
            .await
            .map_err(internal)?;
        let current = self.current_user(&user.id, org_id).await?.ok_or(AppError::Unauthenticated)?;
        tracing::info!(user = %current.user_id, "signed in");
        Ok((token, current))
    }

    async fn session_user(&self, token: &str) -> Result<Option<CurrentUser>, AppError> {
        let hash = token_hash(token);
        let Some(session) = self.store.web_session(&hash).await.map_err(internal)? else {
            return Ok(None);
        };
        if session.expires_at <= now_ms() {
            self.store.delete_web_session(&hash).await.map_err(internal)?;
            return Ok(None);
        }
        self.current_user(&session.user_id, session.org_id.as_deref()).await
    }

    async fn sign_out(&self, token: &str) -> Result<(), AppError> {
        let hash = token_hash(token);
        self.store.delete_web_session(&hash).await.map_err(internal)?;
        let closed = self.tabs.credential_ended(&hash);
        if closed > 0 {
            tracing::debug!(closed, "sign-out closed the sign-in's sockets");
        }
        Ok(())
    }

    async fn change_password(&self, token: &str, current: &str, new: &str, client: Option<IpAddr>) -> Result<(), AppError> {
        let hash = token_hash(token);
        let session = self.store.web_session(&hash).await.map_err(internal)?.ok_or(AppError::Unauthenticated)?;
        let user = self.store.user_by_id(&session.user_id).await.map_err(internal)?.ok_or(AppError::Unauthenticated)?;
        let client = client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        // Guessing the current password here is limited like signing in.
        if let Err(wait) = self.throttle.admit(client, &user.email) {
            return Err(AppError::TooManyAttempts(wait.as_secs().max(1)));
        }
        let right = self.passwords.verify(current.to_string(), user.password_hash.clone()).await.map_err(|_| AppError::Busy)?;
        if !right {
            return Err(AppError::Forbidden("The current password is not right.".into()));
        }
        let phc = self.passwords.hash(new.to_string()).await.map_err(|_| AppError::Busy)?;
        let ended = self.store.change_password(&user.id, &phc, &hash).await.map_err(internal)?;
        for sign_in in &ended {
            self.tabs.credential_ended(sign_in);
        }
        tracing::info!(user = %user.id, ended = ended.len(), "password changed; other sign-ins ended");
        Ok(())
    }

    async fn select_org(&self, token: &str, org_id: &str) -> Result<CurrentUser, AppError> {
        let hash = token_hash(token);
        let session = self.store.web_session(&hash).await.map_err(internal)?.ok_or(AppError::Unauthenticated)?;
        let user = self.current_user(&session.user_id, None).await?.ok_or(AppError::Unauthenticated)?;
        // Not a member: the org does not exist as far as this user can tell.
        if !user.memberships.iter().any(|m| m.org_id == org_id) {
            return Err(AppError::NotFound("Organisation".into()));
        }
        self.store.set_web_session_org(&hash, org_id).await.map_err(internal)?;
        self.current_user(&session.user_id, Some(org_id)).await?.ok_or(AppError::Unauthenticated)
    }

    async fn directory(&self, org_id: &str) -> Result<Directory, AppError> {
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

    async fn robot(&self, org_id: &str, robot_id: &str) -> Result<Robot, AppError> {
        match self.store.robot(org_id, robot_id).await.map_err(internal)? {
            Some(r) => Ok(robot_view(r, now_ms())),
            None => Err(AppError::NotFound(format!("Robot {robot_id}"))),
        }
    }

    async fn session(&self, org_id: &str, session_id: &str) -> Result<app::models::SessionRecord, AppError> {
        match self.store.session(org_id, session_id).await.map_err(internal)? {
            Some(row) => row.record().map_err(internal),
            None => Err(AppError::NotFound(format!("Session {session_id}"))),
        }
    }

    async fn steer_session(&self, org_id: &str, session_id: &str, to: LifecycleState, by: Option<&str>) -> Result<SessionRecord, AppError> {
        self.engine.steer_session(org_id, session_id, to, by).await.map_err(refused)
    }

    async fn handover_candidates(&self, org_id: &str, session_id: &str) -> Result<Vec<app::dispatch::Candidate>, AppError> {
        self.engine.handover_candidates(org_id, session_id).await.map_err(refused)
    }

    async fn hand_over(&self, org_id: &str, session_id: &str, by: Option<&str>, to: &str) -> Result<app::models::Offer, AppError> {
        self.engine.hand_over(org_id, session_id, by, to).await.map_err(refused)
    }

    async fn edit_robot(&self, org_id: &str, actor: &str, robot_id: &str, fields: app::directory::RobotFields) -> Result<Robot, AppError> {
        let pops = self.robots.link_pops(org_id).await.map_err(internal)?;
        if let Some(why) = app::directory::robot_fields_problem(robot_id, &fields, &pops) {
            return Err(AppError::Invalid(why));
        }
        let fields = crate::store::RobotFields { model: fields.model, site: fields.site, pop: fields.pop, req_cert: fields.req_cert };
        let robot = self.robots.edit(org_id, robot_id, &fields, actor).await.map_err(directory_refused)?;
        Ok(robot_view(robot, now_ms()))
    }

    async fn retire_robot(&self, org_id: &str, actor: &str, robot_id: &str) -> Result<(), AppError> {
        self.robots.retire(org_id, robot_id, actor).await.map_err(directory_refused)
    }

    async fn rotate_robot_token(&self, org_id: &str, actor: &str, robot_id: &str) -> Result<String, AppError> {
        self.robots.rotate_token(org_id, robot_id, actor).await.map_err(directory_refused)
    }

    async fn extend_session(&self, org_id: &str, session_id: &str, operator: Option<&str>, actor: &str, minutes: i64) -> Result<SessionRecord, AppError> {
        self.engine.extend_session(org_id, session_id, operator, actor, minutes).await.map_err(refused)
    }

    async fn bookings(&self, org_id: &str, client_id: Option<&str>) -> Result<Vec<app::booking::Booking>, AppError> {
        self.bookings.upcoming(org_id, client_id).await.map_err(booking_refused)
    }

    async fn book(&self, org_id: &str, user_id: &str, client_id: &str, robot_id: &str, starts_at_ms: i64, ends_at_ms: i64, task: Option<&str>) -> Result<app::booking::Booking, AppError> {
        quota(&self.quotas, Write::Booking, user_id)?;
        let booker = crate::services::bookings::Booker { user_id, client_id, task };
        self.bookings.book(org_id, booker, robot_id, starts_at_ms, ends_at_ms).await.map_err(booking_refused)
    }

    async fn cancel_booking(&self, org_id: &str, booking_id: &str, client_id: Option<&str>) -> Result<(), AppError> {
        self.bookings.cancel(org_id, booking_id, client_id).await.map_err(booking_refused)
    }

    async fn booking_options(&self, org_id: &str, client_id: Option<&str>) -> Result<app::booking::BookingOptions, AppError> {
        let robots = self.store.robots(org_id).await.map_err(internal)?.into_iter().map(|r| (r.id, format!("{} · {}", r.model, r.site))).collect();
        let clients = self.bookings.clients(org_id).await.map_err(booking_refused)?;
        let clients = clients.into_iter().filter(|(id, _)| client_id.is_none_or(|me| me == id)).collect();
        Ok(app::booking::BookingOptions { robots, clients })
    }

    async fn client_sessions(&self, org_id: &str, client_id: Option<&str>) -> Result<app::booking::ClientSessions, AppError> {
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
            past.push(app::booking::PastSession { session, billable_ms, rating });
        }
        Ok(app::booking::ClientSessions { live, past, months: app::booking::monthly_billable(&billed) })
    }

    async fn estop_session(&self, org_id: &str, user_id: &str, session: &SessionRecord) -> Result<SessionRecord, AppError> {
        safety_answer(&session.id, self.sessions.operator_estop(org_id, user_id, session).await.map_err(internal)?)
    }

    async fn clear_protective_stop(&self, org_id: &str, user_id: &str, session: &SessionRecord, reason: &str) -> Result<SessionRecord, AppError> {
        safety_answer(&session.id, self.sessions.clear_protective_stop(org_id, user_id, session, reason).await.map_err(internal)?)
    }

    async fn dispatch_decisions(&self, org_id: &str, session_id: &str) -> Result<Vec<app::dispatch::DispatchDecision>, AppError> {
        let rows = self.store.dispatch_records(org_id, session_id).await.map_err(internal)?;
        rows.into_iter().map(|r| r.decision().map_err(internal)).collect()
    }

    async fn post_chat(&self, org_id: &str, author: &CurrentUser, session: &SessionRecord, body: &str) -> Result<app::chat::ChatMessage, AppError> {
        quota(&self.quotas, Write::Chat, &author.user_id)?;
        self.sessions.post_chat(org_id, &author.user_id, &author.display_name, session, body).await.map_err(internal)
    }

    async fn chat(&self, org_id: &str, session_id: &str) -> Result<Vec<app::chat::ChatMessage>, AppError> {
        self.sessions.chat(org_id, session_id).await.map_err(internal)
    }

    async fn rate_session(&self, org_id: &str, rater: &CurrentUser, session: &SessionRecord, stars: u8, feedback: &str) -> Result<app::rating::SessionRating, AppError> {
        let operator_id = session.operator_id.as_deref().ok_or_else(|| AppError::Conflict("Nobody operated this session.".into()))?;
        let at_ms = now_ms();
        if !self.store.rate(org_id, &session.id, operator_id, stars, feedback, &rater.user_id, at_ms).await.map_err(internal)? {
            return Err(AppError::Conflict(app::rating::ALREADY_RATED.into()));
        }
        Ok(app::rating::SessionRating { stars, feedback: feedback.to_string(), rated_by_name: rater.display_name.clone(), at_ms })
    }

    async fn session_rating(&self, org_id: &str, session_id: &str) -> Result<Option<app::rating::SessionRating>, AppError> {
        let row = self.store.rating(org_id, session_id).await.map_err(internal)?;
        Ok(row.map(|r| app::rating::SessionRating {
            stars: u8::try_from(r.stars).unwrap_or(0),
            feedback: r.feedback,
            rated_by_name: r.rated_by_name,
            at_ms: r.at,
        }))
    }

    async fn session_activity(&self, org_id: &str, session_id: &str) -> Result<app::lifecycle::SessionActivity, AppError> {
        let rows = self.store.activity_log(org_id, session_id).await.map_err(internal)?;
        let entries = rows.into_iter().map(|r| r.entry().map_err(internal)).collect::<Result<Vec<_>, _>>()?;
        Ok(app::lifecycle::SessionActivity::new(entries, now_ms()))
    }

    async fn state_history(&self, org_id: &str, session: &SessionRecord) -> Result<app::timeline::StateHistory, AppError> {
        let (activity, changes) =
            tokio::try_join!(self.session_activity(org_id, &session.id), async { self.store.safety_history(org_id, &session.id).await.map_err(internal) })?;
        let changes: Vec<(i64, app::models::SafetyState)> =
            changes.into_iter().filter_map(|(at, to)| app::models::SafetyState::parse(&to).map(|s| (at, s))).collect();
        Ok(app::timeline::StateHistory {
            lifecycle: app::timeline::lifecycle_spans(session.raised_at, &activity.entries),
            safety: app::timeline::safety_spans(session.raised_at, &changes),
            until_ms: session.ended_at.unwrap_or(activity.as_of_ms),
        })
    }

    async fn ops_board(&self, org_id: &str) -> Result<OpsBoard, AppError> {
        let now = now_ms();
        // Independent reads: in parallel, not one round trip after another
        // (every push reloads this picture on every admin screen).
        let s = &self.store;
        let (org_name, live, robots, operators, audit, queue, floors, speed, scores) = tokio::try_join!(
            s.org_name(org_id),
            s.live_sessions(org_id),
            s.robots(org_id),
            s.operators(org_id),
            s.recent_audit(org_id, now - app::board::ESTOP_WINDOW_MS, 200),
            s.queue_depths(org_id),
            s.org_link_floors(org_id),
            s.answer_speed(org_id, app::board::utc_midnight(now)),
            s.operator_scores(org_id),
        )
        .map_err(internal)?;
        let org_name = org_name.ok_or(AppError::NotFound("Organisation".into()))?;
        let scores = scores_of(scores);
        let live = live.into_iter().map(|row| row.record()).collect::<Result<Vec<_>, _>>().map_err(internal)?;
        let count = |n: Option<i64>| n.unwrap_or(0).max(0) as usize;
        let today = AnswerSpeed {
            answered: count(speed.answered),
            answer_ms_total: speed.answer_ms_total.unwrap_or(0),
            answered_within_20s: count(speed.within_20s),
            withdrawn: count(speed.withdrawn),
            abandoned: count(speed.abandoned),
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
            queue: queue
                .into_iter()
                .map(|q| QueueDepth { skill: q.skill, waiting: q.waiting.max(0) as usize, oldest_raised_at_ms: q.oldest_raised_at })
                .collect(),
            today,
            relay: self.relay.stats(org_id),
            as_of_ms: now,
        })
    }

    async fn roster(&self, org_id: &str) -> Result<Roster, AppError> {
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
                    state: live.as_ref().map_or(app::models::PresenceState::Offline, |p| p.state),
                    state_since_ms: live.as_ref().map(|p| p.since).filter(|&since| since > 0),
                    current_call_id: live.as_ref().and_then(|p| p.current_call.clone()),
                    aux_reason: live.and_then(|p| p.aux_reason),
                    score,
                }
            })
            .collect();
        Ok(Roster { rows, as_of_ms: now_ms() })
    }

    async fn operator_profile(&self, org_id: &str, user_id: &str) -> Result<Operator, AppError> {
        match self.store.operator(org_id, user_id).await.map_err(internal)? {
            Some(o) => Ok(operator_view(o, &self.scores(org_id).await?)),
            None => Err(AppError::NotFound("Your operator profile in this organisation".into())),
        }
    }

    fn session_cookie(&self) -> SessionCookie {
        self.cookie
    }

    fn set_session_cookie(&self, token: &str) -> String {
        self.cookie.set(token, WEB_SESSION_TTL_MS / 1000)
    }
}

/// Takes one write of `kind` from `who`'s quota; 429 with `Retry-After` past it.
pub(crate) fn quota(quotas: &crate::services::Quotas, kind: Write, who: &str) -> Result<(), AppError> {
    quotas.admit(kind, who).map_err(|wait| AppError::TooManyAttempts(wait.as_secs().max(1)))
}
