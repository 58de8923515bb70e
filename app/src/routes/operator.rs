use crate::components::{ErrorNotice, RequireRole};
use crate::functions::my_operator_profile;
use crate::models::Role;
use leptos::prelude::*;
use leptos_meta::Title;

/// The operator's start screen: who they are to the dispatcher (region and
/// certifications decide which distress calls can reach them).
#[component]
pub fn OperatorHome() -> impl IntoView {
    view! {
        <Title text="Operator"/>
        <RequireRole role=Role::Operator>
            <OperatorProfile/>
        </RequireRole>
    }
}

#[component]
fn OperatorProfile() -> impl IntoView {
    let profile = Resource::new(|| (), |_| my_operator_profile());
    view! {
        <section class="panel">
            <h1>"Operator"</h1>
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
}
