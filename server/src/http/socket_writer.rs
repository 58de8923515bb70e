//! A socket's writer: the one task that sends what the socket's handler
//! (a console tab, a live screen, a relay side) queues, so the handler
//! never waits on a slow client. Its end is heard twice:
//! - the handler's wait on `Gone` fires only when the writer failed (the
//!   connection was cut for taking nothing, `http::connections`), since
//!   otherwise the queue closes only once the handler is done;
//! - `Writer::finish` gives the queued messages a second to go, then
//!   stops the writer, so a client that stopped reading (or whose sign-in
//!   was just revoked) is not kept open by its unsent messages.

use axum::extract::ws::{Message, WebSocket};
use futures::stream::SplitSink;
use futures::SinkExt;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// How long a finished socket's queued messages may take to go.
const FINISH_WITHIN: Duration = Duration::from_secs(1);

/// Resolves when the writer ended (see the module's doc).
pub type Gone = oneshot::Receiver<()>;

/// The running writer, to be finished once its queue is given back.
pub struct Writer(JoinHandle<()>);

/// Starts the writer of `sink`: up to `queue` messages wait, each sent as
/// `encode` makes it (`None` skips it). `what` names the socket in the log.
pub fn spawn<T: Send + 'static>(mut sink: SplitSink<WebSocket, Message>, queue: usize, what: &'static str, encode: fn(T) -> Option<Message>) -> (mpsc::Sender<T>, Writer, Gone) {
    let (tx, mut rx) = mpsc::channel::<T>(queue);
    let (writing, gone) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _writing = writing;
        while let Some(message) = rx.recv().await {
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
    (tx, Writer(task), gone)
}

impl Writer {
    /// Closes the queue with its last sender, `queue` (clones of it must be
    /// gone already), and lets the writer send what is queued and a close
    /// frame, for at most `FINISH_WITHIN`; then stops it.
    pub async fn finish<T>(self, queue: mpsc::Sender<T>) {
        drop(queue);
        let mut task = self.0;
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
    use tokio_tungstenite::tungstenite::Message as ClientMessage;

    /// A server whose one socket queues `count` texts, then finishes.
    async fn server(count: usize) -> std::net::SocketAddr {
        let app = axum::Router::new().route(
            "/",
            get(move |ws: WebSocketUpgrade| async move {
                ws.on_upgrade(move |socket| async move {
                    let (sink, _stream) = socket.split();
                    let (tx, writer, _gone) = spawn::<String>(sink, count.max(1), "test", |text| Some(Message::Text(text.into())));
                    for n in 0..count {
                        let _ = tx.try_send(n.to_string());
                    }
                    writer.finish(tx).await;
                })
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }

    #[tokio::test]
    async fn a_finished_writer_sends_what_was_queued_then_a_close() {
        let addr = server(3).await;
        let (mut client, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await.unwrap();
        let mut heard = Vec::new();
        while let Some(Ok(message)) = client.next().await {
            match message {
                ClientMessage::Text(text) => heard.push(text.to_string()),
                ClientMessage::Close(_) => {
                    heard.push("close".into());
                    break;
                }
                _ => {}
            }
        }
        assert_eq!(heard, ["0", "1", "2", "close"]);
    }

    #[tokio::test]
    async fn a_writer_whose_client_is_gone_says_so() {
        let (told, gone_heard) = oneshot::channel::<()>();
        let told = std::sync::Mutex::new(Some(told));
        let told = std::sync::Arc::new(told);
        let app = axum::Router::new().route(
            "/",
            get(move |ws: WebSocketUpgrade| async move {
                ws.on_upgrade(move |socket| async move {
                    let (sink, _stream) = socket.split();
                    let (tx, writer, mut gone) = spawn::<String>(sink, 4, "test", |text| Some(Message::Text(text.into())));
                    // Keeps writing until a send fails: the writer's end
                    // is all that stops this loop.
                    let mut tick = tokio::time::interval(Duration::from_millis(5));
                    loop {
                        tokio::select! {
                            _ = &mut gone => break,
                            _ = tick.tick() => { let _ = tx.try_send("x".repeat(1024)); }
                        }
                    }
                    if let Some(told) = told.lock().unwrap().take() {
                        let _ = told.send(());
                    }
                    writer.finish(tx).await;
                })
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let (client, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await.unwrap();
        drop(client);
        tokio::time::timeout(Duration::from_secs(10), gone_heard).await.expect("the writer's failure was heard").unwrap();
    }
}
