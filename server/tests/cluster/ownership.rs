//! Who dispatches an org, and reaching it from any instance (issue "Scale
//! out"): a paused owner is fenced (rule D13), a killed one's org moves to
//! a survivor (D14), a call raised on one instance rings and is answered
//! on another, and an operator rung by an org dispatched elsewhere is busy
//! here (D10).

use super::{accept_offer, admin_cookie, call_at, cookie_at, nats_url, owned_by, owner, raise, ready_console, taken_from_first, until, Cluster, ORG};
use crate::common::{self, scalar};
use reqwest::StatusCode;

/// Two real server processes on one database; the owner of the demo org
/// is paused (SIGSTOP) until the other has taken the org over, then resumed:
/// it answers 503 `dispatched_elsewhere`, writes nothing, and steps down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d13_a_paused_owner_resumes_fenced_writes_nothing_and_steps_down() {
    let Some(cluster) = Cluster::start(None, 2).await else { return };
    let (url, first, second) = (&cluster.url, &cluster.servers[0], &cluster.servers[1]);
    assert!(owner(url).await.starts_with("first/"));
    let elsewhere = raise(&second.base, "uk-pick-01").await;
    assert_eq!(elsewhere.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(elsewhere.json::<serde_json::Value>().await.unwrap()["error"]["code"], "dispatched_elsewhere");

    // Paused past its lease: the second takes the org over.
    let pid = first.child.id().unwrap() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    owned_by(url, "second").await;
    // Resumed, the first believes for a moment that it still dispatches the
    // org: whatever it decides is refused by the epoch, and it steps down.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let refused = raise(&first.base, "uk-pick-01").await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.json::<serde_json::Value>().await.unwrap()["error"]["code"], "dispatched_elsewhere");
    assert_eq!(scalar(url, "SELECT COUNT(*) FROM sessions").await, 0, "nothing of the stale owner's was written");
    let taken = raise(&second.base, "uk-pick-01").await;
    assert!(taken.status().is_success(), "{}", taken.status());
    assert_eq!(scalar(url, "SELECT COUNT(*) FROM sessions").await, 1);
    assert!(owner(url).await.starts_with("second/"), "the resumed instance did not take the org back");
    cluster.finish().await;
}

/// The owner's batch is refused by the org's epoch (rule D13): the lease
/// is given another owner and epoch in the database (the columns a
/// takeover writes, though a real one waits for the lease to lapse), and
/// the owner has not renewed since: it stands for a batch the owner began
/// before it was paused past its lease. The call it decided is answered
/// 503 `dispatched_elsewhere`, nothing of it is written, the refusal is
/// counted, and the owner steps down. (The lease is given a minute, not
/// 3 s, so that the owner does not take it back mid-test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d13_an_owner_whose_batch_the_epoch_refuses_writes_nothing_and_steps_down() {
    use server::metrics::{counter_value, BATCHES_FENCED};
    let Some(cluster) = Cluster::start(None, 1).await else { return };
    let url = &cluster.url;
    // A renewal due between the takeover and the batch steps the owner
    // down before any batch (it renews once a second): then the org is
    // given back and the takeover made again.
    for attempt in 1.. {
        until(|| cluster.dispatching(0), "the instance dispatches the org").await;
        let fenced = counter_value(&cluster.scrape(0).await, BATCHES_FENCED);
        common::execute(url, &format!(
            "UPDATE org_leases SET owner = 'elsewhere/1', epoch = epoch + 1, \
             expires_at = (extract(epoch from clock_timestamp()) * 1000)::bigint + 60000 WHERE org_id = '{ORG}'"
        ))
        .await;
        let refused = raise(cluster.base(0), "uk-pick-01").await;
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.json::<serde_json::Value>().await.unwrap()["error"]["code"], "dispatched_elsewhere");
        assert_eq!(scalar(url, "SELECT COUNT(*) FROM sessions").await, 0, "nothing of the fenced batch was written");
        until(|| async { !cluster.dispatching(0).await }, "the fenced owner steps down").await;
        if counter_value(&cluster.scrape(0).await, BATCHES_FENCED) == fenced + 1 {
            break;
        }
        assert!(attempt < 5, "a renewal came first {attempt} times: no batch was ever refused by the epoch");
        common::execute(url, &format!("UPDATE org_leases SET expires_at = 0 WHERE org_id = '{ORG}'")).await;
    }
    cluster.finish().await;
}

