//! The admin overview (`/admin`, seed 000): the four headline metrics,
//! sessions by state, the dispatch control, the queue, and the fleet and
//! operator lists. Live like the wallboard.

use crate::board::{matched_rtt_tone, state_counts, state_meaning, state_token, OpsBoard};
use crate::components::ErrorNotice;
use crate::chunk::ChunkUnavailable;
use crate::deferred::{Deferred, PanelBuilt};
use crate::live::{use_live_board, LiveBoard};
use crate::models::{PresenceState, RegistryStatus};
use crate::routes::waiting::{live_clock, CeilingNowView};
use crate::routes::wallboard::LiveStatus;
use crate::rules::{format_age, utc_clock};
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use leptos_meta::Title;
use serde_json::Value;

#[component]
pub fn Overview() -> impl IntoView {
    let live = use_live_board();
    let robots = Memo::new(move |_| {
        live.data.get().and_then(Result::ok).map(|b| b.robots.iter().map(|r| (r.id.clone(), format!("{} · {} · {}", r.id, r.site, r.skill))).collect::<Vec<_>>())
    });
    view! {
        <Title text="Overview"/>
        // The control needs the browser (it fetches), so it is built there
        // once the page is interactive (crate::deferred), outside the part
        // a push reloads: a push neither resets the chosen robot or the
        // last answer nor takes the keyboard focus away from it.
        <Deferred placeholder="Loading the dispatch control…" view=move || dispatch_panel(robots)/>
        <Transition fallback=|| view! { <p class="loading">"Loading the overview…"</p> }>
            {move || Suspend::new(async move {
                match live.data.await {
                    Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                    Ok(board) => {
                        let as_of = board.as_of_ms;
                        // One root element: a reload replaces it whole.
                        view! {
                            <div class="overview">
                            <div class="toolbar">
                                <h1>"Overview · "{board.org_name.clone()}</h1>
                                <LiveStatus live as_of/>
                            </div>
                            <DisabledWebhooks urls=board.disabled_webhooks.clone()/>
                            <Headlines board=board.clone()/>
                            <div class="overview-grid">
                                <SessionsByState board=board.clone()/>
                                <Queue board=board.clone() live/>
                            </div>
                            <FleetAndOperators board/>
                            </div>
                        }.into_any()
                    }
                }
            })}
        </Transition>
    }
}

/// Endpoints that stopped getting events: said until an admin acts.
#[component]
fn DisabledWebhooks(urls: Vec<String>) -> impl IntoView {
    (!urls.is_empty()).then(|| {
        view! {
            <p class="notice-line" role="alert" data-testid="webhooks-disabled">
                {format!("Webhook delivery stopped: {} failed for 24 h and {} disabled. ", urls.join(", "), if urls.len() == 1 { "was" } else { "were" })}
                <a href="/admin/integrations">"Open Integrations"</a>
            </p>
        }
    })
}

#[component]
fn Headlines(board: OpsBoard) -> impl IntoView {
    let h = board.headline();
    view! {
        <section class="headlines" aria-label="Headline metrics">
            <div class="metric" data-testid="metric-live"><span class="metric-value">{h.live_sessions}</span><span class="metric-label">"Live sessions"</span></div>
            <div class="metric" data-testid="metric-robots"><span class="metric-value">{h.robots_online}" / "{h.robots_total}</span><span class="metric-label">"Robots online"</span></div>
            <div class="metric" data-testid="metric-operators"><span class="metric-value">{h.operators_available}</span><span class="metric-label">"Operators available"</span></div>
            <div class="metric" data-testid="metric-estops"><span class="metric-value">{h.estops_24h}</span><span class="metric-label">"E-stops · 24h"</span></div>
        </section>
    }
}

