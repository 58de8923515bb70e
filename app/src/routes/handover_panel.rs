//! The cockpit's handover (rule L08): the operator in control picks a
//! ready, certified operator (best first, ranked as the ACD ranks a call)
//! and offers them the session; control moves when they accept. Key H
//! opens the list. Actions, not resources: the list is asked for only when
//! opened, and nothing of it is rendered on the server.

use crate::components::{typing_in_field, window_keys, ErrorNotice};
use crate::functions::{HandOverSession, LoadHandoverCandidates};
use crate::handover::HandoverOutcome;
use leptos::prelude::*;

#[component]
pub fn HandoverPanel(session_id: String, #[prop(into)] ended: Signal<bool>) -> impl IntoView {
    let console = expect_context::<crate::console::Console>();
    let open = RwSignal::new(false);
    let list = ServerAction::<LoadHandoverCandidates>::new();
    let offer = ServerAction::<HandOverSession>::new();
    let id = StoredValue::new(session_id);
    let toggle = move || {
        let opening = !open.get_untracked();
        open.set(opening);
        if opening {
            id.with_value(|id| list.dispatch(LoadHandoverCandidates { session_id: id.clone() }));
        }
    };
    window_keys(move |ev| {
        if typing_in_field(&ev) || ev.ctrl_key() || ev.meta_key() || ev.alt_key() || ended.get_untracked() {
            return;
        }
        if ev.key().eq_ignore_ascii_case("h") {
            ev.prevent_default();
            toggle();
        }
    });
    // Control moved: this operator no longer holds the session.
    let navigate = leptos_router::hooks::use_navigate();
    Effect::new(move |_| {
        let Some(notice) = console.handover.get() else { return };
        if notice.outcome == HandoverOutcome::Accepted && id.with_value(|id| *id == notice.session_id) {
            console.notice.set(Some(format!("{} ({})", notice.outcome.sentence(&notice.to_name), notice.session_id)));
            console.handover.set(None);
            navigate("/operator", Default::default());
        }
    });
    let status = move || {
        let notice = console.handover.get().filter(|n| id.with_value(|id| *id == n.session_id))?;
        let alarm = matches!(notice.outcome, HandoverOutcome::Declined | HandoverOutcome::Missed | HandoverOutcome::Withdrawn);
        Some(view! {
            <p class="notice-line" class:tone-warn=alarm role="status" data-testid="handover-status">
                {notice.outcome.sentence(&notice.to_name)}
            </p>
        })
    };
    let candidates = move || {
        if !open.get() {
            return None;
        }
        Some(match list.value().get() {
            None => view! { <p class="loading">"Looking for ready operators…"</p> }.into_any(),
            Some(Err(error)) => view! { <ErrorNotice error/> }.into_any(),
            Some(Ok(found)) if found.is_empty() => view! {
                <p class="empty" data-testid="handover-none">"Nobody ready is certified for this session's skill right now."</p>
            }
            .into_any(),
            Some(Ok(found)) => view! {
                <ul class="handover-list" data-testid="handover-candidates">
                    {found.into_iter().map(|c| {
                        let to = c.operator_id.clone();
                        let rtt = c.rtt_ms.map(|r| format!("{r} ms")).unwrap_or_else(|| "—".into());
                        view! {
                            <li>
                                <span class="who">{c.name.clone()}</span>
                                <span class="muted">{rtt}</span>
                                <button type="button" class="button" data-testid=format!("handover-to-{}", c.operator_id)
                                    disabled=move || offer.pending().get()
                                    on:click=move |_| {
                                        let session_id = id.get_value();
                                        offer.dispatch(HandOverSession { session_id, to_operator_id: to.clone() });
                                        open.set(false);
                                    }>
                                    "Offer to "{c.name}
                                </button>
                            </li>
                        }
                    }).collect_view()}
                </ul>
            }
            .into_any(),
        })
    };
    view! {
        <div class="handover" hidden=move || ended.get()>
            <button type="button" class="button" data-testid="handover" aria-expanded=move || open.get().to_string()
                on:click=move |_| toggle()>
                "Hand over (H)"
            </button>
            {candidates}
            {move || offer.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            {status}
        </div>
    }
}