/// The owner is killed (-9) after acknowledging calls: a survivor owns the
/// org within seconds, with every acknowledged call on its desk (rule D14;
/// the takeover time itself is a benchmark, BENCHMARKS.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_a_killed_owners_org_moves_to_a_survivor_with_every_acknowledged_call() {
    let Some(mut cluster) = Cluster::start(None, 2).await else { return };
    let url = cluster.url.clone();
    // Nobody is ready: each call is acknowledged queued (202) by the owner.
    let mut acknowledged = Vec::new();
    for robot in ["uk-pick-01", "ue-pick-02", "uw-weld-01", "uk-insp-01"] {
        let res = raise(cluster.base(0), robot).await;
        assert_eq!(res.status(), StatusCode::ACCEPTED);
        acknowledged.push((robot, res.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string()));
    }
    cluster.servers[0].child.start_kill().unwrap();
    cluster.servers[0].child.wait().await.unwrap();
    // The survivor takes the org over and has every acknowledged call: each
    // can be withdrawn there.
    owned_by(&url, "second").await;
    // (Owning it, the survivor answers once the org is loaded.)
    for (robot, session) in &acknowledged {
        let withdrawn = common::http()
            .delete(format!("{}/v1/sessions/{session}", cluster.base(1)))
            .bearer_auth(server::seed::demo_robot_token(robot))
            .send()
            .await
            .unwrap();
        assert_eq!(withdrawn.status(), StatusCode::OK, "{robot}'s acknowledged call is on the survivor's desk");
    }
    assert_eq!(scalar(&url, "SELECT COUNT(*) FROM sessions WHERE lifecycle = 'PENDING'").await, 0);
    cluster.finish().await;
}

