//! Data a screen loads from a server function, and how it crosses from the
//! server-rendered page to the browser.
//!
//! Why not `Resource::new`: its codec reads the page's copy of the value with
//! `serde_json::from_str`, while the server-function client reads a fetched
//! value with `serde_json::from_slice`. serde instantiates every type's
//! decoder once per reader, so each record a screen loads was decoded by two
//! copies of the same code in the wasm (measured: twice 3.3 KB for the signed-in
//! user alone). Reading everything as bytes (`read_json`) leaves one copy.
//! `app/clippy.toml` forbids the other reader and `Resource::new` in the
//! browser build; `scripts/test.sh` runs that check.

use leptos::prelude::*;
use leptos::server::codee::{Decoder, Encoder};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;

/// JSON, written as text and read as bytes (see the module's comment).
pub struct JsonAsBytes;

impl<T: Serialize> Encoder<T> for JsonAsBytes {
    type Error = serde_json::Error;
    type Encoded = String;

    fn encode(value: &T) -> Result<String, Self::Error> {
        serde_json::to_string(value)
    }
}

impl<T: DeserializeOwned> Decoder<T> for JsonAsBytes {
    type Error = serde_json::Error;
    type Encoded = str;

    fn decode(text: &str) -> Result<T, Self::Error> {
        read_json(text)
    }
}

/// Every JSON the browser reads (a page's data, a socket's message) goes
/// through here, with the reader the server-function client uses.
pub fn read_json<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_slice(text.as_bytes())
}

/// A screen's data from a server function. A blocking one (the server
/// waits for it before the first byte) is `Loaded::new_with_options(…, true)`.
pub type Loaded<T> = Resource<T, JsonAsBytes>;

/// Reloads `data` each time `changed` moves on from where it started (an
/// action's version: after each completed dispatch).
pub fn reload_after<T>(changed: impl Fn() -> usize + 'static, data: Loaded<T>)
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    Effect::new(move |_| {
        if changed() > 0 {
            data.refetch();
        }
    });
}

/// `Resource::new`, with the page's copy read as bytes.
///
/// On the server a page renders once: the source is read once and not
/// tracked, so a resource never fetches again because a refresh trigger
/// (another resource's arrival, say) changed mid-render. Such a refetch
/// could outlive the render and read the page's disposed signals, which
/// panicked (issue "Hardening II", finding 15); it also fetched twice.
/// Sources here are ids and refresh triggers, never another resource's
/// result, so the first read is the right one. The browser tracks as ever.
#[track_caller]
pub fn load<T, S, Fut>(source: impl Fn() -> S + Send + Sync + 'static, fetcher: impl Fn(S) -> Fut + Send + Sync + 'static) -> Loaded<T>
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    S: PartialEq + Clone + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    #[cfg(feature = "ssr")]
    let source = move || untrack(&source);
    Resource::new_with_options(source, fetcher, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_written_by_the_server_reads_back_the_same_in_the_browser() {
        let value: Result<Vec<(String, u32)>, crate::error::AppError> = Ok(vec![("é ✓".into(), 7)]);
        let text = <JsonAsBytes as Encoder<_>>::encode(&value).unwrap();
        let back: Result<Vec<(String, u32)>, crate::error::AppError> = <JsonAsBytes as Decoder<_>>::decode(&text).unwrap();
        assert_eq!(back, value);
        assert!(<JsonAsBytes as Decoder<u32>>::decode("not json").is_err());
    }
}