/// Rule O05: a row per state, zeros shown, summing to Live sessions.
#[component]
fn SessionsByState(board: OpsBoard) -> impl IntoView {
    let counts = state_counts(&board.live);
    view! {
        <section class="panel" aria-labelledby="by-state-h">
            <h2 id="by-state-h">"Sessions by state"</h2>
            <table class="table" data-testid="by-state">
                <tbody>
                    {counts.into_iter().map(|(state, n)| view! {
                        <tr>
                            <td><span class=format!("pill {}", state_token(state))>{state.as_str()}</span></td>
                            <td class="muted">{state_meaning(state)}</td>
                            <td class="num" data-state=state.as_str()>{n}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// What `POST /v1/sessions` answered, for a person. (Only the browser
/// raises calls.)
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
enum Raised {
    Matched { operator: String, region: String, rtt_ms: u32, expires_at: String },
    Queued { skill: String, position: i64 },
    Refused(String),
}

#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
impl Raised {
    fn from_response(status: u16, body: &Value) -> Raised {
        match status {
            201 => Raised::Matched {
                operator: body["operator"]["name"].as_str().unwrap_or_default().to_string(),
                region: body["operator"]["region"].as_str().unwrap_or_default().to_string(),
                rtt_ms: body["rttMs"].as_u64().unwrap_or_default() as u32,
                expires_at: body["offer"]["expiresAt"].as_str().unwrap_or_default().to_string(),
            },
            202 => Raised::Queued {
                skill: body["skill"].as_str().unwrap_or_default().to_string(),
                position: body["position"].as_i64().unwrap_or_default(),
            },
            _ => Raised::Refused(body["error"]["message"].as_str().unwrap_or("The call could not be raised.").to_string()),
        }
    }
}

/// Rule A14: the same `POST /v1/sessions` the edge agent makes, from the
/// browser with the admin's session cookie. If the request's code cannot
/// be fetched, the control says so: the call was not raised.
async fn raise_call(robot_id: String) -> Raised {
    match raise_request(robot_id).await {
        Ok(request) => request.await,
        Err(ChunkUnavailable) => Raised::Refused("The call was not raised: this control's code could not be loaded. Check the connection and raise it again.".into()),
    }
}

/// The request and the answer's JSON reading: a chunk of their own,
/// fetched with the first call raised.
#[wasm_split(raise_call, wasm_split_path = ::leptos::wasm_split, fallible)]
fn raise_request(robot_id: String) -> Result<std::pin::Pin<Box<dyn std::future::Future<Output = Raised>>>, ChunkUnavailable> {
    Ok(Box::pin(async move {
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            use wasm_bindgen_futures::JsFuture;
            let body = serde_json::json!({ "robotId": robot_id }).to_string();
            let init = web_sys::RequestInit::new();
            init.set_method("POST");
            init.set_body(&wasm_bindgen::JsValue::from_str(&body));
            let headers = web_sys::Headers::new().expect("headers");
            let _ = headers.set("content-type", "application/json");
            init.set_headers(&headers);
            let Some(window) = web_sys::window() else { return Raised::Refused("No browser window.".into()) };
            let response = match JsFuture::from(window.fetch_with_str_and_init("/v1/sessions", &init)).await {
                Ok(r) => r.unchecked_into::<web_sys::Response>(),
                Err(_) => return Raised::Refused("Could not reach the server.".into()),
            };
            let text = match response.text() {
                Ok(p) => JsFuture::from(p).await.ok().and_then(|t| t.as_string()).unwrap_or_default(),
                Err(_) => String::new(),
            };
            Raised::from_response(response.status(), &crate::page_data::read_json(&text).unwrap_or(Value::Null))
        }
        #[cfg(not(feature = "hydrate"))]
        {
            let _ = robot_id;
            Raised::Refused("The page is still loading.".into())
        }
    }))
}

/// "Raise a distress call", built in the browser.
#[wasm_split(dispatch_control, wasm_split_path = ::leptos::wasm_split, fallible)]
fn dispatch_panel(robots: Memo<Option<Vec<(String, String)>>>) -> PanelBuilt {
    Ok(view! { <DispatchControl robots/> }.into_any())
}

#[component]
fn DispatchControl(robots: Memo<Option<Vec<(String, String)>>>) -> impl IntoView {
    let robot = RwSignal::new(String::new());
    let raise = Action::new_local(|robot_id: &String| raise_call(robot_id.clone()));
    Effect::new(move |_| {
        if robot.get_untracked().is_empty() {
            if let Some(first) = robots.get().and_then(|r| r.first().map(|(id, _)| id.clone())) {
                robot.set(first);
            }
        }
    });
    view! {
        <section class="panel" aria-labelledby="dispatch-h">
            <h2 id="dispatch-h">"Raise a distress call"</h2>
            <form class="dispatch" on:submit=move |ev| { ev.prevent_default(); raise.dispatch(robot.get_untracked()); }>
                <label for="dispatch-robot">"Robot"</label>
                <select id="dispatch-robot" data-testid="dispatch-robot" on:change=move |ev| robot.set(event_target_value(&ev))>
                    <For each=move || robots.get().unwrap_or_default() key=|(id, _)| id.clone() let:choice>
                        {
                            let (id, label) = choice;
                            let value = id.clone();
                            view! { <option value=value selected=move || robot.get() == id>{label}</option> }
                        }
                    </For>
                </select>
                <button type="submit" class="button" disabled=move || raise.pending().get()>
                    {move || if raise.pending().get() { "Raising…" } else { "Raise call" }}
                </button>
            </form>
            <div data-testid="dispatch-result" aria-live="polite">
                {move || raise.value().get().map(|outcome| match outcome {
                    Raised::Matched { operator, region, rtt_ms, expires_at } => view! {
                        <p class="result ok">"201 matched: "<strong>{operator}</strong>" ("{region}") · RTT "
                            <span class=matched_rtt_tone(rtt_ms).class() data-testid="matched-rtt">{rtt_ms}" ms"</span>
                            " · offer expires "{expires_at}</p>
                    }.into_any(),
                    Raised::Queued { skill, position } => view! {
                        <p class="result queued">"202 queued: no ready operator certified for "<strong>{skill}</strong>" · position "{position}</p>
                    }.into_any(),
                    Raised::Refused(message) => view! { <p class="error" role="alert">{message}</p> }.into_any(),
                })}
            </div>
        </section>
    }
}

/// Beyond the seed: queue depth per skill, the longest wait, and how fast
/// today's calls were answered. Rule A17: for a skill with an RTT ceiling,
/// the oldest waiting call's ceiling now and its next relaxation, ticking.
#[component]
fn Queue(board: OpsBoard, live: LiveBoard) -> impl IntoView {
    let now = live_clock(live, board.as_of_ms);
    let today = board.today.clone();
    let ceilings = board.ceilings;
    let has_ceilings = !ceilings.is_empty();
    view! {
        <section class="panel" aria-labelledby="queue-h">
            <h2 id="queue-h">"Queue"</h2>
            <dl class="facts" data-testid="answer-speed">
                <dt>"Answered today"</dt><dd>{today.answered}</dd>
                <dt>"Average time to answer"</dt><dd>{today.average_ms().map_or("—".to_string(), |ms| format!("{} s", crate::rules::fixed(ms as f64 / 1000.0, 1)))}</dd>
                <dt>"Answered within 20 s"</dt><dd>{today.within_20s_percent().map_or("—".to_string(), |p| format!("{p}%"))}</dd>
                {has_ceilings.then(|| view! {
                    <dt>"Answered under the first ceiling"</dt><dd data-testid="answered-first-ceiling">{today.answered_first_ceiling}</dd>
                    <dt>"Answered after it relaxed"</dt><dd data-testid="answered-after-relaxing">{today.answered_after_relaxing}</dd>
                })}
                <dt>"Withdrawn while waiting"</dt><dd>{today.withdrawn}</dd>
                <dt>"Abandoned (nobody took it)"</dt><dd data-testid="abandoned">{today.abandoned}</dd>
            </dl>
            {if board.queue.is_empty() {
                view! { <p class="empty">"No calls waiting."</p> }.into_any()
            } else {
                view! {
                    <table class="table" data-testid="queue">
                        <thead><tr><th>"Skill"</th><th class="num">"Waiting"</th><th class="num">"Longest"</th><th>"Ceiling"</th></tr></thead>
                        <tbody>
                            {board.queue.into_iter().map(|q| {
                                let ceiling = ceilings.iter().find(|c| c.skill == q.skill).cloned();
                                let oldest = q.oldest_raised_at_ms;
                                view! {
                                    <tr data-skill=q.skill.clone()>
                                        <td>{q.skill.clone()}</td>
                                        <td class="num">{q.waiting}</td>
                                        <td class="num">{move || format_age(Some(oldest), now())}</td>
                                        <td data-testid="queue-ceiling"><CeilingNowView ceiling raised_at_ms=oldest now/></td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
    }
}

#[component]
fn FleetAndOperators(board: OpsBoard) -> impl IntoView {
    let presence_of = |id: &str| board.presences.iter().find(|p| p.operator_id == id).map(|p| p.state).unwrap_or(PresenceState::Offline);
    let operators: Vec<_> = board.operators.iter().map(|o| (o.clone(), presence_of(&o.id))).collect();
    view! {
        <div class="overview-grid">
            <section class="panel" aria-labelledby="fleet-h">
                <h2 id="fleet-h">"Fleet"</h2>
                <table class="table" data-testid="fleet">
                    <thead><tr><th>"Robot"</th><th>"Site"</th><th>"PoP"</th><th>"Status"</th><th>"Last heartbeat"</th></tr></thead>
                    <tbody>
                        {board.robots.into_iter().map(|r| view! {
                            <tr>
                                <td>{r.id.clone()}</td><td>{r.site}</td><td>{r.pop}</td>
                                <td><span class=if r.status == RegistryStatus::Online { "pill tone-ok" } else { "pill tone-muted" }>{r.status.as_str()}</span></td>
                                <td>{r.last_heartbeat_ms.map_or("never".to_string(), utc_clock)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
            <section class="panel" aria-labelledby="ops-h">
                <h2 id="ops-h">"Operators"</h2>
                <table class="table" data-testid="operators">
                    <thead><tr><th>"Name"</th><th>"Presence"</th><th>"Region"</th><th>"Certifications"</th><th>"Rating"</th></tr></thead>
                    <tbody>
                        {operators.into_iter().map(|(o, state)| view! {
                            <tr>
                                <td>{o.display_name}</td>
                                <td><span class=format!("pill presence-{}", state.as_str())>{state.as_str()}</span></td>
                                <td>{o.region}</td>
                                <td>{o.certifications.join(", ")}</td>
                                <td data-testid="operator-rating">{crate::rating::OperatorScore::label(o.score)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn o06_the_dispatch_answer_reads_matched_queued_or_the_error() {
        let matched = serde_json::json!({"status":"matched","operator":{"name":"Tom Whitfield","region":"Manchester"},"rttMs":277,"offer":{"expiresAt":"2026-11-29T10:00:30Z"}});
        assert_eq!(
            Raised::from_response(201, &matched),
            Raised::Matched { operator: "Tom Whitfield".into(), region: "Manchester".into(), rtt_ms: 277, expires_at: "2026-11-29T10:00:30Z".into() }
        );
        let queued = serde_json::json!({"status":"queued","skill":"welding","position":2});
        assert_eq!(Raised::from_response(202, &queued), Raised::Queued { skill: "welding".into(), position: 2 });
        let refused = serde_json::json!({"error":{"code":"call_in_progress","message":"robot x already has a call in progress"}});
        assert_eq!(Raised::from_response(409, &refused), Raised::Refused("robot x already has a call in progress".into()));
    }
}
