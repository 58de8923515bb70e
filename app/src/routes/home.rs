use crate::components::Session;
use leptos::prelude::*;
use leptos_router::components::Redirect;

/// `/` sends each person to their start screen, or to sign-in.
#[component]
pub fn Home() -> impl IntoView {
    let session = expect_context::<Session>();
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let target = match session.user.await {
                    Ok(Some(user)) => user.landing_path().to_string(),
                    _ => "/signin".to_string(),
                };
                view! { <Redirect path=target/> }
            })}
        </Suspense>
    }
}