/// Rule D10 across instances: Dana operates in Northstar, dispatched by the
/// first instance, and in Harbor, dispatched by the second. While
/// Northstar's offer rings her, Harbor's call finds her busy and queues (a
/// 202, never a 503 from the database's one-open-offer-per-operator index);
/// once she declines in Northstar, Harbor's desk hears she is free and
/// rings her console there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d10_an_operator_ringing_in_an_org_dispatched_elsewhere_is_busy_here_until_freed() {
    use domain::models::PresenceState;
    use domain::ring::{ConsoleMsg, RingMsg};
    use sqlx::Connection;
    const HARBOR: &str = server::seed::SECOND_ORG_ID;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (cluster.base(0).to_string(), cluster.base(1).to_string());
    let mut db = sqlx::PgConnection::connect(&cluster.url).await.unwrap();
    for sql in [
        "INSERT INTO operator_profiles (org_id, user_id, region) VALUES ('org-harbor', 'u-dana', 'Manchester')",
        "INSERT INTO operator_certifications (org_id, user_id, certification) VALUES ('org-harbor', 'u-dana', 'inspection · tier-2')",
        // Harbor's lease handed to the second instance, which takes it
        // (same instance name) and loads Harbor's desk, Dana on it.
        "UPDATE org_leases SET owner = 'second/handed-over', epoch = epoch + 1, \
         expires_at = (extract(epoch from clock_timestamp()) * 1000)::bigint + 3000 WHERE org_id = 'org-harbor'",
    ] {
        sqlx::query(sql).execute(&mut db).await.unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let owner: String = sqlx::query_scalar("SELECT owner FROM org_leases WHERE org_id = 'org-harbor'").fetch_one(&mut db).await.unwrap();
        if owner.starts_with("second/") && owner != "second/handed-over" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the second never took Harbor");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(owner(&cluster.url).await.starts_with("first/"), "Northstar stays on the first");

    // Ready in both: Northstar's console on the first, Harbor's on the second.
    let mut northstar = ready_console(&first, common::ADMIN).await;
    let harbor_cookie = cookie_at(&second, common::ADMIN).await;
    assert_eq!(call_at(&second, &harbor_cookie, "select_org", &[("org_id", HARBOR)]).await.status(), StatusCode::OK);
    let mut harbor = common::Tab::open_at(&second, &harbor_cookie, "/ws").await;
    harbor.until(|m| matches!(m, RingMsg::Welcome { .. }).then_some(())).await;
    harbor.send(ConsoleMsg::Ready).await;
    harbor
        .until(|m| match m {
            RingMsg::Presence { presence } | RingMsg::Welcome { presence, .. } => (presence.state == PresenceState::Ready).then_some(()),
            _ => None,
        })
        .await;

    let rung = raise(&first, "uk-insp-01").await;
    assert_eq!(rung.status(), StatusCode::CREATED);
    let rung: serde_json::Value = rung.json().await.unwrap();
    assert_eq!(rung["operator"]["id"], "u-dana");
    let northstar_call = rung["sessionId"].as_str().unwrap().to_string();
    let queued = raise(&second, "hb-insp-01").await;
    assert_eq!(queued.status(), StatusCode::ACCEPTED, "busy in Northstar: queued, {}", queued.text().await.unwrap());
    let harbor_call = queued.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();

    northstar.send(ConsoleMsg::Decline { session_id: northstar_call }).await;
    let offered = harbor
        .until(|m| match m {
            RingMsg::Offer { offer } => Some(offer.session_id),
            _ => None,
        })
        .await;
    assert_eq!(offered, harbor_call, "freed in Northstar, Harbor's queued call rings her");
    let open: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM offers WHERE operator_id = 'u-dana' AND status = 'open'").fetch_one(&mut db).await.unwrap();
    assert_eq!(open, 1);
    cluster.finish().await;
}

/// Any instance serves anyone: a call raised on the second instance rings
/// Asha's console on the third, her Accept there starts the session, the
/// owner's (the first's) wallboard hears it, and the second's roster shows
/// her presence, pushed to its live screens (the roster and the overview
/// reload on it); the second and third forward to the first over NATS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_raised_on_one_instance_rings_and_is_answered_on_another_and_a_third_sees_it() {
    use domain::events::OrgEvent;
    use domain::models::{LifecycleState, PresenceState};
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 3).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    // Which instance dispatches the org is on its /metrics, and only there.
    assert!(cluster.dispatching(0).await && !cluster.dispatching(1).await && !cluster.dispatching(2).await);
    let (owner_base, raising, ringing) = (cluster.base(0), cluster.base(1), cluster.base(2));
    let mut wallboard = common::Tab::open_at(owner_base, &admin_cookie(owner_base).await, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    let mut live_screen = common::Tab::open_at(raising, &admin_cookie(raising).await, "/ws?watch=org").await;
    live_screen.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;

    // Asha's console on the third: the owner's desk welcomes her and takes her Ready.
    let mut console = ready_console(ringing, common::OPERATOR).await;
    live_screen
        .until(|m| match m {
            RingMsg::Org { event: OrgEvent::Presence { presence } } => (presence.operator_id == "u-asha" && presence.state == PresenceState::Ready).then_some(()),
            _ => None,
        })
        .await;
    let roster: domain::roster::Roster = call_at(raising, &admin_cookie(raising).await, "load_roster", &[]).await.json().await.unwrap();
    let asha = roster.rows.iter().find(|row| row.email.as_deref() == Some(common::OPERATOR)).expect("Asha's row");
    assert_eq!(asha.state, PresenceState::Ready, "the second's roster shows the presence the third's console set");

    let raised = raise(raising, "ue-pick-01").await;
    assert_eq!(raised.status(), StatusCode::CREATED, "201 from the second: the owner matched and committed");
    let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    accept_offer(&mut console, &session).await;
    let heard = wallboard.until(|m| match m {
        RingMsg::Org { event: OrgEvent::Lifecycle { session_id, lifecycle: LifecycleState::Active, .. } } if session_id == session => Some(()),
        _ => None,
    });
    heard.await;
    assert_eq!(scalar(&cluster.url, &format!("SELECT COUNT(*) FROM sessions WHERE id = '{session}' AND lifecycle = 'ACTIVE'")).await, 1);
    cluster.finish().await;
}

