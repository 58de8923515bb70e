//! Panels whose code the browser fetches after the page is interactive.
//!
//! A screen's secondary panels (a session's timeline, activity, dispatch
//! decisions, chat and rating; the cockpit's and client's side panels) are
//! rendered in the browser from a lazily loaded chunk once the page has
//! hydrated, instead of being hydrated with it: their view code and their
//! data's decoders are not in the way of the first input (issue "wallboard",
//! Budget). The server renders the panel's placeholder; the browser swaps
//! in the panel when its chunk and data arrive.

use leptos::prelude::*;
use std::future::Future;

/// A panel built in the browser by `view` (a `#[lazy]` function: its code is
/// a chunk of its own), once the page is interactive. Until then, and on
/// the server, `placeholder` shows.
#[component]
pub fn Deferred<F, Fut>(placeholder: &'static str, view: F) -> impl IntoView
where
    F: FnOnce() -> Fut + 'static,
    Fut: Future<Output = AnyView> + 'static,
{
    let placeholder = move || view! { <section class="panel" aria-busy="true"><p class="loading">{placeholder}</p></section> }.into_any();
    // On the server (and while hydrating) the panel is its placeholder.
    #[cfg(not(feature = "hydrate"))]
    {
        drop(view);
        placeholder
    }
    #[cfg(feature = "hydrate")]
    {
        // The built panel is a browser value (not Send), kept in a
        // local signal; the closure below moves it into the page once.
        let built = RwSignal::new_local(None::<AnyView>);
        // Built under this component's owner, so the panel finds the
        // page's context and goes when the page goes.
        let scoped = leptos::reactive::computed::ScopedFuture::new(async move {
            let panel = view().await;
            let _ = built.try_set(Some(panel));
        });
        when_interactive(move || leptos::task::spawn_local(scoped));
        move || {
            built.track();
            built.try_update_untracked(Option::take).flatten().unwrap_or_else(placeholder)
        }
    }
}

#[cfg(feature = "hydrate")]
thread_local! {
    static INTERACTIVE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static WAITING: std::cell::RefCell<Vec<Box<dyn FnOnce()>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `start` now if the page is interactive, else once it is.
#[cfg(feature = "hydrate")]
pub fn when_interactive(start: impl FnOnce() + 'static) {
    if INTERACTIVE.get() {
        start();
    } else {
        WAITING.with_borrow_mut(|waiting| waiting.push(Box::new(start)));
    }
}

/// Called by the browser entry once the first page has hydrated: starts the
/// deferred panels' loads that were waiting for it.
#[cfg(feature = "hydrate")]
pub fn page_is_interactive() {
    INTERACTIVE.set(true);
    for start in WAITING.take() {
        start();
    }
}
