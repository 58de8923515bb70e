//! ClutchCall's server: configuration, storage, the HTTP surface and the
//! background jobs. `main.rs` and the integration tests both start it
//! through `start`.

pub mod acd;
pub mod api;
pub mod auth;
pub mod backend;
pub mod clock;
pub mod config;
pub mod http;
pub mod load;
pub mod ring;
pub mod seed;
pub mod store;

use crate::acd::Acd;
use crate::backend::ServerBackend;
use crate::config::Config;
use crate::http::AppState;
use crate::store::SharedStore;
use app::functions::backend::SharedBackend;
use leptos::prelude::LeptosOptions;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A server that is accepting connections.
pub struct Running {
    /// The bound address (the real port when the config asked for port 0).
    pub addr: SocketAddr,
    pub store: SharedStore,
    /// The ACD, for in-process callers (tests, the load run).
    pub acd: Arc<Acd>,
    /// The ring channel's hub.
    pub ring: Arc<ring::RingHub>,
    /// Whether this start created the demo org.
    pub seeded_demo: bool,
    shutdown: oneshot::Sender<()>,
    serve: JoinHandle<std::io::Result<()>>,
    jobs: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops like a crash would: nothing is flushed or finished, only what
    /// the store already committed survives.
    pub fn kill(self) {
        for job in &self.jobs {
            job.abort();
        }
        self.serve.abort();
    }

    /// Stops accepting, lets in-flight requests finish, stops the jobs.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(());
        for job in &self.jobs {
            job.abort();
        }
        self.serve.await??;
        Ok(())
    }
}

/// Opens and migrates the database, seeds the demo on an empty one, binds
/// the address and starts serving.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    if config.database_url.is_none() {
        std::fs::create_dir_all(&config.data_dir)?;
    }
    let store = store::connect(&config.database_url()).await?;
    let seeded_demo = config.seed_demo && seed::seed_demo_if_empty(store.as_ref()).await?;

    let listener = tokio::net::TcpListener::bind(config.addr).await?;
    let addr = listener.local_addr()?;
    let leptos_options = LeptosOptions::builder()
        .output_name("clutchcall")
        .site_root(config.site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    let backend: SharedBackend = Arc::new(ServerBackend::new(store.clone(), config.secure_cookies));
    // Offers that expired while the server was down are closed and their
    // calls re-dispatched before the first request is served.
    let acd = Acd::new(store.clone(), config.offer_window_ms, config.wrap_up_ms).await?;
    acd.recover().await?;
    let ring = ring::RingHub::new(acd.clone(), config.presence_ttl_ms);
    let state = AppState { leptos_options, store: store.clone(), backend, acd: acd.clone(), ring: ring.clone() };
    let app = http::router(state);

    let (shutdown, on_shutdown) = oneshot::channel::<()>();
    let serve = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = on_shutdown.await;
            })
            .await
    });
    let mut jobs = vec![tokio::spawn(expire_web_sessions(store.clone())), acd.spawn_expiry_sweeper()];
    jobs.extend(ring.spawn());
    tracing::info!(%addr, database = store.backend_name(), "ClutchCall listening");
    Ok(Running { addr, store, acd, ring, seeded_demo, shutdown, serve, jobs })
}

/// Sweeps expired sign-in sessions so the table does not grow forever.
async fn expire_web_sessions(store: SharedStore) {
    let mut tick = tokio::time::interval(Duration::from_secs(600));
    loop {
        tick.tick().await;
        match store.delete_expired_web_sessions(clock::now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(removed = n, "expired web sessions removed"),
            Err(e) => tracing::warn!(error = %e, "web session sweep failed"),
        }
    }
}
