//! A TCP forwarder that can go silent, for an instance cut off from the
//! database (issue "Scale out"). Cut, it forwards nothing either way and
//! keeps every connection open, as a network that drops packets does:
//! nothing tells either end. Mended, what waited goes through.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    /// Where it listens, on 127.0.0.1.
    pub port: u16,
    cut: watch::Sender<bool>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy to the server `url` names (`scheme://user@host:port/…`),
    /// and the same URL through it.
    pub async fn to(url: &str) -> (Proxy, String) {
        let mut through = reqwest::Url::parse(url).unwrap();
        let target = format!("{}:{}", through.host_str().unwrap(), through.port().expect("the URL names its port"));
        let proxy = Proxy::start(target).await;
        through.set_host(Some("127.0.0.1")).unwrap();
        through.set_port(Some(proxy.port)).unwrap();
        (proxy, through.to_string())
    }

    /// Forwards every connection to `target` (`host:port`).
    async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = watch::Sender::new(false);
        let heard = cut.subscribe();
        let accepting = tokio::spawn(async move {
            while let Ok((near, _)) = listener.accept().await {
                let Ok(far) = TcpStream::connect(&target).await else { continue };
                let ((near_read, near_write), (far_read, far_write)) = (near.into_split(), far.into_split());
                tokio::spawn(pipe(near_read, far_write, heard.clone()));
                tokio::spawn(pipe(far_read, near_write, heard.clone()));
            }
        });
        Proxy { port, cut, accepting }
    }

    /// Nothing goes through from now on, either way.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// What waited goes through, and so does the rest.
    pub fn mend(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Copies `from` to `to` while not cut; once the proxy is gone (its
/// sender dropped) or either end closes, it ends.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut cut: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if cut.wait_for(|cut| !*cut).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            gone = cut.wait_for(|cut| *cut) => match gone {
                Ok(_) => continue,
                Err(_) => return,
            },
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Read as the cut came: held until mended.
        if cut.wait_for(|cut| !*cut).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
