//! The server's connections: one whose writes wait for `CLIENT_STALL`
//! (its client takes nothing, and the buffers on the way are full) is cut
//! off. A response fails and its connection closes, and whatever it held
//! goes with it (a download's sign-in place, its tar and the org's export
//! place); a socket's writer fails, and the socket leaves.
//!
//! Nothing else can notice such a client: a response body is polled only
//! while its connection can write, so a body whose client stopped reading
//! waits forever, and its connection with it. Hyper drops a cut
//! connection as it does a reset one, so the cut is told here: logged,
//! and counted (`metrics::client_cut`).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_io_timeout::TimeoutWriter;

/// How long a write to a client may wait before the client is cut off.
/// (A write waits only once the server's send buffer is full, the
/// client's window closed: an idle connection, or a socket with nothing
/// to send, never waits.)
pub const CLIENT_STALL: Duration = Duration::from_secs(60);

/// The listener `axum::serve` takes connections from.
pub struct Connections {
    tcp: TcpListener,
    stall: Duration,
}

impl Connections {
    pub fn new(tcp: TcpListener, stall: Duration) -> Connections {
        Connections { tcp, stall }
    }
}

/// A client's connection, whose writes wait at most the stall.
pub struct Connection {
    /// Pinned: the stall's timer is in it.
    io: Pin<Box<TimeoutWriter<TcpStream>>>,
    /// The TCP peer (behind a proxy, the proxy).
    peer: SocketAddr,
    cut: bool,
}

impl Connection {
    pub fn tcp(&self) -> &TcpStream {
        self.io.get_ref()
    }

    /// Tells a cut once: a write that waited the stall fails `TimedOut`
    /// with no OS error (the kernel's own ETIMEDOUT, a dead link's
    /// retransmissions given up, is not a stall).
    fn note_cut<T>(&mut self, result: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(e)) = &result {
            if e.kind() == io::ErrorKind::TimedOut && e.raw_os_error().is_none() && !self.cut {
                self.cut = true;
                tracing::info!(peer = %self.peer, "a client that took nothing for the stall was cut off");
                crate::metrics::client_cut();
            }
        }
        result
    }
}

impl AsyncRead for Connection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.io.as_mut().poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let result = self.io.as_mut().poll_write(cx, buf);
        self.note_cut(result)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let result = self.io.as_mut().poll_write_vectored(cx, bufs);
        self.note_cut(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = self.io.as_mut().poll_flush(cx);
        self.note_cut(result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = self.io.as_mut().poll_shutdown(cx);
        self.note_cut(result)
    }
}

impl axum::serve::Listener for Connections {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Connection, SocketAddr) {
        // axum's own accept: it rides out transient errors (a full file table, say).
        let (tcp, addr) = axum::serve::Listener::accept(&mut self.tcp).await;
        let mut io = TimeoutWriter::new(tcp);
        io.set_timeout(Some(self.stall));
        (Connection { io: Box::pin(io), peer: addr, cut: false }, addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use futures::StreamExt;
    use std::future::IntoFuture;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Tells when it is dropped: the response body that holds it was let go.
    struct Dropped(Option<tokio::sync::oneshot::Sender<()>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.take().map(|tell| tell.send(()));
        }
    }

    /// An endless response to a client that reads nothing: once the stall
    /// is up the connection is closed and the body let go; the client,
    /// reading at last, gets what was on its way, then the end.
    #[tokio::test]
    async fn a_client_that_takes_nothing_is_cut_off_and_its_response_let_go() {
        let metrics = crate::metrics::handle();
        let cuts = || crate::metrics::counter_value(&metrics.render(), crate::metrics::CLIENTS_CUT);
        let cut_before = cuts();
        let (dropped, body_let_go) = tokio::sync::oneshot::channel();
        let dropped = Arc::new(Mutex::new(Some(Dropped(Some(dropped)))));
        let endless = move || {
            let guard = dropped.lock().unwrap().take();
            async move {
                let chunk = bytes::Bytes::from(vec![b'x'; 64 * 1024]);
                let body = futures::stream::repeat(chunk).map(move |chunk| {
                    let _held = &guard;
                    Ok::<_, std::convert::Infallible>(chunk)
                });
                Body::from_stream(body)
            }
        };
        let app = axum::Router::new().route("/endless", get(endless));
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        tokio::spawn(axum::serve(Connections::new(tcp, Duration::from_millis(300)), app).into_future());

        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut client = socket.connect(addr).await.unwrap();
        client.write_all(b"GET /endless HTTP/1.1\r\nhost: test\r\n\r\n").await.unwrap();
        tokio::time::timeout(Duration::from_secs(30), body_let_go).await.expect("the stalled client was cut off").unwrap();
        let mut got = Vec::new();
        // Read at last: what was on its way, then the end (or a reset).
        let read = tokio::time::timeout(Duration::from_secs(30), client.read_to_end(&mut got)).await;
        assert!(read.is_ok(), "the connection ended ({} bytes read)", got.len());
        // (Other tests may cut clients too, never fewer.)
        assert!(cuts() > cut_before, "the cut is counted");
    }

    /// A client that keeps reading is never cut off, however long the
    /// response takes: here a piece comes every 100 ms for 3 s, three
    /// times the stall (each write waits for less).
    #[tokio::test]
    async fn a_client_that_reads_is_not_cut_off() {
        let slow = || async {
            let pieces = futures::stream::iter(0..30).then(|_| async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok::<_, std::convert::Infallible>(bytes::Bytes::from(vec![b'x'; 64 * 1024]))
            });
            Body::from_stream(pieces)
        };
        let app = axum::Router::new().route("/slow", get(slow));
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        tokio::spawn(axum::serve(Connections::new(tcp, Duration::from_secs(1)), app).into_future());
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET /slow HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").await.unwrap();
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert!(got.ends_with(b"0\r\n\r\n"), "the whole body, to its last chunk");
        assert!(got.len() > 30 * 64 * 1024);
    }
}
