//! A socket's writer: the one task that sends what the socket's handler
//! (a console tab, a live screen, a relay side) queues, so the handler
//! never waits on a slow client. It ends in one of two ways:
//! - a send fails (the connection was cut for taking nothing,
//!   `http::connections`): the handler's wait on `Gone` fires, the only
//!   way it does before the handler is done, as the queue closes only
//!   once the handler is;
//! - the handler is done: `Writer::finish` gives the queued messages a
//!   second to go, then stops the writer, so a client that stopped
//!   reading (or whose sign-in was just revoked) is not kept open by its
//!   unsent messages; `Writer::close` sends a close frame of the
//!   handler's (a code the client acts on) ahead of what is queued.
//!
//! Both take the socket's place among its credential's sockets (its
//! `TabPass`) and let it go before the close is sent: a client that
//! connects again once it hears the close finds its place free (in cluster
//! mode the shared place follows when the keeper frees it,
//! `services::places`).

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::stream::SplitSink;
use futures::SinkExt;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// How long a finished socket's queued messages may take to go.
const FINISH_WITHIN: Duration = Duration::from_secs(1);

/// Resolves when the writer ended (see the module's doc).
pub type Gone = oneshot::Receiver<()>;

/// The running writer, to be finished (or closed) once its queue is
/// given back.
#[must_use = "finish the writer: dropped, its task runs on, detached"]
pub struct Writer {
    task: JoinHandle<()>,
    /// The handler's close frame, sent ahead of the queue (`close`).
    closing: oneshot::Sender<CloseFrame>,
}

/// Starts the writer of `sink`: up to `queue` messages wait, each sent as
/// `encode` makes it (`None` skips it). `what` names the socket in the log.
pub fn spawn<T: Send + 'static>(mut sink: SplitSink<WebSocket, Message>, queue: usize, what: &'static str, encode: fn(T) -> Option<Message>) -> (mpsc::Sender<T>, Writer, Gone) {
    let (tx, mut rx) = mpsc::channel::<T>(queue);
    let (writing, gone) = oneshot::channel::<()>();
    let (closing, mut close_frame) = oneshot::channel::<CloseFrame>();
    let task = tokio::spawn(async move {
        let _writing = writing;
        // (Answers `Err` once the writer is finished without a frame: not
        // asked again.)
        let mut may_close = true;
        loop {
            let message = tokio::select! {
                biased;
                frame = &mut close_frame, if may_close => match frame {
                    // What is still queued is dropped: a closing socket's
                    // messages are of no more use, and a full queue would
                    // hold the close back (or lose it: it cannot be queued).
                    Ok(frame) => {
                        let _ = sink.send(Message::Close(Some(frame))).await;
                        break;
                    }
                    Err(_) => {
                        may_close = false;
                        continue;
                    }
                },
                message = rx.recv() => match message {
                    Some(message) => message,
                    None => break,
                },
            };
            let Some(message) = encode(message) else { continue };
            // Failed (the client cut off for taking nothing, say): no close
            // frame can go either.
            if let Err(e) = sink.send(message).await {
                tracing::debug!(error = %e, socket = what, "a socket failed: its writer ends");
                return;
            }
        }
        let _ = sink.close().await;
    });
    (tx, Writer { task, closing }, gone)
}

impl Writer {
    /// Lets go of `place` (the socket's `TabPass`, see the module's doc),
    /// closes the queue with its last sender, `queue` (clones of it must be
    /// gone already), and lets the writer send what is queued and a close
    /// frame, for at most `FINISH_WITHIN`; then stops it.
    pub async fn finish<T>(self, queue: mpsc::Sender<T>, place: impl Sized) {
        self.end(queue, None, place).await;
    }

