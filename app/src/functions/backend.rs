//! The narrow interface the server functions need. `server` implements it
//! over the store (and later the ACD engine) and provides it as context.

use crate::error::AppError;
use crate::models::{CurrentUser, Directory, LifecycleState, Operator, Robot, SessionRecord};
use crate::session_cookie::SessionCookie;
use std::net::IpAddr;
use std::sync::Arc;

#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Checks the password (attempts are rate-limited per client address
    /// and per address and email) and opens a sign-in session. Returns
    /// the session token and the user.
    async fn sign_in(&self, email: &str, password: &str, client: Option<IpAddr>) -> Result<(String, CurrentUser), AppError>;
    /// Who a request with these headers is signed in as, with the token of
    /// that sign-in: the first of its session cookies that is a live
    /// sign-in. The server's one door for "who is asking" (its REST
    /// extractor and sockets ask the same service).
    async fn signed_in(&self, headers: &http::HeaderMap) -> Result<Option<(String, CurrentUser)>, AppError>;
    /// Ends the sign-in, and closes its open sockets at once.
    async fn sign_out(&self, token: &str) -> Result<(), AppError>;
    /// Changes the signed-in person's password (the current one checked,
    /// attempts limited like sign-ins); every other sign-in of theirs ends.
    async fn change_password(&self, token: &str, current: &str, new: &str, client: Option<IpAddr>) -> Result<(), AppError>;
    /// Switches the session's org; the user must belong to it.
    async fn select_org(&self, token: &str, org_id: &str) -> Result<CurrentUser, AppError>;
    async fn directory(&self, org_id: &str) -> Result<Directory, AppError>;
    /// A robot of this org; another org's robot is `NotFound`.
    async fn robot(&self, org_id: &str, robot_id: &str) -> Result<Robot, AppError>;
    /// A session of this org; another org's is `NotFound`.
    async fn session(&self, org_id: &str, session_id: &str) -> Result<SessionRecord, AppError>;
    /// Pause, resume or complete a live session (seed 001): `by` is the
    /// operator asking, who must be the attached one; `None` for an admin.
    async fn steer_session(&self, org_id: &str, session_id: &str, to: LifecycleState, by: Option<&str>) -> Result<SessionRecord, AppError>;
    /// A certified admin takes control of a live session (no accept).
    async fn take_over(&self, org_id: &str, admin_id: &str, session_id: &str, reason: &str) -> Result<SessionRecord, AppError>;
    /// Who a live session may be handed to, best first (rule L08).
    async fn handover_candidates(&self, org_id: &str, session_id: &str) -> Result<Vec<crate::dispatch::Candidate>, AppError>;
    /// Offers a live session to `to`: `by` is the operator in control, `None` an admin.
    async fn hand_over(&self, org_id: &str, session_id: &str, by: Option<&str>, to: &str) -> Result<crate::models::Offer, AppError>;
    /// Edits a robot's model, site, PoP and reqCert (checked here too).
    async fn edit_robot(&self, org_id: &str, actor: &str, robot_id: &str, fields: crate::directory::RobotFields) -> Result<Robot, AppError>;
    /// Retires a robot (refused while it has a live session).
    async fn retire_robot(&self, org_id: &str, actor: &str, robot_id: &str) -> Result<(), AppError>;
    /// A new bearer token, shown once; the old one stops working.
    async fn rotate_robot_token(&self, org_id: &str, actor: &str, robot_id: &str) -> Result<String, AppError>;
    /// Extends a live session (rule L13): `operator` when the operator in
    /// control asks; `None` for an admin or the session's client.
    async fn extend_session(&self, org_id: &str, session_id: &str, operator: Option<&str>, actor: &str, minutes: i64) -> Result<SessionRecord, AppError>;
    /// Bookings not over yet: one client's, or (`None`) the org's.
    async fn bookings(&self, org_id: &str, client_id: Option<&str>) -> Result<Vec<crate::booking::Booking>, AppError>;
    /// Books a robot for a client; `user_id` is who books.
    /// `task`: what the client wants done (the episode's task string).
    #[allow(clippy::too_many_arguments)]
    async fn book(&self, org_id: &str, user_id: &str, client_id: &str, robot_id: &str, starts_at_ms: i64, ends_at_ms: i64, task: Option<&str>) -> Result<crate::booking::Booking, AppError>;
    /// Cancels a booking (only `client_id`'s when given).
    async fn cancel_booking(&self, org_id: &str, booking_id: &str, client_id: Option<&str>) -> Result<(), AppError>;
    /// Robots and clients for the booking form (`client_id`: only that client).
    async fn booking_options(&self, org_id: &str, client_id: Option<&str>) -> Result<crate::booking::BookingOptions, AppError>;
    /// A client's sessions, or (`None`) those without a client.
    async fn client_sessions(&self, org_id: &str, client_id: Option<&str>) -> Result<crate::booking::ClientSessions, AppError>;
    /// E-stop: the session latches in PROTECTIVE_STOP, with an audit record.
    async fn estop_session(&self, org_id: &str, user_id: &str, session: &SessionRecord) -> Result<SessionRecord, AppError>;
    /// Clears a latched PROTECTIVE_STOP with a reason (an audit record).
    async fn clear_protective_stop(&self, org_id: &str, user_id: &str, session: &SessionRecord, reason: &str) -> Result<SessionRecord, AppError>;
    /// The call's dispatch decisions, oldest first.
    async fn dispatch_decisions(&self, org_id: &str, session_id: &str) -> Result<Vec<crate::dispatch::DispatchDecision>, AppError>;
    /// Posts a chat message on an open session (the caller may see it).
    async fn post_chat(&self, org_id: &str, author: &CurrentUser, session: &SessionRecord, body: &str) -> Result<crate::chat::ChatMessage, AppError>;
    /// The session's chat, oldest first.
    async fn chat(&self, org_id: &str, session_id: &str) -> Result<Vec<crate::chat::ChatMessage>, AppError>;
    /// Rates the operator of a COMPLETED session, once (rule L10).
    async fn rate_session(&self, org_id: &str, rater: &CurrentUser, session: &SessionRecord, stars: u8, feedback: &str) -> Result<crate::rating::SessionRating, AppError>;
    async fn session_rating(&self, org_id: &str, session_id: &str) -> Result<Option<crate::rating::SessionRating>, AppError>;
    /// Both state histories of the session, as timeline spans.
    async fn state_history(&self, org_id: &str, session: &SessionRecord) -> Result<crate::timeline::StateHistory, AppError>;
    /// The session's activity log, oldest first.
    async fn session_activity(&self, org_id: &str, session_id: &str) -> Result<crate::lifecycle::SessionActivity, AppError>;
    /// The org's live picture for the wallboard and the overview.
    async fn ops_board(&self, org_id: &str) -> Result<crate::board::OpsBoard, AppError>;
    /// The org's presence roster: one row per operator of the org.
    async fn roster(&self, org_id: &str) -> Result<crate::roster::Roster, AppError>;
    /// The operator profile of a user in this org.
    async fn operator_profile(&self, org_id: &str, user_id: &str) -> Result<Operator, AppError>;
    /// The sign-in cookie (its name depends on HTTPS).
    fn session_cookie(&self) -> SessionCookie;
    /// `Set-Cookie` value that stores a session token in the browser.
    fn set_session_cookie(&self, token: &str) -> String;
}

