//! `GET /v1/events`: the org's event log for integrators. With `Accept:
//! text/event-stream` it is a Server-Sent Events stream that resumes
//! exactly after `Last-Event-ID` (or `?since=`) and stays open, each record
//! an event whose `id` is its log id; otherwise a JSON page after `?since=`
//! for polling clients. An org API key (`events:read`) or a signed-in admin
//! reads it; a robot token never does. A reader further behind than the
//! retention gets `410 events_gone`.

use super::{ApiError, ErrorBody};
use crate::bus::Delivery;
use crate::services::{Credential, IntegrationService, Principal, TabPass};
use crate::state::AppState;
use crate::store::LogRow;
use domain::event_log::{LogRecord, Resume};
use domain::events::Topic;
use domain::integrations::SCOPE_EVENTS_READ;
use domain::models::Role;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use utoipa::{IntoParams, ToSchema};

/// Records per page (JSON) or per read (stream).
pub const MAX_PAGE: i64 = 1000;
const DEFAULT_PAGE: i64 = 100;
/// A stream looks for new records at least this often (the org's live
/// topic wakes it sooner; its events may come from any instance).
const POLL: Duration = Duration::from_secs(1);
/// How often a stream reads its key again.
const RECHECK: Duration = Duration::from_secs(30);

/// Who reads an org's events.
pub struct EventReader {
    org_id: String,
    /// What a stream's pass is opened on: the key, or the admin's sign-in.
    holder: Holder,
}

enum Holder {
    Key(Credential),
    Admin { token: String, user_id: String },
}

impl FromRequestParts<AppState> for EventReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match Principal::from_request_parts(parts, state).await? {
            Principal::Integration { key, token_hash } => {
                if !key.has_scope(SCOPE_EVENTS_READ) {
                    return Err(ApiError::Forbidden(format!("this API key lacks the `{SCOPE_EVENTS_READ}` scope")));
                }
                let org_id = key.org_id.clone();
                Ok(EventReader { org_id: org_id.clone(), holder: Holder::Key(Credential::ApiKey { org_id, key_id: key.id, token: token_hash }) })
            }
            principal @ Principal::User { .. } => {
                let org_id = super::admin_org(&principal, "only admins and the org's API keys read its events")?;
                let Principal::User { token, user } = principal else { unreachable!("matched above") };
                Ok(EventReader { org_id, holder: Holder::Admin { token, user_id: user.user_id } })
            }
            Principal::Robot { .. } => Err(ApiError::Forbidden("a robot token never reads the org's events: use an API key".into())),
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// The last id the reader has: records after it are returned (0 or
    /// absent: from the oldest kept). A stream's `Last-Event-ID` wins.
    #[param(minimum = 0)]
    pub since: Option<i64>,
    /// Records per page, 1–1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// A page of the log.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    /// Oldest first.
    #[schema(value_type = Vec<LogRecord>)]
    pub events: Vec<serde_json::Value>,
    /// Pass as `since` for the next page (the last id read).
    pub next_since: i64,
    /// True when more records follow already.
    pub more: bool,
}

