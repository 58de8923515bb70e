//! The engine v2 rules (shared/RULES.md D08–D10, D12) over real HTTP,
//! real WebSockets and the real engine, on both databases.
//! Demo org floors to us-east: Austin 96, Manchester 205, BLR 275 ms.

mod common;

use domain::events::OrgEvent;
use domain::models::{LifecycleState, PresenceState, RegistryStatus, SafetyState};
use domain::ring::{ConsoleMsg, RingMsg};
use common::{execute, scalar, session_cookie, Tab, TestApp, ADMIN, OPERATOR};
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::time::{Duration, Instant};

const ORG: &str = "org-northstar";
const HARBOR: &str = "org-harbor";

async fn open_offer_of(app: &TestApp, operator: &str) -> Option<String> {
    app.running().store.open_offers().await.unwrap().into_iter().find(|o| o.operator_id == operator).map(|o| o.session_id)
}

/// Polls until `check` holds, for at most `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

both_backends_with!(d08_a_decliner_is_offered_the_same_call_again_after_the_cool_off_not_before, |c: &mut server::config::Config| c.cooloff_ms = 700, |app: TestApp| async move {
    // Carla is the only ready operator certified for pick-place.
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    let (status, body) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::CREATED);
    let session = body["sessionId"].as_str().unwrap().to_string();
    let declined_at = Instant::now();
    app.engine().decline(ORG, "u-carla", &session).await.unwrap();
    // Ready again at once, but not rung for the call she just declined.
    assert_eq!(app.engine().presence_of(ORG, "u-carla").await.unwrap().state, PresenceState::Ready);
    assert_eq!(open_offer_of(&app, "u-carla").await, None, "inside the cool-off");
    // The call is not stuck: when the cool-off ends she is offered it again.
    eventually(Duration::from_secs(5), "re-offered after the cool-off", || async {
        open_offer_of(&app, "u-carla").await.as_deref() == Some(session.as_str())
    })
    .await;
    assert!(declined_at.elapsed() >= Duration::from_millis(700), "never before the cool-off ends");
    let triggers: Vec<(String, String)> =
        app.running().store.dispatch_records(ORG, &session).await.unwrap().into_iter().map(|r| (r.trigger, r.outcome)).collect();
    assert_eq!(triggers.last().unwrap(), &("operator_ready".to_string(), "offered".to_string()));
    app.finish().await;
});

both_backends_with!(d08_a_call_every_operator_missed_is_served_when_one_is_ready_again, |c: &mut server::config::Config| { c.cooloff_ms = 600; c.offer_window_ms = 300; }, |app: TestApp| async move {
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    let (_, body) = app.raise("ue-pick-01").await;
    let session = body["sessionId"].as_str().unwrap().to_string();
    // Carla misses it: aux "missed offer", the call queued (nobody else).
    eventually(Duration::from_secs(5), "offer expired", || async {
        app.engine().presence_of(ORG, "u-carla").await.unwrap().state == PresenceState::Aux
    })
    .await;
    assert_eq!(open_offer_of(&app, "u-carla").await, None);
    // Back at her desk before the cool-off ends: still not rung for it…
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    assert_eq!(open_offer_of(&app, "u-carla").await, None);
    // …and rung as soon as it ends (the old engine left this call stuck forever).
    eventually(Duration::from_secs(5), "served after the cool-off", || async {
        open_offer_of(&app, "u-carla").await.as_deref() == Some(session.as_str())
    })
    .await;
    app.finish().await;
});

