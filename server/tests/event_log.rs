//! The org's event log for integrators (issue "Integrators and supervisors"):
//! every change of a call is logged in the transaction that makes it, with
//! ids 1, 2, 3… per org in commit order. On both databases.

mod common;

use common::{attach_asha, TestApp};
use domain::models::LifecycleState;
use reqwest::StatusCode;

const ORG: &str = "org-northstar";

/// The org's log as integrators read it: (type, session) in id order.
async fn log(app: &TestApp) -> Vec<(i64, String, Option<String>)> {
    let rows = app.running().store.events_after(ORG, 0, 1_000).await.unwrap();
    rows.into_iter().map(|r| r.record().expect("a known type")).map(|r| (r.id, r.event.kind().to_string(), r.session_id)).collect()
}

both_backends!(a_calls_changes_are_logged_in_commit_order_with_ids_one_by_one, |app: TestApp| async move {
    // A call nobody can take waits, then its robot withdraws it.
    let (status, body) = app.raise("ue-pal-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let waited = body["sessionId"].as_str().unwrap().to_string();
    let withdrawn = app.robot(reqwest::Method::DELETE, "ue-pal-01", &format!("/v1/sessions/{waited}")).send().await.unwrap();
    assert!(withdrawn.status().is_success(), "{}", withdrawn.status());

    // A call Asha takes, pauses, hands over to Tom, and Tom completes.
    let session = attach_asha(&app, "uk-pick-01").await;
    app.engine().steer_session(ORG, &session, LifecycleState::Paused, Some("u-asha")).await.unwrap();
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    app.engine().hand_over(ORG, &session, Some("u-asha"), "u-tom").await.unwrap();
    app.engine().answer(ORG, "u-tom", &session).await.unwrap();
    app.engine().steer_session(ORG, &session, LifecycleState::Completed, Some("u-tom")).await.unwrap();

    let records = log(&app).await;
    let ids: Vec<i64> = records.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids, (1..=records.len() as i64).collect::<Vec<_>>(), "ids 1, 2, 3… without a gap");
    let of = |s: &str| records.iter().filter(|(_, _, sid)| sid.as_deref() == Some(s)).map(|(_, kind, _)| kind.as_str()).collect::<Vec<_>>();
    assert_eq!(of(&waited), ["call.raised", "call.queued", "call.cancelled"]);
    assert_eq!(
        of(&session),
        ["call.raised", "call.offered", "call.accepted", "session.lifecycle", "call.offered", "session.handover", "session.lifecycle"],
        "the pause and the completion are lifecycle changes; the handover rings Tom (offered), then control moves"
    );
    // The robot is on every record of a call.
    let rows = app.running().store.events_after(ORG, 0, 1_000).await.unwrap();
    assert!(rows.iter().all(|r| r.robot_id.is_some()), "{rows:?}");
    // Read on from an id: exactly what follows it.
    let after = app.running().store.events_after(ORG, 3, 2).await.unwrap();
    assert_eq!(after.iter().map(|r| r.id).collect::<Vec<_>>(), [4, 5]);
    app.finish().await;
});

/// The records after `after`, as (type, data).
async fn since(app: &TestApp, after: i64) -> Vec<(String, serde_json::Value, Option<String>)> {
    let rows = app.running().store.events_after(ORG, after, 1_000).await.unwrap();
    rows.into_iter()
        .map(|r| r.record().expect("a known type"))
        .map(|r| (r.event.kind().to_string(), serde_json::to_value(&r.event).unwrap()["data"].clone(), r.robot_id))
        .collect()
}

async fn last_id(app: &TestApp) -> i64 {
    app.running().store.event_bounds(ORG).await.unwrap().1
}

