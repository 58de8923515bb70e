//! The session detail's timeline: the lifecycle (seed 001) and the safety
//! state (seed 000) as two bars of spans, widths proportional to time, in
//! the states' colours, each span also listed with its times in text.

use crate::board::state_token;
use crate::models::LifecycleState;
use crate::rules::utc_clock;
use crate::timeline::{Span, StateHistory};
use leptos::prelude::*;

fn lifecycle_token(state: LifecycleState) -> &'static str {
    match state {
        LifecycleState::Pending => "life-pending",
        LifecycleState::Active => "life-active",
        LifecycleState::Paused => "life-paused",
        LifecycleState::Completed => "life-completed",
        LifecycleState::Cancelled => "life-cancelled",
    }
}

fn bar<S: Copy + 'static>(spans: Vec<Span<S>>, until_ms: i64, name: fn(S) -> &'static str, token: fn(S) -> &'static str, testid: &'static str) -> impl IntoView {
    let total = spans.first().map_or(1, |s| (until_ms - s.from_ms).max(1));
    let label = spans.iter().map(|s| name(s.state)).collect::<Vec<_>>().join(" → ");
    view! {
        <div class="timeline" role="img" data-testid=testid aria-label=label>
            {spans.iter().map(|s| {
                let length = (s.to_ms.unwrap_or(until_ms) - s.from_ms).max(0);
                // Terminal and instant states still show a sliver.
                let grow = (length * 1_000 / total).max(8);
                view! {
                    <span class=format!("seg {}", token(s.state)) style=format!("flex-grow: {grow}")
                        title=format!("{} {} → {}", name(s.state), utc_clock(s.from_ms), s.to_ms.map_or_else(|| "…".into(), utc_clock))>
                        {name(s.state)}
                    </span>
                }
            }).collect_view()}
        </div>
        <ol class="timeline-list visually-hidden">
            {spans.into_iter().map(|s| view! {
                <li>{name(s.state)}" from "{utc_clock(s.from_ms)}{s.to_ms.map(|t| format!(" to {}", utc_clock(t)))}</li>
            }).collect_view()}
        </ol>
    }
}

#[component]
pub fn StateTimeline(history: StateHistory) -> impl IntoView {
    let StateHistory { lifecycle, safety, until_ms } = history;
    view! {
        <h3 class="muted">"Lifecycle"</h3>
        {bar(lifecycle, until_ms, LifecycleState::as_str, lifecycle_token, "timeline-lifecycle")}
        <h3 class="muted">"Safety state"</h3>
        {bar(safety, until_ms, crate::models::SafetyState::as_str, state_token, "timeline-safety")}
    }
}
