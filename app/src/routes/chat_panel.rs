//! A session's chat (rule L09) as the cockpit and the session detail show
//! it: the messages, live, and a line to write one (Enter sends).

use crate::chat::{chat_body, ChatMessage};
use crate::components::{loaded, ErrorNotice};
use crate::functions::{load_chat, PostChat};
use crate::rules::utc_clock;
use leptos::prelude::*;

/// `session_id` may change (the detail view's URL); `refresh` changes
/// whenever the chat may have moved (a push).
#[component]
pub fn ChatPanel(
    session_id: impl Fn() -> String + Send + Sync + Copy + 'static,
    refresh: impl Fn() -> u64 + Send + Sync + Copy + 'static,
    /// The session has ended: the transcript stays, writing stops.
    #[prop(into)]
    read_only: Signal<bool>,
) -> impl IntoView {
    let post = ServerAction::<PostChat>::new();
    let messages = crate::page_data::load(move || (session_id(), refresh(), post.version().get()), |(id, _, _)| crate::components::for_chosen_session(id, load_chat));
    let draft = RwSignal::new(String::new());
    let problem = RwSignal::new(None::<String>);
    let send = move || match chat_body(&draft.get_untracked()) {
        Err(why) => problem.set(Some(why)),
        Ok(body) => {
            problem.set(None);
            draft.set(String::new());
            post.dispatch(PostChat { session_id: session_id(), body });
        }
    };
    view! {
        <section class="panel" aria-labelledby="chat-h">
            <h2 id="chat-h">"Chat"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading the chat…"</p> }>
                {loaded(move || !session_id().is_empty(), messages, |list| view! { <Messages list/> })}
            </Transition>
            <form class="chat-form" on:submit=move |ev| { ev.prevent_default(); send(); }>
                <label class="visually-hidden" for="chat-input">"Message"</label>
                <input id="chat-input" data-testid="chat-input" type="text" maxlength="1000" autocomplete="off"
                    placeholder=move || if read_only.get() { "The session has ended." } else { "Write to the operator, client and admins" }
                    disabled=move || read_only.get()
                    prop:value=move || draft.get()
                    on:input=move |ev| draft.set(event_target_value(&ev))/>
                <button type="submit" class="button" data-testid="chat-send" disabled=move || read_only.get() || post.pending().get()>"Send"</button>
            </form>
            {move || problem.get().map(|why| view! { <p class="error" role="alert">{why}</p> })}
            {move || post.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
        </section>
    }
}

#[component]
fn Messages(list: Vec<ChatMessage>) -> impl IntoView {
    if list.is_empty() {
        return view! { <p class="empty">"No messages yet."</p> }.into_any();
    }
    view! {
        <ol class="chat" data-testid="chat">
            {list.into_iter().map(|m| view! {
                <li>
                    <span class="age">{utc_clock(m.at_ms)}</span>" "
                    <strong>{m.author_name}</strong>": "
                    // Text, never HTML: Leptos escapes it.
                    <span class="chat-body">{m.body}</span>
                </li>
            }).collect_view()}
        </ol>
    }
    .into_any()
}
