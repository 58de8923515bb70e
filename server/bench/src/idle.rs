//! Idle consoles at scale (issue "Engine v3"): many open console tabs that
//! only heartbeat, as a large fleet's operators keep them open between
//! calls. One process cannot open more than one loopback address's
//! ephemeral ports (about 28,000) to one server, so the tabs are spread
//! over source addresses 127.0.0.2, 127.0.0.3, …

use domain::ring::{ConsoleMsg, RingMsg};
use futures::{SinkExt, StreamExt};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Tabs per loopback source address (below its ephemeral port range).
const TABS_PER_ADDRESS: usize = 20_000;

/// Raises this process's open-file limit to `wanted` (past the hard limit
/// where the process may: root with CAP_SYS_RESOURCE); servers it starts
/// afterwards inherit it. Each end of every socket is one open file, in
/// this process and in the server.
pub fn raise_open_files(wanted: u64) -> anyhow::Result<()> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read or write the struct we pass and nothing else.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let hard = limit.rlim_max as u64;
    let raised = libc::rlimit { rlim_cur: wanted as libc::rlim_t, rlim_max: (wanted.max(hard)) as libc::rlim_t };
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        anyhow::bail!(
            "this run needs {wanted} open files per process and the hard limit here is {hard} ({}): fewer --idle tabs, or raise the limit (ulimit -Hn as root)",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// User + system CPU seconds the process `pid` has used.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ')'.
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks: f64 = [11, 12].iter().filter_map(|&i| fields.get(i)?.parse::<f64>().ok()).sum();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Opens `tabs` console tabs for each sign-in cookie at `base` (tab `n`
/// overall from source address 127.0.0.(2 + n / 20,000)); returns once each
/// has been welcomed. The tabs heartbeat every `heartbeat` (a browser's is
/// `HEARTBEAT_MS`; spread over the interval) and never send Ready, so they
/// are never offered a call.
pub async fn open(base: &str, cookies: &[String], tabs: usize, heartbeat: Duration) -> anyhow::Result<usize> {
    let server: SocketAddr = base.trim_start_matches("http://").parse()?;
    let mut welcomed = Vec::new();
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
    for (n, cookie) in cookies.iter().flat_map(|c| std::iter::repeat_n(c, tabs)).enumerate() {
        let source = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + (n / TABS_PER_ADDRESS) as u8));
        let (told, welcome) = oneshot::channel();
        let (upgrade, permit) = (upgrade(base, cookie)?, gate.clone().acquire_owned().await?);
        let phase = Duration::from_millis((n as u64 * 7919) % (heartbeat.as_millis() as u64).max(1));
        tokio::spawn(async move {
            let ws = match connect(source, server, upgrade).await {
                Ok(ws) => ws,
                Err(e) => return drop(told.send(Err(e))),
            };
            drop(permit);
            tab(ws, phase, heartbeat, told).await;
        });
        welcomed.push(welcome);
    }
    let mut open = 0;
    for welcome in welcomed {
        welcome.await.map_err(|_| anyhow::anyhow!("an idle tab ended before its welcome"))??;
        open += 1;
    }
    Ok(open)
}

fn upgrade(base: &str, cookie: &str) -> anyhow::Result<tokio_tungstenite::tungstenite::handshake::client::Request> {
    let mut request = format!("{}/ws", base.replace("http://", "ws://")).into_client_request()?;
    request.headers_mut().insert("cookie", cookie.parse()?);
    request.headers_mut().insert("origin", base.parse()?);
    Ok(request)
}

type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

async fn connect(source: IpAddr, server: SocketAddr, request: tokio_tungstenite::tungstenite::handshake::client::Request) -> anyhow::Result<Socket> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    let stream = socket.connect(server).await?;
    Ok(tokio_tungstenite::client_async(request, stream).await?.0)
}

/// One idle tab: waits for its Welcome, then heartbeats and reads until the
/// server closes it.
async fn tab(ws: Socket, phase: Duration, heartbeat_every: Duration, told: oneshot::Sender<anyhow::Result<()>>) {
    let (mut sink, mut stream) = ws.split();
    let mut told = Some(told);
    let heartbeat = Message::Text(serde_json::to_string(&ConsoleMsg::Heartbeat).expect("json").into());
    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + phase, heartbeat_every);
    loop {
        tokio::select! {
            _ = every.tick() => {
                if sink.send(heartbeat.clone()).await.is_err() { break; }
            }
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    if let Some(told) = told.take() {
                        let welcomed = matches!(serde_json::from_str::<RingMsg>(&text), Ok(RingMsg::Welcome { .. }));
                        let _ = told.send(if welcomed { Ok(()) } else { Err(anyhow::anyhow!("an idle tab was refused: {text}")) });
                    }
                }
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
    if let Some(told) = told.take() {
        let _ = told.send(Err(anyhow::anyhow!("an idle tab closed before its welcome")));
    }
}
