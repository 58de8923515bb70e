//! Who a page is for: the signed-in user, resolved once per page load.

use crate::error::AppError;
use crate::models::CurrentUser;
use leptos::prelude::*;

/// Who is signed in, known before anything renders. Provided once by `App`.
///
/// The server resolves it from the request's cookie before it renders a
/// page (`server::http::page_user` puts it in the request's extensions),
/// and writes it into the page (`SignedInData`); the browser reads it back
/// from there at start-up. So no screen waits on it, and redirects and 403s
/// are real HTTP statuses. (It was a blocking resource, whose fetching code
/// every page's shell carried: issue "wallboard", Budget.)
///
/// It changes only with a whole page load: signing in, switching org and
/// signing out are plain form posts, which the server answers with a
/// redirect. So every screen's data and the console's socket (scoped to the
/// org it connected in) start over instead of racing the change.
#[derive(Clone, Debug)]
pub struct Session {
    user: std::sync::Arc<Result<Option<CurrentUser>, AppError>>,
}

/// Where the page carries the signed-in user to the browser.
pub const SIGNED_IN_DATA_ID: &str = "signed-in-user";

impl Session {
    pub fn new(user: Result<Option<CurrentUser>, AppError>) -> Self {
        Session { user: std::sync::Arc::new(user) }
    }

    /// This page's: on the server the request's (nobody, when rendered
    /// outside a request, as for the route list); in the browser the one
    /// the server wrote into the page.
    pub fn of_this_page() -> Self {
        #[cfg(feature = "ssr")]
        let found = use_context::<http::request::Parts>().and_then(|parts| parts.extensions.get::<Session>().cloned());
        #[cfg(feature = "hydrate")]
        let found = document()
            .get_element_by_id(SIGNED_IN_DATA_ID)
            .and_then(|data| data.text_content())
            .map(|text| Session::new(crate::page_data::read_json(&text).unwrap_or_else(|e| Err(AppError::Internal(format!("the page's sign-in data: {e}"))))));
        #[cfg(not(any(feature = "ssr", feature = "hydrate")))]
        let found = None;
        found.unwrap_or_else(|| Session::new(Ok(None)))
    }

    pub fn user(&self) -> &Result<Option<CurrentUser>, AppError> {
        &self.user
    }

    /// The signed-in user, if the sign-in was read.
    pub fn signed_in(&self) -> Option<&CurrentUser> {
        self.user.as_ref().as_ref().ok().and_then(Option::as_ref)
    }

    /// The user as JSON that is safe inside a `<script>`: no `<`, so no
    /// `</script>` in a display name can end the element early.
    #[cfg(feature = "ssr")]
    pub fn script_json(&self) -> String {
        serde_json::to_string(&*self.user).unwrap_or_else(|_| "null".into()).replace('<', "\\u003c")
    }
}