/// The org's events: a JSON page, or (`Accept: text/event-stream`) a stream.
#[utoipa::path(
    get, path = "/v1/events", tag = "events",
    params(
        EventsQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "A stream resumes exactly after this id"),
    ),
    responses(
        (status = 200, description = "A page (JSON), or with `Accept: text/event-stream` an endless stream: each event's `id` is the record's, its `data` the record", body = EventPage),
        (status = 400, description = "`since`, `limit` or `Last-Event-ID` is not a number in range", body = ErrorBody),
        (status = 401, description = "No credential, or an unknown or revoked key", body = ErrorBody),
        (status = 403, description = "A robot token, a non-admin, or a key without `events:read`", body = ErrorBody),
        (status = 410, description = "`events_gone`: records after the reader's last id are past the retention (`CLUTCHCALL_EVENT_RETENTION_DAYS`); start again without `since`", body = ErrorBody),
        (status = 429, description = "Too many open streams for this key", body = ErrorBody),
        (status = 503, description = "`unavailable`: the database did not answer; try again after `Retry-After`", body = ErrorBody),
    ),
    security(("api_key" = []), ("admin_session" = []))
)]
pub async fn events(State(state): State<AppState>, reader: EventReader, query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::MalformedJson(e.body_text()))?;
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::MalformedJson(format!("limit must be 1–{MAX_PAGE}")));
    }
    let last_event_id = match headers.get("last-event-id").map(|v| v.to_str().ok().and_then(|v| v.trim().parse::<i64>().ok())) {
        Some(None) => return Err(ApiError::MalformedJson("Last-Event-ID must be a record id".into())),
        Some(Some(id)) => Some(id),
        None => None,
    };
    let after = last_event_id.or(query.since).unwrap_or(0);
    if after < 0 {
        return Err(ApiError::MalformedJson("since must be 0 or more".into()));
    }
    let log = state.integrations.clone();
    if log.resume(&reader.org_id, after).await? == Resume::Gone {
        return Err(ApiError::Gone(format!(
            "the events after {after} are past the retention and were deleted: read again from the oldest kept (no `since`, no Last-Event-ID)"
        )));
    }
    let streaming = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/event-stream"));
    if !streaming {
        let mut rows = log.page(&reader.org_id, after, limit + 1).await?;
        let more = rows.len() as i64 > limit;
        rows.truncate(limit as usize);
        let next_since = rows.last().map_or(after, |r| r.id);
        return Ok(Json(EventPage { events: rows.iter().map(LogRow::json).collect(), next_since, more }).into_response());
    }
    let key = match &reader.holder {
        Holder::Key(Credential::ApiKey { token, .. }) => Some(token.clone()),
        _ => None,
    };
    let pass = match reader.holder {
        Holder::Key(credential) => {
            let pass = state.tabs.open(credential, None).await.map_err(|_| ApiError::RateLimited { retry_after_s: 5 })?;
            // Read again once the pass exists: a revocation committed
            // after the first read ends the pass, one before is seen here.
            if !log.key_holds(key.as_deref().unwrap_or_default()).await? {
                return Err(ApiError::Unauthenticated("unknown or revoked API key".into()));
            }
            pass
        }
        Holder::Admin { token, user_id } => state.accounts.socket_pass(&token, &user_id, &reader.org_id, Role::Admin).await?,
    };
    let wake = state.engine.subscribe(&Topic::org(&reader.org_id));
    let ended = Box::pin(pass.ended());
    let reading = Reading { log, org_id: reader.org_id, after, buffered: VecDeque::new(), pass, ended, wake, limit, key, checked: Instant::now() };
    Ok(Sse::new(futures::stream::unfold(reading, next_event)).keep_alive(KeepAlive::default()).into_response())
}

/// A stream's place in the log.
struct Reading {
    log: Arc<IntegrationService>,
    org_id: String,
    /// The last id sent (or passed over).
    after: i64,
    buffered: VecDeque<LogRow>,
    /// Ends the stream when the key is revoked (or the admin's sign-in ends).
    pass: TabPass,
    /// `pass`'s end, one wait for the stream's life (as a tab's: `ring::ears`).
    ended: futures::future::BoxFuture<'static, crate::services::Ended>,
    wake: crate::bus::Subscription,
    limit: i64,
    /// The key's hash: it is read again now and then, should word of its
    /// revocation have been lost between instances.
    key: Option<String>,
    checked: Instant,
}

async fn next_event(mut r: Reading) -> Option<(Result<Event, Infallible>, Reading)> {
    loop {
        if !r.pass.holds() {
            return None;
        }
        if let Some(record) = r.buffered.pop_front() {
            r.after = record.id;
            let event = Event::default().id(record.id.to_string()).data(record.json().to_string());
            return Some((Ok(event), r));
        }
        if let Some(key) = r.key.as_deref().filter(|_| r.checked.elapsed() >= RECHECK) {
            match r.log.key_holds(key).await {
                Ok(true) => r.checked = Instant::now(),
                Ok(false) => return None,
                Err(e) => tracing::warn!(error = %e, "API key check failed; the stream goes on"),
            }
        }
        match r.log.page(&r.org_id, r.after, r.limit).await {
            Ok(rows) if !rows.is_empty() => {
                r.buffered.extend(rows);
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                // The client reconnects with its Last-Event-ID.
                tracing::warn!(error = %e, "event stream read failed: the stream ends");
                return None;
            }
        }
        tokio::select! {
            _ = &mut r.ended => return None,
            delivery = r.wake.recv() => if delivery == Delivery::Closed { tokio::time::sleep(POLL).await },
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}
