use server::config::Config;
use server::seed::{DEMO_ADMIN_EMAIL, DEMO_PASSWORD};
use tracing_subscriber::EnvFilter;

/// glibc gives every thread that allocates its own malloc arena (tokio's
/// workers, sqlx's SQLite threads, the password threads), and after a large
/// block is freed it raises its mmap threshold, so argon2's 19 MiB blocks
/// then stay in the arenas. Two arenas and a fixed 1 MiB threshold keep the
/// server near 250 MB with 1,000 signed-in consoles instead of 450–600 MB
/// (BENCHMARKS.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn cap_malloc_arenas() {
    // SAFETY: mallopt only sets allocator tunables; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn cap_malloc_arenas() {}

fn main() -> anyhow::Result<()> {
    cap_malloc_arenas();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve())
}

async fn serve() -> anyhow::Result<()> {
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
