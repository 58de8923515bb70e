//! The browser entry point: hydrates the server-rendered page.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    let Some(body) = leptos::prelude::document().body() else { return };
    wasm_bindgen_futures::spawn_local(async move {
        // Screens are lazy routes: hydration ends once the current screen's
        // chunks have arrived and its server-rendered DOM is claimed. Only
        // then is the page interactive, so only then is it marked (browser
        // tests and benchmarks wait for the mark; an effect in the app
        // would run before a lazy screen has hydrated).
        let mounted = leptos::mount::hydrate_from_async(body.clone(), app::App).await;
        mounted.forget();
        let _ = body.set_attribute("data-hydrated", "true");
    });
}