both_backends!(d09_one_open_session_per_robot_is_enforced_by_the_database, |app: TestApp| async move {
    let (status, first) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, body) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "call_in_progress");
    // Not only the engine: a second open session cannot be written at all.
    let url = app.database_url();
    let sneak = format!(
        "INSERT INTO sessions (id, org_id, robot_id, skill, pop, raised_at) VALUES ('ses-sneak', '{ORG}', 'ue-pick-01', 'pick-place', 'us-east', 1)"
    );
    let refused = {
        use sqlx::Connection;
        if url.starts_with("postgres") {
            let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
            sqlx::query(&sneak).execute(&mut conn).await.is_err()
        } else {
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query(&sneak).execute(&mut conn).await.is_err()
        }
    };
    assert!(refused, "the unique partial index refuses a second open session for the robot");
    // Once the first ends, the robot may call again.
    let id = first["sessionId"].as_str().unwrap();
    app.robot(Method::DELETE, "ue-pick-01", &format!("/v1/sessions/{id}")).send().await.unwrap();
    assert_eq!(app.raise("ue-pick-01").await.0, StatusCode::ACCEPTED);
    app.finish().await;
});

/// PostgreSQL only: two server instances on one database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d09_a_second_instance_answers_409_for_a_call_in_progress_and_never_dispatches() {
    let Some(app) = TestApp::spawn(common::Db::Postgres).await else { return };
    let (status, first) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // A second instance on the same database: it cannot take the org's
    // dispatch lock, so it never decides for the org…
    let mut second_config = app.config.clone();
    second_config.addr = "127.0.0.1:0".parse().unwrap();
    second_config.instance = Some("second".into());
    let second = server::start(second_config).await.expect("second instance starts");
    let base = format!("http://{}", second.addr);
    let raise = |robot: &'static str| {
        common::http()
            .post(format!("{base}/v1/sessions"))
            .bearer_auth(server::seed::demo_robot_token(robot))
            .json(&json!({ "robotId": robot }))
            .send()
    };
    // …yet a robot with a call in progress still gets a plain 409 there.
    let res = raise("ue-pick-01").await.unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "call_in_progress");
    assert!(body["error"]["message"].as_str().unwrap().contains(first["sessionId"].as_str().unwrap()));
    // A new call there is refused with a retryable 503, never a 5xx crash or a second dispatcher.
    let res = raise("uw-weld-01").await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().contains_key("retry-after"));
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "dispatched_elsewhere");
    second.stop().await.unwrap();
    app.finish().await;
}

/// Dana operates in both demo orgs (Harbor gets her an operator profile).
async fn dana_operates_in_harbor_too(app: &TestApp) {
    let url = app.database_url();
    execute(&url, "INSERT INTO operator_profiles (org_id, user_id, region) VALUES ('org-harbor', 'u-dana', 'Manchester')").await;
    execute(&url, "INSERT INTO operator_certifications (org_id, user_id, certification) VALUES ('org-harbor', 'u-dana', 'inspection · tier-2')").await;
}

both_backends!(d10_an_operator_ringing_in_one_org_is_busy_in_every_org_and_nothing_answers_500, |app: TestApp| async move {
    dana_operates_in_harbor_too(&app).await;
    app.engine().operator_ready(ORG, "u-dana", true).await.unwrap();
    app.engine().operator_ready(HARBOR, "u-dana", true).await.unwrap();
    // Northstar rings her (inspection at uk-london).
    let (status, northstar) = app.raise("uk-insp-01").await;
    assert_eq!(status, StatusCode::CREATED, "{northstar}");
    assert_eq!(northstar["operator"]["id"], "u-dana");
    let northstar_call = northstar["sessionId"].as_str().unwrap().to_string();
    // Harbor's call finds her busy: queued, not a 500 from the offer index.
    let (status, harbor) = app.raise("hb-insp-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{harbor}");
    let harbor_call = harbor["sessionId"].as_str().unwrap().to_string();
    // A decline sent in Harbor does not touch Northstar's offer.
    assert!(matches!(
        app.engine().decline(HARBOR, "u-dana", &northstar_call).await,
        Err(server::engine::EngineError::NoOpenOffer)
    ));
    assert_eq!(open_offer_of(&app, "u-dana").await.as_deref(), Some(northstar_call.as_str()), "Northstar still rings");
    // She declines in Northstar: free again, so Harbor's waiting call rings her.
    app.engine().decline(ORG, "u-dana", &northstar_call).await.unwrap();
    eventually(Duration::from_secs(5), "Harbor's queued call offered", || async {
        open_offer_of(&app, "u-dana").await.as_deref() == Some(harbor_call.as_str())
    })
    .await;
    let url = app.database_url();
    assert_eq!(
        scalar(&url, &format!("SELECT COUNT(*) FROM offers WHERE session_id = '{northstar_call}' AND status = 'declined'")).await,
        1
    );
    app.finish().await;
});

