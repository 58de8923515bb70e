//! Revocations and robot records on every instance (issue "Scale out"): a
//! sign-out, a token rotation or a robot's edit made on one instance holds
//! on the others, by message or, when that is lost, by the sweep; a robot's
//! silence is told where its heartbeats stopped.

use super::{admin_cookie, call_at, cookie_at, heartbeat, nats_url, raise, Cluster, ORG, OwnNats};
use crate::common::{self, scalar};
use reqwest::StatusCode;

/// Waits (at most `within_s`) until the instance at `base` refuses the
/// demo robot's `token`.
async fn until_refused(base: &str, token: &str, within_s: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(within_s);
    while heartbeat(base, token).await != StatusCode::UNAUTHORIZED {
        assert!(std::time::Instant::now() < deadline, "a token revoked in the database still works on the instance at {base}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Revocations hold on every instance: a sign-out on one closes the same
/// sign-in's socket on another, and a token rotated on one stops working
/// on another that had it cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_and_a_token_rotation_on_one_instance_hold_on_the_other() {
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (&cluster.servers[0], &cluster.servers[1]);
    // The second instance caches the robot's token.
    assert_eq!(heartbeat(&second.base, &server::seed::demo_robot_token("uk-pick-01")).await, StatusCode::OK);

    // Dana's sign-in on the first opens a wallboard socket on the second.
    let cookie = admin_cookie(&first.base).await;
    let mut wallboard = common::Tab::open_at(&second.base, &cookie, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    assert_eq!(call_at(&first.base, &cookie, "sign_out", &[]).await.status(), StatusCode::OK);
    assert!(wallboard.closed_within(std::time::Duration::from_secs(5)).await, "signed out on the first, the second's socket closed");

    // A new token on the first: the old one fails on the second (its cache
    // is told through NATS, in milliseconds; polled, never slept).
    let cookie = admin_cookie(&first.base).await;
    let rotated = call_at(&first.base, &cookie, "rotate_robot_token", &[("robot_id", "uk-pick-01")]).await;
    assert_eq!(rotated.status(), StatusCode::OK);
    let token: String = rotated.json().await.unwrap();
    until_refused(&second.base, &server::seed::demo_robot_token("uk-pick-01"), 5).await;
    assert_eq!(heartbeat(&second.base, &token).await, StatusCode::OK, "the new one works there");
    cluster.finish().await;
}

/// Asha's sockets with `cookie`: her console on `console_at`, the watch
/// of her own sessions on `watch_at`, each heard from once.
async fn ashas_sockets(console_at: &str, watch_at: &str, cookie: &str) -> [common::Tab; 2] {
    use domain::ring::RingMsg;
    let mut console = common::Tab::open_at(console_at, cookie, "/ws").await;
    console.until(|m| matches!(m, RingMsg::Welcome { .. }).then_some(())).await;
    let mut watch = common::Tab::open_at(watch_at, cookie, "/ws?watch=mine").await;
    watch.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    [console, watch]
}

/// Each of `tabs` closes within 5 s; `why` is what ended them.
async fn all_closed(tabs: [common::Tab; 2], why: &str) {
    for (mut tab, at) in tabs.into_iter().zip(["the second", "the third"]) {
        assert!(tab.closed_within(std::time::Duration::from_secs(5)).await, "{why} on the first: Asha's socket on {at} is still open");
    }
}

/// The other ways a sign-in or a membership ends hold on every instance,
/// by message alone (no sweep): a password changed, a role changed and a
/// member removed on the first close the person's sockets on the second
/// and the third, and a robot retired on the first is refused on both,
/// which had its token cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_a_role_a_removal_and_a_retirement_on_one_instance_hold_on_the_two_others() {
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start_with(Some(&nats), 3, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "3600".into())]).await else { return };
    let (first, second, third) = (cluster.base(0), cluster.base(1), cluster.base(2));
    let admin = admin_cookie(first).await;

    // Her password, changed from a sign-in on the first, ends her other
    // sign-in's sockets (that one was made on the second).
    let (changing, other) = (cookie_at(first, common::OPERATOR).await, cookie_at(second, common::OPERATOR).await);
    let tabs = ashas_sockets(second, third, &other).await;
    let new = "a-longer-passphrase-of-ashas";
    let changed = call_at(first, &changing, "change_password", &[("current", server::seed::DEMO_PASSWORD), ("new", new), ("confirm", new)]).await;
    assert_eq!(changed.status(), StatusCode::OK);
    all_closed(tabs, "her password changed").await;

    // A new role, then her removal from the org: each ends her sockets in it.
    let tabs = ashas_sockets(second, third, &changing).await;
    assert_eq!(call_at(first, &admin, "set_member_role", &[("user_id", "u-asha"), ("role", "admin")]).await.status(), StatusCode::OK);
    all_closed(tabs, "her role changed").await;
    let tabs = ashas_sockets(second, third, &changing).await;
    assert_eq!(call_at(first, &admin, "remove_member", &[("user_id", "u-asha")]).await.status(), StatusCode::OK);
    all_closed(tabs, "her removal").await;

    // A robot retired on the first: its token, cached on the others, fails there.
    let token = server::seed::demo_robot_token("uk-pick-01");
    for base in [second, third] {
        assert_eq!(heartbeat(base, &token).await, StatusCode::OK);
    }
    assert_eq!(call_at(first, &admin, "retire_robot", &[("robot_id", "uk-pick-01")]).await.status(), StatusCode::OK);
    for base in [second, third] {
        until_refused(base, &token, 5).await;
    }
    cluster.finish().await;
}