/// An offer ringing when its org's owner is killed (-9) rings on after
/// the takeover (rule D14; D11's re-ring, across instances): the
/// operator's console on the survivor, never reconnected, is welcomed by
/// the new owner's desk with the same offer, and her Accept there starts
/// the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d14_an_offer_ringing_when_its_owner_is_killed_rings_on_at_the_survivor_and_is_answered_there() {
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(mut cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let url = cluster.url.clone();
    assert!(owner(&url).await.starts_with("first/"));
    let mut console = ready_console(cluster.base(1), common::OPERATOR).await;
    let raised = raise(cluster.base(1), "uk-pick-01").await;
    assert_eq!(raised.status(), StatusCode::CREATED, "offered by the owner, the first");
    let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    let rung = console.until(|m| match m {
        RingMsg::Offer { offer } => Some(offer.session_id),
        _ => None,
    });
    assert_eq!(rung.await, session);

    let killed_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    cluster.servers[0].child.start_kill().unwrap();
    cluster.servers[0].child.wait().await.unwrap();
    owned_by(&url, "second").await;
    // Her tab registers with the new desk, which loaded the offer still
    // ringing (a Welcome made before the kill would be the old desk's).
    let rung_again = console.until(|m| match m {
        RingMsg::Welcome { offer: Some(offer), server_now_ms, .. } if server_now_ms >= killed_ms => Some(offer.session_id),
        _ => None,
    });
    assert_eq!(rung_again.await, session);
    console.send(domain::ring::ConsoleMsg::Accept { session_id: session.clone() }).await;
    let accepted = console.until(|m| match m {
        RingMsg::Accepted { session_id } => Some(session_id),
        _ => None,
    });
    assert_eq!(accepted.await, session);
    assert_eq!(scalar(&url, &format!("SELECT COUNT(*) FROM sessions WHERE id = '{session}' AND lifecycle = 'ACTIVE'")).await, 1);
    cluster.finish().await;
}

/// An owner paused (SIGSTOP) stays connected to NATS for a while; once
/// another instance has taken its org over, every request forwarded from
/// the remaining instance reaches the new owner (the lease's epoch names the
/// subject), none waits on the paused one; resumed, it steps down (D13).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d13_requests_forwarded_after_a_paused_owner_is_taken_over_reach_the_new_owner() {
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 3).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    // The third learns the first's epoch by forwarding to it.
    let token = server::seed::demo_robot_token("uk-pick-01");
    let raised = raise(cluster.base(2), "uk-pick-01").await;
    assert_eq!(raised.status(), StatusCode::ACCEPTED);
    let first = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    let withdrawn = common::http().delete(format!("{}/v1/sessions/{first}", cluster.base(2))).bearer_auth(&token).send().await.unwrap();
    assert_eq!(withdrawn.status(), StatusCode::OK);

    let pid = cluster.servers[0].child.id().unwrap() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let other = 3 - taken_from_first(&cluster.url).await;
    // Every call through the instance that does not own the org is answered
    // by the new owner (one sent to the paused first would wait 5 s, 503).
    for _ in 0..4 {
        let raised = raise(cluster.base(other), "uk-pick-01").await;
        assert_eq!(raised.status(), StatusCode::ACCEPTED, "answered by the new owner");
        let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
        let withdrawn = common::http().delete(format!("{}/v1/sessions/{session}", cluster.base(other))).bearer_auth(&token).send().await.unwrap();
        assert_eq!(withdrawn.status(), StatusCode::OK);
    }
    unsafe { libc::kill(pid, libc::SIGCONT) };
    cluster.finish().await;
}
