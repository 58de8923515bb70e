//! Code the browser fetches on demand: a split function's chunk (a
//! deferred panel, the operator console, the overview's call request).

/// A split function's code could not be fetched (its chunk failed to
/// load: the network, or a server restarted with another build). What
/// needed it says so and tries again, instead of the page panicking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkUnavailable;

impl From<leptos::wasm_split::SplitLoaderError> for ChunkUnavailable {
    fn from(_: leptos::wasm_split::SplitLoaderError) -> Self {
        ChunkUnavailable
    }
}
