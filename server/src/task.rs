//! A task that lives exactly as long as its owner: what a lease, a relay
//! channel or a subscription starts ends when that ends, even when its
//! owner is dropped without a word (an aborted dispatcher, a closed session).

use std::future::Future;

/// A spawned task, aborted when this is dropped.
pub struct OwnedTask(tokio::task::JoinHandle<()>);

impl OwnedTask {
    pub fn spawn(work: impl Future<Output = ()> + Send + 'static) -> OwnedTask {
        OwnedTask(tokio::spawn(work))
    }
}

impl OwnedTask {
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Drop for OwnedTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
