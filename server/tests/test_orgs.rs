//! Browser tests' own orgs (`CLUTCHCALL_TEST_ORGS=1`): each copy of the
//! demo is a world of its own, and the door is shut unless asked for.

mod common;

use common::{browser, call, http, landing, Db, TestApp};
use reqwest::StatusCode;
use serde_json::Value;

async fn copy(app: &TestApp) -> Value {
    let res = http().post(app.url("/test/orgs")).header("origin", &app.base).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json().await.unwrap()
}

both_backends_with!(copies_of_the_demo_share_no_person_robot_or_call, |c: &mut server::config::Config| c.test_orgs = true, |app: TestApp| async move {
    let (one, two) = (copy(&app).await, copy(&app).await);
    assert_ne!(one["tag"], two["tag"]);
    for key in ["u-asha", "u-dana", "u-kofi", "u-lena"] {
        assert_ne!(one["people"][key]["email"], two["people"][key]["email"], "{key}");
        assert_eq!(one["people"][key]["name"], two["people"][key]["name"], "display names stay: {key}");
    }
    assert_ne!(one["orgs"]["org-northstar"]["id"], two["orgs"]["org-northstar"]["id"]);

    // A copy's people sign in with the demo password and land where the demo's do.
    let asha = browser();
    let signed = call(&asha, &app, "sign_in", &[("email", one["people"]["u-asha"]["email"].as_str().unwrap()), ("password", one["password"].as_str().unwrap())]).await;
    assert_eq!(landing(signed).await, "/operator");

    // A copy's robot raises a call in its own org, with its own token,
    // and rings nobody of the other copy (nobody there is ready either).
    let robot = &one["robots"]["uk-insp-01"];
    let raised = http()
        .post(app.url("/v1/sessions"))
        .bearer_auth(robot["token"].as_str().unwrap())
        .json(&serde_json::json!({ "robotId": robot["id"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(raised.status(), StatusCode::ACCEPTED);
    let body: Value = raised.json().await.unwrap();
    assert_eq!(body["status"], "queued", "{body}");
    // Its token is the copy's: the other copy's robot of the same demo id is another robot.
    let theirs = http()
        .post(app.url(&format!("/v1/robots/{}/heartbeat", two["robots"]["uk-insp-01"]["id"].as_str().unwrap())))
        .bearer_auth(robot["token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    app.finish().await;
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_through_a_proxy_finds_no_door() {
    let app = TestApp::spawn_with(Db::Sqlite, |c| c.test_orgs = true).await.unwrap();
    let res = http().post(app.url("/test/orgs")).header("origin", &app.base).header("x-forwarded-for", "203.0.113.9").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_is_shut_unless_asked_for() {
    let app = TestApp::spawn(Db::Sqlite).await.unwrap();
    let res = http().post(app.url("/test/orgs")).header("origin", &app.base).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_orgs_are_refused_on_a_reachable_address() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = server::config::Config::local(dir.path().to_path_buf(), None, common::site_root());
    config.test_orgs = true;
    config.addr = "0.0.0.0:0".parse().unwrap();
    let refused = server::start(config).await.err().expect("refused");
    assert!(refused.to_string().contains("loopback"), "{refused}");
}
