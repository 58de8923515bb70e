use crate::components::Session;
use leptos::prelude::*;
use leptos_router::components::Redirect;

/// `/` sends each person to their start screen, or to sign-in.
#[component]
pub fn Home() -> impl IntoView {
    let target = expect_context::<Session>().signed_in().map_or("/signin", |user| user.landing_path()).to_string();
    view! { <Redirect path=target/> }
}
