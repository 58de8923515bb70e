//! The session detail's dispatch history: every decision the ACD took for
//! the call (what prompted it, where it put the call) and who it considered,
//! with their RTT and verdict.

use crate::dispatch::DispatchDecision;
use crate::rules::utc_clock;
use leptos::prelude::*;

#[component]
pub fn DispatchHistory(decisions: Vec<DispatchDecision>) -> impl IntoView {
    if decisions.is_empty() {
        return view! { <p class="empty">"No dispatch decision recorded for this call."</p> }.into_any();
    }
    view! {
        <ol class="dispatch-history" data-testid="dispatch-history">
            {decisions.into_iter().map(|d| {
                let omitted = d.considered.omitted.iter().map(|(verdict, n)| format!("{n} {}", verdict.replace('_', " "))).collect::<Vec<_>>().join(", ");
                // The chosen operator by name where the record lists them.
                let chosen = d.operator_id.clone().map(|id| {
                    d.considered.candidates.iter().find(|c| c.operator_id == id).map_or(id, |c| c.name.clone())
                });
                view! {
                    <li data-outcome=d.outcome.as_str()>
                        <p>
                            <span class="age">{utc_clock(d.at_ms)}</span>" "
                            <strong>{d.trigger.as_str().replace('_', " ")}</strong>" → "{d.outcome.as_str()}
                            {chosen.map(|op| format!(" · {op}"))}
                            {d.rtt_ms.map(|r| format!(" · {r} ms"))}
                            <span class="muted">" · pool: "{d.pool_source.as_str().replace('_', " ")}</span>
                        </p>
                        <table class="table">
                            <thead><tr><th scope="col">"Operator"</th><th scope="col">"RTT"</th><th scope="col">"Verdict"</th></tr></thead>
                            <tbody>
                                {d.considered.candidates.into_iter().map(|c| view! {
                                    <tr>
                                        <td>{c.name.clone()}</td>
                                        <td>{c.rtt_ms.map_or("—".to_string(), |r| format!("{r} ms"))}</td>
                                        <td>{c.verdict.as_str().replace('_', " ")}{c.state.map(|s| format!(" ({})", s.as_str()))}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                        {(!omitted.is_empty()).then(|| view! { <p class="muted">"Not listed: "{omitted}</p> })}
                    </li>
                }
            }).collect_view()}
        </ol>
    }
    .into_any()
}
