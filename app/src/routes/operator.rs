use crate::components::{ErrorNotice, RequireRole};
use crate::deferred::{Deferred, PanelBuilt};
use crate::console::{Console, Link};
use crate::functions::my_operator_profile;
use crate::models::{PresenceState, Role};
use crate::ring::{valid_aux_reason, ConsoleMsg, COMMON_AUX_REASONS};
use crate::rules::{format_age, utc_clock};
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use leptos_meta::Title;

/// The operator's Ready screen: say when you can take calls, step away
/// with a reason, and answer the calls that ring.
#[component]
pub fn OperatorHome() -> impl IntoView {
    view! {
        <Title text="Ready"/>
        <RequireRole role=Role::Operator>
            <ReadyScreen/>
            // Below the controls: its code loads once the page is
            // interactive (crate::deferred).
            <Deferred placeholder="Loading your profile…" view=operator_profile/>
        </RequireRole>
    }
}

/// The presence pill: state in words (never colour alone), the aux reason
/// or call, and how long.
#[component]
pub fn PresencePill() -> impl IntoView {
    let console = expect_context::<Console>();
    move || match console.presence.get() {
        None => view! { <span class="tag tone-muted" data-testid="presence">"offline"</span> }.into_any(),
        Some(p) => {
            let live = matches!(p.state, PresenceState::Ringing | PresenceState::OnCall);
            let tone = match p.state {
                PresenceState::Ready => "tone-ok",
                PresenceState::Ringing | PresenceState::OnCall | PresenceState::Acw => "tone-warn",
                PresenceState::Aux | PresenceState::Offline => "tone-muted",
            };
            let detail = match p.state {
                PresenceState::Aux => p.aux_reason.clone().map(|r| format!(" · {r}")),
                PresenceState::Ringing | PresenceState::OnCall => p.current_call.clone().map(|c| format!(" · call {c}")),
                _ => None,
            };
            let since = p.since_ms;
            view! {
                <span class=format!("tag {tone}") class:live=live data-testid="presence">
                    {p.state.as_str()}{detail}
                </span>
                <span class="age" title="in this state for">{move || format_age(Some(since), console.now_ms.get())}</span>
            }
            .into_any()
        }
    }
}

#[component]
fn ReadyScreen() -> impl IntoView {
    let console = expect_context::<Console>();
    let reason = RwSignal::new(COMMON_AUX_REASONS[0].to_string());
    let other = RwSignal::new(String::new());
    let aux_error = RwSignal::new(None::<String>);
    let state = move || console.presence.get().map(|p| p.state);
    let connected = move || console.link.get() == Link::Open;
    let can_ready = move || connected() && matches!(state(), Some(PresenceState::Aux | PresenceState::Acw | PresenceState::Offline));
    let can_aux = move || connected() && matches!(state(), Some(PresenceState::Ready | PresenceState::Acw | PresenceState::Ringing));

    let go_ready = move |_| {
        console.unlock_alerts();
        console.notice.set(None);
        console.send(ConsoleMsg::Ready);
    };
    let go_aux = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let chosen = if reason.get_untracked() == "other" { other.get_untracked() } else { reason.get_untracked() };
        match valid_aux_reason(&chosen) {
            Some(reason) => {
                aux_error.set(None);
                console.send(ConsoleMsg::Aux { reason });
            }
            None => aux_error.set(Some("Give a short reason (up to 64 characters).".into())),
        }
    };

    view! {
        <section class="panel ready-screen">
            <div class="toolbar">
                <h1>"Ready screen"</h1>
                <PresencePill/>
            </div>
            <p class="as-of" data-testid="link-line">
                {move || match console.link.get() {
                    Link::Open => match console.last_update_ms.get() {
                        Some(at) => format!("Connected · last update {}", utc_clock(at)),
                        None => "Connected".to_string(),
                    },
                    Link::Connecting => "Connecting to the ring channel…".to_string(),
                    Link::Retrying { .. } => "Connection lost: reconnecting… (calls cannot reach you until it is back)".to_string(),
                    Link::Refused(why) => why,
                    Link::Unloaded => "The console could not be loaded: trying again… (calls cannot reach you until it is)".to_string(),
                }}
            </p>
            {move || console.notice.get().map(|n| view! { <p class="notice-line" role="status" data-testid="notice">{n}</p> })}
            <div class="ready-actions">
                <button type="button" class="button primary big" data-testid="go-ready" disabled=move || !can_ready() on:click=go_ready>
                    "Ready"
                </button>
                <form class="aux-form" on:submit=go_aux>
                    <label for="aux-reason">"Step away"</label>
                    <select id="aux-reason" on:change=move |ev| reason.set(event_target_value(&ev)) prop:value=reason>
                        {COMMON_AUX_REASONS.iter().map(|r| view! { <option value=*r>{*r}</option> }).collect_view()}
                        <option value="other">"other…"</option>
                    </select>
                    {move || (reason.get() == "other").then(|| view! {
                        <input type="text" aria-label="Reason" placeholder="Reason" maxlength="64"
                            prop:value=other on:input=move |ev| other.set(event_target_value(&ev))/>
                    })}
                    <button type="submit" class="button" disabled=move || !can_aux()>"Go aux"</button>
                </form>
                <crate::components::SignOutForm/>
            </div>
            {move || aux_error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
            <p class="shortcuts">"While a call rings: "<kbd>"Enter"</kbd>" accept · "<kbd>"Esc"</kbd>" decline. Pressing Ready also allows the ring sound and notifications."</p>
        </section>
    }
}

/// Who the ACD sees: name, region, certifications and the skills they match.
#[wasm_split(operator_profile, wasm_split_path = ::leptos::wasm_split, fallible)]
fn operator_profile() -> PanelBuilt {
    let profile = crate::page_data::load(|| (), |_| my_operator_profile());
    Ok(view! {
        <section class="panel">
            <h2>"Your profile"</h2>
            <Suspense fallback=|| view! { <p class="loading">"Loading your profile…"</p> }>
                {move || Suspend::new(async move {
                    match profile.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(op) => view! {
                            <dl class="facts" data-testid="operator-profile">
                                <dt>"Name"</dt><dd>{op.display_name.clone()}</dd>
                                <dt>"Region"</dt><dd>{op.region.clone()}</dd>
                                <dt>"Certifications"</dt>
                                <dd>
                                    {if op.certifications.is_empty() {
                                        view! { <span class="muted">"None yet: no distress call can be routed to you."</span> }.into_any()
                                    } else {
                                        view! { <ul class="chips">{op.certifications.iter().map(|c| view! { <li class="chip">{c.clone()}</li> }).collect_view()}</ul> }.into_any()
                                    }}
                                </dd>
                                <dt>"Skills matched"</dt><dd>{op.skills.join(", ")}</dd>
                            </dl>
                        }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
    .into_any())
}