/// The skill a call raised by the demo robot at the instance at `base` is
/// dispatched on (from the robot's record as that instance has it); the
/// call, queued (nobody is ready), is withdrawn.
async fn skill_raised_at(base: &str) -> String {
    let res = raise(base, "uk-pick-01").await;
    assert_eq!(res.status(), StatusCode::ACCEPTED, "queued: nobody is ready");
    let body: serde_json::Value = res.json().await.unwrap();
    let session = body["sessionId"].as_str().unwrap();
    let withdrawn = common::http().delete(format!("{base}/v1/sessions/{session}")).bearer_auth(server::seed::demo_robot_token("uk-pick-01"));
    assert_eq!(withdrawn.send().await.unwrap().status(), StatusCode::OK);
    body["skill"].as_str().unwrap().to_string()
}

/// Waits (at most `within_s`) until the demo robot's calls at `base` are
/// dispatched on `skill`.
async fn until_raised_as(base: &str, skill: &str, within_s: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(within_s);
    while skill_raised_at(base).await != skill {
        assert!(std::time::Instant::now() < deadline, "the instance at {base} still raises the robot's calls as it was before its edit");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A robot edited on one instance raises its calls as edited on another
/// that had its record cached: that instance is told through NATS, in
/// milliseconds (the sweep, a minute away, plays no part).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_edited_on_one_instance_raises_calls_as_edited_on_the_other() {
    let Some(nats) = nats_url().await else { return };
    // No sweep during the test: only the edit's message can tell the second.
    let Some(cluster) = Cluster::start_with(Some(&nats), 2, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "3600".into())]).await else { return };
    let (first, second) = (cluster.base(0), cluster.base(1));
    assert_eq!(skill_raised_at(second).await, "pick-place", "as seeded, and now cached on the second");
    let cookie = admin_cookie(first).await;
    assert_eq!(call_at(first, &cookie, "edit_robot", &EDITED).await.status(), StatusCode::OK);
    until_raised_as(second, "welding", 5).await;
    cluster.finish().await;
}

