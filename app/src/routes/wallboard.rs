//! The operations wallboard (`/ops/wallboard`, seed 000): one card per live
//! session, alarms first, with the header's org-wide counters, the relay
//! panel, the safety-events feed and link health. Read-only.

use crate::board::{
    divergence_tone, is_alarm, link_rows, registry_chip, rtt_tone, state_counts, state_hint, state_token, velocity_percent,
    velocity_tone, BoardFilter, OpsBoard, CHIP_STATES,
};
use crate::components::ErrorNotice;
use crate::deferred::{Deferred, PanelBuilt};
use crate::live::{use_live_board, LiveBoard};
use crate::models::{SafetyState, SessionRecord};
use crate::relay::{overflow_note, relay_health, RelayHealth, RelayStat};
use crate::routes::waiting::{live_clock, CeilingNowView};
use crate::rules::{fixed, format_age, utc_clock};
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use leptos_meta::Title;
use leptos_router::hooks::{use_navigate, use_query_map};
use std::sync::Arc;

/// The wallboard's filters, read from the URL.
fn filter_from_query() -> Memo<BoardFilter> {
    let query = use_query_map();
    Memo::new(move |_| {
        let q = query.read();
        let get = |k: &str| q.get(k).filter(|v| !v.is_empty());
        BoardFilter { site: get("site"), pop: get("pop"), state: get("state").and_then(|s| SafetyState::parse(&s)) }
    })
}

#[component]
pub fn Wallboard() -> impl IntoView {
    let live = use_live_board();
    let filter = filter_from_query();
    view! {
        <Title text="Wallboard"/>
        <div class="wallboard">
            <Transition fallback=|| view! { <p class="loading">"Loading the wallboard…"</p> }>
                {move || Suspend::new(async move {
                    match live.data.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(board) => view! { <Board board live filter/> }.into_any(),
                    }
                })}
            </Transition>
            // The panels below the cards load their code once the page is
            // interactive (crate::deferred): the wallboard was over the wasm
            // budget with them hydrated with the rest (BENCHMARKS.md, the
            // wasm's ninth pass). Outside the board, which a reload replaces
            // whole: a reload updates them in place rather than building
            // them anew (a scrolled safety feed stays where it is).
            <Deferred placeholder="Loading the relay, safety events and link health…" view=move || board_panels(live)/>
        </div>
    }
}

#[component]
fn Board(board: OpsBoard, live: LiveBoard, filter: Memo<BoardFilter>) -> impl IntoView {
    // Plain shared data, not a StoredValue: a push may run this board's
    // effects once more after a reload has replaced (and disposed) it, and a
    // disposed StoredValue panics where an Arc is still there to read.
    let board = Arc::new(board);
    let cards = Arc::new(board.cards());
    let counts = state_counts(&board.live);
    let attached = cards.len();
    let as_of = board.as_of_ms;
    let now = live_clock(live, as_of);
    let shown = move || cards.iter().filter(|s| filter.get().matches(s)).cloned().collect::<Vec<_>>();
    let statuses = board.clone();
    // One root element: a reload replaces it whole.
    view! {
        <div class="board">
        <header class="board-head">
            <h1>"Wallboard"</h1>
            <span class="attached" data-testid="attached">{attached}" attached"</span>
            <ul class="chips" aria-label="Sessions by state">
                {CHIP_STATES.iter().rev().map(|&state| {
                    let n = counts.iter().find(|(s, _)| *s == state).map_or(0, |(_, n)| *n);
                    view! {
                        <li class=format!("chip {}", state_token(state)) data-testid=format!("chip-{}", state.as_str())>
                            <span class="chip-state">{state.as_str()}</span>" "<span class="chip-count">{n}</span>
                        </li>
                    }
                }).collect_view()}
            </ul>
            <LiveStatus live as_of/>
        </header>
        <Waiting board=board.clone() now/>
        <Filters board=board.clone() filter/>
        <section class="cards" aria-label="Live sessions" data-testid="cards">
            {move || {
                let shown = shown();
                if shown.is_empty() {
                    let message = if attached == 0 { "No live sessions." } else { "No live session matches these filters." };
                    view! { <p class="empty">{message}</p> }.into_any()
                } else {
                    shown.into_iter().map(|s| {
                        let status = statuses.robot_status(&s.robot);
                        view! { <Card session=s chip=registry_chip(status) now/> }
                    }).collect_view().into_any()
                }
            }}
        </section>
        </div>
    }
}

