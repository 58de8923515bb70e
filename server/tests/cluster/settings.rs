//! Cluster mode's settings (issue "Scale out"): what cannot work is
//! refused at start, with a sentence that says what to do.

use crate::common;
use server::config::Config;

/// NATS beside an SQLite file is refused before the file is made: one
/// process owns an SQLite file, and instances share one PostgreSQL.
#[tokio::test]
async fn cluster_mode_on_an_sqlite_file_is_refused_with_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut config = Config::local(data.clone(), None, common::site_root());
    config.nats_url = Some("nats://127.0.0.1:4222".into());
    let refused = server::start(config).await.err().expect("refused").to_string();
    assert!(refused.contains("DATABASE_URL=postgres://"), "{refused}");
    assert!(!data.exists(), "nothing was made before the refusal");
}

/// A NATS that does not answer at start is an error naming it, not a
/// cluster member that cannot hear the others.
#[tokio::test]
async fn cluster_mode_whose_nats_does_not_answer_is_refused_naming_it() {
    let Some((url, name)) = common::scratch_pg_database().await else { return };
    // A listener that never answers: the connection is made, NATS's
    // greeting never comes. (On an address of its own: the cluster tests
    // pick 127.0.0.1 ports by binding and letting go, and one held here
    // must not be one of those.)
    let silent = std::net::TcpListener::bind("127.0.0.9:0").unwrap();
    let nats = format!("nats://{}", silent.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::local(dir.path().to_path_buf(), Some(url), common::site_root());
    config.nats_url = Some(nats.clone());
    let started = tokio::time::timeout(std::time::Duration::from_secs(30), server::start(config)).await.expect("told within 30 s");
    let refused = started.err().expect("refused").to_string();
    assert!(refused.contains(&format!("NATS at {nats} does not answer")), "{refused}");
    assert!(refused.contains("unset CLUTCHCALL_NATS_URL"), "{refused}");
    common::drop_pg_database(&name).await;
}