both_backends!(changes_outside_dispatch_are_logged_in_their_own_transaction, |app: TestApp| async move {
    use common::{browser, call, sign_in, ADMIN};
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let session = attach_asha(&app, "uk-pick-01").await;

    // Safety: telemetry latches PROTECTIVE_STOP; an admin clears it.
    let mark = last_id(&app).await;
    let telemetry = app
        .robot(reqwest::Method::POST, "uk-pick-01", &format!("/v1/sessions/{session}/telemetry"))
        .json(&serde_json::json!({"state": "PROTECTIVE_STOP", "rttMs": 60, "divergenceDeg": 1.0, "velocityScale": 1.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(telemetry.status(), StatusCode::OK);
    let cleared = call(&admin, &app, "clear_protective_stop", &[("session_id", &session), ("reason", "checked the cell")]).await;
    assert_eq!(cleared.status(), StatusCode::OK);
    // Chat: the length, never the text.
    assert_eq!(call(&admin, &app, "post_chat", &[("session_id", &session), ("body", "All clear?")]).await.status(), StatusCode::OK);
    let logged = since(&app, mark).await;
    let kinds: Vec<&str> = logged.iter().map(|(k, _, _)| k.as_str()).collect();
    assert_eq!(kinds, ["safety.protective_stop", "safety.protective_stop_cleared", "chat.posted"]);
    assert_eq!(logged[0].1["to"], "PROTECTIVE_STOP");
    assert_eq!(logged[2].1, serde_json::json!({"authorId": "u-dana", "authorRole": "admin", "length": 10}));
    assert!(!serde_json::to_string(&logged).unwrap().contains("All clear"), "the chat's text stays in ClutchCall");
    assert!(logged.iter().all(|(_, _, robot)| robot.as_deref() == Some("uk-pick-01")));

    // Rating a completed session.
    app.engine().steer_session(ORG, &session, LifecycleState::Completed, Some("u-asha")).await.unwrap();
    let mark = last_id(&app).await;
    assert_eq!(call(&admin, &app, "rate_session", &[("session_id", &session), ("stars", "4"), ("feedback", "")]).await.status(), StatusCode::OK);
    assert_eq!(since(&app, mark).await[0].1, serde_json::json!({"operatorId": "u-asha", "stars": 4}));

    // A robot registered, then retired.
    let mark = last_id(&app).await;
    let registered = common::http()
        .post(app.url("/v1/robots"))
        .header("cookie", common::session_cookie(&app, ADMIN).await)
        .header("origin", &app.base)
        .json(&serde_json::json!({"id": "uk-new-01", "model": "UR10e", "site": "Leeds", "pop": "uk-london", "reqCert": "pick-place · tier-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), StatusCode::CREATED, "{}", registered.text().await.unwrap());
    assert_eq!(call(&admin, &app, "retire_robot", &[("robot_id", "uk-new-01")]).await.status(), StatusCode::OK);
    let robots = since(&app, mark).await;
    assert_eq!(robots.iter().map(|(k, _, _)| k.as_str()).collect::<Vec<_>>(), ["robot.registered", "robot.retired"]);
    assert_eq!(robots[0].1["model"], "UR10e");
    assert!(robots.iter().all(|(_, _, robot)| robot.as_deref() == Some("uk-new-01")));

    // A booking made and cancelled.
    let mark = last_id(&app).await;
    let start = domain::booking::utc_when(server::clock::now_ms() + 3 * 60 * 60 * 1000).trim_end_matches(" UTC").replacen(' ', "T", 1);
    let booked = call(&admin, &app, "book_robot", &[("robot_id", "uk-pick-01"), ("starts_at", &start), ("minutes", "60"), ("client_id", "u-kofi")]).await;
    assert_eq!(booked.status(), StatusCode::OK);
    let booking: domain::booking::Booking = booked.json().await.unwrap();
    assert_eq!(call(&admin, &app, "cancel_booking", &[("booking_id", &booking.id)]).await.status(), StatusCode::OK);
    let bookings = since(&app, mark).await;
    assert_eq!(bookings.iter().map(|(k, _, _)| k.as_str()).collect::<Vec<_>>(), ["booking.made", "booking.cancelled"]);
    assert_eq!(bookings[0].1["clientId"], "u-kofi");

    // A robot whose heartbeats stopped: logged once, however many
    // instances notice (the store decides on the database's last beat).
    let beat = app.robot(reqwest::Method::POST, "uk-pick-01", "/v1/robots/uk-pick-01/heartbeat").send().await.unwrap();
    assert_eq!(beat.status(), StatusCode::OK);
    let mark = last_id(&app).await;
    let store = &app.running().store;
    let now = server::clock::now_ms();
    let timeout = domain::rules::ROBOT_HEARTBEAT_TIMEOUT_MS;
    assert!(!store.log_robot_offline(ORG, "uk-pick-01", now, timeout).await.unwrap(), "not silent long enough");
    assert!(store.log_robot_offline(ORG, "uk-pick-01", now + timeout, timeout).await.unwrap());
    assert!(!store.log_robot_offline(ORG, "uk-pick-01", now + timeout + 5, timeout).await.unwrap(), "once per silence");
    assert_eq!(since(&app, mark).await.iter().map(|(k, _, _)| k.as_str()).collect::<Vec<_>>(), ["robot.offline"]);
    app.finish().await;
});

// Retention: each org's log is pruned up to its newest record past the
// retention, by id (a record committed out of `at` order leaves no hole
// the 410 rule cannot see); other orgs' records are cut at their own.
both_backends_with!(
    retention_prunes_each_org_up_to_its_newest_record_past_it,
    // The server's own pruning keeps everything: only the test's call prunes.
    |c: &mut server::config::Config| c.event_retention_days = u32::MAX,
    |app: TestApp| async move {
    let url = app.database_url();
    // (Ids far above what the running server gives; `at` far in the past.)
    let rows = [(ORG, 1_000_001, 100), (ORG, 1_000_002, 900), (ORG, 1_000_003, 150), (ORG, 1_000_004, 950), ("org-harbor", 1_000_001, 100), ("org-harbor", 1_000_002, 600)];
    for (org, id, at) in rows {
        common::execute(&url, &format!("INSERT INTO org_events (org_id, id, at, kind, data) VALUES ('{org}', {id}, {at}, 'robot.offline', '{{}}')")).await;
    }
    let pruned = app.running().store.prune_events(500).await.unwrap();
    assert!(pruned >= 4, "{pruned}");
    let kept = |org: &str| format!("SELECT COUNT(*) FROM org_events WHERE org_id = '{org}' AND id > 1000000");
    let oldest_kept = |org: &str| format!("SELECT MIN(id) FROM org_events WHERE org_id = '{org}' AND id > 1000000");
    assert_eq!(common::scalar(&url, &kept(ORG)).await, 1, "1, 2 (new but before the old 3) and 3 go");
    assert_eq!(common::scalar(&url, &oldest_kept(ORG)).await, 1_000_004);
    assert_eq!(common::scalar(&url, &kept("org-harbor")).await, 1);
    assert_eq!(common::scalar(&url, &oldest_kept("org-harbor")).await, 1_000_002);
    assert_eq!(app.running().store.prune_events(500).await.unwrap(), 0, "nothing more past the retention");
    app.finish().await;
}
);

// Retention walks each org's log from its oldest record by the key, a step
// of records at a time (no index by `at`, sqlite/0024): more records past
// the retention than a step all go, and the walk ends at the first step
// with none past it.
both_backends_with!(
    retention_walks_a_long_log_a_step_at_a_time,
    |c: &mut server::config::Config| c.event_retention_days = u32::MAX,
    |app: TestApp| async move {
    let url = app.database_url();
    // 12,001 records past the retention (more than two steps of 5,000),
    // then one within it.
    common::execute(
        &url,
        "INSERT INTO org_events (org_id, id, at, kind, data) \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12001) \
         SELECT 'org-harbor', 2000000 + i, 100, 'robot.offline', '{}' FROM n",
    )
    .await;
    common::execute(&url, "INSERT INTO org_events (org_id, id, at, kind, data) VALUES ('org-harbor', 3000000, 900, 'robot.offline', '{}')").await;
    let pruned = app.running().store.prune_events(500).await.unwrap();
    assert!(pruned >= 12_001, "{pruned}");
    assert_eq!(common::scalar(&url, "SELECT COUNT(*) FROM org_events WHERE org_id = 'org-harbor' AND id > 2000000").await, 1);
    assert_eq!(common::scalar(&url, "SELECT MIN(id) FROM org_events WHERE org_id = 'org-harbor' AND id > 2000000").await, 3_000_000);
    assert_eq!(app.running().store.prune_events(500).await.unwrap(), 0, "nothing more past the retention");
    app.finish().await;
}
);