/// When the demo robot's `offline` reaches `tab` (kept open with pings
/// meanwhile), `within` at most.
async fn robot_offline_heard(tab: &mut common::Tab, within: std::time::Duration) -> std::time::Instant {
    use domain::events::OrgEvent;
    use domain::models::RegistryStatus;
    use domain::ring::{ConsoleMsg, RingMsg};
    let deadline = std::time::Instant::now() + within;
    let mut pinged = std::time::Instant::now();
    for nonce in 1.. {
        assert!(std::time::Instant::now() < deadline, "the robot's silence was never told");
        match tab.try_next(std::time::Duration::from_secs(2)).await {
            Ok(Some(RingMsg::Org { event: OrgEvent::RobotStatus { robot_id, status: RegistryStatus::Offline, .. } })) if robot_id == "uk-pick-01" => break,
            Ok(_) => {}
            Err(()) => panic!("the wallboard closed"),
        }
        // Within the socket's silence TTL (20 s), not after every message.
        if pinged.elapsed() >= std::time::Duration::from_secs(2) {
            tab.send(ConsoleMsg::Ping { nonce }).await;
            pinged = std::time::Instant::now();
        }
    }
    std::time::Instant::now()
}

/// A robot whose edge agent moved from one instance to another is told
/// offline when it falls silent there, not when its silence on the first
/// would have come: the store, which has its later heartbeat, decides, and
/// the instance that logs the silence tells it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_whose_agent_moved_to_another_instance_is_told_offline_only_once_silent_there() {
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (cluster.base(0), cluster.base(1));
    let cookie = admin_cookie(first).await;
    let mut wallboard = common::Tab::open_at(first, &cookie, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    let token = server::seed::demo_robot_token("uk-pick-01");
    assert_eq!(heartbeat(first, &token).await, StatusCode::OK);
    // (The spacing the scenario needs: the first's silence would end 2 s
    // before the second's.)
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let moved = std::time::Instant::now();
    assert_eq!(heartbeat(second, &token).await, StatusCode::OK);
    let silent = std::time::Duration::from_millis(domain::rules::ROBOT_HEARTBEAT_TIMEOUT_MS as u64);
    let told = robot_offline_heard(&mut wallboard, silent + std::time::Duration::from_secs(10)).await;
    assert!(told >= moved + silent, "told offline {:?} after its last heartbeat", told - moved);
    cluster.finish().await;
}

/// The demo robot's edit: a new reqCert (so a new skill), the rest as seeded.
const EDITED: [(&str, &str); 5] = [("robot_id", "uk-pick-01"), ("model", "Franka FR3"), ("site", "Leeds Hub"), ("pop", "uk-london"), ("req_cert", "welding · tier-1")];

/// The instance that heard a robot's last heartbeat reports it offline
/// when its heartbeats stop, though the robot was edited on another
/// instance meanwhile (which makes this one forget its cached record).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_edited_elsewhere_is_still_reported_offline_where_its_heartbeats_stopped() {
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (cluster.base(0), cluster.base(1));
    assert_eq!(heartbeat(second, &server::seed::demo_robot_token("uk-pick-01")).await, StatusCode::OK);
    let cookie = admin_cookie(first).await;
    assert_eq!(call_at(first, &cookie, "edit_robot", &EDITED).await.status(), StatusCode::OK);
    // Only the second heard a heartbeat: only it can tell the silence.
    let logged = format!("SELECT COUNT(*) FROM org_events WHERE org_id = '{ORG}' AND robot_id = 'uk-pick-01' AND kind = 'robot.offline'");
    let silent = std::time::Duration::from_millis(domain::rules::ROBOT_HEARTBEAT_TIMEOUT_MS as u64);
    let deadline = std::time::Instant::now() + silent + std::time::Duration::from_secs(10);
    while scalar(&cluster.url, &logged).await == 0 {
        assert!(std::time::Instant::now() < deadline, "the robot's silence was never reported");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    cluster.finish().await;
}

/// An edit whose message no instance heard (made in the database alone)
/// still reaches a cached record within the sweep, as a lost revocation does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_edit_no_instance_heard_of_takes_effect_within_the_sweep() {
    use sqlx::Connection;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start_with(Some(&nats), 2, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "2".into())]).await else { return };
    let second = cluster.base(1);
    assert_eq!(skill_raised_at(second).await, "pick-place", "as seeded, and now cached on the second");
    let mut db = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    let edit = format!("UPDATE robots SET req_cert = 'welding · tier-1' WHERE org_id = '{ORG}' AND id = 'uk-pick-01'");
    assert_eq!(sqlx::query(&edit).execute(&mut db).await.unwrap().rows_affected(), 1);
    until_raised_as(second, "welding", 10).await;
    cluster.finish().await;
}