/// A signed-in admin's live-screen socket on the org topic.
async fn watch(app: &TestApp) -> Tab {
    let cookie = session_cookie(app, ADMIN).await;
    Tab::open_path(app, &cookie, "/ws?watch=org").await
}

fn org_event(msg: RingMsg) -> Option<OrgEvent> {
    match msg {
        RingMsg::Org { event } => Some(event),
        _ => None,
    }
}

both_backends!(d12_presence_lifecycle_telemetry_registry_and_audit_reach_the_org_topic, |app: TestApp| async move {
    let mut screen = watch(&app).await;
    // Presence: an operator's console says Ready.
    let mut console = Tab::open(&app, &session_cookie(&app, OPERATOR).await).await;
    console.send(ConsoleMsg::Ready).await;
    let ready = screen
        .until(|m| match org_event(m) {
            Some(OrgEvent::Presence { presence }) if presence.state == PresenceState::Ready => Some(presence),
            _ => None,
        })
        .await;
    assert_eq!((ready.operator_id.as_str(), ready.name.as_str()), ("u-asha", "Asha Rao"));
    // Lifecycle: a call raised and matched, then accepted.
    let (_, body) = app.raise("ue-pick-01").await;
    let session = body["sessionId"].as_str().unwrap().to_string();
    screen
        .until(|m| match org_event(m) {
            Some(OrgEvent::Lifecycle { session_id, lifecycle: LifecycleState::Pending, operator_id, .. }) if session_id == session => operator_id,
            _ => None,
        })
        .await;
    console.send(ConsoleMsg::Accept { session_id: session.clone() }).await;
    screen
        .until(|m| match org_event(m) {
            Some(OrgEvent::Lifecycle { session_id, lifecycle: LifecycleState::Active, .. }) if session_id == session => Some(()),
            _ => None,
        })
        .await;
    // Telemetry, and the audit record of a protective stop.
    let res = app
        .robot(Method::POST, "ue-pick-01", &format!("/v1/sessions/{session}/telemetry"))
        .json(&json!({ "state": "PROTECTIVE_STOP", "rttMs": 280, "divergenceDeg": 2.0, "velocityScale": 0.0 }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (mut audit, mut telemetry) = (None, None);
    while audit.is_none() || telemetry.is_none() {
        match screen.until(org_event).await {
            OrgEvent::Audit { entry } => audit = Some(entry),
            OrgEvent::Telemetry { session: record } => telemetry = Some(record),
            _ => {}
        }
    }
    assert_eq!(telemetry.unwrap().state, SafetyState::ProtectiveStop);
    let audit = audit.unwrap();
    assert_eq!((audit.action, audit.session_id.as_deref()), (domain::events::AuditAction::ProtectiveStop, Some(session.as_str())));
    // Registry status: a heartbeat brings the robot online.
    app.robot(Method::POST, "ue-pick-02", "/v1/robots/ue-pick-02/heartbeat").send().await.unwrap();
    let status = screen
        .until(|m| match org_event(m) {
            Some(OrgEvent::RobotStatus { robot_id, status, .. }) if robot_id == "ue-pick-02" => Some(status),
            _ => None,
        })
        .await;
    assert_eq!(status, RegistryStatus::Online);
    app.finish().await;
});

both_backends!(d12_an_admin_watching_the_org_never_becomes_a_presence, |app: TestApp| async move {
    let mut screen = watch(&app).await;
    // Its Pong comes from the socket's loop: whatever the server does on
    // opening a tab (a console's tab_opened, which makes a presence) is done.
    screen.ping(1).await;
    let dana = app.engine().presence_of(ORG, "u-dana").await.unwrap();
    assert_eq!(dana.state, PresenceState::Offline, "watching the wallboard is not taking calls");
    // And an operator may not watch the org.
    let cookie = session_cookie(&app, OPERATOR).await;
    assert_eq!(Tab::refused(&app, &cookie, "/ws?watch=org").await, 403);
    app.finish().await;
});

both_backends!(d12_a_live_screens_socket_first_says_resync_for_what_changed_before_it_subscribed, |app: TestApp| async move {
    // A screen loads its data, then its socket subscribes: a change in
    // between reaches it only by the reload the first message asks for.
    let mut org = watch(&app).await;
    assert_eq!(org.next().await, RingMsg::Resync, "the admins' watch");
    let asha = session_cookie(&app, OPERATOR).await;
    let mut mine = Tab::open_path(&app, &asha, "/ws?watch=mine").await;
    assert_eq!(mine.next().await, RingMsg::Resync, "an operator's party watch");
    // Once: what follows is the org's events.
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    assert!(matches!(org.next().await, RingMsg::Org { event: OrgEvent::Presence { .. } }));
    app.finish().await;
});

both_backends_with!(r08_a_tab_that_goes_silent_is_closed_and_lapses_never_deaf, |c: &mut server::config::Config| c.presence_ttl_ms = 800, |app: TestApp| async move {
    // The socket stays open but the tab stops heartbeating (a frozen tab).
    let mut tab = Tab::open(&app, &session_cookie(&app, OPERATOR).await).await;
    tab.send(ConsoleMsg::Ready).await;
    eventually(Duration::from_secs(5), "offline after the TTL", || async {
        app.engine().presence_of(ORG, "u-asha").await.unwrap().state == PresenceState::Offline
    })
    .await;
    assert!(tab.closed_within(Duration::from_secs(2)).await, "the server closed the silent tab");
    // A fresh tab is heard again: Ready makes her offerable and the offer arrives.
    let mut again = Tab::open(&app, &session_cookie(&app, OPERATOR).await).await;
    again.send(ConsoleMsg::Ready).await;
    eventually(Duration::from_secs(5), "ready again", || async {
        app.engine().presence_of(ORG, "u-asha").await.unwrap().state == PresenceState::Ready
    })
    .await;
    again.send(ConsoleMsg::Heartbeat).await;
    let (status, body) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::CREATED);
    let offer = again.until(|m| match m { RingMsg::Offer { offer } => Some(offer), _ => None }).await;
    assert_eq!(offer.session_id, body["sessionId"].as_str().unwrap());
    app.finish().await;
});

/// Sets the org's RTT ceiling for `skill` as an admin does on /admin/floors.
async fn set_ceiling(app: &TestApp, skill: &str, ceiling_ms: u32, step_ms: u32, every_s: u32, lifted_after_s: u32) -> StatusCode {
    let admin = common::browser();
    common::sign_in(&admin, app, ADMIN).await;
    let fields = [ceiling_ms.to_string(), step_ms.to_string(), every_s.to_string(), lifted_after_s.to_string()];
    common::call(&admin, app, "set_rtt_ceiling", &[("skill", skill), ("ceiling_ms", &fields[0]), ("step_ms", &fields[1]), ("every_s", &fields[2]), ("lifted_after_s", &fields[3])])
        .await
        .status()
}

/// The call's dispatch decisions, oldest first, as the session detail reads them.
async fn decisions(app: &TestApp, session: &str) -> Vec<domain::dispatch::DispatchDecision> {
    app.running().store.dispatch_records(ORG, session).await.unwrap().into_iter().map(|r| r.decision().unwrap()).collect()
}

both_backends!(a15_an_operator_above_the_skills_rtt_ceiling_is_not_offered_the_call, |app: TestApp| async move {
    use domain::dispatch::{Outcome, Verdict};
    assert_eq!(set_ceiling(&app, "pick-place", 0, 0, 30, 600).await, StatusCode::UNPROCESSABLE_ENTITY, "a ceiling of 0 ms is refused");
    assert_eq!(
        set_ceiling(&app, "pick-place", 150, 0, 30, 900).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a ceiling lifted only as a waiting call is cancelled (15 min) is refused"
    );
    assert_eq!(set_ceiling(&app, "pick-place", 150, 0, 30, 600).await, StatusCode::OK);
    assert_eq!(scalar(&app.database_url(), "SELECT COUNT(*) FROM audit_records WHERE action = 'rtt_ceiling_set' AND detail LIKE 'pick-place: new ceiling, 150 ms%'").await, 1);
    // Tom (Manchester, 205 ms to us-east) is ready and certified, but above 150 ms.
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let (status, body) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let session = body["sessionId"].as_str().unwrap().to_string();
    assert_eq!(open_offer_of(&app, "u-tom").await, None);
    let queued = decisions(&app, &session).await.pop().unwrap();
    assert_eq!(queued.outcome, Outcome::Queued);
    assert_eq!(queued.considered.ceiling_ms, Some(150));
    let tom = queued.considered.candidates.iter().find(|c| c.operator_id == "u-tom").expect("Tom was considered");
    assert_eq!((tom.rtt_ms, tom.verdict), (Some(205), Verdict::AboveRttCeiling));
    // Carla (Austin, 96 ms) is within it: the queued call is hers as soon as she is ready.
    app.engine().operator_ready(ORG, "u-carla", true).await.unwrap();
    assert_eq!(open_offer_of(&app, "u-carla").await.as_deref(), Some(session.as_str()));
    assert_eq!(open_offer_of(&app, "u-tom").await, None);
    app.finish().await;
});

both_backends!(a16_a_waiting_calls_ceiling_relaxes_in_steps_until_it_is_lifted, |app: TestApp| async move {
    use domain::dispatch::{Outcome, Trigger};
    // A step of 100 ms after 1 s takes the ceiling from 150 to 250 ms: Tom (205 ms).
    assert_eq!(set_ceiling(&app, "pick-place", 150, 100, 1, 600).await, StatusCode::OK);
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let raised = Instant::now();
    let (status, body) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let session = body["sessionId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(5), "offered to Tom once the ceiling rose past 205 ms", || async {
        open_offer_of(&app, "u-tom").await.as_deref() == Some(session.as_str())
    })
    .await;
    assert!(raised.elapsed() >= Duration::from_secs(1), "never before the step");
    let offered = decisions(&app, &session).await.pop().unwrap();
    assert_eq!((offered.trigger, offered.outcome, offered.considered.ceiling_ms), (Trigger::CeilingRelaxed, Outcome::Offered, Some(250)));

    // Without steps, the ceiling holds until it is lifted (after 2 s): then
    // Asha (BLR, 275 ms) is offered the palletizing call.
    assert_eq!(set_ceiling(&app, "palletize", 100, 0, 1, 2).await, StatusCode::OK);
    app.engine().operator_ready(ORG, "u-asha", true).await.unwrap();
    let raised = Instant::now();
    let (status, body) = app.raise("ue-pal-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let session = body["sessionId"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(6), "offered to Asha once the ceiling was lifted", || async {
        open_offer_of(&app, "u-asha").await.as_deref() == Some(session.as_str())
    })
    .await;
    assert!(raised.elapsed() >= Duration::from_secs(2), "never before the lifting");
    let records = decisions(&app, &session).await;
    let offered = records.last().unwrap();
    assert_eq!((offered.trigger, offered.outcome, offered.considered.ceiling_ms), (Trigger::CeilingRelaxed, Outcome::Offered, None));
    assert_eq!(records.iter().map(|r| (r.outcome, r.considered.ceiling_ms)).collect::<Vec<_>>(), [(Outcome::Queued, Some(100)), (Outcome::Offered, None)], "no step: 100 ms until lifted, looked at again only then");
    app.finish().await;
});
