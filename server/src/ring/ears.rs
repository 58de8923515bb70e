//! What a tab's read loop waits on: its socket's next frame, its topic's
//! next delivery, the end of the credential that opened it, and silence
//! past the presence TTL. The two ends are armed once per socket and kept
//! across reads: made anew for every frame, each was a timer armed and
//! disarmed per heartbeat, on every open console (issue "Engine v3": idle
//! consoles at scale).

use crate::bus::{Delivery, Subscription};
use crate::services::{Ended, TabPass};
use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use futures::stream::SplitStream;
use futures::StreamExt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// What a tab's read loop hears next.
pub(super) enum Heard {
    /// A text frame (empty for any other frame: it too shows the tab is there).
    Text(Utf8Bytes),
    /// Closed, failed, or silent for the TTL.
    Gone { silent: bool },
    Delivery(Delivery),
    /// The sign-in ended (signed out, expired, password changed): close now.
    SignedOut,
    /// The person's membership of the org changed: close, and a reconnect
    /// is judged on their access now.
    AccessChanged,
}

pub(super) struct Ears<'a> {
    stream: SplitStream<WebSocket>,
    topic: Subscription,
    ended: Pin<Box<dyn Future<Output = Ended> + Send + 'a>>,
    /// Wakes at the earliest the tab can be silent for the TTL; re-armed
    /// then from the last frame (one timer a TTL, not one a frame).
    silence: Pin<Box<Sleep>>,
    heard: Instant,
    ttl: Duration,
}

impl<'a> Ears<'a> {
    pub fn new(stream: SplitStream<WebSocket>, topic: Subscription, pass: &'a TabPass, ttl: Duration) -> Ears<'a> {
        let heard = Instant::now();
        Ears { stream, topic, ended: Box::pin(pass.ended()), silence: Box::pin(tokio::time::sleep_until(heard + ttl)), heard, ttl }
    }

    /// The next thing heard. After `SignedOut` or `AccessChanged` the tab
    /// closes: it is not asked again.
    pub async fn next(&mut self) -> Heard {
        loop {
            tokio::select! {
                ended = &mut self.ended => return match ended {
                    Ended::CredentialEnded => Heard::SignedOut,
                    Ended::AccessChanged => Heard::AccessChanged,
                },
                frame = self.stream.next() => {
                    return match frame {
                        Some(Ok(Message::Text(text))) => {
                            self.heard = Instant::now();
                            Heard::Text(text)
                        }
                        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => Heard::Gone { silent: false },
                        Some(Ok(_)) => {
                            self.heard = Instant::now();
                            Heard::Text(Utf8Bytes::default())
                        }
                    };
                }
                delivery = self.topic.recv() => return Heard::Delivery(delivery),
                () = self.silence.as_mut() => {
                    let due = self.heard + self.ttl;
                    if due <= Instant::now() {
                        return Heard::Gone { silent: true };
                    }
                    self.silence.as_mut().reset(due);
                }
            }
        }
    }
}