/// A revocation lost on the way between instances still takes effect.
/// Changes made in the database alone stand for changes whose revocations
/// never reached the second instance: it keeps trusting what it cached
/// until it learns something may have been lost (another instance skipped
/// a number on the revocations subject or tallied more than was heard, or
/// NATS came back after an outage); then it checks its sockets and cached tokens against the
/// database, and what no longer holds ends there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocations_lost_on_the_way_take_effect_after_a_gap_or_a_reconnect() {
    use domain::ring::{RingError, RingMsg};
    use futures::StreamExt;
    use server::auth::token_hash;
    use sqlx::Connection;
    let Some(nats) = OwnNats::start(None).await else { return };
    // No sweep during the test: only the counts may notice the losses.
    let Some(cluster) = Cluster::start_with(Some(&nats.url()), 2, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "3600".into())]).await else { return };
    let second = cluster.base(1).to_string();
    let mut db = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    async fn rotate_unheard(db: &mut sqlx::PgConnection, token: &str) {
        let sql = format!("UPDATE robots SET token_hash = $1 WHERE org_id = '{ORG}' AND id = 'uk-pick-01'");
        assert_eq!(sqlx::query(&sql).bind(server::auth::token_hash(token)).execute(db).await.unwrap().rows_affected(), 1);
    }

    // The second caches the robot's token; an admin's wallboard is open there.
    let old = server::seed::demo_robot_token("uk-pick-01");
    assert_eq!(heartbeat(&second, &old).await, StatusCode::OK);
    let cookie = admin_cookie(&second).await;
    let mut wallboard = common::Tab::open_at(&second, &cookie, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    let sign_in = cookie.split_once('=').unwrap().1;
    rotate_unheard(&mut db, "rotated-unheard-1").await;
    sqlx::query("DELETE FROM web_sessions WHERE token_hash = $1").bind(token_hash(sign_in)).execute(&mut db).await.unwrap();
    assert_eq!(heartbeat(&second, &old).await, StatusCode::OK, "unheard, the second still trusts its cache");

    // Another instance's revocations, in order from its first, are applied
    // (the second sign-in's socket closes).
    let cluster_id: String = sqlx::query_scalar("SELECT id FROM cluster_identity").fetch_one(&mut db).await.unwrap();
    let raw = async_nats::connect(nats.url()).await.unwrap();
    let revoke = |seq: &'static str, secret: String| {
        let (raw, subject) = (raw.clone(), format!("clutchcall.{cluster_id}.revocations"));
        async move {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("CC-Publisher", "elsewhere/1");
            headers.insert("CC-Seq", seq);
            let payload = serde_json::to_vec(&serde_json::json!({ "kind": "credential_ended", "secret": secret })).unwrap();
            raw.publish_with_headers(subject, headers, payload.into()).await.unwrap();
            raw.flush().await.unwrap();
        }
    };
    let other_cookie = admin_cookie(&second).await;
    // (Its pass is taken before the socket opens.)
    let mut other_wallboard = common::Tab::open_at(&second, &other_cookie, "/ws?watch=org").await;
    revoke("1", "nothing-open".into()).await;
    revoke("2", token_hash(other_cookie.split_once('=').unwrap().1)).await;
    other_wallboard.until(|m| matches!(m, RingMsg::Error { code: RingError::SignedOut, .. }).then_some(())).await;

    // Then one skips a number: one was lost. (The wallboard is heard
    // first, so the TTL does not close it for silence meanwhile.)
    wallboard.ping(1).await;
    revoke("4", "nothing-open".into()).await;
    until_refused(&second, &old, 10).await;
    wallboard.until(|m| matches!(m, RingMsg::Error { code: RingError::SignedOut, .. }).then_some(())).await;
    assert_eq!(heartbeat(&second, "rotated-unheard-1").await, StatusCode::OK, "the token the database holds works");

    // The last one sent is lost: the publisher's tally shows it. The
    // instances tally theirs too.
    let mut tallies = raw.subscribe(format!("clutchcall.{cluster_id}.revocations")).await.unwrap();
    server::bus::nats::settled(&raw).await.unwrap();
    rotate_unheard(&mut db, "rotated-unheard-2").await;
    assert_eq!(heartbeat(&second, "rotated-unheard-1").await, StatusCode::OK, "cached again, and unheard");
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("CC-Publisher", "elsewhere/1");
    headers.insert("CC-Sent", "5");
    raw.publish_with_headers(format!("clutchcall.{cluster_id}.revocations"), headers, Vec::new().into()).await.unwrap();
    raw.flush().await.unwrap();
    until_refused(&second, "rotated-unheard-1", 10).await;
    assert_eq!(heartbeat(&second, "rotated-unheard-2").await, StatusCode::OK);
    let tallied = tokio::time::timeout(std::time::Duration::from_secs(15), async {
        while let Some(message) = tallies.next().await {
            let header = |name: &str| message.headers.as_ref().and_then(|h| h.get(name)).map(|v| v.to_string());
            if header("CC-Sent").is_some() && header("CC-Publisher").is_some_and(|p| p.starts_with("second/")) {
                return;
            }
        }
    });
    tallied.await.expect("the second instance tallies its revocations");

    // NATS goes away and comes back: whatever was sent meanwhile is lost.
    rotate_unheard(&mut db, "rotated-unheard-3").await;
    assert_eq!(heartbeat(&second, "rotated-unheard-2").await, StatusCode::OK, "cached again, and unheard");
    let nats = nats.restart().await;
    until_refused(&second, "rotated-unheard-2", 30).await;
    assert_eq!(heartbeat(&second, "rotated-unheard-3").await, StatusCode::OK);
    cluster.finish().await;
    drop(nats);
}

