//! Forms that post to a server function, without `ActionForm`.
//!
//! A form here is a plain `<form method="post" action=S::url()>`, so it
//! works before the wasm has loaded (the server function answers a form
//! post with a redirect back). Once hydrated, its submit handler
//! ([`dispatch_on_submit`]) stops the browser's post, reads the fields with
//! [`Submitted`] and dispatches the action with the arguments built by hand.
//! `ActionForm` decodes the form with serde_qs instead: a decoder per
//! argument type plus the decoder itself, ~30 KB gzip in the screens' chunks
//! (issue "wallboard" budget).

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos::web_sys::FormData;
use std::str::FromStr;

/// The submit handler of a form posting to `action`'s server function:
/// stops the browser's own post and dispatches the arguments `read` makes
/// of the fields.
pub fn dispatch_on_submit<S>(action: ServerAction<S>, read: impl Fn(&Submitted) -> S + Copy + 'static) -> impl Fn(SubmitEvent) + Copy + 'static
where
    S: ServerFn + Clone + Send + Sync + 'static,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    move |ev| {
        action.dispatch(read(&Submitted::take(&ev)));
    }
}

/// The fields of a submitted form, read the way `ActionForm`'s decoder read
/// them: the submit button's own name and value count, and an empty field
/// is an absent optional argument.
pub struct Submitted(Option<FormData>);

impl Submitted {
    /// Stops the browser's own post and reads the form that was submitted.
    pub fn take(ev: &SubmitEvent) -> Self {
        ev.prevent_default();
        Self(leptos::form::form_data_from_event(ev).ok())
    }

    fn get(&self, name: &str) -> Option<String> {
        self.0.as_ref()?.get(name).as_string()
    }

    /// A required text field; absent reads as empty, which the server
    /// function rejects with its own message.
    pub fn text(&self, name: &str) -> String {
        self.get(name).unwrap_or_default()
    }

    /// An optional text field: empty or absent is `None`.
    pub fn optional(&self, name: &str) -> Option<String> {
        self.get(name).filter(|value| !value.is_empty())
    }

    /// A group of checkboxes named `name[0]`, `name[1]`, …: the values of
    /// those ticked, in form order; none ticked is `None`.
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        let data = self.0.as_ref()?;
        let prefix = format!("{name}[");
        let ticked: Vec<String> = data
            .entries()
            .into_iter()
            .filter_map(Result::ok)
            .map(|entry| leptos::web_sys::js_sys::Array::from(&entry))
            .filter(|pair| pair.get(0).as_string().is_some_and(|key| key.starts_with(&prefix)))
            .filter_map(|pair| pair.get(1).as_string())
            .collect();
        (!ticked.is_empty()).then_some(ticked)
    }

    /// A number field (the browser has checked it); unreadable reads as
    /// zero, which the server function rejects with its own message.
    pub fn number<T: FromStr + Default>(&self, name: &str) -> T {
        self.get(name).and_then(|value| value.trim().parse().ok()).unwrap_or_default()
    }
}
