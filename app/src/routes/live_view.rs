//! The supervisor's live view on the session detail (admins, issue
//! "Integrators and supervisors" part 2): the camera, the 5 s joint plot,
//! relay health and the operator's actions as they happen, through a
//! read-only join of the session's relay (`/relay/{id}/watch`). The cockpit
//! shows who is watching; the activity log records the join and the leave.
//! From here a certified admin takes control (no accept needed, with a
//! reason), and any admin may E-stop.

use crate::components::ErrorNotice;
use crate::console::relay::CockpitRelay;
use crate::forms::dispatch_on_submit;
use crate::functions::{EstopSession, TakeOverSession};
use crate::models::SessionRecord;
use super::teleop_panel::TeleopPanel;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;

type Record = crate::page_data::Loaded<Result<SessionRecord, crate::error::AppError>>;

#[component]
pub fn LiveView(record: Record, now_ms: RwSignal<i64>) -> impl IntoView {
    let watching = RwSignal::new(false);
    let take = ServerAction::<TakeOverSession>::new();
    let estop = ServerAction::<EstopSession>::new();
    // The held session's id and holder, as last loaded. A memo: the record
    // reloads with every push, and the view (its socket) must not be
    // rebuilt then; a failed reload keeps what was known.
    let held = Memo::new(move |before: Option<&Option<(String, String)>>| match record.get() {
        Some(Ok(s)) => s.operator_id.clone().filter(|_| !s.lifecycle.is_terminal()).map(|holder| (s.id.clone(), holder)),
        _ => before.cloned().flatten(),
    });
    let held_id = Memo::new(move |_| held.with(|h| h.as_ref().map(|(id, _)| id.clone())));
    let live = move || held.with(Option::is_some);
    // Another session (`?s=` changed): not watched until asked again.
    Effect::new(move |before: Option<Option<String>>| {
        let id = held_id.get();
        if before.is_some_and(|b| b != id) {
            watching.set(false);
            take.clear();
            estop.clear();
        }
        id
    });
    let me = expect_context::<crate::components::Session>().signed_in().map(|u| u.user_id.clone()).unwrap_or_default();
    let mine = Signal::derive(move || held.with(|h| h.as_ref().is_some_and(|(_, holder)| *holder == me)));
    view! {
        <section class="panel" aria-labelledby="live-view-h" data-testid="live-view">
            <div class="toolbar">
                <h2 id="live-view-h">"Live view"</h2>
                {move || live().then(|| view! {
                    <button type="button" class="button" data-testid="watch-toggle"
                        on:click=move |_| watching.update(|on| *on = !*on)>
                        {move || if watching.get() { "Stop watching" } else { "Watch live" }}
                    </button>
                })}
            </div>
            {move || match record.get() {
                None => Some(view! { <p class="loading">"Loading the session…"</p> }.into_any()),
                Some(_) if !live() => Some(view! { <p class="empty">"The live view opens while an operator holds the session (ACTIVE or PAUSED)."</p> }.into_any()),
                Some(_) => None,
            }}
            {move || watching.get().then(|| held_id.get()).flatten().map(|session_id| view! { <Watching session_id now_ms take estop mine/> })}
            {move || take.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            {move || estop.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
        </section>
    }
}

/// The read-only relay socket, open while this is shown.
#[component]
fn Watching(session_id: String, now_ms: RwSignal<i64>, take: ServerAction<TakeOverSession>, estop: ServerAction<EstopSession>, mine: Signal<bool>) -> impl IntoView {
    let relay = CockpitRelay::new();
    provide_context(relay);
    relay.live.set(true);
    relay.keep_watching(session_id.clone());
    let estop_id = StoredValue::new(session_id.clone());
    view! {
        <TeleopPanel now_ms/>
        <p class="muted" data-testid="operator-action">
            {move || match relay.last_action.get() {
                Some(values) => format!("Operator's last action: {}", values.iter().map(|v| crate::rules::fixed(f64::from(*v), 2)).collect::<Vec<_>>().join(" · ")),
                None => "No operator action yet.".to_string(),
            }}
        </p>
        <div class="live-controls">
            <form method="post" action=TakeOverSession::url() class="booking-form" data-testid="take-over"
                on:submit=dispatch_on_submit(take, |form| TakeOverSession { session_id: form.text("session_id"), reason: form.text("reason") })>
                <input type="hidden" name="session_id" value=session_id/>
                <label for="take-reason">"Why take control? (kept in the activity log)"</label>
                <textarea id="take-reason" name="reason" required maxlength="500" rows="2"></textarea>
                <button type="submit" class="button primary" disabled=move || take.pending().get() || mine.get()>
                    {move || if take.pending().get() { "Taking control…" } else if mine.get() { "You hold the session" } else { "Take control" }}
                </button>
            </form>
            <button type="button" class="button danger" data-testid="live-estop" disabled=move || estop.pending().get()
                on:click=move |_| { estop.dispatch(EstopSession { session_id: estop_id.get_value() }); }>
                "E-stop"
            </button>
        </div>
        {move || take.value().get().and_then(Result::ok).map(|_| view! {
            <p class="notice-line" role="status">"You hold the session now: "<a href=format!("/cockpit/{}", estop_id.get_value())>"open the cockpit"</a></p>
        })}
        {move || estop.value().get().and_then(Result::ok).map(|_| view! {
            <p class="notice-line" role="status" data-testid="live-estop-done">"E-stop sent: the session is latched in PROTECTIVE_STOP until cleared above."</p>
        })}
    }
}
