//! Pieces shared by several screens: the top bar and the role guard (the
//! signed-in user they read is `page_user::Session`).

use crate::error::AppError;
use crate::functions::{SelectOrg, SignOut};
use crate::models::{CurrentUser, Role};
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_location;

pub use crate::page_user::Session;
use crate::page_user::SIGNED_IN_DATA_ID;

/// The signed-in user, written into the page's head for the browser to read
/// at start-up (see [`Session`]). Rendered on the server only: the head is
/// not hydrated.
#[component]
pub fn SignedInData() -> impl IntoView {
    #[cfg(feature = "ssr")]
    let json = Session::of_this_page().script_json();
    #[cfg(not(feature = "ssr"))]
    let json = String::new();
    view! { <script id=SIGNED_IN_DATA_ID type="application/json" inner_html=json></script> }
}

/// Brand, navigation for the selected org's role, org switcher, sign out.
///
/// Plain HTML, rendered by the server in the page's shell, outside the app
/// the browser hydrates (`#app`): its links, org switch and sign-out work
/// without the wasm (the router still takes its links' clicks), and no page
/// carries its code (issue "wallboard", Budget). It changes only with a
/// whole page load, as the signed-in user does (see [`Session`]). The
/// operator console's link state, which is live, is the app's
/// ([`ConsoleStatus`]).
#[component]
pub fn TopBar() -> impl IntoView {
    let session = Session::of_this_page();
    view! {
        <header class="topbar">
            <a class="brand" href="/">"ClutchCall"</a>
            {session.signed_in().cloned().map(|user| view! { <SignedInBar user/> })}
        </header>
    }
}

#[component]
fn SignedInBar(user: CurrentUser) -> impl IntoView {
    let role = user.role();
    let selected = user.selected_org.as_ref().map(|o| o.org_id.clone()).unwrap_or_default();
    let orgs = user.memberships.clone();
    let several_orgs = orgs.len() > 1;
    view! {
        <nav class="nav" aria-label="Main">
            {(role == Some(Role::Admin)).then(|| view! {
                <a href="/admin">"Overview"</a>
                <a href="/ops/wallboard">"Wallboard"</a>
                <a href="/ops/roster">"Sessions (Live)"</a>
                <a href="/admin/directory">"Directory"</a>
                <a href="/admin/people">"People"</a>
                <a href="/admin/integrations">"Integrations"</a>
            })}
            {role.is_some_and(|r| r.grants(Role::Operator)).then(|| view! { <a href="/operator">"Ready"</a> })}
            {role.is_some_and(|r| r.grants(Role::Client)).then(|| view! { <a href="/client">"Bookings"</a> })}
            {role.is_some_and(|r| r.grants(Role::Client)).then(|| view! { <a href="/datasets">"Datasets"</a> })}
        </nav>
        <div class="account">
            // Plain forms that post to the server functions, which redirect
            // (see `Session`).
            {several_orgs.then(|| {
                view! {
                    <form class="org-switch" method="post" action=SelectOrg::url()>
                        <label class="visually-hidden" for="org-switch">"Organisation"</label>
                        <select id="org-switch" name="org_id">
                            {orgs.into_iter().map(|o| {
                                let is_selected = o.org_id == selected;
                                view! { <option value=o.org_id.clone() selected=is_selected>{o.org_name.clone()}" · "{o.role.as_str()}</option> }
                            }).collect_view()}
                        </select>
                        <button type="submit" class="button subtle">"Switch"</button>
                    </form>
                }
            })}
            {(!several_orgs).then(|| user.selected_org.as_ref().map(|o| view! {
                <span class="org-name">{o.org_name.clone()}" · "{o.role.as_str()}</span>
            }))}
            <a class="who" href="/account" title=format!("{} · change your password", user.email)>{user.display_name.clone()}</a>
            <SignOutForm/>
        </div>
    }
}

/// The operator console's socket and its state, for anyone who may operate
/// in the selected org (under the top bar, which is not hydrated).
#[component]
pub fn ConsoleStatus() -> impl IntoView {
    let operates = expect_context::<Session>().signed_in().and_then(CurrentUser::role).is_some_and(|r| r.grants(Role::Operator));
    operates.then(|| view! { <div class="console-status"><crate::console::ConsoleLink/></div> })
}

/// "Sign out": a plain form posting to the server function, which ends the
/// sign-in and redirects to `/signin` (see `Session`).
#[component]
pub fn SignOutForm() -> impl IntoView {
    view! {
        <form method="post" action=SignOut::url()>
            <button type="submit" class="button subtle">"Sign out"</button>
        </form>
    }
}

