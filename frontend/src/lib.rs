//! The browser entry point: hydrates the server-rendered page.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    use wasm_bindgen::JsCast;
    let document = leptos::prelude::document();
    let Some(body) = document.body() else { return };
    // The app, under the top bar, which is plain HTML (app::components::TopBar).
    let Some(root) = document.get_element_by_id("app").and_then(|app| app.dyn_into::<leptos::web_sys::HtmlElement>().ok()) else { return };
    wasm_bindgen_futures::spawn_local(async move {
        // Screens are lazy routes: hydration ends once the current screen's
        // chunks have arrived and its server-rendered DOM is claimed. Only
        // then is the page interactive, so only then is it marked (browser
        // tests and benchmarks wait for the mark; an effect in the app
        // would run before a lazy screen has hydrated).
        let mounted = leptos::mount::hydrate_from_async(root, app::App).await;
        mounted.forget();
        // The benchmark of what a page loads before it is interactive
        // counts the files fetched before this mark (panels that load
        // their code after it are not in the way of the first input).
        if let Some(performance) = leptos::prelude::window().performance() {
            let _ = performance.mark("hydrated");
        }
        let _ = body.set_attribute("data-hydrated", "true");
        app::deferred::page_is_interactive();
    });
}

/// Room for the chunk splitter (`wasm_split_cli_support`, run by the site
/// build, `frontend/site`) to give each chunk its own read-only data. It re-packs every
/// chunk's strings and tables at their own alignment, and when the re-packed
/// segment comes out longer than the linker's (by 1.9 KB here) it gives up
/// and keeps all data in the shell: every screen's static text then loads
/// with every page. These bytes lengthen the linker's segment; no code
/// refers to them, so no chunk includes them and they cost nothing.
#[used]
static SPLIT_DATA_SLACK: [u8; 24 * 1024] = [0; 24 * 1024];
