use crate::components::{ErrorNotice, Session};
use crate::functions::SelectOrg;
use leptos::server_fn::ServerFn;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::Redirect;

/// Pick the org to work in. Nothing org-scoped is shown until one is chosen.
#[component]
pub fn ChooseOrg() -> impl IntoView {
    let session = expect_context::<Session>();
    view! {
        <Title text="Choose organisation"/>
        <section class="signin">
            <h1>"Choose an organisation"</h1>
            {match session.user().clone() {
                Ok(None) => view! { <Redirect path="/signin"/> }.into_any(),
                Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                Ok(Some(user)) if user.memberships.is_empty() => view! {
                    <p class="empty">"You do not belong to any organisation yet. Ask an admin to add you."</p>
                }.into_any(),
                Ok(Some(user)) => view! {
                    <ul class="org-list">
                        {user.memberships.into_iter().map(|m| view! {
                            <li>
                                // A plain post: the server redirects to the org's
                                // landing screen, loaded whole (see `Session`).
                                <form method="post" action=SelectOrg::url()>
                                    <input type="hidden" name="org_id" value=m.org_id.clone()/>
                                    <button type="submit" class="button">
                                        {m.org_name.clone()}" · "{m.role.as_str()}
                                    </button>
                                </form>
                            </li>
                        }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </section>
    }
}