pub type SharedBackend = Arc<dyn Backend>;

/// Directory administration of people, link floors and robot registration
/// (admins), and taking up an invitation (anyone holding the link).
#[async_trait::async_trait]
pub trait DirectoryAdmin: Send + Sync + 'static {
    async fn people(&self, org_id: &str) -> Result<crate::people::PeopleAdmin, AppError>;
    async fn invite(&self, org_id: &str, actor: &str, person: crate::people::PersonFields) -> Result<crate::people::InviteLink, AppError>;
    async fn preview_import(&self, org_id: &str, csv: &str) -> Result<crate::people::ImportPreview, AppError>;
    async fn import(&self, org_id: &str, actor: &str, csv: &str) -> Result<crate::people::ImportResult, AppError>;
    async fn set_role(&self, org_id: &str, actor: &str, user_id: &str, role: crate::models::Role) -> Result<(), AppError>;
    async fn remove_member(&self, org_id: &str, actor: &str, user_id: &str) -> Result<(), AppError>;
    async fn edit_profile(&self, org_id: &str, actor: &str, user_id: &str, fields: crate::people::ProfileFields) -> Result<(), AppError>;
    async fn set_floor(&self, org_id: &str, actor: &str, floor: crate::models::LinkFloor) -> Result<(), AppError>;
    async fn remove_floor(&self, org_id: &str, actor: &str, region: &str, pop: &str) -> Result<(), AppError>;
    async fn set_ceiling(&self, org_id: &str, actor: &str, ceiling: crate::dispatch::RttCeiling) -> Result<(), AppError>;
    async fn remove_ceiling(&self, org_id: &str, actor: &str, skill: &str) -> Result<(), AppError>;
    async fn register_robot(&self, org_id: &str, actor: &str, id: &str, fields: crate::directory::RobotFields) -> Result<crate::people::RegisteredRobot, AppError>;
    /// What the link can do for `signed_in` (the person whose browser opened it).
    /// `client`: the address it came from (opening links has a quota).
    async fn invitation(&self, token: &str, signed_in: Option<&CurrentUser>, client: Option<std::net::IpAddr>) -> Result<crate::people::InvitationView, AppError>;
    /// Sets the password (`Some`) of an account without one, or joins the
    /// signed-in account (`None`); returns the org's id.
    /// `client`: the address it came from (taking up links is throttled like signing in).
    async fn accept_invitation(&self, token: &str, password: Option<&str>, signed_in: Option<&CurrentUser>, client: Option<std::net::IpAddr>) -> Result<String, AppError>;
}

