//! ClutchCall's server: configuration, storage, the engine, the services,
//! the HTTP surface and the background jobs. `main.rs` and the integration
//! tests both start it through `start`.

pub mod api;
pub mod auth;
pub mod backend;
pub mod bus;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod datasets;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod recent;
pub mod relay;
pub mod ring;
pub mod seed;
pub mod services;
pub mod state;
pub mod store;
pub mod task;
pub mod webhooks;

use crate::backend::ServerBackend;
use crate::bus::{InProcessBus, SharedBus};
use crate::config::Config;
use crate::engine::Engine;
use crate::http::origin::PublicOrigins;
use crate::state::AppState;
use crate::services::{Accounts, OpenTabs, RobotRegistry, SessionService, SignInThrottle};
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
    /// For tests that look inside; the server itself reaches it only
    /// through the engine and the services.
    pub store: SharedStore,
    pub engine: Arc<Engine>,
    /// Session records, telemetry and operator stops (for tests that write
    /// through the service).
    pub sessions: Arc<SessionService>,
    /// Where `/metrics` listens, if it does.
    pub metrics_addr: Option<SocketAddr>,
    /// Whether this start created the demo org.
    pub seeded_demo: bool,
    /// Whether the database holds no org at all (then say how to create one).
    pub empty: bool,
    shutdown: oneshot::Sender<()>,
    serve: JoinHandle<std::io::Result<()>>,
    jobs: Vec<JoinHandle<()>>,
    /// This instance's name: its webhook claims (a restart under the same
    /// name takes them back at once, as it does its org leases).
    instance: String,
    /// Cluster mode: this run's places against the caps, ended with it.
    places: Option<Arc<crate::services::places::SharedPlaces>>,
    /// Closes the relay's sockets at a stop ("restart") and says farewell
    /// to the other instances' relays.
    relay: Arc<relay::Relay>,
}

impl Running {
    /// Stops like a crash would: nothing is flushed or finished, only what
    /// the store already committed survives.
    pub fn kill(self) {
        self.engine.abort();
        for job in &self.jobs {
            job.abort();
        }
        self.serve.abort();
    }

    /// Stops accepting, lets in-flight requests finish, stops the jobs,
    /// closes the relay's sockets with "restart" (1012; up to 2 s for
    /// their close frames) and tells the other instances it is gone.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(());
        for job in &self.jobs {
            job.abort();
        }
        // The relay's sockets outlive the graceful shutdown of requests:
        // they are told to connect again now, not reset at the exit, and
        // the other instances stop counting them at once. (Again after the
        // requests in flight: one may have upgraded a socket meanwhile.)
        self.relay.farewell().await;
        let served = self.serve.await;
        self.relay.sockets_closed().await;
        // Another instance delivers this one's webhook endpoints at once.
        webhooks::release(&self.store, &self.instance).await;
        if let Some(places) = &self.places {
            places.end().await;
        }
        self.engine.stop().await;
        served??;
        Ok(())
    }
}

