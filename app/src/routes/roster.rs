//! Sessions (Live): the presence roster (`/ops/roster`, seed 003). One row
//! per operator of the org, re-fetched every 8 s and on every presence push;
//! filters work in the browser and live in the URL. Read-only.

use crate::components::loaded;
use crate::live::{use_live, Live};
use crate::models::PresenceState;
use crate::roster::{badge, counters, label, matching_rows, search_text, secondary_line, Roster, RosterRow, EMPTY_ROSTER, PAGE_ROWS, ROSTER_POLL_MS};
use crate::rules::{format_age, utc_clock};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;
use std::sync::Arc;

#[component]
pub fn Roster() -> impl IntoView {
    let live = use_live(crate::functions::load_roster, ROSTER_POLL_MS);
    let query = use_query_map();
    let url_filters = Memo::new(move |_| {
        let query = query.read();
        (query.get("state").and_then(|s| PresenceState::parse(&s)), query.get("q").unwrap_or_default())
    });
    // The filters act at once on local signals; the URL (shareable, survives
    // a reload) follows a moment later, so a keystroke never waits for the
    // router.
    let (initial_state, initial_search) = url_filters.get_untracked();
    let state = RwSignal::new(initial_state);
    let search = RwSignal::new(initial_search);
    let shown = RwSignal::new(PAGE_ROWS);
    let navigate = StoredValue::new(use_navigate());
    let written = StoredValue::new(url_filters.get_untracked());
    let pending_url = StoredValue::new(None::<TimeoutHandle>);
    // Back, forward or a pasted link: the URL leads again.
    Effect::watch(
        move || url_filters.get(),
        move |filters, _, _| {
            if *filters != written.get_value() {
                written.set_value(filters.clone());
                state.set(filters.0);
                search.set(filters.1.clone());
            }
        },
        false,
    );
    let set_filters = move |new_state: Option<PresenceState>, q: String| {
        state.set(new_state);
        search.set(q.clone());
        shown.set(PAGE_ROWS);
        written.set_value((new_state, q.clone()));
        let mut parts = Vec::new();
        if let Some(s) = new_state {
            parts.push(format!("state={}", s.as_str()));
        }
        if !q.is_empty() {
            parts.push(format!("q={}", crate::rules::url_encode(&q)));
        }
        let url = if parts.is_empty() { "/ops/roster".to_string() } else { format!("/ops/roster?{}", parts.join("&")) };
        if let Some(handle) = pending_url.get_value() {
            handle.clear();
        }
        let write = move || navigate.with_value(|n| n(&url, NavigateOptions { replace: true, scroll: false, ..Default::default() }));
        pending_url.set_value(set_timeout_with_handle(write, URL_DELAY).ok());
    };
    view! {
        <Title text="Sessions (Live)"/>
        <div class="toolbar">
            <h1>"Sessions (Live)"</h1>
            <label class="visually-hidden" for="roster-state">"State"</label>
            <select id="roster-state" data-testid="roster-state" on:change=move |ev| set_filters(PresenceState::parse(&event_target_value(&ev)), search.get_untracked())>
                <option value="" selected=move || state.get().is_none()>"All states"</option>
                {PresenceState::ALL.into_iter().map(|s| view! { <option value=s.as_str() selected=move || state.get() == Some(s)>{s.as_str()}</option> }).collect_view()}
            </select>
            <label class="visually-hidden" for="roster-search">"Search"</label>
            <input id="roster-search" data-testid="roster-search" type="search" placeholder="Search name, email, external id"
                prop:value=move || search.get()
                on:input=move |ev| set_filters(state.get_untracked(), event_target_value(&ev))/>
        </div>
        <Transition fallback=|| view! { <p class="loading">"Loading the roster…"</p> }>
            {loaded(|| true, live.data, move |roster| view! { <RosterRows roster live state search shown/> })}
        </Transition>
    }
}

/// How long the URL lags the filters (one write per burst of typing).
const URL_DELAY: std::time::Duration = std::time::Duration::from_millis(300);

#[component]
fn RosterRows(roster: Roster, live: Live<Roster>, state: RwSignal<Option<PresenceState>>, search: RwSignal<String>, shown: RwSignal<usize>) -> impl IntoView {
    let Roster { rows, as_of_ms } = roster;
    // Rule R10: the header counts the whole roster, whatever the filters.
    let c = counters(&rows);
    // Plain shared data, not StoredValues: a push may run these rows'
    // effects once more after a reload has replaced (and disposed) them.
    let texts: Arc<[String]> = rows.iter().map(search_text).collect();
    let rows: Arc<[RosterRow]> = rows.into();
    let all = rows.clone();
    let filtered = Memo::new(move |_| {
        let (state, q) = (state.get(), search.get());
        matching_rows(&all, &texts, state, &q)
    });
    // The browser's clock once running (ages tick locally); the server's
    // moment when rendered there.
    let now = move || match live.now_ms.get() {
        0 => as_of_ms,
        n => n,
    };
    let empty = rows.is_empty();
    // One root element: a reload replaces it whole.
    view! {
        <div class="roster-view">
        <p class="roster-counters" data-testid="roster-counters">
            <span data-testid="roster-counts">{c.online}" online · "{c.ready}" ready · "{c.on_call}" on call · "{c.aux}" aux"</span>
            <span class="muted">" · updated "{utc_clock(as_of_ms)}</span>
            {move || if live.connected.get() { " · live" } else { " · polling every 8 s" }}
        </p>
        {if empty {
            view! { <p class="empty" data-testid="roster-empty">{EMPTY_ROSTER}</p> }.into_any()
        } else {
            view! {
                // Rows of one load never change, so a row's position keys it.
                <ul class="roster" data-testid="roster">
                    <For each=move || filtered.with(|f| f.iter().take(shown.get()).copied().collect::<Vec<_>>()) key=|i| *i let:i>
                        <RosterLine row=rows[i].clone() now/>
                    </For>
                </ul>
                {move || {
                    let total = filtered.with(Vec::len);
                    if total == 0 {
                        view! { <p class="empty">"No operator matches these filters."</p> }.into_any()
                    } else if total > shown.get() {
                        view! {
                            <p class="muted">{shown.get()}" of "{total}" shown "
                                <button type="button" class="button subtle" on:click=move |_| shown.update(|n| *n += PAGE_ROWS)>"Show more"</button>
                            </p>
                        }.into_any()
                    } else {
                        ().into_any()
                    }
                }}
            }.into_any()
        }}
        </div>
    }
}

#[component]
fn RosterLine(row: RosterRow, now: impl Fn() -> i64 + Send + Sync + Copy + 'static) -> impl IntoView {
    let b = badge(row.state);
    let since = row.state_since_ms;
    let class = format!("tag tone-{}{}", b.tone, if b.live { " live" } else { "" });
    view! {
        <li class="roster-row" data-testid="roster-row" data-agent=row.agent_id.clone() data-state=row.state.as_str()>
            <div class="roster-who">
                <strong>{label(&row).to_string()}</strong>
                <span class="muted">{secondary_line(&row)}</span>
            </div>
            {row.score.map(|s| view! { <span class="muted score" title="Clients' rating">{crate::rating::OperatorScore::label(Some(s))}</span> })}
            <span class=class>{row.state.as_str()}</span>
            <span class="age" data-testid="roster-age">{move || format_age(since, now())}</span>
        </li>
    }
}