/// A secret shown once (a token, a key, a link): what it is, the value,
/// and a copy button. Only hints of it are kept after this.
#[component]
pub fn ShownOnce(intro: String, value: String, testid: &'static str) -> impl IntoView {
    let copied = value.clone();
    view! {
        <p class="notice-line" role="status">
            {intro}
            <code data-testid=testid>{value}</code>" "
            <button type="button" class="button subtle" on:click=move |_| copy_to_clipboard(&copied)>"Copy"</button>
        </p>
    }
}

/// Puts `text` on the clipboard (a shown-once token or link); nothing
/// before hydration.
pub fn copy_to_clipboard(text: &str) {
    #[cfg(feature = "hydrate")]
    if let Some(window) = leptos::web_sys::window() {
        let _ = window.navigator().clipboard().write_text(text);
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = text;
}

/// Listens to the window's key presses for as long as the calling view
/// lives: the listener is the window's, so it must go with the view (a
/// re-render builds a new one), or it would act on the old controls.
pub fn window_keys(handler: impl Fn(leptos::web_sys::KeyboardEvent) + 'static) {
    let keys = window_event_listener(leptos::ev::keydown, handler);
    #[cfg(feature = "hydrate")]
    {
        let keys = StoredValue::new_local(Some(keys));
        on_cleanup(move || keys.update_value(|keys| keys.take().into_iter().for_each(|k| k.remove())));
    }
    #[cfg(not(feature = "hydrate"))]
    drop(keys);
}

/// Whether a key went to a text field (then it is typing, not a shortcut).
pub fn typing_in_field(ev: &leptos::web_sys::KeyboardEvent) -> bool {
    use leptos::wasm_bindgen::JsCast;
    ev.target()
        .and_then(|t| t.dyn_into::<leptos::web_sys::HtmlElement>().ok())
        .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"))
}

/// Renders `children` only for a signed-in user whose role in the selected
/// org grants `role`. The server functions check again: this guard is for
/// the person, not for security.
#[component]
pub fn RequireRole(role: Role, children: ChildrenFn) -> impl IntoView {
    guarded(Some(role), children)
}

/// As [`RequireRole`] for anyone with a role in the selected org: screens
/// whose data decides who may see it (the session detail: its operator,
/// its client, the org's admins).
#[component]
pub fn RequireMember(children: ChildrenFn) -> impl IntoView {
    guarded(None, children)
}

fn guarded(role: Option<Role>, children: ChildrenFn) -> impl IntoView {
    // Inside a boundary for the screen's own loads that are read outside a
    // `Transition` of their own (built within it: the children expression is
    // evaluated there). A Transition, not a Suspense: one such read (the
    // dispatch control's robot list) would otherwise drop the whole screen
    // to the fallback on every push, taking the keyboard focus with it.
    view! { <Transition fallback=|| ()>{screen_for(role, &children)}</Transition> }
}

/// The screen if the signed-in user's role grants `role` (any role when
/// `None`); else why not: a 403, or off to choose an org or to sign in.
fn screen_for(role: Option<Role>, children: &ChildrenFn) -> AnyView {
    match expect_context::<Session>().user() {
        Ok(Some(user)) => match user.role() {
            Some(held) if role.is_none_or(|r| held.grants(r)) => children().into_any(),
            Some(_) => view! { <Forbidden role=role.unwrap_or(Role::Admin)/> }.into_any(),
            None => view! { <Redirect path="/orgs"/> }.into_any(),
        },
        Ok(None) => {
            let here = use_location().pathname.get_untracked();
            view! { <Redirect path=format!("/signin?next={here}")/> }.into_any()
        }
        Err(e) => view! { <ErrorNotice error=e.clone()/> }.into_any(),
    }
}

#[component]
fn Forbidden(role: Role) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::FORBIDDEN);
    }
    let message = match role {
        Role::Admin => "This screen is for admins of the organisation.",
        Role::Operator => "This screen is for operators.",
        Role::Client => "This screen is for clients of the organisation.",
    };
    view! {
        <section class="notice" role="alert">
            <h1>"Not allowed"</h1>
            <p>{message}</p>
            <a class="button" href="/">"Go to my start screen"</a>
        </section>
    }
}

