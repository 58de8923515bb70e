//! The server's side of `app::functions::backend::Backend`: what the server
//! functions may ask for, handed to the services and the engine.

mod answers;
mod integrations;
mod people;
pub use integrations::IntegrationsBackend;
pub use people::{DatasetsBackend, PeopleBackend};

use answers::{booking_refused, directory_refused, internal, refused, safety_answer};
use crate::clock::now_ms;
use crate::services::views::robot_view;
use crate::services::Write;
use domain::board::OpsBoard;
use app::error::AppError;
use app::functions::backend::Backend;
use domain::models::{CurrentUser, Directory, LifecycleState, Operator, Robot, SessionRecord};
use domain::roster::Roster;
use app::session_cookie::SessionCookie;
use async_trait::async_trait;
use std::net::IpAddr;
use std::sync::Arc;

/// An adapter: each server function's request goes to one service (or the
/// engine), and its refusal comes back as the `AppError` a person reads. It
/// holds no store: reads are `OrgViews`', changes the services'.
pub struct ServerBackend {
    pub engine: Arc<crate::engine::Engine>,
    /// What the screens read.
    pub views: Arc<crate::services::OrgViews>,
    /// Safety changes made by people (E-stop, clear), chat and ratings.
    pub sessions: Arc<crate::services::SessionService>,
    pub bookings: Arc<crate::services::BookingService>,
    /// Directory changes of robots (edit, retire, rotate).
    pub robots: Arc<crate::services::RobotRegistry>,
    pub quotas: Arc<crate::services::Quotas>,
    /// Who is asking; signing in and out.
    pub accounts: Arc<crate::services::Accounts>,
}

#[async_trait]
impl Backend for ServerBackend {
    async fn sign_in(&self, email: &str, password: &str, client: Option<IpAddr>) -> Result<(String, CurrentUser), AppError> {
        self.accounts.sign_in(email, password, client).await
    }

    async fn signed_in(&self, headers: &http::HeaderMap) -> Result<Option<(String, CurrentUser)>, AppError> {
        self.accounts.person(headers).await.map_err(internal)
    }

    async fn sign_out(&self, token: &str) -> Result<(), AppError> {
        self.accounts.sign_out(token).await
    }

    async fn change_password(&self, token: &str, current: &str, new: &str, client: Option<IpAddr>) -> Result<(), AppError> {
        self.accounts.change_password(token, current, new, client).await
    }

    async fn select_org(&self, token: &str, org_id: &str) -> Result<CurrentUser, AppError> {
        self.accounts.select_org(token, org_id).await
    }

    async fn directory(&self, org_id: &str) -> Result<Directory, AppError> {
        self.views.directory(org_id).await
    }

    async fn robot(&self, org_id: &str, robot_id: &str) -> Result<Robot, AppError> {
        self.views.robot(org_id, robot_id).await
    }

    async fn session(&self, org_id: &str, session_id: &str) -> Result<domain::models::SessionRecord, AppError> {
        self.views.session(org_id, session_id).await
    }

    async fn steer_session(&self, org_id: &str, session_id: &str, to: LifecycleState, by: Option<&str>) -> Result<SessionRecord, AppError> {
        self.engine.steer_session(org_id, session_id, to, by).await.map_err(refused)
    }

    async fn take_over(&self, org_id: &str, admin_id: &str, session_id: &str, reason: &str) -> Result<SessionRecord, AppError> {
        self.engine.take_over(org_id, session_id, admin_id, reason).await.map_err(refused)?;
        self.views.session(org_id, session_id).await
    }

    async fn handover_candidates(&self, org_id: &str, session_id: &str) -> Result<Vec<domain::dispatch::Candidate>, AppError> {
        self.engine.handover_candidates(org_id, session_id).await.map_err(refused)
    }

    async fn hand_over(&self, org_id: &str, session_id: &str, by: Option<&str>, to: &str) -> Result<domain::models::Offer, AppError> {
        self.engine.hand_over(org_id, session_id, by, to).await.map_err(refused)
    }