    /// Lets go of `place`, as `finish`, and closes the socket with `frame`
    /// (its code tells the client what to do): sent once the message being
    /// sent has gone, ahead of those still queued, which are dropped;
    /// `FINISH_WITHIN` at most, as `finish`.
    pub async fn close<T>(self, queue: mpsc::Sender<T>, frame: CloseFrame, place: impl Sized) {
        self.end(queue, Some(frame), place).await;
    }

    async fn end<T>(self, queue: mpsc::Sender<T>, frame: Option<CloseFrame>, place: impl Sized) {
        drop(place);
        let Writer { mut task, closing } = self;
        match frame {
            Some(frame) => drop(closing.send(frame)),
            None => drop(closing),
        }
        drop(queue);
        if tokio::time::timeout(FINISH_WITHIN, &mut task).await.is_err() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::WebSocketUpgrade;
    use axum::routing::get;
    use futures::StreamExt;
    use std::future::Future;
    use std::sync::{Arc, Mutex};
    use tokio_tungstenite::tungstenite::Message as ClientMessage;

    /// Serves each socket to `serve`; the address, and what `serve` made
    /// of the first socket.
    async fn server<T, F, Fut>(serve: F) -> (std::net::SocketAddr, oneshot::Receiver<T>)
    where
        T: Send + 'static,
        F: Fn(WebSocket) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        let (tell, told) = oneshot::channel();
        let tell = Arc::new(Mutex::new(Some(tell)));
        let app = axum::Router::new().route(
            "/",
            get(move |ws: WebSocketUpgrade| async move {
                // Taken first: a `serve` that panics drops it, and the
                // test hears so at once, not at its timeout.
                let tell = tell.lock().unwrap().take();
                ws.on_upgrade(move |socket| async move {
                    let what = serve(socket).await;
                    if let Some(tell) = tell {
                        let _ = tell.send(what);
                    }
                })
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (addr, told)
    }

    fn text(text: String) -> Option<Message> {
        Some(Message::Text(text.into()))
    }

    /// Three texts and a close reach the client; the writer is not gone
    /// while it works (the client said it had them all), and is once it
    /// finished.
    #[tokio::test]
    async fn a_finished_writer_sends_what_was_queued_then_a_close() {
        let (addr, told) = server(|socket: WebSocket| async move {
            let (sink, mut stream) = socket.split();
            let (tx, writer, mut gone) = spawn::<String>(sink, 3, "test", text);
            for n in 0..3 {
                let _ = tx.try_send(n.to_string());
            }
            let _ = stream.next().await;
            let at_work = gone.try_recv();
            writer.finish(tx, ()).await;
            let gone_at_work = !matches!(at_work, Err(oneshot::error::TryRecvError::Empty));
            // (A receiver that answered may not be asked again.)
            let gone_after = gone_at_work || gone.await.is_err();
            (gone_at_work, gone_after)
        })
        .await;
        let (mut client, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await.unwrap();
        let mut heard = Vec::new();
        let read = async {
            while let Some(Ok(message)) = client.next().await {
                match message {
                    ClientMessage::Text(text) => {
                        heard.push(text.to_string());
                        if heard.len() == 3 {
                            futures::SinkExt::send(&mut client, ClientMessage::Text("got them".into())).await.unwrap();
                        }
                    }
                    // Read on: the close is answered, and the stream ends.
                    ClientMessage::Close(_) => heard.push("close".into()),
                    _ => {}
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read).await.expect("the socket ended");
        assert_eq!(heard, ["0", "1", "2", "close"]);
        let told = tokio::time::timeout(Duration::from_secs(10), told).await.expect("the server's socket told");
        assert_eq!(told.unwrap(), (false, true), "not gone at work; gone once finished");
    }

    /// A client that takes nothing does not hold its socket's end up: the
    /// writer gets its second, then is stopped.
    #[tokio::test]
    async fn a_finish_gives_a_client_that_takes_nothing_a_second() {
        let (addr, told) = server(|socket: WebSocket| async move {
            let (sink, _stream) = socket.split();
            let (tx, writer, gone) = spawn::<String>(sink, 256, "test", text);
            // Far more than the buffers on the way hold.
            for _ in 0..256 {
                let _ = tx.try_send("x".repeat(256 * 1024));
            }
            let started = tokio::time::Instant::now();
            writer.finish(tx, ()).await;
            let took = started.elapsed();
            // Stopped, not left waiting on the client: its end is heard.
            let stopped = tokio::time::timeout(Duration::from_secs(5), gone).await.is_ok();
            (took, stopped)
        })
        .await;
        // Connected, then never read.
        let (_client, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await.unwrap();
        let (took, stopped) = tokio::time::timeout(Duration::from_secs(30), told).await.expect("the finish ended").unwrap();
        assert!(took >= FINISH_WITHIN, "it had its second: {took:?}");
        assert!(stopped, "then it was stopped");
    }

    /// A socket closed with a code of the handler's while its queue is
    /// full (a slow client): the close goes once the message being sent
    /// has, ahead of the rest, which are dropped; the client gets the code.
    /// (Queued behind them, it could not even be queued, and the client
    /// got a bare close, or none once the second ran out.)
    #[tokio::test]
    async fn a_close_goes_ahead_of_what_is_queued() {
        let (closing, closed) = oneshot::channel::<()>();
        let closing = Arc::new(Mutex::new(Some(closing)));
        let (addr, _told) = server(move |socket: WebSocket| {
            let closing = closing.clone();
            async move {
                let (sink, _stream) = socket.split();
                let (tx, writer, _gone) = spawn::<String>(sink, 64, "test", text);
                // Far more than the buffers on the way hold: the queue
                // full while the writer waits in a send (the client reads
                // nothing yet). On this one thread, a queue still full
                // once the writer had its turn means it is waiting.
                loop {
                    while tx.try_send("x".repeat(256 * 1024)).is_ok() {}
                    tokio::task::yield_now().await;
                    if tx.capacity() == 0 {
                        break;
                    }
                }
                if let Some(closing) = closing.lock().unwrap().take() {
                    let _ = closing.send(());
                }
                writer.close(tx, CloseFrame { code: 4000, reason: "told".into() }, ()).await;
            }
        })
        .await;
        let (mut client, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await.unwrap();
        // Read only once the close is asked for, the writer held up by
        // the client until then.
        tokio::time::timeout(Duration::from_secs(10), closed).await.expect("the close was asked for").unwrap();
        let mut texts = 0;
        let code = async {
            while let Some(message) = client.next().await {
                match message.expect("a frame, not a reset") {
                    ClientMessage::Text(_) => texts += 1,
                    ClientMessage::Close(frame) => return frame.map(|f| u16::from(f.code)),
                    _ => {}
                }
            }
            panic!("the socket ended with no close");
        };
        let code = tokio::time::timeout(Duration::from_secs(10), code).await.expect("the close came");
        assert_eq!(code, Some(4000));
        assert!(texts >= 1, "what the writer was sending went first");
        assert!(texts < 64, "what was still queued was dropped ({texts} came)");
    }

    /// A client gone (its connection closed, unread): the socket's next
    /// writes fail, and the writer's end is heard.
    #[tokio::test]
    async fn a_writer_whose_client_is_gone_says_so() {
        let (addr, told) = server(|socket: WebSocket| async move {
            let (sink, _stream) = socket.split();
            let (tx, writer, mut gone) = spawn::<String>(sink, 4, "test", text);
            // Keeps writing, as fast as the writer takes it, until a
            // send fails: the writer's end is all that stops this loop.
            loop {
                tokio::select! {
                    _ = &mut gone => break,
                    _ = tx.send("x".repeat(1024)) => {}
                }
            }
            writer.finish(tx, ()).await;
        })
        .await;
        let (client, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await.unwrap();
        drop(client);
        tokio::time::timeout(Duration::from_secs(10), told).await.expect("the writer's failure was heard").unwrap();
    }
}
