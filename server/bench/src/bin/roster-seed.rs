//! Seeds a SQLite data dir with a load org of N operators (default 5,000)
//! and an admin, for the roster's keystroke benchmark
//! (`end2end/bench/roster.bench.ts`, figures in BENCHMARKS.md). The rows go
//! in through the server's own store, in one transaction, as the demo seed's do.
//!
//! cargo run -p clutchcall-bench --release --bin roster-seed -- DATA_DIR [N]

use server::auth::hash_password;
use server::seed::{load_org, LOAD_ORG_ID, LOAD_PASSWORD};
use server::store::{NewMembership, NewUser};

/// The admin who opens the roster.
const ADMIN_EMAIL: &str = "roster-admin@load.example";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or_else(|| anyhow::anyhow!("usage: roster-seed DATA_DIR [OPERATORS]"))?;
    let operators: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(5_000);
    std::fs::create_dir_all(&dir)?;
    let store = server::store::connect(&format!("sqlite://{dir}/clutchcall.db")).await?;
    let mut seed = load_org(operators, 1);
    seed.users.push(NewUser {
        id: "u-roster-admin".into(),
        email: ADMIN_EMAIL.into(),
        display_name: "Roster Admin".into(),
        external_id: None,
        password_hash: hash_password(LOAD_PASSWORD),
    });
    seed.memberships.push(NewMembership { org_id: LOAD_ORG_ID.into(), user_id: "u-roster-admin".into(), role: domain::models::Role::Admin });
    store.seed(&seed).await?;
    println!("seeded {operators} operators; sign in as {ADMIN_EMAIL} / {LOAD_PASSWORD}");
    Ok(())
}