    async fn edit_robot(&self, org_id: &str, actor: &str, robot_id: &str, fields: domain::directory::RobotFields) -> Result<Robot, AppError> {
        let pops = self.robots.link_pops(org_id).await.map_err(internal)?;
        if let Some(why) = domain::directory::robot_fields_problem(robot_id, &fields, &pops) {
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

    async fn bookings(&self, org_id: &str, client_id: Option<&str>) -> Result<Vec<domain::booking::Booking>, AppError> {
        self.bookings.upcoming(org_id, client_id).await.map_err(booking_refused)
    }

    async fn book(&self, org_id: &str, user_id: &str, client_id: &str, robot_id: &str, starts_at_ms: i64, ends_at_ms: i64, task: Option<&str>) -> Result<domain::booking::Booking, AppError> {
        quota(&self.quotas, Write::Booking, user_id).await?;
        let booker = crate::services::bookings::Booker { user_id, client_id, task };
        self.bookings.book(org_id, booker, robot_id, starts_at_ms, ends_at_ms).await.map_err(booking_refused)
    }

    async fn cancel_booking(&self, org_id: &str, booking_id: &str, client_id: Option<&str>) -> Result<(), AppError> {
        self.bookings.cancel(org_id, booking_id, client_id).await.map_err(booking_refused)
    }

    async fn booking_options(&self, org_id: &str, client_id: Option<&str>) -> Result<domain::booking::BookingOptions, AppError> {
        let robots = self.views.bookable_robots(org_id).await?;
        let clients = self.bookings.clients(org_id).await.map_err(booking_refused)?;
        let clients = clients.into_iter().filter(|(id, _)| client_id.is_none_or(|me| me == id)).collect();
        Ok(domain::booking::BookingOptions { robots, clients })
    }

    async fn client_sessions(&self, org_id: &str, client_id: Option<&str>) -> Result<domain::booking::ClientSessions, AppError> {
        self.views.client_sessions(org_id, client_id).await
    }

    async fn estop_session(&self, org_id: &str, user_id: &str, session: &SessionRecord) -> Result<SessionRecord, AppError> {
        safety_answer(&session.id, self.sessions.operator_estop(org_id, user_id, session).await.map_err(internal)?)
    }

    async fn clear_protective_stop(&self, org_id: &str, user_id: &str, session: &SessionRecord, reason: &str) -> Result<SessionRecord, AppError> {
        safety_answer(&session.id, self.sessions.clear_protective_stop(org_id, user_id, session, reason).await.map_err(internal)?)
    }

    async fn dispatch_decisions(&self, org_id: &str, session_id: &str) -> Result<Vec<domain::dispatch::DispatchDecision>, AppError> {
        self.views.dispatch_decisions(org_id, session_id).await
    }

    async fn post_chat(&self, org_id: &str, author: &CurrentUser, session: &SessionRecord, body: &str) -> Result<domain::chat::ChatMessage, AppError> {
        quota(&self.quotas, Write::Chat, &author.user_id).await?;
        self.sessions.post_chat(org_id, &author.user_id, &author.display_name, session, body).await.map_err(internal)
    }

    async fn chat(&self, org_id: &str, session_id: &str) -> Result<Vec<domain::chat::ChatMessage>, AppError> {
        self.sessions.chat(org_id, session_id).await.map_err(internal)
    }

    async fn rate_session(&self, org_id: &str, rater: &CurrentUser, session: &SessionRecord, stars: u8, feedback: &str) -> Result<domain::rating::SessionRating, AppError> {
        let operator_id = session.operator_id.as_deref().ok_or_else(|| AppError::Conflict("Nobody operated this session.".into()))?;
        let at_ms = now_ms();
        if !self.sessions.rate(org_id, &session.id, operator_id, stars, feedback, &rater.user_id, at_ms).await.map_err(internal)? {
            return Err(AppError::Conflict(domain::rating::ALREADY_RATED.into()));
        }
        Ok(domain::rating::SessionRating { stars, feedback: feedback.to_string(), rated_by_name: rater.display_name.clone(), at_ms })
    }

    async fn session_rating(&self, org_id: &str, session_id: &str) -> Result<Option<domain::rating::SessionRating>, AppError> {
        self.views.session_rating(org_id, session_id).await
    }

    async fn session_activity(&self, org_id: &str, session_id: &str) -> Result<domain::lifecycle::SessionActivity, AppError> {
        self.views.session_activity(org_id, session_id).await
    }

    async fn state_history(&self, org_id: &str, session: &SessionRecord) -> Result<domain::timeline::StateHistory, AppError> {
        self.views.state_history(org_id, session).await
    }

    async fn ops_board(&self, org_id: &str) -> Result<OpsBoard, AppError> {
        self.views.ops_board(org_id).await
    }

    async fn roster(&self, org_id: &str) -> Result<Roster, AppError> {
        self.views.roster(org_id).await
    }

    async fn operator_profile(&self, org_id: &str, user_id: &str) -> Result<Operator, AppError> {
        self.views.operator_profile(org_id, user_id).await
    }

    fn session_cookie(&self) -> SessionCookie {
        self.accounts.cookie()
    }

    fn set_session_cookie(&self, token: &str) -> String {
        self.accounts.set_cookie(token)
    }
}

/// Takes one write of `kind` from `who`'s quota; 429 with `Retry-After` past it.
pub(crate) async fn quota(quotas: &crate::services::Quotas, kind: Write, who: &str) -> Result<(), AppError> {
    quotas.admit(kind, who).await.map_err(|wait| AppError::TooManyAttempts(wait.as_secs().max(1)))
}