/// Opens and migrates the database, seeds the demo on an empty one, starts
/// the engine, binds the address and starts serving.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    if config.nats_url.is_some() && !config.database_url().starts_with("postgres") {
        anyhow::bail!("cluster mode (CLUTCHCALL_NATS_URL) shares one PostgreSQL database between instances: set DATABASE_URL=postgres://…; an SQLite file belongs to one process");
    }
    if config.database_url.is_none() {
        std::fs::create_dir_all(&config.data_dir)?;
    }
    let store = store::connect(&config.database_url()).await?;
    let listener = tokio::net::TcpListener::bind(config.addr).await?;
    let addr = listener.local_addr()?;
    if config.test_orgs && !addr.ip().is_loopback() {
        anyhow::bail!("CLUTCHCALL_TEST_ORGS=1 lets anyone create orgs with a public password: it is for browser tests on a loopback address, and {addr} is not one");
    }
    let seeded_demo = config.demo.applies(addr) && seed::seed_demo_if_empty(store.as_ref()).await?;
    let empty = !seeded_demo && store.is_empty().await?;

    let leptos_options = LeptosOptions::builder()
        .output_name("clutchcall")
        .site_root(config.site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    // Rate limits: in memory on one instance; in the database in cluster
    // mode, so they hold however requests are spread over the instances.
    let limits_kept = match config.nats_url {
        Some(_) => crate::services::limits::Kept::InDatabase(store.clone()),
        None => crate::services::limits::Kept::InMemory,
    };
    let throttle = Arc::new(SignInThrottle::new(config.sign_ins_per_address_per_minute, &limits_kept));
    let tabs = OpenTabs::with_cap(config.tabs_per_person);
    let cookie = app::session_cookie::SessionCookie { secure: config.cookies_secure() };
    // This run of this instance, in its org leases and on its events.
    let instance = config.instance_name(addr);
    let run = format!("{instance}/{}", uuid::Uuid::now_v7().simple());
    let nats = match &config.nats_url {
        None => None,
        Some(url) => Some(
            crate::bus::nats::NatsBus::connect(url, &run, &store.cluster_id().await?)
                .await
                .map_err(|e| anyhow::anyhow!("cluster mode needs NATS, and NATS at {url} does not answer ({e}): start it, or unset CLUTCHCALL_NATS_URL"))?,
        ),
    };
    let bus: SharedBus = match &nats {
        Some(nats) => nats.clone(),
        None => InProcessBus::new(),
    };
    // Each org's dispatcher reloads its calls and re-dispatches offers that
    // went stale while the server was down before it answers anything.
    // Installed before the engine, which records which orgs it dispatches.
    crate::metrics::handle();
    let forwarding = nats.as_deref().map(|nats| crate::engine::forward::Forwarding::new(nats, store.clone()));
    // Cluster mode: which operators ring in orgs dispatched elsewhere (rule D10).
    let busy = Arc::new(crate::engine::busy::BusyOperators::default());
    let busy_news = match &nats {
        Some(nats) => Some(crate::cluster::share_busy(nats, &busy, config.engine_settings().offer_window_ms).await?),
        None => None,
    };
    let engine = Engine::start(store.clone(), bus.clone(), clock::Clock::system(), config.engine_settings(), &run, forwarding, busy).await?;
    let busy_job = busy_news.map(|heard| crate::cluster::hear_busy(heard, run.clone(), engine.clone()));
    let sessions = Arc::new(SessionService::new(store.clone(), bus.clone()));
    let bookings = Arc::new(crate::services::BookingService::new(store.clone(), bus.clone(), engine.clone(), config.booking_caps));
    let quotas = Arc::new(crate::services::Quotas::new(&limits_kept));
    let (robots, lapse_job) = RobotRegistry::load(store.clone(), bus.clone(), tabs.clone()).await?;
    // Cluster mode: revocations made on any instance reach the sockets and token caches of all.
    let revocations_job = match &nats {
        Some(nats) => Some(crate::cluster::join(nats.clone(), store.clone(), tabs.clone(), robots.clone(), config.revocation_sweep).await?),
        None => None,
    };
    let origins = PublicOrigins::new(config.public_origin.as_deref(), addr);
    let people = Arc::new(crate::services::PeopleService::new(store.clone(), bus.clone(), engine.clone(), tabs.clone(), origins.primary()));
    // The relay records ACTIVE sessions; COMPLETED recordings become episodes.
    let (finished, recordings) = tokio::sync::mpsc::unbounded_channel();
    let recorder = Arc::new(relay::recording::Recorder::start(config.data_dir.join("recordings"), finished, config.relay.recording_max_bytes)?);
    // Cluster mode: a session's edge agent and cockpit may be on different instances.
    let relay_link = match (&config.nats_url, &nats) {
        (Some(url), Some(nats)) => Some(
            relay::link::RelayLink::connect(url, nats.publisher(), &store.cluster_id().await?)
                .await
                .map_err(|e| anyhow::anyhow!("cluster mode needs NATS, and NATS at {url} does not answer the relay's connection ({e})"))?,
        ),
        _ => None,
    };
    // Recordings whose finish never came (their instance died) are finished by whichever instance looks first.
    let tidy_store = store.clone();
    let tidy_job = tokio::spawn(relay::recording::tidy(Arc::downgrade(&recorder), config.recording_tidy, async move |session_id: &str| {
        Ok(tidy_store.session_state(session_id).await?)
    }));
    let (relay, relay_job) = relay::Relay::start(bus.clone(), clock::Clock::system(), recorder, config.relay, relay_link, sessions.clone());
    let datasets = Arc::new(datasets::DatasetService::new(store.clone(), bus.clone(), config.data_dir.join("datasets")));
    let episodes_job = tokio::spawn(datasets.clone().make_episodes(recordings));
    // Cluster mode: caps on open sockets and running exports count every instance's.
    let (places, places_job) = match &nats {
        Some(_) => {
            let (places, keeper) = crate::services::places::SharedPlaces::start(store.clone(), run.clone()).await?;
            tabs.share_places(places.clone());
            datasets.share_places(places.clone());
            (Some(places), Some(keeper))
        }
        None => (None, None),
    };
    let passwords = Arc::new(crate::services::PasswordChecker::new(crate::services::passwords::HASHING_THREADS, crate::services::passwords::WAITING_CHECKS));
    let accounts = Arc::new(Accounts::new(store.clone(), robots.clone(), throttle.clone(), passwords.clone(), tabs.clone(), cookie));
    let outbound = webhooks::outbound::Outbound::new(config.webhooks.allow_private)?;
    let integrations = Arc::new(crate::services::IntegrationService::new(store.clone(), tabs.clone(), outbound.clone()));
    let webhooks_job = webhooks::start(store.clone(), outbound, instance.clone(), webhooks::Settings { first_retry_ms: config.webhooks.first_retry_ms });
    let prune_job = tokio::spawn(prune_events(integrations.clone(), config.event_retention_days));
    let views = Arc::new(crate::services::OrgViews::new(store.clone(), engine.clone(), relay.clone()));
    let relay_handle = relay.clone();
    let backend: SharedBackend = Arc::new(ServerBackend {
        engine: engine.clone(),
        views: views.clone(),
        sessions: sessions.clone(),
        bookings,
        robots: robots.clone(),
        quotas: quotas.clone(),
        accounts: accounts.clone(),
    });
    let test_orgs = match config.test_orgs {
        true => Some(Arc::new(crate::services::TestOrgs::new(store.clone(), robots.clone()).await)),
        false => None,
    };
    let sign_in_throttle = throttle.clone();
    let state = AppState::new(state::AppServices {
        leptos_options,
        backend,
        engine: engine.clone(),
        robots,
        sessions: sessions.clone(),
        accounts,
        integrations,
        tabs,
        origins,
        people,
        relay,
        datasets,
        robot_limits: Arc::new(http::robot_rate::RobotRateLimit::new(&limits_kept)),
        throttle: sign_in_throttle,
        trusted_proxies: Arc::new(config.trusted_proxies.clone()),
        passwords,
        quotas: quotas.clone(),
        presence_ttl_ms: config.presence_ttl_ms,
        client_stall: config.client_stall,
        test_orgs,
    });
    let app = http::router(state);

    let (shutdown, on_shutdown) = oneshot::channel::<()>();
    let listener = http::connections::Connections::new(listener, config.client_stall);
    // Small frames (offers, presence) go out at once, not after the peer's
    // delayed ACK (Nagle's algorithm cost ~40 ms on a burst of frames).
    let listener = axum::serve::ListenerExt::tap_io(listener, |connection| {
        if let Err(e) = connection.tcp().set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    let serve = tokio::spawn(async move {
        // The peer address reaches handlers (sign-in limits are per address).
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
            .with_graceful_shutdown(async {
                let _ = on_shutdown.await;
            })
            .await
    });
    let mut jobs = vec![tokio::spawn(expire_web_sessions(store.clone())), tokio::spawn(maintain(store.clone())), lapse_job, tokio::spawn(sweep_limits(throttle, quotas, limits_kept.clone())), relay_job, episodes_job, tidy_job, webhooks_job, prune_job];
    jobs.extend(revocations_job);
    jobs.extend(busy_job);
    jobs.extend(places_job);
    let metrics_addr = match config.metrics_addr {
        Some(at) => match http::metrics::serve(at, views).await {
            Ok((bound, task)) => {
                jobs.push(task);
                Some(bound)
            }
            // Metrics are for the ops team's tools: their port being taken
            // must not keep dispatch down.
            Err(e) => {
                tracing::warn!(%at, error = %e, "metrics address unavailable: /metrics is off");
                None
            }
        },
        None => None,
    };
    tracing::info!(%addr, database = store.backend_name(), "ClutchCall listening");
    Ok(Running { addr, store, engine, sessions, metrics_addr, seeded_demo, empty, shutdown, serve, jobs, instance, places, relay: relay_handle })
}

/// Forgets rate limits that have recovered (in memory, and in the
/// database in cluster mode), so a flood of distinct emails or addresses
/// leaves no state behind.
async fn sweep_limits(throttle: Arc<SignInThrottle>, quotas: Arc<crate::services::Quotas>, kept: crate::services::limits::Kept) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tick.tick().await;
        throttle.sweep();
        quotas.sweep();
        // (On one instance the table is empty: no write for nothing.)
        if let crate::services::limits::Kept::InDatabase(store) = &kept {
            if let Err(e) = store.forget_recovered_limits(clock::now_ms()).await {
                tracing::warn!(error = %e, "rate limit sweep failed");
            }
        }
    }
}

