//! The REST API for edge agents, under `/v1`. JSON in and out, camelCase,
//! RFC 3339 UTC times. A robot authenticates with its bearer token and acts
//! only for itself; a signed-in admin (session cookie) may act for any
//! robot of the selected org; the admin overview's dispatch control uses
//! this same path. Handlers stay thin: auth, then the ACD or the store.

pub mod error;
mod event_stream;
mod events;
mod telemetry;

pub use error::{ApiError, ErrorBody, ErrorCode, ErrorDetail};

use crate::engine::{CallOutcome, EngineError};
use crate::services::Principal;
use crate::state::AppState;
use crate::services::registry::DirectoryError;
use crate::store::RobotRecord;
use domain::models::{LifecycleState, Offer, Role, SafetyState, SessionRecord};
use domain::rules::rfc3339;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

/// Request bodies above this are refused with 413.
pub const BODY_LIMIT: usize = 64 * 1024;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/sessions", post(raise_call))
        .route("/sessions/{id}", get(get_session).delete(withdraw_call))
        .route("/sessions/{id}/telemetry", post(telemetry::report_telemetry))
        .route("/sessions/{id}/errors", post(events::report_error))
        .route("/robots", post(register_robot))
        .route("/robots/{id}/heartbeat", post(heartbeat))
        .route("/events", get(event_stream::events))
        .route("/openapi.json", get(openapi))
        .fallback(|| async { ApiError::NotFound("no such endpoint".into()) })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
}

/// `Json<T>` whose rejections are `ApiError`s (400, 413, 422).
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    Json<T>: FromRequest<S, Rejection = axum::extract::rejection::JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<T>::from_request(req, state).await?;
        Ok(ApiJson(value))
    }
}

/// Who may call the API: an edge agent, or an admin of the selected org
/// (the overview's dispatch control uses this same path, rule A14).
pub enum Caller {
    /// An edge agent, by its bearer token.
    Robot(RobotRecord),
    /// A signed-in admin, in the org selected in their session.
    Admin { org_id: String, admin_id: String },
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match Principal::from_request_parts(parts, state).await? {
            Principal::Robot { robot, .. } => Ok(Caller::Robot(robot)),
            Principal::Integration { .. } => Err(ApiError::Forbidden("an API key reads the org's events (`/v1/events`); it does not act for robots".into())),
            principal @ Principal::User { .. } => {
                let org_id = admin_org(&principal, "only admins may act for robots")?;
                let Principal::User { user, .. } = principal else { unreachable!("matched above") };
                Ok(Caller::Admin { org_id, admin_id: user.user_id })
            }
        }
    }
}

/// The org a signed-in admin works in, or 403 (`refusal` for a non-admin).
pub(super) fn admin_org(principal: &Principal, refusal: &str) -> Result<String, ApiError> {
    let org = principal.selected_org().ok_or_else(|| ApiError::Forbidden("choose an organisation first".into()))?;
    if org.role != Role::Admin {
        return Err(ApiError::Forbidden(refusal.into()));
    }
    Ok(org.org_id.clone())
}

impl Caller {
    pub(super) fn org_id(&self) -> &str {
        match self {
            Caller::Robot(robot) => &robot.org_id,
            Caller::Admin { org_id, .. } => org_id,
        }
    }

    /// The robot this caller may act for: a robot token only for itself,
    /// an admin for any robot of the org; anything else does not exist
    /// here (404, whether or not it exists elsewhere: no oracle).
    async fn robot(&self, state: &AppState, robot_id: &str) -> Result<RobotRecord, ApiError> {
        match self {
            Caller::Robot(own) if own.id == robot_id => Ok(own.clone()),
            Caller::Robot(_) => Err(ApiError::not_found("robot", robot_id)),
            Caller::Admin { org_id, .. } => state.robots.robot(org_id, robot_id).await?.ok_or_else(|| ApiError::not_found("robot", robot_id)),
        }
    }

    /// A session this caller may see: a robot only its own sessions.
    pub(super) async fn session(&self, state: &AppState, session_id: &str) -> Result<SessionRecord, ApiError> {
        let record = state
            .sessions
            .session(self.org_id(), session_id)
            .await?
            .ok_or_else(|| ApiError::not_found("session", session_id))?;
        if let Caller::Robot(own) = self {
            if record.robot != own.id {
                // Another robot's session answers as an unknown one.
                return Err(ApiError::not_found("session", session_id));
            }
        }
        Ok(record)
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallRequest {
    /// The robot in trouble.
    pub robot_id: String,
}

#[derive(Serialize, ToSchema)]
pub struct MatchedOperatorBody {
    pub id: String,
    pub name: String,
    pub region: String,
}

/// What became of a raised call: the `status` of its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// `201`: an operator's console is ringing.
    Matched,
    /// `202`: nobody could take it yet; it waits in its skill's queue.
    Queued,
}

/// `201`: an operator was selected and their console is ringing.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallMatched {
    /// Always `matched`.
    pub status: CallStatus,
    pub session_id: String,
    pub operator: MatchedOperatorBody,
    pub rtt_ms: u32,
    pub offer: Offer,
}