/// A failed load, said plainly.
#[component]
pub fn ErrorNotice(error: AppError) -> impl IntoView {
    #[cfg(feature = "hydrate")]
    leptos::logging::error!("load failed: {error:?}");
    view! { <p class="error" role="alert">{error.to_string()}</p> }
}

/// What a `Transition` shows of a loaded value: the failure said plainly,
/// else `render`'s view; nothing (and no waiting) while `shown` is false.
pub fn loaded<T, V>(
    shown: impl Fn() -> bool + Send + Sync + Copy + 'static,
    resource: crate::page_data::Loaded<Result<T, AppError>>,
    render: impl Fn(T) -> V + Send + Sync + Copy + 'static,
) -> impl Fn() -> Suspend<AnyView> + Send + Sync + Copy + 'static
where
    T: Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static,
    V: IntoView + 'static,
{
    move || {
        Suspend::new(async move {
            if !shown() {
                return ().into_any();
            }
            match resource.await {
                Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                Ok(value) => render(value).into_any(),
            }
        })
    }
}

/// Loads one session's data only once a session is chosen (a non-empty
/// id): with none (the client screen without `?s=`, whose session panels
/// are built in the browser and stay hidden), nothing is asked of the
/// server.
pub async fn for_chosen_session<T, F>(session_id: String, load: impl FnOnce(String) -> F) -> Result<T, AppError>
where
    F: std::future::Future<Output = Result<T, AppError>>,
{
    if session_id.is_empty() {
        return Err(AppError::NotFound("No session is chosen.".into()));
    }
    load(session_id).await
}

/// A session's activity log (rule L05), oldest first.
#[component]
pub fn ActivityLog(log: crate::lifecycle::SessionActivity) -> impl IntoView {
    let crate::lifecycle::SessionActivity { entries, billable_ms, as_of_ms } = log;
    if entries.is_empty() {
        return view! { <p class="empty">"Nothing has happened in this session yet."</p> }.into_any();
    }
    // Rule L08: who held the session when, read from the log itself.
    let spans = crate::handover::control_spans(&entries);
    view! {
        <p class="muted" data-testid="billable">
            "Billable time "{crate::rules::format_duration(billable_ms)}" (paused time excluded) as of "{crate::rules::utc_clock(as_of_ms)}
        </p>
        {(!spans.is_empty()).then(|| view! {
            <p class="muted" data-testid="control-spans">
                "In control: "
                {spans.into_iter().map(|s| {
                    let until = s.to_ms.map_or_else(|| "now".to_string(), crate::rules::utc_clock);
                    let who = s.operator_name.unwrap_or(s.operator_id);
                    format!("{who} ({} → {until})", crate::rules::utc_clock(s.from_ms))
                }).collect::<Vec<_>>().join(" · ")}
            </p>
        })}
        <ol class="activity" data-testid="activity">
            {entries.into_iter().map(|e| view! {
                <li data-kind=e.kind.as_str()>
                    <span class="age">{crate::rules::utc_clock(e.at_ms)}</span>" "
                    <strong>{e.kind.as_str()}</strong>
                    {e.operator_name.or(e.operator_id).map(|who| format!(" · {who}"))}
                    {e.detail.map(|d| format!(" · {d}"))}
                </li>
            }).collect_view()}
        </ol>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    #[cfg(feature = "ssr")]
    #[test]
    fn the_signed_in_user_written_into_the_page_cannot_end_its_script() {
        let name = "</script><script>alert(1)</script><!--";
        let user = CurrentUser { user_id: "u-1".into(), email: "a@b.example".into(), display_name: name.into(), memberships: vec![], selected_org: None };
        let json = Session::new(Ok(Some(user.clone()))).script_json();
        assert!(!json.contains('<'), "{json}");
        let back: Result<Option<CurrentUser>, AppError> = crate::page_data::read_json(&json).unwrap();
        assert_eq!(back, Ok(Some(user)), "and reads back the same");
    }

    #[test]
    fn with_no_session_chosen_nothing_is_asked_of_the_server() {
        let asked = std::cell::Cell::new(false);
        let load = |_: String| {
            asked.set(true);
            std::future::ready(Ok::<_, AppError>(()))
        };
        let poll = std::pin::pin!(for_chosen_session(String::new(), load)).poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(poll, Poll::Ready(Err(AppError::NotFound(_)))));
        assert!(!asked.get(), "no session chosen, yet the loader ran");

        let poll = std::pin::pin!(for_chosen_session("s-1".into(), load)).poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(poll, Poll::Ready(Ok(()))));
        assert!(asked.get());
    }
}
