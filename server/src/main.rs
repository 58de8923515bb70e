use server::config::Config;
use server::seed::{DEMO_ADMIN_EMAIL, DEMO_PASSWORD};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,tower_http=info,sqlx=warn")),
        )
        .init();

    let config = Config::from_env()?;
    let running = server::start(config).await?;
    if running.seeded_demo {
        tracing::info!(
            "created the demo org. Sign in at http://{} as {DEMO_ADMIN_EMAIL} (admin) or \
             asha.rao@northstar.example (operator), password {DEMO_PASSWORD:?}",
            running.addr
        );
    }
    println!("ClutchCall listening on http://{}", running.addr);

    shutdown_signal().await;
    tracing::info!("shutting down: finishing in-flight requests");
    running.stop().await
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sig) => {
                sig.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = terminate => {} }
}
