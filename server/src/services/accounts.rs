//! Who is asking, in one place: a person by their sign-in cookie, a robot by
//! its bearer token, an integration by its org API key (`cck_…`). The REST extractor (`http/principal.rs`), the page
//! middleware and the server functions (through `backend`) and the sockets
//! all ask here, and so do signing in and out, changing a password and
//! choosing an org, which start or end what this answers. A socket's pass
//! on a sign-in is opened here too, and ended by `tabs` when the sign-in
//! ends or its role changes.

use super::passwords::PasswordChecker;
use super::tabs::{Credential, OpenTabs, TabPass};
use super::{store_failed as internal, RobotRegistry, SignInThrottle};
use crate::auth::{new_token, token_hash};
use crate::clock::now_ms;
use crate::store::{ApiKeyRow, RobotRecord, SharedStore, StoreError, StoreResult};
use domain::integrations::API_KEY_PREFIX;
use app::error::AppError;
use domain::models::{CurrentUser, OrgMembership, Role};
use domain::rules::normalize_email;
use app::session_cookie::SessionCookie;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A sign-in lasts one long shift.
pub const WEB_SESSION_TTL_MS: i64 = 12 * 60 * 60 * 1000;

/// Who a request comes from.
pub enum Principal {
    /// An edge agent; `token_hash` is its bearer token's (long-lived
    /// sockets end when it is rotated or the robot retired).
    Robot { robot: RobotRecord, token_hash: String },
    /// A signed-in person; `token` is their sign-in token (long-lived
    /// sockets hold a pass on it).
    User { token: String, user: CurrentUser },
    /// An org's integration, by an API key (`cck_…`): it reads the org's
    /// event log and nothing else; `token_hash` is the key's.
    Integration { key: ApiKeyRow, token_hash: String },
}

impl Principal {
    /// The person's role in their selected org, if they chose one.
    pub fn selected_org(&self) -> Option<&OrgMembership> {
        match self {
            Principal::User { user, .. } => user.selected_org.as_ref(),
            Principal::Robot { .. } | Principal::Integration { .. } => None,
        }
    }
}

/// Why a request has no caller.
#[derive(Debug)]
pub enum NoPrincipal {
    /// An Authorization header that is not `Bearer <token>`.
    MalformedBearer,
    UnknownRobotToken,
    /// A `cck_` key that is unknown or revoked.
    UnknownApiKey,
    /// Neither a bearer token nor a session cookie.
    NoCredential,
    /// Session cookies, none of them a live sign-in.
    SignInEnded,
    Store(StoreError),
}

/// Why a socket was not opened.
#[derive(Debug, PartialEq, Eq)]
pub enum SocketRefused {
    /// The sign-in ended, or the role it was judged on changed meanwhile.
    Ended,
    TooManyTabs,
    Unavailable,
}

/// A socket's refused upgrade, in plain text; an API stream's is JSON
/// (`ApiError::from`).
impl IntoResponse for SocketRefused {
    fn into_response(self) -> Response {
        match self {
            SocketRefused::Ended => (StatusCode::UNAUTHORIZED, "the sign-in session has ended").into_response(),
            SocketRefused::TooManyTabs => (StatusCode::TOO_MANY_REQUESTS, "Too many open ClutchCall tabs: close one and retry.").into_response(),
            SocketRefused::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "try again in a moment").into_response(),
        }
    }
}

pub struct Accounts {
    store: SharedStore,
    robots: Arc<RobotRegistry>,
    throttle: Arc<SignInThrottle>,
    /// argon2 work (sign-in checks, new passwords) on its own few threads.
    passwords: Arc<PasswordChecker>,
    tabs: Arc<OpenTabs>,
    cookie: SessionCookie,
}

/// Checked when the email is unknown, so a wrong email costs the same time
/// as a wrong password and the answer does not tell which it was.
fn dummy_hash() -> String {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| crate::auth::hash_password(&new_token())).clone()
}

impl Accounts {
    pub fn new(
        store: SharedStore,
        robots: Arc<RobotRegistry>,
        throttle: Arc<SignInThrottle>,
        passwords: Arc<PasswordChecker>,
        tabs: Arc<OpenTabs>,
        cookie: SessionCookie,
    ) -> Accounts {
        Accounts { store, robots, throttle, passwords, tabs, cookie }
    }