pub type SharedDirectoryAdmin = Arc<dyn DirectoryAdmin>;

/// The datasets a person may see: admins all of the org's episodes, a
/// client those of the sessions they booked.
#[async_trait::async_trait]
pub trait Datasets: Send + Sync + 'static {
    async fn episodes(&self, org_id: &str, client_id: Option<&str>) -> Result<Vec<crate::datasets::Episode>, AppError>;
}

pub type SharedDatasets = Arc<dyn Datasets>;

/// API keys and webhooks of the org (admins, `/admin/integrations`).
#[async_trait::async_trait]
pub trait IntegrationsAdmin: Send + Sync + 'static {
    async fn integrations(&self, org_id: &str) -> Result<crate::integrations::Integrations, AppError>;
    /// A key that reads the org's events; shown once.
    async fn create_key(&self, org_id: &str, actor: &str, name: &str) -> Result<crate::integrations::NewApiKey, AppError>;
    /// It stops working now, and its open streams end.
    async fn revoke_key(&self, org_id: &str, actor: &str, key_id: &str) -> Result<(), AppError>;
    /// An endpoint for `types` (empty: all); its signing secret shown once.
    async fn add_webhook(&self, org_id: &str, actor: &str, url: &str, types: Vec<String>) -> Result<crate::integrations::NewWebhook, AppError>;
    async fn remove_webhook(&self, org_id: &str, actor: &str, id: &str) -> Result<(), AppError>;
    async fn enable_webhook(&self, org_id: &str, actor: &str, id: &str) -> Result<(), AppError>;
    /// Sends one event to the endpoint again, now.
    async fn resend(&self, org_id: &str, id: &str, event_id: i64) -> Result<crate::integrations::DeliveryView, AppError>;
}

pub type SharedIntegrations = Arc<dyn IntegrationsAdmin>;
