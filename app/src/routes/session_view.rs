//! The session detail (`/ops/sessions?s=<id>`): every field of the record,
//! the activity log and the call's dispatch decisions, live with the org's
//! events; the one place a latched PROTECTIVE_STOP is cleared (rule W11).
//! Who held the session when (rule L08) is read from the activity log.
//! Open to the org's admins, the session's operator and its client (the
//! server functions decide; anyone else reads "not found"). Admins follow
//! the org's push channel, the others the pushes about their own sessions
//! (`/ws?watch=mine`); the dispatch decisions are the admins' alone, and
//! so is the live view of a held session (live_view.rs).

use crate::board::{divergence_tone, rtt_tone, state_hint, state_token, velocity_percent, velocity_tone};
use crate::components::{loaded, ActivityLog, ErrorNotice};
use crate::deferred::{Deferred, PanelBuilt};
use crate::functions::{load_dispatch_decisions, load_session, load_session_activity, load_state_history, ClearProtectiveStop};
use crate::routes::chat_panel::ChatPanel;
use crate::routes::session_dispatch::DispatchHistory;
use crate::routes::session_rating::RatingPanel;
use crate::routes::session_timeline::StateTimeline;
use crate::models::{Role, SafetyState};
use crate::live::use_live_board;
use crate::rules::{format_age, rfc3339};
use crate::forms::dispatch_on_submit;
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use leptos::server_fn::ServerFn;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;


#[component]
pub fn SessionView() -> impl IntoView {
    let query = use_query_map();
    let id = move || query.read().get("s").unwrap_or_default();
    // The guard around this screen has resolved who is asking.
    let me = expect_context::<crate::components::Session>().signed_in().cloned();
    let admin = me.as_ref().and_then(|u| u.role()) == Some(Role::Admin);
    let my_id = StoredValue::new(me.map(|u| u.user_id).unwrap_or_default());
    // Admins: reloaded with the board, which the org's events keep current.
    let live = admin.then(use_live_board);
    // The others: pushes about the sessions they are a party to.
    let mine = (!admin).then(|| crate::live::use_push(crate::live::Watch::Mine, crate::live::POLL_MS));
    let pulse = move || match (live, mine) {
        (Some(l), _) => l.data.get().and_then(Result::ok).map_or(0, |b| b.as_of_ms),
        (None, Some(m)) => m.version.get() as i64,
        (None, None) => 0,
    };
    let now_ms = move || live.map_or(0, |l| l.now_ms.get_untracked());
    // The live view's plot runs on the board's ticking clock.
    let clock = live.map_or_else(|| RwSignal::new(0), |l| l.now_ms);
    // Rule W11: the only place a latched PROTECTIVE_STOP is cleared.
    let clear = ServerAction::<ClearProtectiveStop>::new();
    let version = move || (id(), pulse(), clear.version().get());
    let record = crate::page_data::load(version, |(id, _, _)| load_session(id));
    view! {
        <Title text="Session"/>
        <section class="panel">
            <div class="toolbar">
                <h1>"Session · "<span data-testid="session-id">{id}</span></h1>
                {admin.then(|| view! { <a class="button subtle" href="/ops/wallboard">"Wallboard"</a> })}
            </div>
            {move || id().is_empty().then(|| view! { <p class="empty">"Choose a session on the wallboard."</p> })}
            <Transition fallback=|| view! { <p class="loading">"Loading the session…"</p> }>
                {move || Suspend::new(async move {
                    if id().is_empty() {
                        return ().into_any();
                    }
                    match record.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(s) => {
                            let now = s.ended_at.unwrap_or(now_ms().max(s.raised_at));
                            // The clear is the admins' and the operator in control's (rule W11).
                            let may_clear = admin || my_id.with_value(|me| s.operator_id.as_deref() == Some(me.as_str()));
                            view! {
                                <dl class="facts" data-testid="session-record">
                                    <dt>"State"</dt><dd><span class=format!("pill {}", state_token(s.state))>{s.state.as_str()}</span>" "{state_hint(s.state)}</dd>
                                    <dt>"Lifecycle"</dt><dd>{s.lifecycle.as_str()}</dd>
                                    <dt>"Robot"</dt><dd>{s.robot.clone()}" · "{s.robot_model.clone()}</dd>
                                    <dt>"Site"</dt><dd>{s.site.clone()}" ("{s.pop.clone()}")"</dd>
                                    <dt>"Skill"</dt><dd>{s.skill.clone()}</dd>
                                    <dt>"Operator"</dt><dd>{s.operator_name.clone().unwrap_or_else(|| "—".into())}" · "{s.region.clone().unwrap_or_else(|| "—".into())}</dd>
                                    <dt>"Raised"</dt><dd>{rfc3339(s.raised_at)}</dd>
                                    <dt>"Attached"</dt><dd>{s.started_at.map(rfc3339).unwrap_or_else(|| "—".into())}{s.started_at.map(|at| format!(" (up {})", format_age(Some(at), now)))}</dd>
                                    <dt>"Planned end"</dt><dd>{s.planned_end_at.map(crate::booking::utc_when).unwrap_or_else(|| "—".into())}</dd>
                                    <dt>"Ended"</dt><dd>{s.ended_at.map(rfc3339).unwrap_or_else(|| "—".into())}</dd>
                                    <dt>"Client"</dt><dd data-testid="session-client">{s.client_name.clone().unwrap_or_else(|| "— (the org's admins)".into())}</dd>
                                    <dt>"RTT"</dt><dd class=rtt_tone(s.rtt_ms).class()>{s.rtt_ms.map_or("—".into(), |r| format!("{r} ms"))}</dd>
                                    <dt>"Divergence"</dt><dd class=divergence_tone(s.divergence_deg).class()>{s.divergence_deg.map_or("—".into(), crate::board::degrees)}</dd>
                                    <dt>"Velocity"</dt><dd class=velocity_tone(s.velocity_scale).class()>{s.velocity_scale.map_or("—".into(), velocity_percent)}</dd>
                                </dl>
                                {(may_clear && s.state == SafetyState::ProtectiveStop && !s.lifecycle.is_terminal()).then(|| view! {
                                    <form method="post" action=ClearProtectiveStop::url() class="clear-stop" data-testid="clear-stop" on:submit=dispatch_on_submit(clear, |form| ClearProtectiveStop { session_id: form.text("session_id"), reason: form.text("reason") })>
                                        <input type="hidden" name="session_id" value=s.id.clone()/>
                                        <label for="clear-reason">"Why may the stop be cleared? (kept in the audit log)"</label>
                                        <textarea id="clear-reason" name="reason" required maxlength="500" rows="2" data-testid="clear-reason"></textarea>
                                        <button type="submit" class="button" data-testid="clear-submit">"Clear the stop"</button>
                                    </form>
                                })}
                            }.into_any()
                        }
                    }
                })}
            </Transition>
            {move || clear.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
        </section>
        // The panels below the record load their code once the page is
        // interactive (crate::deferred).
        <Deferred placeholder="Loading the rating, chat, timeline and activity…"
            view=move || session_panels(Signal::derive(id), Signal::derive(pulse), record, clear.version().into(), admin, clock)/>
    }
}

