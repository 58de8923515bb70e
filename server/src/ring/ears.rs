//! What a tab's socket hears next: a frame from the browser, a delivery on
//! its topic, the end of its sign-in or of its writer, or its silence for
//! the TTL.
//!
//! The waits for a delivery, the sign-in's end, the writer's and the
//! silence stand for the socket's whole life instead of being set up again
//! for every frame.
//! An idle console's heartbeat, by far the most frequent frame (5,000 a
//! second from 50,000 tabs), then joins no waiter list (polling the topic
//! still takes its lock once) and only moves the silence timer's deadline
//! later: tokio notes a later deadline with a few atomic operations (no
//! lock), and its timer wheel moves the entry when the old deadline's slot
//! comes up, without waking the task. (A timer re-armed by the task when
//! it fired early, instead, woke every idle tab about once a TTL: one more
//! wake per four heartbeats at a 5 s beat. BENCHMARKS.md, Engine v3's
//! fourth and twenty-ninth parts.)

use crate::bus::{Delivery, Subscription};
use crate::services::Ended;
use axum::extract::ws::{Message, Utf8Bytes};
use futures::future::{BoxFuture, FutureExt, Fuse};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// What the tab's read loop hears next.
pub(super) enum Heard {
    /// A text frame (an empty one for any other frame that is not a close).
    Text(Utf8Bytes),
    /// Closed, failed (its writer too), or silent for the TTL.
    Gone { silent: bool },
    Delivery(Delivery),
    /// The sign-in ended, or the person's membership of the org changed:
    /// close now (`super::tell_closing`).
    Ended(Ended),
}

/// A tab's frames (the socket's read half) and topic, and its waits.
pub(super) struct Ears<F> {
    frames: F,
    /// The topic's deliveries; the one awaited outlives each `next`.
    topic: BoxStream<'static, Delivery>,
    /// The sign-in's end; once heard, the tab is closed (it is not heard again).
    ended: Fuse<BoxFuture<'static, Ended>>,
    /// Answers once the socket's writer has ended, which before the tab is
    /// done means it failed (its client cut off for taking nothing, say:
    /// `http::connections`): nothing more reaches the tab, which is gone.
    writer: Fuse<tokio::sync::oneshot::Receiver<()>>,
    /// Fires at the last frame's deadline.
    silence: Pin<Box<Sleep>>,
    heard: Instant,
    ttl: Duration,
}

impl<F: Stream<Item = Result<Message, axum::Error>> + Unpin> Ears<F> {
    /// Listens from now: the tab counts as heard from this instant.
    /// `ended` is the sign-in's end (`TabPass::ended`); `writer` answers
    /// when the socket's writer ends (its sender is dropped with the writer).
    pub(super) fn new(
        frames: F,
        topic: Subscription,
        ended: impl Future<Output = Ended> + Send + 'static,
        writer: tokio::sync::oneshot::Receiver<()>,
        ttl: Duration,
    ) -> Ears<F> {
        let heard = Instant::now();
        let topic = futures::stream::unfold(topic, |mut topic| async move { Some((topic.recv().await, topic)) }).boxed();
        let silence = Box::pin(tokio::time::sleep_until(heard + ttl));
        Ears { frames, topic, ended: ended.boxed().fuse(), writer: writer.fuse(), silence, heard, ttl }
    }

    /// Whether the tab's last frame (or `new`) was read within the TTL.
    pub(super) fn heard_within_ttl(&self) -> bool {
        self.heard.elapsed() < self.ttl
    }

    /// `work`'s outcome, unless the sign-in (or the writer) ends first:
    /// then what the tab heard (`Heard::Ended`, `Heard::Gone`). No frame
    /// or delivery is read meanwhile.
    pub(super) async fn unless_ended<T>(&mut self, work: impl Future<Output = T>) -> Result<T, Heard> {
        tokio::select! {
            biased;
            why = &mut self.ended => Err(Heard::Ended(why)),
            _ = &mut self.writer => Err(self.writer_gone()),
            done = work => Ok(done),
        }
    }

    /// The writer ended: the tab is gone, as a tab closed by the server
    /// is (silent if its last frame is a TTL old).
    fn writer_gone(&self) -> Heard {
        Heard::Gone { silent: !self.heard_within_ttl() }
    }

