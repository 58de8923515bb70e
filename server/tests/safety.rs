//! People's safety changes: the cockpit's E-stop latches PROTECTIVE_STOP
//! and is an audit record (rules O04, W13); only an explicit clear with a
//! reason, by an admin or the attached operator, leaves it (rule W11).
//! On both databases, over real HTTP.

mod common;

use domain::board::OpsBoard;
use domain::events::AuditAction;
use domain::models::{SafetyState, SessionRecord};
use common::{browser, call, sign_in, TestApp, ADMIN, OPERATOR};
use reqwest::{Method, StatusCode};

async fn attach_asha(app: &TestApp) -> String {
    common::attach_asha(app, "uk-pick-01").await
}

async fn telemetry(app: &TestApp, session: &str, state: &str) -> reqwest::Response {
    app.robot(Method::POST, "uk-pick-01", &format!("/v1/sessions/{session}/telemetry"))
        .json(&serde_json::json!({"state": state, "rttMs": 60, "divergenceDeg": 1.0, "velocityScale": 1.0}))
        .send()
        .await
        .unwrap()
}

async fn board(client: &reqwest::Client, app: &TestApp) -> OpsBoard {
    call(client, app, "load_ops_board", &[]).await.json().await.unwrap()
}

both_backends!(w13_o04_the_cockpit_estop_latches_the_session_and_reaches_the_feed_and_the_edge_agent, |app: TestApp| async move {
    let session = attach_asha(&app).await;
    assert_eq!(telemetry(&app, &session, "ARMED").await.status(), StatusCode::OK);
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    let stopped = call(&asha, &app, "estop_session", &[("session_id", &session)]).await;
    assert_eq!(stopped.status(), StatusCode::OK);
    assert_eq!(stopped.json::<SessionRecord>().await.unwrap().state, SafetyState::ProtectiveStop);

    // The edge agent learns it from its next telemetry answer and the record.
    let answer = telemetry(&app, &session, "ARMED").await;
    assert_eq!(answer.status(), StatusCode::CONFLICT);
    assert!(answer.text().await.unwrap().contains("protective_stop_latched"));
    let record: SessionRecord = app.robot(Method::GET, "uk-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(record.state, SafetyState::ProtectiveStop);

    // A second press changes nothing and counts once.
    assert_eq!(call(&asha, &app, "estop_session", &[("session_id", &session)]).await.status(), StatusCode::OK);
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let b = board(&admin, &app).await;
    assert_eq!(b.headline().estops_24h, 1, "O04");
    assert_eq!(b.audit[0].action, AuditAction::OperatorEstop, "W13: on the safety feed");
    assert_eq!(b.audit[0].actor_id.as_deref(), Some("u-asha"));
    assert_eq!(b.cards()[0].state, SafetyState::ProtectiveStop, "the card latches");
    // Another operator of the org cannot stop Asha's session.
    let carla = browser();
    sign_in(&carla, &app, "carla.mendes@northstar.example").await;
    assert_eq!(call(&carla, &app, "estop_session", &[("session_id", &session)]).await.status(), StatusCode::NOT_FOUND);
    app.finish().await;
});

both_backends!(w11_only_a_clear_with_a_reason_by_an_admin_or_the_attached_operator_leaves_the_latch, |app: TestApp| async move {
    let session = attach_asha(&app).await;
    assert_eq!(telemetry(&app, &session, "PROTECTIVE_STOP").await.status(), StatusCode::OK);
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let clear = |reason: &'static str| {
        let (admin, app, session) = (&admin, &app, session.clone());
        async move { call(admin, app, "clear_protective_stop", &[("session_id", &session), ("reason", reason)]).await }
    };
    assert_eq!(clear("   ").await.status(), StatusCode::UNPROCESSABLE_ENTITY, "a reason is required");
    let carla = browser();
    sign_in(&carla, &app, "carla.mendes@northstar.example").await;
    let foreign = call(&carla, &app, "clear_protective_stop", &[("session_id", &session), ("reason", "mine now")]).await;
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND, "not her session");
    assert_eq!(telemetry(&app, &session, "ARMED").await.status(), StatusCode::CONFLICT, "still latched");

    let cleared = clear("cell inspected, guard closed").await;
    assert_eq!(cleared.status(), StatusCode::OK);
    assert_eq!(cleared.json::<SessionRecord>().await.unwrap().state, SafetyState::Safe);
    let b = board(&admin, &app).await;
    assert_eq!(b.audit[0].action, AuditAction::ProtectiveStopCleared);
    assert_eq!(b.audit[0].detail.as_deref(), Some("cell inspected, guard closed"));
    assert_eq!(b.audit[0].actor_id.as_deref(), Some("u-dana"));
    let again = clear("twice").await;
    assert_eq!(again.status(), StatusCode::CONFLICT, "nothing latched to clear");
    assert_eq!(telemetry(&app, &session, "ARMED").await.status(), StatusCode::OK, "the robot re-arms");

    // The attached operator may clear too.
    assert_eq!(telemetry(&app, &session, "PROTECTIVE_STOP").await.status(), StatusCode::OK);
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    let by_asha = call(&asha, &app, "clear_protective_stop", &[("session_id", &session), ("reason", "checked on camera")]).await;
    assert_eq!(by_asha.status(), StatusCode::OK);
    app.finish().await;
});

both_backends!(the_timeline_holds_every_safety_change_and_the_lifecycle_from_the_log, |app: TestApp| async move {
    let session = attach_asha(&app).await;
    for state in ["SAFE", "ARMED", "ARMED", "DEGRADED", "ARMED"] {
        assert_eq!(telemetry(&app, &session, state).await.status(), StatusCode::OK);
    }
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    assert_eq!(call(&asha, &app, "estop_session", &[("session_id", &session)]).await.status(), StatusCode::OK);
    let cleared = call(&asha, &app, "clear_protective_stop", &[("session_id", &session), ("reason", "cell checked")]).await;
    assert_eq!(cleared.status(), StatusCode::OK);
    assert_eq!(call(&asha, &app, "steer_session", &[("session_id", &session), ("to", "PAUSED")]).await.status(), StatusCode::OK);
    let history: domain::timeline::StateHistory =
        call(&asha, &app, "load_state_history", &[("session_id", &session)]).await.json().await.unwrap();
    use SafetyState as S;
    let safety: Vec<S> = history.safety.iter().map(|s| s.state).collect();
    assert_eq!(safety, [S::Boot, S::Safe, S::Armed, S::Degraded, S::Armed, S::ProtectiveStop, S::Safe], "repeats merge; E-stop and clear included");
    assert!(history.safety.windows(2).all(|w| w[0].to_ms == Some(w[1].from_ms)), "spans meet");
    use domain::models::LifecycleState as L;
    let lifecycle: Vec<L> = history.lifecycle.iter().map(|s| s.state).collect();
    assert_eq!(lifecycle, [L::Pending, L::Active, L::Paused]);
    // Another operator sees nothing of it.
    let carla = browser();
    sign_in(&carla, &app, "carla.mendes@northstar.example").await;
    assert_eq!(call(&carla, &app, "load_state_history", &[("session_id", &session)]).await.status(), StatusCode::NOT_FOUND);
    app.finish().await;
});