/// The detail's panels below the record: rating, chat, timeline, activity
/// and (admins) the dispatch decisions, reloaded with the record.
#[wasm_split(session_panels, wasm_split_path = ::leptos::wasm_split, fallible)]
fn session_panels(
    id: Signal<String>,
    pulse: Signal<i64>,
    record: crate::page_data::Loaded<Result<crate::models::SessionRecord, crate::error::AppError>>,
    cleared: Signal<usize>,
    admin: bool,
    clock: RwSignal<i64>,
) -> PanelBuilt {
    let session_id = move || id.get();
    let chosen = move || !id.get().is_empty();
    let version = move || (id.get(), pulse.get(), cleared.get());
    let activity = crate::page_data::load(version, |(id, _, _)| load_session_activity(id));
    let history = crate::page_data::load(version, |(id, _, _)| load_state_history(id));
    let decisions = crate::page_data::load(version, move |(id, _, _)| async move {
        if admin { load_dispatch_decisions(id).await } else { Ok(Vec::new()) }
    });
    Ok(view! {
        {admin.then(|| view! { <super::live_view::LiveView record now_ms=clock/> })}
        <RatingPanel session_id record/>
        <ChatPanel session_id
            refresh=move || pulse.get() as u64
            read_only=Signal::derive(move || record.get().and_then(Result::ok).is_some_and(|s| s.lifecycle.is_terminal()))/>
        <section class="panel" aria-labelledby="timeline-h">
            <h2 id="timeline-h">"Timeline"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading the timeline…"</p> }>
                {loaded(chosen, history, |history| view! { <StateTimeline history/> })}
            </Transition>
        </section>
        <section class="panel" aria-labelledby="activity-h">
            <h2 id="activity-h">"Activity"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading the activity…"</p> }>
                {loaded(chosen, activity, |log| view! { <ActivityLog log/> })}
            </Transition>
        </section>
        <section class="panel" aria-labelledby="dispatch-h" hidden=!admin>
            <h2 id="dispatch-h">"Dispatch"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading the dispatch decisions…"</p> }>
                {loaded(move || admin && chosen(), decisions, |decisions| view! { <DispatchHistory decisions/> })}
            </Transition>
        </section>
    }
    .into_any())
}