    /// The next frame or topic delivery; a tab that sent nothing for the
    /// TTL is gone (`silent`), unless a frame is waiting to be read then
    /// (the loop was busy, say with a resync): that frame is what it heard.
    pub(super) async fn next(&mut self) -> Heard {
        tokio::select! {
            why = &mut self.ended => Heard::Ended(why),
            _ = &mut self.writer => self.writer_gone(),
            delivery = self.topic.next() => Heard::Delivery(delivery.unwrap_or(Delivery::Closed)),
            frame = self.frames.next() => self.read(frame),
            // Its deadline moves with `heard`, so it fires when due.
            () = &mut self.silence => self.on_silence(),
        }
    }

    /// The deadline came. A frame that arrived while the loop was busy
    /// (say, with a resync) is heard rather than taken for silence. (Polled
    /// without a waker: with nothing there the tab closes, so no wake is
    /// missed. The read half shares a lock with the socket's writer; held
    /// by it just then, a waiting frame is not seen and the tab closes as
    /// silent, as it did when a timeout polled the read first.)
    fn on_silence(&mut self) -> Heard {
        match self.frames.next().now_or_never() {
            Some(frame) => self.read(frame),
            None => Heard::Gone { silent: true },
        }
    }

    fn read(&mut self, frame: Option<Result<Message, axum::Error>>) -> Heard {
        match frame {
            Some(Ok(Message::Close(_)) | Err(_)) | None => Heard::Gone { silent: false },
            Some(Ok(frame)) => {
                self.heard = Instant::now();
                self.silence.as_mut().reset(self.heard + self.ttl);
                match frame {
                    Message::Text(text) => Heard::Text(text),
                    _ => Heard::Text(Utf8Bytes::default()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::{EventBus, InProcessBus};
    use domain::events::{Event, OperatorEvent, Topic};
    use futures::channel::{mpsc, oneshot};

    const TTL: Duration = Duration::from_secs(20);

    type Frames = mpsc::UnboundedReceiver<Result<Message, axum::Error>>;

    struct Tab {
        ears: Ears<Frames>,
        send: mpsc::UnboundedSender<Result<Message, axum::Error>>,
        bus: std::sync::Arc<InProcessBus>,
        topic: Topic,
        sign_out: Option<oneshot::Sender<Ended>>,
        /// Dropped: the writer is gone.
        writer: Option<tokio::sync::oneshot::Sender<()>>,
    }

    fn open_tab() -> Tab {
        let (send, frames) = mpsc::unbounded();
        let bus = InProcessBus::new();
        let topic = Topic::operator("org-ears", "u-ears");
        let (sign_out, ended) = oneshot::channel::<Ended>();
        let ended = async move { ended.await.unwrap_or(Ended::CredentialEnded) };
        let (writer, gone) = tokio::sync::oneshot::channel::<()>();
        let ears = Ears::new(frames, bus.subscribe(&topic), ended, gone, TTL);
        Tab { ears, send, bus, topic, sign_out: Some(sign_out), writer: Some(writer) }
    }

    fn heartbeat() -> Result<Message, axum::Error> {
        Ok(Message::Text(r#"{"type":"heartbeat"}"#.into()))
    }

    /// Whether `next` has something before `wait` has passed (on paused time).
    async fn hears_within(ears: &mut Ears<Frames>, wait: Duration) -> Option<Heard> {
        tokio::time::timeout(wait, ears.next()).await.ok()
    }

    /// Hears nothing until just before a TTL from now, and is gone at it.
    async fn gone_a_ttl_from_now(ears: &mut Ears<Frames>) {
        assert!(hears_within(ears, TTL - Duration::from_millis(2)).await.is_none(), "gone before the TTL");
        assert!(matches!(hears_within(ears, Duration::from_millis(3)).await, Some(Heard::Gone { silent: true })), "silent at the TTL");
    }

    #[tokio::test(start_paused = true)]
    async fn r08_a_tab_is_gone_a_ttl_after_its_last_frame_and_not_before() {
        let mut tab = open_tab();
        // A frame every 7 s for a minute (three TTLs), listened to all
        // along: never silent, as each frame moves the deadline.
        for _ in 0..9 {
            assert!(hears_within(&mut tab.ears, Duration::from_secs(7)).await.is_none(), "silent between frames");
            tab.send.unbounded_send(heartbeat()).unwrap();
            assert!(matches!(tab.ears.next().await, Heard::Text(_)));
        }
        // Then silent: gone a TTL after its last frame.
        gone_a_ttl_from_now(&mut tab.ears).await;
    }

    #[tokio::test(start_paused = true)]
    async fn r08_a_frame_waiting_at_the_deadline_is_heard_not_silence() {
        let mut tab = open_tab();
        // The loop was busy past the deadline while the tab's frame waited.
        tab.send.unbounded_send(heartbeat()).unwrap();
        tokio::time::advance(TTL + Duration::from_secs(1)).await;
        assert!(matches!(tab.ears.on_silence(), Heard::Text(_)), "a waiting frame is heard");
        // And the TTL runs from when it was read.
        gone_a_ttl_from_now(&mut tab.ears).await;
        // With nothing waiting, the silence is the tab's.
        assert!(matches!(open_tab().ears.on_silence(), Heard::Gone { silent: true }));
        // `next` asks the same, whichever of its waits it polls first.
        for _ in 0..20 {
            let mut tab = open_tab();
            tab.send.unbounded_send(heartbeat()).unwrap();
            tokio::time::advance(TTL + Duration::from_secs(1)).await;
            assert!(matches!(tab.ears.next().await, Heard::Text(_)), "a waiting frame is heard");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn deliveries_and_the_sign_ins_end_are_heard_and_a_close_is_not_silence() {
        let mut tab = open_tab();
        tab.bus.publish(tab.topic.clone(), Event::Operator(OperatorEvent::Rejoin));
        assert!(matches!(tab.ears.next().await, Heard::Delivery(Delivery::Event(Event::Operator(OperatorEvent::Rejoin)))));
        // A delivery is not a frame: the TTL still runs from the opening.
        tokio::time::advance(Duration::from_secs(10)).await;
        tab.bus.publish(tab.topic.clone(), Event::Operator(OperatorEvent::Rejoin));
        assert!(matches!(tab.ears.next().await, Heard::Delivery(_)));
        assert!(matches!(hears_within(&mut tab.ears, Duration::from_secs(11)).await, Some(Heard::Gone { silent: true })));

        let mut tab = open_tab();
        let work = tab.ears.unless_ended(std::future::pending::<()>());
        tab.sign_out.take().unwrap().send(Ended::AccessChanged).unwrap();
        assert!(matches!(work.await, Err(Heard::Ended(Ended::AccessChanged))));
        assert!(hears_within(&mut tab.ears, Duration::from_secs(1)).await.is_none(), "an end is heard once");

        let mut tab = open_tab();
        tab.sign_out.take().unwrap().send(Ended::CredentialEnded).unwrap();
        assert!(matches!(tab.ears.next().await, Heard::Ended(Ended::CredentialEnded)));

        let mut tab = open_tab();
        tab.send.unbounded_send(Ok(Message::Close(None))).unwrap();
        assert!(matches!(tab.ears.next().await, Heard::Gone { silent: false }));
        let mut tab = open_tab();
        tab.send.unbounded_send(Err(axum::Error::new(std::io::Error::other("reset")))).unwrap();
        assert!(matches!(tab.ears.next().await, Heard::Gone { silent: false }));
        let mut tab = open_tab();
        drop(tab.send);
        assert!(matches!(tab.ears.next().await, Heard::Gone { silent: false }), "a socket that ended is not silent");

        // The writer gone (failed): the tab is gone, heartbeats or not.
        let mut tab = open_tab();
        tab.send.unbounded_send(heartbeat()).unwrap();
        assert!(matches!(tab.ears.next().await, Heard::Text(_)));
        drop(tab.writer.take());
        assert!(matches!(tab.ears.next().await, Heard::Gone { silent: false }), "a tab nothing reaches is gone");
        assert!(hears_within(&mut tab.ears, Duration::from_secs(1)).await.is_none(), "heard once");
        let mut tab = open_tab();
        let work = tab.ears.unless_ended(std::future::pending::<()>());
        drop(tab.writer.take());
        assert!(matches!(work.await, Err(Heard::Gone { silent: false })), "and a resync's wait ends with it");
    }
}