/// The calls waiting, per skill (beyond the seed): how many, the longest
/// wait and, rule A17, the oldest call's RTT ceiling now and its next
/// relaxation, ticking.
#[component]
fn Waiting(board: Arc<OpsBoard>, now: impl Fn() -> i64 + Send + Sync + Copy + 'static) -> impl IntoView {
    let tiles: Vec<_> = board.queue.iter().map(|q| (q.clone(), board.ceilings.iter().find(|c| c.skill == q.skill).cloned())).collect();
    view! {
        <section class="waiting-strip" aria-labelledby="waiting-h" data-testid="wallboard-queue">
            <h2 id="waiting-h">"Waiting"</h2>
            {if tiles.is_empty() {
                view! { <p class="empty">"No calls waiting"</p> }.into_any()
            } else {
                view! {
                    <ul class="waiting-tiles">
                        {tiles.into_iter().map(|(q, ceiling)| {
                            let oldest = q.oldest_raised_at_ms;
                            let has_ceiling = ceiling.is_some();
                            view! {
                                <li class="waiting-tile" data-skill=q.skill.clone()>
                                    <span class="waiting-skill">{q.skill.clone()}</span>
                                    <span class="waiting-count"><strong>{q.waiting}</strong>" waiting"</span>
                                    <span class="waiting-age">"longest "<span data-testid="waiting-longest">{move || format_age(Some(oldest), now())}</span></span>
                                    {has_ceiling.then(|| view! {
                                        <span class="waiting-ceiling" data-testid="wallboard-ceiling">"ceiling "<CeilingNowView ceiling raised_at_ms=oldest now/></span>
                                    })}
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </section>
    }
}

/// The panels below the cards: the relay (W15), the safety events (W13)
/// and link health (W16), of the board as last loaded (a board that failed
/// to load says so above them).
#[wasm_split(board_panels, wasm_split_path = ::leptos::wasm_split, fallible)]
fn board_panels(live: LiveBoard) -> PanelBuilt {
    // Read as it stands, not awaited: a reload keeps the last board until
    // the next one lands, and a board still loading (after a link from
    // another screen) shows the panels once it has.
    let panels = move || {
        live.data.get().and_then(Result::ok).map(|board| {
            let board = Arc::new(board);
            let now = live_clock(live, board.as_of_ms);
            view! {
                <div class="board-panels">
                    <RelayPanel board=board.clone() live now/>
                    <SafetyFeed board=board.clone()/>
                    <LinkHealth board/>
                </div>
            }
        })
    };
    Ok(panels.into_any())
}

/// When the data was last updated, and whether push is connected.
#[component]
pub fn LiveStatus(live: LiveBoard, as_of: i64) -> impl IntoView {
    view! {
        <p class="live-status" data-testid="live-status">
            {move || if live.connected.get() {
                view! { <span class="pill tone-ok">"live"</span> }.into_any()
            } else {
                view! { <span class="pill tone-muted" title="Reloading every 15 s until the push channel is back">"polling"</span> }.into_any()
            }}
            " updated "{utc_clock(as_of)}
        </p>
    }
}

#[component]
fn Filters(board: Arc<OpsBoard>, filter: Memo<BoardFilter>) -> impl IntoView {
    let navigate = use_navigate();
    let options = |pick: fn(&SessionRecord) -> String| {
        let mut values: Vec<String> = board.live.iter().map(pick).collect();
        values.sort();
        values.dedup();
        values
    };
    let (sites, pops) = (options(|s| s.site.clone()), options(|s| s.pop.clone()));
    let set = move |apply: Box<dyn Fn(&mut BoardFilter)>| {
        let mut next = filter.get_untracked();
        apply(&mut next);
        navigate(&format!("/ops/wallboard{}", next.to_query()), Default::default());
    };
    let set = StoredValue::new(set);
    let none = |v: String| (!v.is_empty()).then_some(v);
    view! {
        <form class="filters" aria-label="Filters" on:submit=|ev| ev.prevent_default()>
            <label>"Site "
                <select data-testid="filter-site" on:change=move |ev| { let v = none(event_target_value(&ev)); set.with_value(|set| set(Box::new(move |f| f.site = v.clone()))) }>
                    <option value="" selected=move || filter.get().site.is_none()>"All"</option>
                    {sites.into_iter().map(|v| { let sel = v.clone(); view! { <option value=v.clone() selected=move || filter.get().site.as_deref() == Some(sel.as_str())>{v.clone()}</option> } }).collect_view()}
                </select>
            </label>
            <label>"PoP "
                <select data-testid="filter-pop" on:change=move |ev| { let v = none(event_target_value(&ev)); set.with_value(|set| set(Box::new(move |f| f.pop = v.clone()))) }>
                    <option value="" selected=move || filter.get().pop.is_none()>"All"</option>
                    {pops.into_iter().map(|v| { let sel = v.clone(); view! { <option value=v.clone() selected=move || filter.get().pop.as_deref() == Some(sel.as_str())>{v.clone()}</option> } }).collect_view()}
                </select>
            </label>
            <label>"State "
                <select data-testid="filter-state" on:change=move |ev| { let v = SafetyState::parse(&event_target_value(&ev)); set.with_value(|set| set(Box::new(move |f| f.state = v))) }>
                    <option value="" selected=move || filter.get().state.is_none()>"All"</option>
                    {SafetyState::ALL.into_iter().map(|s| view! { <option value=s.as_str() selected=move || filter.get().state == Some(s)>{s.as_str()}</option> }).collect_view()}
                </select>
            </label>
        </form>
    }
}

/// One live session (rule W01): every field of the record.
#[component]
fn Card(session: SessionRecord, chip: Option<String>, now: impl Fn() -> i64 + Send + Sync + Copy + 'static) -> impl IntoView {
    let state = session.state;
    let alarm = is_alarm(state);
    let class = format!("card {}{}{}", state_token(state), if alarm { " alarm" } else { "" }, if chip.is_some() { " stale" } else { "" });
    let started = session.started_at;
    let rtt = session.rtt_ms.map_or("—".to_string(), |ms| format!("{ms} ms"));
    let divergence = session.divergence_deg.map_or("—".to_string(), crate::board::degrees);
    let velocity = session.velocity_scale.map_or("—".to_string(), velocity_percent);
    view! {
        <article class=class data-testid="card" data-state=state.as_str() data-session=session.id.clone()>
            <header>
                <a class="card-id" href=format!("/ops/sessions?s={}", session.id)>{session.id.clone()}</a>
                <span class=format!("pill {}", state_token(state))>{state.as_str()}</span>
            </header>
            <p class="card-robot"><strong>{session.robot.clone()}</strong>" · "{session.site.clone()}</p>
            <p class="card-operator">{session.operator_name.clone().unwrap_or_else(|| "—".into())}" · "{session.region.clone().unwrap_or_else(|| "—".into())}
                " · up "{move || format_age(started, now())}</p>
            {chip.map(|c| view! { <p class="chip tone-warning" data-testid="registry-chip" title="The session record may be stale: do not read these numbers as live">{c}</p> })}
            <dl class="card-numbers">
                <div><dt>"RTT"</dt><dd class=rtt_tone(session.rtt_ms).class()>{rtt}</dd></div>
                <div><dt>"Divergence"</dt><dd class=divergence_tone(session.divergence_deg).class()>{divergence}</dd></div>
                <div><dt>"Velocity"</dt><dd class=velocity_tone(session.velocity_scale).class()>{velocity}</dd></div>
            </dl>
            <p class=if alarm { format!("hint {}", state_token(state)) } else { "hint muted".to_string() }>{state_hint(state)}</p>
        </article>
    }
}

/// Rule W15: the relay panel of the `robot` namespace. One row per
/// attached session: whether frames flow or stalled (no robot frame for
/// 2 s), frames per second each way, and how long since the last frame —
/// what tells a held session that stopped delivering from a healthy one.
#[component]
fn RelayPanel(board: Arc<OpsBoard>, live: LiveBoard, now: impl Fn() -> i64 + Send + Sync + Copy + 'static) -> impl IntoView {
    let rows = move || {
        let heard = live.relay.get();
        let stats = heard.shown(&board.relay);
        let mut rows: Vec<(app_session::Row, Option<RelayStat>)> = board
            .live
            .iter()
            .filter(|s| s.operator_id.is_some())
            .map(|s| (app_session::Row { id: s.id.clone(), robot: s.robot.clone(), since: s.started_at.unwrap_or(s.raised_at) }, stats.iter().find(|r| r.session_id == s.id).cloned()))
            .collect();
        rows.sort_by(|a, b| a.0.robot.cmp(&b.0.robot));
        rows
    };
    view! {
        <section class="panel relay-panel" aria-labelledby="relay-h">
            <h2 id="relay-h">"Relay · robot namespace"</h2>
            {move || {
                let rows = rows();
                if rows.is_empty() {
                    return view! { <p class="empty" data-testid="relay-empty">"No attached session: nothing to relay."</p> }.into_any();
                }
                let now = now();
                view! {
                    <table class="grid relay" data-testid="relay">
                        <thead><tr><th>"Robot"</th><th>"Frames"</th><th>"Robot → cockpit"</th><th>"Cockpit → robot"</th><th>"Last frame"</th></tr></thead>
                        <tbody>
                            {rows.into_iter().map(|(row, stat)| {
                                let health = relay_health(stat.as_ref(), row.since, now);
                                let tone = match health {
                                    RelayHealth::Flowing => "tag tone-ok",
                                    RelayHealth::Stalled => "tag tone-alarm",
                                    RelayHealth::Starting => "tag tone-muted",
                                };
                                let (up, down) = stat.as_ref().map_or(("—".to_string(), "—".to_string()), |s| {
                                    (
                                        format!("{} fps · {} kB/s", fixed(f64::from(s.robot_frames.fps), 0), fixed(s.robot_frames.bytes_per_s as f64 / 1000.0, 1)),
                                        format!("{} fps", fixed(f64::from(s.operator_frames.fps), 0)),
                                    )
                                });
                                let last = stat.as_ref().and_then(|s| s.robot_frames.last_frame_ms).map_or("never".to_string(), |at| format!("{} ago", format_age(Some(at), now)));
                                // The relay's limits: frames over the rate cap, samples past the
                                // recording cap. A tag only when something was held back.
                                let held = stat.as_ref().and_then(overflow_note);
                                // Admins watching the live view (read-only joins).
                                let watching = stat.as_ref().map_or(0, |s| s.supervisors);
                                view! {
                                    <tr data-testid=format!("relay-{}", row.robot)>
                                        <td><a href=format!("/ops/sessions?s={}", row.id)>{row.robot.clone()}</a></td>
                                        <td>
                                            <span class=tone data-testid="relay-health">{health.label()}</span>
                                            {held.map(|note| view! { " "<span class="tag tone-warn" title=note.clone() aria-label=note data-testid="relay-held">"held back"</span> })}
                                            {(watching > 0).then(|| view! { " "<span class="tag tone-muted" data-testid="relay-watching">{format!("{watching} watching")}</span> })}
                                        </td>
                                        <td>{up}</td>
                                        <td>{down}</td>
                                        <td>{last}</td>
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

mod app_session {
    /// An attached session as the relay panel lists it.
    pub struct Row {
        pub id: String,
        pub robot: String,
        pub since: i64,
    }
}

/// Rule W13: the org's audit records, newest first.
#[component]
fn SafetyFeed(board: Arc<OpsBoard>) -> impl IntoView {
    let audit = board.audit.clone();
    view! {
        <section class="panel" aria-labelledby="safety-h">
            <h2 id="safety-h">"Safety events"</h2>
            {if audit.is_empty() {
                view! { <p class="empty">"No safety events in the last 24 h."</p> }.into_any()
            } else {
                view! {
                    <ol class="feed" data-testid="safety-feed">
                        {audit.into_iter().take(30).map(|a| view! {
                            <li>
                                <time>{utc_clock(a.at_ms)}</time>" "
                                <strong>{a.action.label()}</strong>" "
                                {a.robot_id.clone().unwrap_or_default()}" "
                                <span class="muted">{a.detail.clone().unwrap_or_default()}</span>
                            </li>
                        }).collect_view()}
                    </ol>
                }.into_any()
            }}
        </section>
    }
}

/// Rule W16.
#[component]
fn LinkHealth(board: Arc<OpsBoard>) -> impl IntoView {
    let rows = link_rows(&board.floors, &board.live);
    view! {
        <section class="panel" aria-labelledby="links-h">
            <h2 id="links-h">"Link health"</h2>
            <table class="table" data-testid="link-health">
                <thead><tr><th>"Path"</th><th class="num">"Floor"</th><th>"Note"</th><th class="num">"Live"</th></tr></thead>
                <tbody>
                    {rows.into_iter().map(|r| view! {
                        <tr class:muted=r.riding == 0>
                            <td>{r.path}</td>
                            <td class="num">{r.floor_ms}" ms"</td>
                            <td>{r.note.unwrap_or_else(|| "—".into())}</td>
                            <td class="num">{r.riding}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}
