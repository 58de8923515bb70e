use crate::components::{ErrorNotice, RequireRole};
use crate::functions::load_session;
use crate::models::Role;
use crate::routes::operator::PresencePill;
use crate::rules::utc_clock;
use leptos::prelude::*;
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
    let record = Resource::new(session_id, load_session);
    view! {
        <section class="panel">
            <div class="toolbar">
                <h1>"Cockpit · "<span data-testid="cockpit-session">{session_id}</span></h1>
                <PresencePill/>
                <a class="button subtle" href="/operator">"Ready screen"</a>
            </div>
            <Suspense fallback=|| view! { <p class="loading">"Loading the session…"</p> }>
                {move || Suspend::new(async move {
                    match record.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(s) => view! {
                            <dl class="facts" data-testid="cockpit">
                                <dt>"Robot"</dt><dd>{s.robot.clone()}" · "{s.robot_model.clone()}</dd>
                                <dt>"Site"</dt><dd>{s.site.clone()}" (" {s.pop.clone()} ")"</dd>
                                <dt>"Lifecycle"</dt><dd data-testid="cockpit-lifecycle">{s.lifecycle.as_str()}</dd>
                                <dt>"Safety state"</dt><dd>{s.state.as_str()}</dd>
                                <dt>"Operator"</dt><dd>{s.operator_name.clone().unwrap_or_else(|| "—".into())}</dd>
                                <dt>"Attached"</dt><dd>{s.started_at.map(utc_clock).unwrap_or_else(|| "—".into())}</dd>
                                <dt>"RTT"</dt><dd>{s.rtt_ms.map(|r| format!("{r} ms")).unwrap_or_else(|| "—".into())}</dd>
                            </dl>
                        }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}
