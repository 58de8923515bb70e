//! Directory administration of robots from the admin's server functions:
//! edit (rule A02: the reqCert must name a skill; the next decision uses
//! the new values, no restart), rotate the token (the old one stops at
//! once), retire (refused while live; the token stops; rule O02: the robot
//! leaves the fleet count). Every change is an audit record. Both databases.

mod common;

use domain::board::OpsBoard;
use domain::models::Robot;
use common::{browser, call, scalar, sign_in, TestApp, ADMIN, OPERATOR};
use reqwest::{Method, StatusCode};

async fn heartbeat(app: &TestApp, robot: &str, token: &str) -> StatusCode {
    common::http()
        .post(app.url(&format!("/v1/robots/{robot}/heartbeat")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
}

async fn audits(app: &TestApp, action: &str) -> i64 {
    scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM audit_records WHERE action = '{action}'")).await
}

both_backends!(a02_an_admin_edits_a_robot_and_its_next_call_is_dispatched_on_the_new_req_cert, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let edit = |req_cert: &'static str| {
        let (admin, app) = (admin.clone(), &app);
        async move {
            call(&admin, app, "edit_robot", &[("robot_id", "ue-pick-02"), ("model", "UR10e"), ("site", "Ashburn FC-3"), ("pop", "us-east"), ("req_cert", req_cert)]).await
        }
    };
    assert_eq!(edit("   ").await.status(), StatusCode::UNPROCESSABLE_ENTITY, "a reqCert naming no skill");
    let edited = edit("welding · tier-2").await;
    assert_eq!(edited.status(), StatusCode::OK);
    let robot: Robot = edited.json().await.unwrap();
    assert_eq!((robot.skill.as_str(), robot.site.as_str()), ("welding", "Ashburn FC-3"));
    // The next call asks for welding (nobody ready holds it: queued under that skill).
    let (status, body) = app.raise("ue-pick-02").await;
    assert_eq!((status, body["skill"].as_str()), (StatusCode::ACCEPTED, Some("welding")), "{body}");
    assert_eq!(audits(&app, "robot_edited").await, 1);
    let detail = scalar(
        &app.database_url(),
        "SELECT COUNT(*) FROM audit_records WHERE action = 'robot_edited' AND actor_id = 'u-dana' AND detail LIKE '%reqCert: pick-place · tier-1 → welding · tier-2%'",
    )
    .await;
    assert_eq!(detail, 1, "who, and before → after");
    // Operators do not administer.
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    assert_eq!(call(&asha, &app, "rotate_robot_token", &[("robot_id", "ue-pick-02")]).await.status(), StatusCode::FORBIDDEN);
    app.finish().await;
});

both_backends!(a_rotated_token_replaces_the_old_one_at_once, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let old = server::seed::demo_robot_token("ue-pick-02");
    assert_eq!(heartbeat(&app, "ue-pick-02", &old).await, StatusCode::OK);
    let rotated = call(&admin, &app, "rotate_robot_token", &[("robot_id", "ue-pick-02")]).await;
    assert_eq!(rotated.status(), StatusCode::OK);
    let new: String = rotated.json().await.unwrap();
    assert_eq!(heartbeat(&app, "ue-pick-02", &old).await, StatusCode::UNAUTHORIZED, "the old token stops at once");
    assert_eq!(heartbeat(&app, "ue-pick-02", &new).await, StatusCode::OK);
    let robot: Robot = call(&admin, &app, "load_robot", &[("robot_id", "ue-pick-02")]).await.json().await.unwrap();
    assert!(robot.token_rotated_ms.is_some(), "the registry row shows when");
    assert_eq!(audits(&app, "robot_token_rotated").await, 1);
    let leaked = scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM audit_records WHERE detail LIKE '%{new}%'")).await;
    assert_eq!(leaked, 0, "the token is written nowhere");
    assert_eq!(call(&admin, &app, "rotate_robot_token", &[("robot_id", "no-such-robot")]).await.status(), StatusCode::NOT_FOUND);
    app.finish().await;
});