/// A revocation no instance heard of at all (its instance died between
/// the commit and telling the others: nothing is missing in any count,
/// no tally is short) still takes effect within the sweep: every
/// `CLUTCHCALL_REVOCATION_SWEEP_S` each instance checks its sockets and
/// cached tokens against the database. (The other tests keep the default
/// minute, so their losses are noticed by the counts alone.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_no_instance_heard_of_takes_effect_within_the_sweep() {
    use domain::ring::{RingError, RingMsg};
    use server::auth::token_hash;
    use sqlx::Connection;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start_with(Some(&nats), 2, vec![("CLUTCHCALL_REVOCATION_SWEEP_S", "2".into())]).await else { return };
    let second = cluster.base(1).to_string();
    // The second caches the robot's token; an admin's wallboard is open there.
    let old = server::seed::demo_robot_token("uk-pick-01");
    assert_eq!(heartbeat(&second, &old).await, StatusCode::OK);
    let cookie = admin_cookie(&second).await;
    let mut wallboard = common::Tab::open_at(&second, &cookie, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    // Rotated and signed out in the database alone: nothing is published.
    // (In one transaction: one sweep sees both.)
    let mut db = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    let mut tx = db.begin().await.unwrap();
    let rotate = format!("UPDATE robots SET token_hash = $1 WHERE org_id = '{ORG}' AND id = 'uk-pick-01'");
    sqlx::query(&rotate).bind(token_hash("rotated-unheard")).execute(&mut *tx).await.unwrap();
    let sign_in = cookie.split_once('=').unwrap().1;
    sqlx::query("DELETE FROM web_sessions WHERE token_hash = $1").bind(token_hash(sign_in)).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    // Within a few sweeps (none before the first could have seen it).
    until_refused(&second, &old, 10).await;
    wallboard.until(|m| matches!(m, RingMsg::Error { code: RingError::SignedOut, .. }).then_some(())).await;
    assert_eq!(heartbeat(&second, "rotated-unheard").await, StatusCode::OK, "the token the database holds works");
    cluster.finish().await;
}
