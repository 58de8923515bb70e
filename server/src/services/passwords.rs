//! Password checks on a small pool of dedicated threads.
//!
//! argon2id allocates 19 MiB per check. On tokio's blocking pool (up to 512
//! threads) every thread kept its own malloc arena with that memory, and a
//! shift of sign-ins took the server past 2 GB. Here at most `threads`
//! checks run at once, on threads that live as long as the server, and a
//! bounded queue in front answers "busy" at once instead of piling up.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Checks running at once (and so arenas holding argon2's memory).
pub const HASHING_THREADS: usize = 2;
/// Checks waiting for a thread before sign-ins are told to retry.
pub const WAITING_CHECKS: usize = 64;

/// One piece of argon2 work: check a password against a PHC string, or
/// hash a new one (setting or changing a password costs the same memory).
enum Check {
    Verify { password: String, phc: String, answer: oneshot::Sender<bool> },
    Hash { password: String, answer: oneshot::Sender<String> },
}

/// Too many sign-ins at once: retry in a moment.
#[derive(Debug, PartialEq, Eq)]
pub struct Busy;

pub struct PasswordChecker {
    checks: SyncSender<Check>,
}

impl PasswordChecker {
    pub fn new(threads: usize, waiting: usize) -> PasswordChecker {
        let (checks, queue) = sync_channel::<Check>(waiting);
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..threads.max(1) {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("argon2-{i}"))
                .spawn(move || run(&queue))
                .expect("password thread starts");
        }
        PasswordChecker { checks }
    }

    /// Whether `password` matches the PHC string `phc`.
    pub async fn verify(&self, password: String, phc: String) -> Result<bool, Busy> {
        let (answer, answered) = oneshot::channel();
        self.queue(Check::Verify { password, phc, answer })?;
        answered.await.map_err(|_| Busy)
    }

    /// A new password's PHC string, hashed on the same threads.
    pub async fn hash(&self, password: String) -> Result<String, Busy> {
        let (answer, answered) = oneshot::channel();
        self.queue(Check::Hash { password, answer })?;
        answered.await.map_err(|_| Busy)
    }

    fn queue(&self, check: Check) -> Result<(), Busy> {
        match self.checks.try_send(check) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Err(Busy),
        }
    }
}

fn run(queue: &Mutex<Receiver<Check>>) {
    loop {
        // The lock is held only while taking the next check, never while hashing.
        let next = queue.lock().map(|q| q.recv());
        let Ok(Ok(check)) = next else { return };
        match check {
            Check::Verify { password, phc, answer } => {
                let _ = answer.send(crate::auth::verify_password(&password, &phc));
            }
            Check::Hash { password, answer } => {
                let _ = answer.send(crate::auth::hash_password(&password));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checks_verify_and_a_full_queue_answers_busy_at_once() {
        let phc = crate::auth::hash_password("right");
        let checker = Arc::new(PasswordChecker::new(1, 2));
        assert_eq!(checker.verify("right".into(), phc.clone()).await, Ok(true));
        assert_eq!(checker.verify("wrong".into(), phc.clone()).await, Ok(false));
        let made = checker.hash("new one".into()).await.unwrap();
        assert_eq!(checker.verify("new one".into(), made).await, Ok(true));
        // One thread, two places: a burst of 16 gets some Busy answers, and
        // nothing waits beyond the queue.
        let burst: Vec<_> = (0..16).map(|_| {
            let (checker, phc) = (checker.clone(), phc.clone());
            tokio::spawn(async move { checker.verify("wrong".into(), phc).await })
        }).collect();
        let mut busy = 0;
        for b in burst {
            if b.await.unwrap() == Err(Busy) {
                busy += 1;
            }
        }
        assert!(busy >= 16 - 3, "at most one running and two waiting: {busy} busy");
    }
}