/// `202`: no ready operator holds the certification; the call waits.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallQueued {
    /// Always `queued`.
    pub status: CallStatus,
    pub session_id: String,
    /// The skill that went unserved.
    pub skill: String,
    /// 1-based place in that skill's queue.
    pub position: i64,
}

/// Raise a distress call.
#[utoipa::path(
    post, path = "/v1/sessions", tag = "sessions",
    request_body = CallRequest,
    responses(
        (status = 201, description = "Matched: the operator's console rings", body = CallMatched),
        (status = 202, description = "Queued: no ready certified operator", body = CallQueued),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Not an admin (a person acting for robots)", body = ErrorBody),
        (status = 404, description = "Unknown robot, or another org's", body = ErrorBody),
        (status = 409, description = "The robot already has a call in progress (`call_in_progress`)", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 422, description = "Wrong shape or values", body = ErrorBody),
        (status = 429, description = "Over the token's request rate (`rate_limited`); see `Retry-After`", body = ErrorBody),
        (status = 503, description = "Dispatch briefly unavailable (`unavailable`), or run by another instance (`dispatched_elsewhere`); retry", body = ErrorBody),
    ),
    security(("robot_token" = []), ("admin_session" = []))
)]
async fn raise_call(State(state): State<AppState>, caller: Caller, ApiJson(body): ApiJson<CallRequest>) -> Result<Response, ApiError> {
    let robot = caller.robot(&state, &body.robot_id).await?;
    Ok(match state.engine.raise_call(&robot).await? {
        CallOutcome::Matched { session_id, operator, rtt_ms, offer } => (
            StatusCode::CREATED,
            Json(CallMatched {
                status: CallStatus::Matched,
                session_id,
                operator: MatchedOperatorBody { id: operator.id, name: operator.name, region: operator.region },
                rtt_ms,
                offer,
            }),
        )
            .into_response(),
        CallOutcome::Queued { session_id, skill, position } => {
            (StatusCode::ACCEPTED, Json(CallQueued { status: CallStatus::Queued, session_id, skill, position })).into_response()
        }
    })
}

