//! The cockpit (`/cockpit/<id>`): the operator's view of the session they
//! hold, with seed 001's lifecycle controls (pause, resume, complete) and
//! the session's activity log.

use crate::components::{loaded, typing_in_field, window_keys, ActivityLog, ErrorNotice, RequireRole};
use crate::deferred::{Deferred, PanelBuilt};
use crate::board::{state_hint, state_token};
use crate::functions::{load_session, load_session_activity, EstopSession, ExtendSession, SteerSession};
use crate::lifecycle::{steer_controls, SteerControl};
use crate::models::{LifecycleState, Role, SafetyState, SessionRecord};
use crate::routes::chat_panel::ChatPanel;
use crate::routes::handover_panel::HandoverPanel;
use crate::routes::operator::PresencePill;
use crate::rules::utc_clock;
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

/// Where an accepted call lands: the session the operator now holds.
#[component]
pub fn CockpitPage() -> impl IntoView {
    view! {
        <Title text="Cockpit"/>
        <RequireRole role=Role::Operator>
            <Cockpit/>
        </RequireRole>
    }
}

#[component]
fn Cockpit() -> impl IntoView {
    let params = use_params_map();
    let session_id = move || params.read().get("id").unwrap_or_default();
    let steer = ServerAction::<SteerSession>::new();
    let estop = ServerAction::<EstopSession>::new();
    // Bumped by the deferred extension control after each extension.
    let extended = RwSignal::new(0_usize);
    let console = expect_context::<crate::console::Console>();
    // The data plane: robot state and camera in, actions out (the socket is
    // opened by the deferred panels).
    let relay = crate::console::relay::CockpitRelay::new();
    provide_context(relay);
    // Each completed move or stop reloads the record and the log, and so
    // does a change of the operator's presence (the session ended
    // elsewhere: an admin, the edge agent, the inactivity chain) and every
    // push about the session (telemetry, a stop, a clear, an extension).
    let presence_since = move || console.presence.get().map(|p| p.since_ms);
    let pushed = crate::live::use_push(crate::live::Watch::Mine, crate::live::POLL_MS);
    let version = move || {
        (session_id(), steer.version().get(), estop.version().get(), extended.get(), presence_since(), pushed.version.get())
    };
    let record = crate::page_data::load(version, |(id, ..)| load_session(id));
    let ended = Signal::derive(move || record.get().and_then(Result::ok).is_some_and(|s| s.lifecycle.is_terminal()));
    // The relay socket is open while the session is live, never after.
    Effect::new(move |_| {
        let live = record.get().and_then(Result::ok).is_some_and(|s| matches!(s.lifecycle, LifecycleState::Active | LifecycleState::Paused));
        relay.live.set(live);
    });
    // Kept here, not in the controls: a push re-renders them, and a first
    // press of Complete must survive that.
    let confirming = RwSignal::new(false);
    cockpit_keys(record, steer, estop, confirming);
    view! {
        <section class="panel">
            <div class="toolbar">
                <h1>"Cockpit · "<span data-testid="cockpit-session">{session_id}</span></h1>
                <PresencePill/>
                <a class="button subtle" href="/operator">"Ready screen"</a>
            </div>
            <Transition fallback=|| view! { <p class="loading">"Loading the session…"</p> }>
                {loaded(|| true, record, move |s| view! { <SessionFacts s=s.clone() now_ms=pushed.now_ms/><Controls s steer estop confirming/> })}
            </Transition>
            {move || steer.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
            {move || estop.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
        </section>
        // The robot's view, the extension, hand-over, chat and activity load
        // their code once the page is interactive (crate::deferred): the
        // controls and the E-stop come first. The relay's data cannot come
        // sooner anyway: its socket opens in the browser.
        <Deferred placeholder="Loading the robot's view, hand-over, chat and activity…"
            view=move || cockpit_panels(Signal::derive(version), Signal::derive(move || console.chat_version.get()), ended, pushed.now_ms, extended)/>
    }
}

/// What reloads the cockpit's record: the session, each completed move,
/// stop or extension, the operator's presence, a push about the session.
type Revision = (String, usize, usize, usize, Option<i64>, u64);

/// The cockpit's panels below the controls: the robot's view, the
/// extension, hand-over, chat, activity.
#[wasm_split(cockpit_panels, wasm_split_path = ::leptos::wasm_split, fallible)]
fn cockpit_panels(revision: Signal<Revision>, chat_version: Signal<u64>, ended: Signal<bool>, now_ms: RwSignal<i64>, extended: RwSignal<usize>) -> PanelBuilt {
    let session_id = move || revision.with(|r| r.0.clone());
    expect_context::<crate::console::relay::CockpitRelay>().keep_open(session_id());
    let extend = ServerAction::<ExtendSession>::new();
    Effect::new(move |_| {
        let done = extend.version().get();
        if done > 0 {
            extended.set(done);
        }
    });
    let activity = crate::page_data::load(move || revision.get(), |(id, ..)| load_session_activity(id));
    Ok(view! {
        <super::teleop_panel::TeleopPanel now_ms/>
        <section class="panel" aria-label="Extend" hidden=move || ended.get()>
            <ExtendControl session_id=session_id() extend ended/>
        </section>
        <section class="panel" aria-label="Hand over">
            <HandoverPanel session_id=session_id() ended/>
        </section>
        <ChatPanel session_id refresh=move || chat_version.get() read_only=ended/>
        <section class="panel" aria-labelledby="activity-h">
            <h2 id="activity-h">"Activity"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading the activity…"</p> }>
                {loaded(|| true, activity, |log| view! { <ActivityLog log/> })}
            </Transition>
        </section>
    }
    .into_any())
}

#[component]
fn SessionFacts(s: SessionRecord, now_ms: RwSignal<i64>) -> impl IntoView {
    use crate::board::{divergence_tone, rtt_tone, velocity_percent, velocity_tone};
    let started = s.started_at;
    let ended = s.ended_at;
    let elapsed = move || match started {
        Some(at) => crate::rules::format_age(Some(at), ended.unwrap_or(now_ms.get().max(at))),
        None => "—".into(),
    };
    view! {
        <dl class="facts" data-testid="cockpit">
            <dt>"Robot"</dt><dd>{s.robot.clone()}" · "{s.robot_model.clone()}</dd>
            <dt>"Site"</dt><dd>{s.site.clone()}" (" {s.pop.clone()} ")"</dd>
            <dt>"Lifecycle"</dt><dd data-testid="cockpit-lifecycle">{s.lifecycle.as_str()}</dd>
            <dt>"Safety state"</dt>
            <dd><span class=format!("pill {}", state_token(s.state)) data-testid="cockpit-safety">{s.state.as_str()}</span>" "{state_hint(s.state)}</dd>
            <dt>"Operator"</dt><dd>{s.operator_name.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>"Attached"</dt><dd>{s.started_at.map(utc_clock).unwrap_or_else(|| "—".into())}</dd>
            <dt>"Up"</dt><dd data-testid="cockpit-elapsed">{elapsed}</dd>
            <dt>"RTT"</dt><dd class=rtt_tone(s.rtt_ms).class()>{s.rtt_ms.map(|r| format!("{r} ms")).unwrap_or_else(|| "—".into())}</dd>
            <dt>"Divergence"</dt><dd class=divergence_tone(s.divergence_deg).class()>{s.divergence_deg.map_or("—".into(), crate::board::degrees)}</dd>
            <dt>"Velocity"</dt><dd class=velocity_tone(s.velocity_scale).class()>{s.velocity_scale.map_or("—".into(), velocity_percent)}</dd>
            <dt>"Planned end"</dt><dd data-testid="cockpit-planned-end">{s.planned_end_at.map(crate::booking::utc_when).unwrap_or_else(|| "—".into())}</dd>
            <dt>"Client"</dt><dd>{s.client_name.clone().unwrap_or_else(|| "—".into())}</dd>
        </dl>
    }
}

/// The cockpit's keys: E stops, the steer keys (P, C then C) move the
/// lifecycle, drive keys and any other key are operator input (rule L07).
/// One listener for the page, judged on the record as it is when the key
/// is pressed: the controls re-render on every push (a latched robot's
/// telemetry pushes several a second) and a listener of theirs could be
/// gone between a reload's start and its end, losing the key.
fn cockpit_keys(record: crate::page_data::Loaded<Result<SessionRecord, crate::error::AppError>>, steer: ServerAction<SteerSession>, estop: ServerAction<EstopSession>, confirming: RwSignal<bool>) {
    let console = expect_context::<crate::console::Console>();
    let relay = expect_context::<crate::console::relay::CockpitRelay>();
    // Made once: each call of `pending()` makes a memo of its own.
    let (estop_pending, steer_pending) = (estop.pending(), steer.pending());
    window_keys(move |ev| {
        if typing_in_field(&ev) || ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
            return;
        }
        let Some(s) = record.get_untracked().and_then(Result::ok) else { return };
        let key = ev.key().to_lowercase();
        let ended = s.lifecycle.is_terminal();
        let active = s.lifecycle == LifecycleState::Active;
        let operate_with = |action: [f32; crate::teleop::ACTION_DIM]| {
            if active {
                relay.send_action(&action);
                console.input_seen(&s.id);
            }
        };
        if key == "e" && !ended {
            ev.prevent_default();
            // One key, no confirmation: a stop must never wait for a second press.
            if s.state != SafetyState::ProtectiveStop && !estop_pending.get_untracked() {
                estop.dispatch(EstopSession { session_id: s.id.clone() });
            }
        } else if let Some(control) = steer_controls(s.lifecycle).into_iter().find(|c| c.key.to_string() == key) {
            ev.prevent_default();
            if control.to == LifecycleState::Completed && !confirming.get_untracked() {
                confirming.set(true);
            } else {
                confirming.set(false);
                if !steer_pending.get_untracked() {
                    steer.dispatch(SteerSession { session_id: s.id.clone(), to: control.to });
                }
            }
        } else if ev.key() == "Escape" {
            confirming.set(false);
        } else if let Some(action) = crate::teleop::key_action(&ev.key()) {
            ev.prevent_default();
            operate_with(action);
        } else {
            operate_with([0.0; crate::teleop::ACTION_DIM]);
        }
    });
}

/// Pause/Resume (key P) and Complete (key C, then C again to confirm):
/// only the moves seed 001 allows from the session's state are shown.
#[component]
fn Controls(s: SessionRecord, steer: ServerAction<SteerSession>, estop: ServerAction<EstopSession>, confirming: RwSignal<bool>) -> impl IntoView {
    let id = s.id.clone();
    let latched = s.state == SafetyState::ProtectiveStop;
    let stop_id = StoredValue::new(s.id.clone());
    // One key, no confirmation: a stop must never wait for a second press.
    let stop = move || {
        if !latched && !estop.pending().get_untracked() {
            stop_id.with_value(|id| estop.dispatch(EstopSession { session_id: id.clone() }));
        }
    };
    let controls = steer_controls(s.lifecycle);
    let ended = s.lifecycle.is_terminal();
    let pending = steer.pending();
    let send = StoredValue::new(move |to: LifecycleState| {
        if !pending.get_untracked() {
            steer.dispatch(SteerSession { session_id: id.clone(), to });
        }
    });
    let press = move |control: SteerControl| {
        if control.to == LifecycleState::Completed && !confirming.get_untracked() {
            confirming.set(true);
            return;
        }
        confirming.set(false);
        send.with_value(|send| send(control.to));
    };
    // Operator input (rule L07): drive keys anywhere in the cockpit, the
    // pointer in the control area and the gamepad, sent as actions on the
    // relay (which resets the inactivity chain); none while PAUSED (rule
    // L03), whose control area is disabled.
    let console = expect_context::<crate::console::Console>();
    let relay = expect_context::<crate::console::relay::CockpitRelay>();
    let active = s.lifecycle == LifecycleState::Active;
    let input_session = StoredValue::new(s.id.clone());
    let operate_with = move |action: [f32; crate::teleop::ACTION_DIM]| {
        if active {
            relay.send_action(&action);
            input_session.with_value(|id| console.input_seen(id));
        }
    };
    let operate = move || operate_with([0.0; crate::teleop::ACTION_DIM]);
    // A gamepad (Gamepad API) is read every 100 ms: buttons or a stick out
    // of its dead zone are input, like keys.
    #[cfg(feature = "hydrate")]
    if active {
        let poll = move || {
            if let Some(axes) = crate::console::gamepad_axes() {
                operate_with(crate::teleop::gamepad_action(&axes));
            }
        };
        let handle = set_interval_with_handle(poll, std::time::Duration::from_millis(100)).ok();
        on_cleanup(move || handle.into_iter().for_each(|h| h.clear()));
    }
    view! {
        <div class="controls" role="group" aria-label="Session controls">
            {(!ended).then(|| view! {
                <button type="button" class="button estop" data-testid="estop" disabled=latched on:click=move |_| stop()>
                    {if latched { "Stopped (latched)" } else { "E-stop (E)" }}
                </button>
            })}
            {controls.into_iter().map(|control| {
                let label = move || match (control.to, confirming.get()) {
                    (LifecycleState::Completed, true) => "Confirm complete (C)".to_string(),
                    _ => format!("{} ({})", control.label, control.key.to_ascii_uppercase()),
                };
                view! {
                    <button type="button" class="button" class:danger=control.to == LifecycleState::Completed
                        data-testid=format!("steer-{}", control.to.as_str().to_lowercase())
                        disabled=move || pending.get()
                        on:click=move |_| press(control)>
                        {label}
                    </button>
                }
            }).collect_view()}
            {ended.then(|| view! { <p class="muted">"This session has ended."</p> })}
        </div>
        {(latched && !ended).then(|| view! {
            <p class="notice-line" role="status">
                "PROTECTIVE_STOP is latched: it is cleared, with a reason, on the "
                <a href=format!("/ops/sessions?s={}", s.id) data-testid="detail-link">"session detail"</a>"."
            </p>
        })}
        {(!ended).then(|| view! {
            <div class="control-area" data-testid="control-area" tabindex="0" aria-disabled=(!active).to_string()
                aria-label="Control area: keys and pointer here drive the robot"
                on:pointerdown=move |_| operate() on:pointermove=move |_| operate()>
                {if active { "Control area: arrows / WASD, PageUp / PageDown, the pointer here or a gamepad drive the robot." } else { "Paused: control input is off until you resume." }}
            </div>
        })}
        <InactivityWarning session_id=s.id.clone()/>
    }
}

/// Rule L07: no input for the warning interval; the session will be
/// cancelled unless the operator acts.
#[component]
fn InactivityWarning(session_id: String) -> impl IntoView {
    let console = expect_context::<crate::console::Console>();
    move || {
        let (warned, stop_at) = console.inactivity.get()?;
        (warned == session_id).then(|| view! {
            <p class="notice-line" role="alert" data-testid="inactivity-warning">
                "No input for a while: this session will be cancelled in "
                {move || format!("{} s", crate::ring::seconds_left(stop_at, console.now_ms.get()))}
                " unless you act. Press a key or use the control area."
            </p>
        })
    }
}

/// Rule L13: extend the planned end (refused, with the reason, when the
/// robot is booked by someone else first); the two-minute notice.
#[component]
fn ExtendControl(session_id: String, extend: ServerAction<ExtendSession>, #[prop(into)] ended: Signal<bool>) -> impl IntoView {
    let console = expect_context::<crate::console::Console>();
    let id = StoredValue::new(session_id);
    let soon = move || {
        let (session, end) = console.planned_end_soon.get()?;
        (id.with_value(|id| *id == session) && !ended.get()).then(|| view! {
            <p class="notice-line" role="alert" data-testid="planned-end-soon">
                "The session ends at "{crate::booking::utc_when(end)}" unless you extend it."
            </p>
        })
    };
    let first = crate::booking::EXTENSION_CHOICES_MIN[0];
    window_keys(move |ev| {
        if typing_in_field(&ev) || ev.ctrl_key() || ev.meta_key() || ev.alt_key() || ended.get_untracked() {
            return;
        }
        if ev.key().eq_ignore_ascii_case("x") && !extend.pending().get_untracked() {
            ev.prevent_default();
            console.planned_end_soon.set(None);
            extend.dispatch(ExtendSession { session_id: id.get_value(), minutes: first });
        }
    });
    view! {
        <div class="extend" role="group" aria-label="Extend the session" hidden=move || ended.get()>
            <span class="muted">"Extend by"</span>
            {crate::booking::EXTENSION_CHOICES_MIN.into_iter().map(|minutes| view! {
                <button type="button" class="button subtle" data-testid=format!("extend-{minutes}")
                    disabled=move || extend.pending().get()
                    on:click=move |_| {
                        console.planned_end_soon.set(None);
                        extend.dispatch(ExtendSession { session_id: id.get_value(), minutes });
                    }>
                    {if minutes == first { format!("+{minutes} min (X)") } else { format!("+{minutes} min") }}
                </button>
            }).collect_view()}
        </div>
        {soon}
        {move || extend.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
    }
}
