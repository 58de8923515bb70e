use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Not found"/>
        <section class="notice" role="alert">
            <h1>"Page not found"</h1>
            <p>"There is nothing at this address. Check the link, or go back to your start screen."</p>
            <a class="button" href="/">"Go to my start screen"</a>
        </section>
    }
}