    pub fn cookie(&self) -> SessionCookie {
        self.cookie
    }

    /// The `Set-Cookie` value that carries a new sign-in for its lifetime.
    pub fn set_cookie(&self, token: &str) -> String {
        self.cookie.set(token, WEB_SESSION_TTL_MS / 1000)
    }

    /// Who sends a request with these headers: the robot whose bearer
    /// token it carries, else the person of its first session cookie that is
    /// a live sign-in (cookies may share the name, one planted by a sibling
    /// site).
    pub async fn principal(&self, headers: &HeaderMap) -> Result<Principal, NoPrincipal> {
        if let Some(value) = headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or(NoPrincipal::MalformedBearer)?;
            let hash = token_hash(token);
            if token.starts_with(API_KEY_PREFIX) {
                let key = self.store.api_key(&hash).await.map_err(NoPrincipal::Store)?.ok_or(NoPrincipal::UnknownApiKey)?;
                return Ok(Principal::Integration { key, token_hash: hash });
            }
            let robot = self.robots.by_token_hash(&hash).await.map_err(NoPrincipal::Store)?.ok_or(NoPrincipal::UnknownRobotToken)?;
            return Ok(Principal::Robot { robot, token_hash: hash });
        }
        let tokens = self.cookie.tokens(headers);
        if tokens.is_empty() {
            return Err(NoPrincipal::NoCredential);
        }
        match self.first_live(tokens).await {
            Ok(Some((token, user))) => Ok(Principal::User { token, user }),
            Ok(None) => Err(NoPrincipal::SignInEnded),
            Err(e) => Err(NoPrincipal::Store(e)),
        }
    }

    /// The person signed in by these headers' session cookies, with the
    /// token of the first live sign-in among them.
    pub async fn person(&self, headers: &HeaderMap) -> StoreResult<Option<(String, CurrentUser)>> {
        self.first_live(self.cookie.tokens(headers)).await
    }

    async fn first_live(&self, tokens: Vec<String>) -> StoreResult<Option<(String, CurrentUser)>> {
        for token in tokens {
            if let Some(user) = self.signed_in_user(&token).await? {
                return Ok(Some((token, user)));
            }
        }
        Ok(None)
    }

    /// The user behind a sign-in token, if the sign-in still holds (an
    /// expired one is deleted on sight).
    async fn signed_in_user(&self, token: &str) -> StoreResult<Option<CurrentUser>> {
        let hash = token_hash(token);
        let Some(session) = self.store.web_session(&hash).await? else {
            return Ok(None);
        };
        if session.expires_at <= now_ms() {
            self.store.delete_web_session(&hash).await?;
            return Ok(None);
        }
        self.user(&session.user_id, session.org_id.as_deref()).await
    }

    async fn user(&self, user_id: &str, org_id: Option<&str>) -> StoreResult<Option<CurrentUser>> {
        let Some(user) = self.store.user_by_id(user_id).await? else {
            return Ok(None);
        };
        let memberships: Vec<OrgMembership> = self
            .store
            .memberships(user_id)
            .await?
            .into_iter()
            .map(OrgMembership::from)
            .collect();
        // A sign-in keeps its org only while the user still belongs to it.
        let selected_org = org_id.and_then(|id| memberships.iter().find(|m| m.org_id == id).cloned());
        Ok(Some(CurrentUser { user_id: user.id, email: user.email, display_name: user.display_name, memberships, selected_org }))
    }

    /// Checks the password (attempts limited per client address and per
    /// address and email) and opens a sign-in in the person's home org.
    /// Returns the sign-in token and the user.
    pub async fn sign_in(&self, email: &str, password: &str, client: Option<IpAddr>) -> Result<(String, CurrentUser), AppError> {
        let email = normalize_email(email);
        // Without a peer address (never over TCP) all such attempts share one limit.
        let client = client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        // The attempt is counted before the password is checked: parallel
        // guesses cannot pass a check that is recorded only afterwards.
        if let Err(wait) = self.throttle.admit(client, &email).await {
            tracing::info!(%client, "sign-in attempts over the limit");
            return Err(AppError::TooManyAttempts(wait.as_secs().max(1)));
        }
        let user = self.store.user_by_email(&email).await.map_err(internal)?;
        let known_hash = user.as_ref().map(|u| u.password_hash.clone());
        // argon2 is deliberately slow (and 19 MiB a check): on its own threads.
        let verified = self
            .passwords
            .verify(password.to_string(), known_hash.unwrap_or_else(dummy_hash))
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
        let current = self.user(&user.id, org_id).await.map_err(internal)?.ok_or(AppError::Unauthenticated)?;
        tracing::info!(user = %current.user_id, "signed in");
        Ok((token, current))
    }

    /// Ends the sign-in, and closes its open sockets at once.
    pub async fn sign_out(&self, token: &str) -> Result<(), AppError> {
        let hash = token_hash(token);
        self.store.delete_web_session(&hash).await.map_err(internal)?;
        let closed = self.tabs.credential_ended(&hash);
        if closed > 0 {
            tracing::debug!(closed, "sign-out closed the sign-in's sockets");
        }
        Ok(())
    }

    /// Changes the signed-in person's password (the current one checked,
    /// attempts limited like sign-ins); every other sign-in of theirs ends,
    /// and with it their sockets.
    pub async fn change_password(&self, token: &str, current: &str, new: &str, client: Option<IpAddr>) -> Result<(), AppError> {
        let hash = token_hash(token);
        let session = self.store.web_session(&hash).await.map_err(internal)?.ok_or(AppError::Unauthenticated)?;
        let user = self.store.user_by_id(&session.user_id).await.map_err(internal)?.ok_or(AppError::Unauthenticated)?;
        let client = client.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        // Guessing the current password here is limited like signing in.
        if let Err(wait) = self.throttle.admit(client, &user.email).await {
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

    /// Switches the sign-in's org; the user must belong to it.
    pub async fn select_org(&self, token: &str, org_id: &str) -> Result<CurrentUser, AppError> {
        let hash = token_hash(token);
        let session = self.store.web_session(&hash).await.map_err(internal)?.ok_or(AppError::Unauthenticated)?;
        let user = self.user(&session.user_id, None).await.map_err(internal)?.ok_or(AppError::Unauthenticated)?;
        // Not a member: the org does not exist as far as this user can tell.
        if !user.memberships.iter().any(|m| m.org_id == org_id) {
            return Err(AppError::NotFound("Organisation".into()));
        }
        self.store.set_web_session_org(&hash, org_id).await.map_err(internal)?;
        self.tabs.sign_in_moved(&hash, org_id);
        self.user(&session.user_id, Some(org_id)).await.map_err(internal)?.ok_or(AppError::Unauthenticated)
    }

    /// The pass of a socket that `person` opens with the sign-in `token`,
    /// judged to hold `role` in `org_id`. The pass exists before the sign-in
    /// and role are read again, so a change committed after that read finds
    /// the pass and ends it, and one committed before is seen here.
    pub async fn socket_pass(&self, token: &str, person: &str, org_id: &str, role: Role) -> Result<TabPass, SocketRefused> {
        let hash = token_hash(token);
        let expires_at = match self.store.web_session(&hash).await {
            Ok(Some(session)) if session.expires_at > now_ms() => session.expires_at,
            Ok(_) => return Err(SocketRefused::Ended),
            Err(e) => {
                tracing::error!(error = %e, "sign-in lookup failed");
                return Err(SocketRefused::Unavailable);
            }
        };
        let left = Duration::from_millis((expires_at - now_ms()).max(0) as u64);
        let credential = Credential::SignIn { person: person.to_string(), sign_in: hash, org_id: org_id.to_string(), role };
        let pass = self.tabs.open(credential, Some(Instant::now() + left)).await.map_err(|_| {
            tracing::info!(user = %person, "socket refused: too many open tabs");
            SocketRefused::TooManyTabs
        })?;
        match self.role(token, org_id).await {
            Ok(Some(now)) if now == role => Ok(pass),
            Ok(_) => Err(SocketRefused::Ended),
            Err(e) => {
                tracing::error!(error = %e, "sign-in lookup failed");
                Err(SocketRefused::Unavailable)
            }
        }
    }

    /// The role the sign-in behind `token` holds in `org_id`, if it still holds.
    pub async fn role(&self, token: &str, org_id: &str) -> StoreResult<Option<Role>> {
        self.store.signed_in_role(&token_hash(token), org_id, now_ms()).await
    }
}
