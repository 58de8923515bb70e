use clap::{Parser, Subcommand};
use server::config::Config;
use server::seed::{DEMO_ADMIN_EMAIL, DEMO_PASSWORD};
use std::io::BufRead;
use tracing_subscriber::EnvFilter;

/// ClutchCall: distress calls from robots, rung to the nearest certified
/// operator. Every setting is an environment variable (or the flag beside
/// it); none is needed for the demo.
#[derive(Parser)]
#[command(name = "server", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    settings: server::config::Settings,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the console and the API (what runs with no command).
    Serve,
    /// Create an organisation and its first admin on the configured
    /// database. The password comes from CLUTCHCALL_ADMIN_PASSWORD, or else
    /// the first line of standard input.
    CreateAdmin {
        /// The organisation's name, e.g. "Northstar Robotics".
        #[arg(long)]
        org: String,
        /// The admin's email: what they sign in with.
        #[arg(long)]
        email: String,
        /// The admin's name as colleagues see it.
        #[arg(long)]
        name: String,
    },
}

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
    server::config::forget_empty_settings();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let config = Config::from_settings(cli.settings);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => runtime.block_on(serve(config)),
        Command::CreateAdmin { org, email, name } => runtime.block_on(create_admin(config, &org, &email, &name)),
    }
}

/// One line of standard input; typed at a terminal, it is not shown.
fn read_line_unechoed() -> std::io::Result<String> {
    let mut line = String::new();
    // SAFETY: termios is plain data; tcgetattr fills it, or fails and we
    // read with echo as a pipe would (nothing is shown there anyway).
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    let terminal = unsafe { libc::isatty(0) == 1 && libc::tcgetattr(0, &mut saved) == 0 };
    if terminal {
        let mut quiet = saved;
        quiet.c_lflag &= !libc::ECHO;
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &quiet) };
    }
    let read = std::io::stdin().lock().read_line(&mut line);
    if terminal {
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &saved) };
        eprintln!();
    }
    read.map(|_| line)
}

async fn create_admin(config: Config, org: &str, email: &str, name: &str) -> anyhow::Result<()> {
    let password = match std::env::var("CLUTCHCALL_ADMIN_PASSWORD") {
        Ok(password) => password,
        Err(_) => {
            eprintln!("password for {email} (one line on standard input):");
            let line = read_line_unechoed()?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
    };
    if config.database_url.is_none() {
        std::fs::create_dir_all(&config.data_dir)?;
    }
    let store = server::store::connect(&config.database_url()).await?;
    let org_id = server::seed::create_first_admin(store.as_ref(), org, email, name, &password).await?;
    println!("created organisation {org:?} ({org_id}) with admin {email}: start the server and sign in");
    Ok(())
}

async fn serve(config: Config) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,tower_http=info,sqlx=warn")),
        )
        .init();

    let running = server::start(config).await?;
    if running.seeded_demo {
        println!(
            "\n!! DEMO DATA: created the demo org, whose password ({DEMO_PASSWORD:?}) and robot tokens are PUBLIC.\n\
             !! Sign in at http://{} as {DEMO_ADMIN_EMAIL} (admin) or asha.rao@northstar.example (operator).\n\
             !! Never expose this database; set CLUTCHCALL_DEMO=0 for real data.\n",
            running.addr
        );
    } else if running.empty {
        println!(
            "\nThe database holds no organisation. Create the first one and its admin:\n  \
             CLUTCHCALL_ADMIN_PASSWORD=… server create-admin --org \"Your org\" --email you@example.com --name \"Your Name\"\n\
             (demo data is created only when the server listens on a loopback address, or with CLUTCHCALL_DEMO=1)\n"
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
