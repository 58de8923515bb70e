//! The live screens' picture (`load_ops_board`) and the overview's metric
//! definitions (seed 000, rules O01–O05, W03, W13, W14), on both databases.

mod common;

use domain::board::{state_counts, OpsBoard};
use domain::models::{LifecycleState, PresenceState, RegistryStatus, SafetyState};
use common::{browser, call, sign_in, TestApp, ADMIN};
use reqwest::{Method, StatusCode};

const ORG: &str = "org-northstar";

async fn board(client: &reqwest::Client, app: &TestApp) -> OpsBoard {
    let res = call(client, app, "load_ops_board", &[]).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

/// Raises a call for `robot`, which `operator` (made ready) answers.
async fn attach(app: &TestApp, operator: &str, robot: &str) -> String {
    app.engine().operator_ready(ORG, operator, true).await.unwrap();
    let (status, body) = app.raise(robot).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["operator"]["id"], operator, "{body}");
    let session = body["sessionId"].as_str().unwrap().to_string();
    app.engine().answer(ORG, operator, &session).await.unwrap();
    session
}

both_backends!(o01_o05_the_overview_counts_live_sessions_robots_operators_and_estops, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let empty = board(&admin, &app).await;
    let h = empty.headline();
    assert_eq!((h.live_sessions, h.robots_online, h.operators_available, h.estops_24h), (0, 0, 0, 0));
    assert_eq!(h.robots_total, 13, "Northstar's fleet only");

    // Tom answers a call (attached), Carla is ready, a call waits in the queue.
    let held = attach(&app, "u-tom", "uk-pick-01").await;
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    let (queued, _) = app.raise("uw-weld-01").await; // welding: nobody ready holds it
    assert_eq!(queued, StatusCode::ACCEPTED);
    let beat = app.robot(Method::POST, "uk-pick-01", "/v1/robots/uk-pick-01/heartbeat").send().await.unwrap();
    assert_eq!(beat.status(), StatusCode::OK);
    // An operator E-stop, written through the service, and a robot's protective stop.
    let record = app.running().sessions.session(ORG, &held).await.unwrap().unwrap();
    app.running().sessions.operator_estop(ORG, "u-tom", &record).await.unwrap();

    let b = board(&admin, &app).await;
    let h = b.headline();
    assert_eq!(h.live_sessions, 1, "O01: ACTIVE or PAUSED only; the queued call is no card");
    assert!(b.live.iter().all(|s| matches!(s.lifecycle, LifecycleState::Active | LifecycleState::Paused)));
    assert_eq!((h.robots_online, h.robots_total), (1, 13), "O02");
    assert_eq!(h.operators_available, 2, "O03: Tom attached (on_call) and Carla ready");
    let states: Vec<_> = b.presences.iter().filter(|p| p.operator_id == "u-tom").map(|p| p.state).collect();
    assert_eq!(states, [PresenceState::OnCall]);
    assert_eq!(h.estops_24h, 1, "O04");
    assert_eq!(b.audit[0].action, domain::events::AuditAction::OperatorEstop, "W13: the stop is on the safety feed");
    let counts = state_counts(&b.live);
    assert_eq!(counts.iter().map(|(_, n)| n).sum::<usize>(), h.live_sessions, "O05: rows sum to Live sessions");
    assert_eq!(b.queue.len(), 1);
    assert_eq!((b.queue[0].skill.as_str(), b.queue[0].waiting), ("welding", 1));
    assert_eq!((b.today.answered, b.today.withdrawn), (1, 0), "today: Tom's answered call; the queued one waits");
    assert_eq!(b.today.within_20s_percent(), Some(100));
    assert_eq!(b.robot_status("uk-pick-01"), RegistryStatus::Online);
    assert_eq!(b.robot_status("uk-insp-01"), RegistryStatus::Offline, "W14: the join says which robots are not heartbeating");
    app.finish().await;
});