both_backends!(o02_a_retired_robot_leaves_the_fleet_and_its_token_stops_but_not_while_live, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let fleet = |admin: reqwest::Client| {
        let app = &app;
        async move { call(&admin, app, "load_ops_board", &[]).await.json::<OpsBoard>().await.unwrap().headline().robots_total }
    };
    let before = fleet(admin.clone()).await;
    let (status, body) = app.raise("uk-weld-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let session = body["sessionId"].as_str().unwrap().to_string();
    let refused = call(&admin, &app, "retire_robot", &[("robot_id", "uk-weld-01")]).await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    assert!(refused.text().await.unwrap().contains(&session), "names the live session");
    let withdrawn = app.robot(Method::DELETE, "uk-weld-01", &format!("/v1/sessions/{session}")).send().await.unwrap();
    assert_eq!(withdrawn.status(), StatusCode::OK);
    assert_eq!(call(&admin, &app, "retire_robot", &[("robot_id", "uk-weld-01")]).await.status(), StatusCode::OK);
    assert_eq!(heartbeat(&app, "uk-weld-01", &server::seed::demo_robot_token("uk-weld-01")).await, StatusCode::UNAUTHORIZED);
    assert_eq!(fleet(admin.clone()).await, before - 1, "O02: retired robots leave the total fleet");
    assert_eq!(call(&admin, &app, "load_robot", &[("robot_id", "uk-weld-01")]).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(call(&admin, &app, "retire_robot", &[("robot_id", "uk-weld-01")]).await.status(), StatusCode::NOT_FOUND, "once");
    assert_eq!(audits(&app, "robot_retired").await, 1);
    // Its history stays readable.
    let record = call(&admin, &app, "load_session", &[("session_id", &session)]).await;
    assert_eq!(record.status(), StatusCode::OK);
    app.finish().await;
});

both_backends!(a_person_changes_their_password_and_every_other_sign_in_ends, |app: TestApp| async move {
    use common::{session_cookie, Tab};
    let here = browser();
    sign_in(&here, &app, OPERATOR).await;
    let elsewhere_cookie = session_cookie(&app, OPERATOR).await;
    let mut elsewhere_tab = Tab::open(&app, &elsewhere_cookie).await;
    let change = |current: &'static str, new: &'static str, confirm: &'static str| {
        let (here, app) = (here.clone(), &app);
        async move { call(&here, app, "change_password", &[("current", current), ("new", new), ("confirm", confirm)]).await.status() }
    };
    assert_eq!(change("clutchcall-demo", "too short", "too short").await, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(change("clutchcall-demo", "a long new password", "a long new passworD").await, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(change("not my password", "a long new password", "a long new password").await, StatusCode::FORBIDDEN);
    assert_eq!(change("clutchcall-demo", "a long new password", "a long new password").await, StatusCode::OK);
    // This sign-in goes on; the other one ended, its socket closed at once.
    let me: Option<domain::models::CurrentUser> = call(&here, &app, "signed_in_user", &[]).await.json().await.unwrap();
    assert!(me.is_some());
    assert!(elsewhere_tab.closed_within(std::time::Duration::from_secs(5)).await, "the other browser's socket closed");
    let other = common::http()
        .post(app.url("/api/signed_in_user"))
        .header(reqwest::header::COOKIE, &elsewhere_cookie)
        .header("origin", app.url(""))
        .send()
        .await
        .unwrap();
    let other: Option<domain::models::CurrentUser> = other.json().await.unwrap();
    assert!(other.is_none(), "the other sign-in ended");
    // The old password no longer opens; the new one does (from another
    // address: this one has used its burst of sign-in attempts).
    let fresh = common::browser_from([127, 0, 0, 9]);
    assert_eq!(call(&fresh, &app, "sign_in", &[("email", OPERATOR), ("password", "clutchcall-demo")]).await.status(), StatusCode::UNAUTHORIZED);
    let signed = call(&fresh, &app, "sign_in", &[("email", OPERATOR), ("password", "a long new password")]).await;
    assert!(signed.status().is_success() || signed.status().is_redirection(), "{}", signed.status());
    app.finish().await;
});
