//! Panels whose code the browser fetches after the page is interactive.
//!
//! A screen's secondary panels (a session's timeline, activity, dispatch
//! decisions, chat and rating; the cockpit's and client's side panels; the
//! wallboard's relay, safety and link-health panels) are
//! rendered in the browser from a lazily loaded chunk once the page has
//! hydrated, instead of being hydrated with it: their view code and their
//! data's decoders are not in the way of the first input (issue "wallboard",
//! Budget). The server renders the panel's placeholder; the browser swaps
//! in the panel when its chunk and data arrive.

use crate::chunk::ChunkUnavailable;
use leptos::prelude::*;
use std::future::Future;

/// A deferred panel's builder: a function split into a chunk of its own
/// with `#[wasm_split(<name>, wasm_split_path = ::leptos::wasm_split,
/// fallible)]` (what `#[lazy]` does, except that a failed load is an error
/// to show, not a panic).
pub type PanelBuilt = Result<AnyView, ChunkUnavailable>;

/// A panel built in the browser by `view` (a split function, see
/// [`PanelBuilt`]), once the page is interactive. Until then, and on the
/// server, `placeholder` shows; if its code cannot be fetched, a notice
/// with a "Try again" button does.
#[component]
pub fn Deferred<F, Fut>(placeholder: &'static str, view: F) -> impl IntoView
where
    F: Fn() -> Fut + Clone + 'static,
    Fut: Future<Output = PanelBuilt> + 'static,
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
        // The built panel is a browser value (not Send), kept in a local
        // signal; the closure below moves it into the page once.
        let built = RwSignal::new_local(None::<PanelBuilt>);
        let owner = Owner::current();
        // Starts (or restarts) the load. Run under this component's owner,
        // wherever it is called from (the first time by the browser entry,
        // then by the retry button): the panel then finds the page's
        // context and goes when the page goes.
        let start = move || {
            let view = view.clone();
            let scoped = leptos::reactive::computed::ScopedFuture::new(async move {
                let panel = view().await;
                let _ = built.try_set(Some(panel));
            });
            leptos::task::spawn_local(scoped);
        };
        let start = move || match &owner {
            Some(owner) => owner.with(start.clone()),
            None => start(),
        };
        // Kept in a (browser-only) stored value: the view below must be
        // Send, the panel's builder is not.
        let start = StoredValue::new_local(start);
        let retry = move |_| {
            built.set(None);
            start.with_value(|start| start());
        };
        when_interactive(move || start.with_value(|start| start()));
        move || {
            built.track();
            match built.try_update_untracked(Option::take).flatten() {
                Some(Ok(panel)) => panel,
                Some(Err(ChunkUnavailable)) => {
                    view! {
                        <section class="panel" role="alert" data-testid="panel-unavailable">
                            <p class="error">"This part of the page could not be loaded. Check the connection, then try again."</p>
                            <button type="button" class="button" on:click=retry>"Try again"</button>
                        </section>
                    }
                    .into_any()
                }
                None => placeholder(),
            }
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