/// The session record.
#[utoipa::path(
    get, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, body = SessionRecord),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ),
    security(("robot_token" = []), ("admin_session" = []))
)]
async fn get_session(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<SessionRecord>, ApiError> {
    Ok(Json(caller.session(&state, &id).await?))
}

/// Withdraw a call: the session is CANCELLED and any open offer withdrawn.
#[utoipa::path(
    delete, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The session, now CANCELLED", body = SessionRecord),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Already COMPLETED or CANCELLED (`session_ended`)", body = ErrorBody),
        (status = 429, body = ErrorBody), (status = 503, body = ErrorBody),
    ),
    security(("robot_token" = []), ("admin_session" = []))
)]
async fn withdraw_call(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<SessionRecord>, ApiError> {
    let (robot, reason) = match &caller {
        Caller::Robot(own) => (Some(own.id.as_str()), "withdrawn by the edge agent"),
        Caller::Admin { .. } => (None, "withdrawn by an admin"),
    };
    // Another robot's session, or none: 404 (the desk or the row decides).
    match state.engine.finish_session(caller.org_id(), &id, robot, LifecycleState::Cancelled, reason).await {
        Err(EngineError::NotFound("session")) => Err(ApiError::not_found("session", &id)),
        done => Ok(Json(done?)),
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatAck {
    pub robot_id: String,
    /// Always `online`: the robot reads `offline` 15 s after its last heartbeat.
    #[schema(value_type = String, example = "online")]
    pub status: domain::models::RegistryStatus,
    #[schema(format = DateTime)]
    pub at: String,
}

/// Edge-agent heartbeat: the robot reads `online` in the registry.
#[utoipa::path(
    post, path = "/v1/robots/{id}/heartbeat", tag = "robots",
    params(("id" = String, Path, description = "Robot id")),
    responses(
        (status = 200, body = HeartbeatAck),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody), (status = 503, body = ErrorBody, description = "the database did not answer in time; `Retry-After` is the agent's heartbeat interval"),
    ),
    security(("robot_token" = []), ("admin_session" = []))
)]
async fn heartbeat(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<HeartbeatAck>, ApiError> {
    let beat = async {
        let robot = caller.robot(&state, &id).await?;
        let now = state.robots.heartbeat(&robot).await?;
        Ok(Json(HeartbeatAck { robot_id: robot.id, status: domain::models::RegistryStatus::Online, at: rfc3339(now) }))
    };
    // Unstored, it is retried by the agent's next heartbeat: an agent that
    // obeyed a second's `Retry-After` would heartbeat ten times as often
    // while the database is away.
    beat.await.map_err(|e: ApiError| e.with_retry_after(domain::rules::ROBOT_HEARTBEAT_EVERY_MS as u64 / 1000))
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewRobotBody {
    /// Lowercase letters, digits and dashes, 1–64 characters; unique in the org.
    #[schema(min_length = 1, max_length = 64, pattern = "^[a-z0-9-]+$")]
    pub id: String,
    #[schema(min_length = 1, max_length = 64)]
    pub model: String,
    #[schema(min_length = 1, max_length = 96)]
    pub site: String,
    /// A PoP of the link-health table, e.g. `us-east`.
    #[schema(min_length = 1, max_length = 32)]
    pub pop: String,
    /// Required certification; its first token (split on `·` or whitespace) is the skill.
    #[schema(min_length = 1, max_length = 96)]
    pub req_cert: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredRobot {
    pub id: String,
    pub skill: String,
    /// The robot's bearer token. Shown once; only its hash is stored.
    pub token: String,
}

/// Register a robot (admins). Returns its bearer token once.
#[utoipa::path(
    post, path = "/v1/robots", tag = "robots",
    request_body = NewRobotBody,
    responses(
        (status = 201, body = RegisteredRobot),
        (status = 401, body = ErrorBody), (status = 403, description = "Not an admin", body = ErrorBody),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 409, description = "`robot_exists`: this org already has a robot with the id", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 429, description = "A robot token over its request rate", body = ErrorBody),
        (status = 422, description = "Bad id, an empty or overlong field, a PoP not in the link-health table, or a reqCert that names no skill", body = ErrorBody),
    ),
    security(("admin_session" = []))
)]
async fn register_robot(State(state): State<AppState>, caller: Caller, ApiJson(body): ApiJson<NewRobotBody>) -> Result<Response, ApiError> {
    let Caller::Admin { org_id, admin_id } = caller else {
        return Err(ApiError::Forbidden("only admins register robots".into()));
    };
    let fields = domain::directory::RobotFields { model: body.model, site: body.site, pop: body.pop, req_cert: body.req_cert };
    let (skill, token) = state.robots.enroll(&org_id, &body.id, fields, &admin_id).await.map_err(|e| match e {
        DirectoryError::Exists(id) => ApiError::Conflict { code: ErrorCode::RobotExists, message: format!("robot {id} already exists") },
        DirectoryError::Invalid(problem) => ApiError::Invalid(problem),
        DirectoryError::Store(e) => e.into(),
        other => ApiError::Invalid(other.to_string()),
    })?;
    Ok((StatusCode::CREATED, Json(RegisteredRobot { id: body.id, skill, token })).into_response())
}

/// This API's OpenAPI 3 description.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta", responses((status = 200, description = "OpenAPI 3 document")))]
async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "robot_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some("The robot's bearer token")).build()),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some("An org API key (`cck_…`, scope `events:read`), created by an admin on /admin/integrations")).build()),
        );
        components.add_security_scheme(
            "admin_session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(app::session_cookie::PLAIN_NAME, "A signed-in admin's session cookie (`__Host-cc_session` behind HTTPS)"))),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "ClutchCall edge-agent API", version = "1", description = "Distress calls, telemetry and heartbeats from robots' edge agents; the org's event log for integrators."),
    paths(raise_call, get_session, withdraw_call, telemetry::report_telemetry, events::report_error, heartbeat, register_robot, event_stream::events, openapi),
    components(schemas(
        CallRequest, CallMatched, CallQueued, MatchedOperatorBody, Offer, SessionRecord, SafetyState, LifecycleState,
        telemetry::TelemetryBody, HeartbeatAck, NewRobotBody, RegisteredRobot, ErrorBody, ErrorDetail, ErrorCode, CallStatus,
        events::ErrorReport, domain::lifecycle::ActivityEntry, domain::lifecycle::ActivityKind,
        event_stream::EventPage, domain::event_log::LogRecord, domain::event_log::LogEvent, domain::event_log::CallRaised,
        domain::event_log::CallOffered, domain::event_log::OperatorOnly, domain::event_log::CallAccepted, domain::event_log::Empty,
        domain::event_log::Ended, domain::event_log::LifecycleChanged, domain::event_log::SafetyChanged, domain::event_log::Handover,
        domain::event_log::ChatPosted, domain::event_log::Rated, domain::event_log::RobotRegistered, domain::event_log::RobotOffline,
        domain::event_log::Booking, domain::event_log::BookingCancelled
    )),
    modifiers(&Security)
)]
pub struct ApiDoc;