/// How often the store looks for tables to keep fit (`Store::maintain`):
/// soon enough that a table growing from empty is analyzed within seconds.
const MAINTAIN_EVERY: Duration = Duration::from_secs(5);

/// Keeps the tables fit where the database does not (PostgreSQL with
/// autovacuum off), from the start and every 5 s.
async fn maintain(store: SharedStore) {
    let mut tick = tokio::time::interval(MAINTAIN_EVERY);
    // A slow vacuum is not followed by a burst of catch-up ones.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut told = false;
    loop {
        tick.tick().await;
        match store.maintain().await {
            Ok(true) if !told => {
                tracing::warn!("PostgreSQL's autovacuum is off: this instance vacuums and analyzes tables as autovacuum would");
                told = true;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "table maintenance failed"),
        }
    }
}

/// Deletes event log records older than the retention, from the start and
/// every ten minutes (a reader further behind gets 410).
async fn prune_events(integrations: Arc<crate::services::IntegrationService>, retention_days: u32) {
    let keep_ms = i64::from(retention_days) * 24 * 60 * 60 * 1000;
    let mut tick = tokio::time::interval(Duration::from_secs(600));
    loop {
        tick.tick().await;
        match integrations.prune(clock::now_ms() - keep_ms).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(removed = n, retention_days, "event log records past the retention removed"),
            Err(e) => tracing::warn!(error = %e, "event log pruning failed"),
        }
    }
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