both_backends!(w03_w04_cards_are_the_live_sessions_in_priority_order, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let armed = attach(&app, "u-tom", "uk-pick-01").await;
    let stopped = attach(&app, "u-carla", "ue-pick-01").await;
    for (session, state) in [(&armed, "ARMED"), (&stopped, "PROTECTIVE_STOP")] {
        let res = app
            .robot(Method::POST, if session == &armed { "uk-pick-01" } else { "ue-pick-01" }, &format!("/v1/sessions/{session}/telemetry"))
            .json(&serde_json::json!({"state": state, "rttMs": 190, "divergenceDeg": 1.0, "velocityScale": 1.0}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    }
    let b = board(&admin, &app).await;
    let cards = b.cards();
    assert_eq!(cards.len(), b.live.len(), "W03: N attached is the number of records");
    assert_eq!(cards[0].id, stopped, "W04: the latched stop comes first, though it attached later");
    assert_eq!(cards[0].state, SafetyState::ProtectiveStop);
    assert_eq!(b.audit[0].action, domain::events::AuditAction::ProtectiveStop, "the robot's stop is on the feed too");
    // Operators get no board: it is an admin screen.
    let operator = browser();
    sign_in(&operator, &app, common::OPERATOR).await;
    assert_eq!(call(&operator, &app, "load_ops_board", &[]).await.status(), StatusCode::FORBIDDEN);
    app.finish().await;
});

/// `/metrics` serves the overview's figures, queue depth, presence counts
/// and the dispatch latency histogram in the Prometheus text format, on its
/// own (loopback) address and not on the public port. (The recorder is the
/// process's, shared by the tests running beside this one, so values that
/// other tests change are only checked for presence.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_on_their_own_address_in_prometheus_format() {
    let app = TestApp::spawn(common::Db::Sqlite).await.expect("sqlite");
    let metrics_addr = app.running().metrics_addr.expect("metrics listen");
    assert!(metrics_addr.ip().is_loopback());
    assert_ne!(metrics_addr.port(), app.running().addr.port());
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let (status, _) = app.raise("uk-pick-01").await;
    assert_eq!(status, StatusCode::CREATED);
    let text = common::http().get(format!("http://{metrics_addr}/metrics")).send().await.unwrap().text().await.unwrap();
    for line in [
        "clutchcall_robots_total{org=\"org-northstar\"} 13",
        "clutchcall_robots_total{org=\"org-harbor\"} 2",
        "clutchcall_live_sessions{org=\"org-northstar\"}",
        "clutchcall_operators_available{org=\"org-northstar\"}",
        "clutchcall_estops_24h{org=\"org-northstar\"}",
        "clutchcall_sessions_by_state{org=\"org-northstar\",state=\"PROTECTIVE_STOP\"}",
        "clutchcall_presences{org=\"org-northstar\",state=\"ringing\"}",
        "clutchcall_queue_depth{org=\"org-northstar\",skill=\"welding\"}",
        "# TYPE clutchcall_dispatch_seconds histogram",
        "clutchcall_dispatch_seconds_bucket{le=\"0.01\"}",
        "clutchcall_scrape_read_database 1",
        // Shown before any cut (at 0 in a process that cut none), so the
        // first cut is an increase.
        "# TYPE clutchcall_clients_cut_total counter",
        "\nclutchcall_clients_cut_total ",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    let public = common::http().get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(public.status(), StatusCode::NOT_FOUND, "never on the public port");
    app.finish().await;
}

// The wallboard as the server renders it (SSR, before any script runs):
// every field of a card, its link, the chips at 0, the alarm styling and
// hint, the registry chip, and no action that could clear a stop. The
// panels below the cards are built in the browser (end2end board.spec.ts
// checks them, W12 included).
both_backends!(w01_w02_w05_w07_w11_w12_w14_the_wallboard_renders_every_field_read_only, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let session = attach(&app, "u-tom", "uk-pick-01").await;
    let res = app
        .robot(Method::POST, "uk-pick-01", &format!("/v1/sessions/{session}/telemetry"))
        .json(&serde_json::json!({"state": "PROTECTIVE_STOP", "rttMs": 333, "divergenceDeg": 15.5, "velocityScale": 0.456}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let page = admin.get(app.url("/ops/wallboard")).header("accept", "text/html").send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    // Without the hydration markers (`<!>`) views leave after dynamic text.
    let html = page.text().await.unwrap().replace("<!>", "");
    let card_start = html.find(&format!("data-session=\"{session}\"")).expect("W01: a card for the live session");
    let card = &html[html[..card_start].rfind("<article").unwrap()..card_start + html[card_start..].find("</article>").unwrap()];
    for field in ["uk-pick-01", "Leeds Hub", "Tom Whitfield", "Manchester", "up ", "333 ms", "15.5°", "46%", "PROTECTIVE_STOP"] {
        assert!(card.contains(field), "W01: {field} missing from the card: {card}");
    }
    assert!(card.contains(&format!("href=\"/ops/sessions?s={session}\"")), "W02");
    assert!(card.contains("alarm") && card.contains("state-protective-stop"), "W07: {card}");
    assert!(card.contains("latched, awaiting clear"), "W11");
    assert!(card.contains("tone-warning") && card.contains("state-diverged"), "W08–W10: 333 ms and 46% warn, 15.5° takes DIVERGED's colour");
    assert!(card.contains("robot offline"), "W14: uk-pick-01 never heartbeat");
    for chip in ["ARMED", "DEGRADED", "DIVERGED", "PROTECTIVE_STOP"] {
        assert!(html.contains(&format!("data-testid=\"chip-{chip}\"")), "W05: chip {chip}");
    }
    let attached = &html[html.find("data-testid=\"attached\"").expect("W03: the header count")..];
    let attached: String = attached[attached.find('>').unwrap() + 1..attached.find("</span>").unwrap()].chars().filter(char::is_ascii_digit).collect();
    assert_eq!(attached, "1", "W03: N attached is the number of live sessions");
    // The relay (W15), safety (W13) and link health (W16) panels are built
    // in the browser once the page is interactive: the server sends their
    // placeholder (their rendering is checked in end2end/tests/board.spec.ts
    // and relay.spec.ts).
    assert!(html.contains("Loading the relay, safety events and link health…"), "the panels' placeholder");
    let lower = html.to_lowercase();
    assert!(!lower.contains(">clear<") && !lower.contains("clear stop") && !lower.contains("name=\"clear"), "W12: no clear action");
    app.finish().await;
});

/// Sets an RTT ceiling as an admin does on /admin/floors.
async fn set_ceiling(admin: &reqwest::Client, app: &TestApp, skill: &str, fields: [&str; 4]) {
    let form = [("skill", skill), ("ceiling_ms", fields[0]), ("step_ms", fields[1]), ("every_s", fields[2]), ("lifted_after_s", fields[3])];
    assert_eq!(call(admin, app, "set_rtt_ceiling", &form).await.status(), StatusCode::OK);
}

both_backends!(a17_the_board_carries_the_ceilings_and_splits_answered_calls_by_their_first_ceiling, |app: TestApp| async move {
    let admin = browser();
    assert_eq!(sign_in(&admin, &app, ADMIN).await.status(), StatusCode::OK);
    set_ceiling(&admin, &app, "pick-place", ["150", "50", "30", "300"]).await;
    set_ceiling(&admin, &app, "palletize", ["100", "200", "1", "300"]).await;
    let before = board(&admin, &app).await;
    assert_eq!(before.ceilings.iter().map(|c| (c.skill.as_str(), c.ceiling_ms)).collect::<Vec<_>>(), [("palletize", 100), ("pick-place", 150)]);
    assert_eq!((before.today.answered_first_ceiling, before.today.answered_after_relaxing), (0, 0));

    // Carla (Austin, 96 ms) is within pick-place's first ceiling: answered under it.
    let carla_s = attach(&app, "u-carla", "ue-pick-01").await;
    // She hands it over to Tom, who accepts: still one call, answered once.
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    app.engine().hand_over(ORG, &carla_s, Some("u-carla"), "u-tom").await.unwrap();
    app.engine().answer(ORG, "u-tom", &carla_s).await.unwrap();
    // Asha (BLR, 275 ms) is above palletize's 100 ms until it rises to 300 ms after 1 s.
    app.engine().operator_ready(ORG, "u-asha", true).await.unwrap();
    let (status, body) = app.raise("ue-pal-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let session = body["sessionId"].as_str().unwrap().to_string();
    let waiting = board(&admin, &app).await;
    assert!(waiting.queue.iter().any(|q| q.skill == "palletize" && q.waiting == 1), "the waiting call is on the board: {:?}", waiting.queue);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while app.engine().answer(ORG, "u-asha", &session).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "Asha was never offered the call after its ceiling rose");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let after = board(&admin, &app).await;
    assert_eq!(after.today.answered, 2);
    assert_eq!((after.today.answered_first_ceiling, after.today.answered_after_relaxing), (1, 1));
    app.finish().await;
});
