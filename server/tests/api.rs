//! The edge-agent REST API: every endpoint's success and each error code,
//! on both databases.

mod common;

use common::{browser, sign_in, TestApp, ADMIN, OPERATOR};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

async fn error_of(res: reqwest::Response) -> (StatusCode, String) {
    let status = res.status();
    let body: Value = res.json().await.expect("errors are JSON");
    let code = body["error"]["code"].as_str().expect("error.code").to_string();
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "error.message: {body}");
    (status, code)
}

async fn queued_session(app: &TestApp, robot: &str) -> String {
    let (status, body) = app.raise(robot).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    body["sessionId"].as_str().unwrap().to_string()
}

fn telemetry(state: &str) -> Value {
    json!({ "state": state, "rttMs": 180, "divergenceDeg": 2.5, "velocityScale": 1.0 })
}

both_backends!(authentication_errors_are_401_403_404, |app: TestApp| async move {
    let client = common::http();
    let body = json!({ "robotId": "ue-pick-01" });
    let res = client.post(app.url("/v1/sessions")).json(&body).send().await.unwrap();
    assert_eq!(error_of(res).await, (StatusCode::UNAUTHORIZED, "unauthenticated".into()));
    let res = client.post(app.url("/v1/sessions")).bearer_auth("not-a-token").json(&body).send().await.unwrap();
    assert_eq!(error_of(res).await, (StatusCode::UNAUTHORIZED, "unauthenticated".into()));
    let res = client.post(app.url("/v1/sessions")).header("authorization", "Basic abc").json(&body).send().await.unwrap();
    assert_eq!(error_of(res).await.0, StatusCode::UNAUTHORIZED);
    // Another robot's token, same org: as if the robot did not exist (no oracle).
    let res = app.robot(Method::POST, "ue-pick-02", "/v1/sessions").json(&body).send().await.unwrap();
    assert_eq!(error_of(res).await, (StatusCode::NOT_FOUND, "not_found".into()));
    // Another org's robot, or no such robot: not found.
    for robot in ["hb-pick-01", "no-such-robot"] {
        let res = app.robot(Method::POST, "ue-pick-01", "/v1/sessions").json(&json!({ "robotId": robot })).send().await.unwrap();
        assert_eq!(error_of(res).await, (StatusCode::NOT_FOUND, "not_found".into()), "{robot}");
    }
    app.finish().await;
});

both_backends!(malformed_and_wrongly_shaped_bodies_are_400_and_422, |app: TestApp| async move {
    let post = |body: &'static str| {
        app.robot(Method::POST, "ue-pick-01", "/v1/sessions").header("content-type", "application/json").body(body).send()
    };
    assert_eq!(error_of(post("{not json").await.unwrap()).await, (StatusCode::BAD_REQUEST, "malformed_json".into()));
    assert_eq!(error_of(post("{}").await.unwrap()).await, (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body".into()));
    assert_eq!(error_of(post(r#"{"robotId": 7}"#).await.unwrap()).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error_of(post(r#"{"robotId":"ue-pick-01","extra":1}"#).await.unwrap()).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    let no_type = app.robot(Method::POST, "ue-pick-01", "/v1/sessions").body(r#"{"robotId":"ue-pick-01"}"#).send().await.unwrap();
    assert_eq!(error_of(no_type).await, (StatusCode::BAD_REQUEST, "malformed_json".into()));
    app.finish().await;
});

both_backends!(bodies_over_64_kib_are_413, |app: TestApp| async move {
    let huge = format!(r#"{{"robotId":"{}"}}"#, "x".repeat(70 * 1024));
    let res = app.robot(Method::POST, "ue-pick-01", "/v1/sessions").header("content-type", "application/json").body(huge).send().await.unwrap();
    assert_eq!(error_of(res).await, (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large".into()));
    app.finish().await;
});

both_backends!(unknown_endpoints_and_sessions_are_404_json, |app: TestApp| async move {
    let res = app.robot(Method::GET, "ue-pick-01", "/v1/nothing-here").send().await.unwrap();
    assert_eq!(error_of(res).await.0, StatusCode::NOT_FOUND);
    let res = app.robot(Method::GET, "ue-pick-01", "/v1/sessions/ses-nope").send().await.unwrap();
    assert_eq!(error_of(res).await, (StatusCode::NOT_FOUND, "not_found".into()));
    app.finish().await;
});

both_backends!(get_session_returns_the_seed_record_and_only_to_its_robot, |app: TestApp| async move {
    let session = queued_session(&app, "ue-pick-01").await;
    let res = app.robot(Method::GET, "ue-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let record: Value = res.json().await.unwrap();
    for field in ["id", "robot", "site", "operatorName", "region", "startedAt", "rttMs", "divergenceDeg", "state", "velocityScale", "lifecycle", "skill"] {
        assert!(record.get(field).is_some(), "missing {field}: {record}");
    }
    assert_eq!(record["state"], "BOOT");
    assert!(domain::rules::parse_rfc3339(record["raisedAt"].as_str().unwrap()).is_some());
    // Another robot of the org: not found (no oracle); the admin: allowed; another org's admin view: 404.
    let other = app.robot(Method::GET, "ue-pick-02", &format!("/v1/sessions/{session}")).send().await.unwrap();
    assert_eq!(error_of(other).await.0, StatusCode::NOT_FOUND);
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    assert_eq!(admin.get(app.url(&format!("/v1/sessions/{session}"))).send().await.unwrap().status(), StatusCode::OK);
    let harbor = app.robot(Method::GET, "hb-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap();
    assert_eq!(error_of(harbor).await.0, StatusCode::NOT_FOUND);
    app.finish().await;
});

both_backends!(telemetry_updates_the_safety_state_and_link_numbers, |app: TestApp| async move {
    let session = queued_session(&app, "ue-pick-01").await;
    let path = format!("/v1/sessions/{session}/telemetry");
    let res = app.robot(Method::POST, "ue-pick-01", &path)
        .json(&json!({ "state": "DEGRADED", "rttMs": 340, "divergenceDeg": 9.5, "velocityScale": 0.62 }))
        .send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let record: Value = res.json().await.unwrap();
    assert_eq!(record["state"], "DEGRADED");
    assert_eq!(record["rttMs"], 340);
    assert_eq!(record["divergenceDeg"], 9.5);
    assert_eq!(record["velocityScale"], 0.62);

    for bad in [
        json!({ "state": "armed", "rttMs": 1, "divergenceDeg": 0.0, "velocityScale": 1.0 }),
        json!({ "state": "ARMED", "rttMs": -1, "divergenceDeg": 0.0, "velocityScale": 1.0 }),
        json!({ "state": "ARMED", "rttMs": 1, "divergenceDeg": -2.0, "velocityScale": 1.0 }),
        json!({ "state": "ARMED", "rttMs": 1, "divergenceDeg": 0.0, "velocityScale": 1.5 }),
        json!({ "state": "ARMED" }),
    ] {
        let res = app.robot(Method::POST, "ue-pick-01", &path).json(&bad).send().await.unwrap();
        assert_eq!(error_of(res).await, (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body".into()), "{bad}");
    }
    app.finish().await;
});

both_backends!(w11_protective_stop_is_latched_and_audited, |app: TestApp| async move {
    let session = queued_session(&app, "ue-pick-01").await;
    let path = format!("/v1/sessions/{session}/telemetry");
    let send = |state: &'static str| app.robot(Method::POST, "ue-pick-01", &path).json(&telemetry(state)).send();
    assert_eq!(send("ARMED").await.unwrap().status(), StatusCode::OK);
    assert_eq!(send("PROTECTIVE_STOP").await.unwrap().status(), StatusCode::OK);
    let actions = app.running().store.audit_actions("org-northstar").await.unwrap();
    assert_eq!(actions, vec![("protective_stop".to_string(), Some(session.clone()))]);
    // Later telemetry cannot leave it …
    for state in ["ARMED", "SAFE", "BOOT", "DEGRADED"] {
        assert_eq!(error_of(send(state).await.unwrap()).await, (StatusCode::CONFLICT, "protective_stop_latched".into()));
    }
    // … it may repeat it, without a second audit record.
    assert_eq!(send("PROTECTIVE_STOP").await.unwrap().status(), StatusCode::OK);
    assert_eq!(app.running().store.audit_actions("org-northstar").await.unwrap().len(), 1);
    let record: Value = app.robot(Method::GET, "ue-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(record["state"], "PROTECTIVE_STOP");
    app.finish().await;
});

// `DELETE` answers with the session as its batch committed it (SQLite:
// read back inside the batch; PostgreSQL: read after it): ended, with what
// the desk does not hold (the edge agent's telemetry, the robot's model),
// and the same as a later `GET`. Ending it again is a 409; another robot's
// is a 404.
both_backends!(ending_a_session_answers_the_record_its_batch_committed, |app: TestApp| async move {
    let session = queued_session(&app, "ue-pick-01").await;
    let path = format!("/v1/sessions/{session}");
    let res = app.robot(Method::POST, "ue-pick-01", &format!("{path}/telemetry"))
        .json(&json!({ "state": "DEGRADED", "rttMs": 340, "divergenceDeg": 9.5, "velocityScale": 0.62 }))
        .send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(error_of(app.robot(Method::DELETE, "uk-pick-01", &path).send().await.unwrap()).await.0, StatusCode::NOT_FOUND);
    let res = app.robot(Method::DELETE, "ue-pick-01", &path).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let ended: Value = res.json().await.unwrap();
    assert_eq!(ended["id"], session.as_str());
    assert_eq!(ended["lifecycle"], "CANCELLED");
    assert!(domain::rules::parse_rfc3339(ended["endedAt"].as_str().unwrap()).is_some(), "{ended}");
    assert_eq!((ended["state"].clone(), ended["rttMs"].clone(), ended["divergenceDeg"].clone()), (json!("DEGRADED"), json!(340), json!(9.5)));
    assert!(!ended["robotModel"].as_str().unwrap().is_empty());
    let read: Value = app.robot(Method::GET, "ue-pick-01", &path).send().await.unwrap().json().await.unwrap();
    assert_eq!(read, ended, "the answer is the committed row");
    assert_eq!(error_of(app.robot(Method::DELETE, "ue-pick-01", &path).send().await.unwrap()).await, (StatusCode::CONFLICT, "session_ended".into()));
    app.finish().await;
});

both_backends!(telemetry_into_an_ended_session_is_409, |app: TestApp| async move {
    let session = queued_session(&app, "ue-pick-01").await;
    app.robot(Method::DELETE, "ue-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap();
    let res = app.robot(Method::POST, "ue-pick-01", &format!("/v1/sessions/{session}/telemetry")).json(&telemetry("SAFE")).send().await.unwrap();
    assert_eq!(error_of(res).await, (StatusCode::CONFLICT, "session_ended".into()));
    app.finish().await;
});

both_backends!(heartbeats_keep_a_robot_online, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let status = |id: &'static str| {
        let admin = admin.clone();
        let (url, origin) = (app.url("/api/load_robot"), app.base.clone());
        async move {
            let robot: Value = admin.post(url).header("origin", origin).form(&[("robot_id", id)]).send().await.unwrap().json().await.unwrap();
            robot["status"].as_str().unwrap().to_string()
        }
    };
    assert_eq!(status("uk-mm-01").await, "offline");
    let res = app.robot(Method::POST, "uk-mm-01", "/v1/robots/uk-mm-01/heartbeat").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let ack: Value = res.json().await.unwrap();
    assert_eq!(ack["status"], "online");
    assert!(domain::rules::parse_rfc3339(ack["at"].as_str().unwrap()).is_some());
    assert_eq!(status("uk-mm-01").await, "online");
    // A token heartbeats only for its own robot: another's answers as an unknown one.
    let res = app.robot(Method::POST, "uk-mm-01", "/v1/robots/uk-pal-01/heartbeat").send().await.unwrap();
    assert_eq!(error_of(res).await.0, StatusCode::NOT_FOUND);
    let res = app.robot(Method::POST, "uk-mm-01", "/v1/robots/hb-pick-01/heartbeat").send().await.unwrap();
    assert_eq!(error_of(res).await.0, StatusCode::NOT_FOUND);
    app.finish().await;
});

both_backends!(admins_register_robots_and_get_their_token_once, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let new = json!({ "id": "ue-pick-09", "model": "UR10e", "site": "Ashburn FC-2", "pop": "us-east", "reqCert": "pick-place · tier-3" });
    let res = admin.post(app.url("/v1/robots")).json(&new).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let made: Value = res.json().await.unwrap();
    assert_eq!(made["skill"], "pick-place");
    let token = made["token"].as_str().unwrap();
    let res = common::http().post(app.url("/v1/robots/ue-pick-09/heartbeat")).bearer_auth(token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "the issued token works");

    let res = admin.post(app.url("/v1/robots")).json(&new).send().await.unwrap();
    assert_eq!(error_of(res).await, (StatusCode::CONFLICT, "robot_exists".into()));
    for req_cert in ["", "  · "] {
        let bad = json!({ "id": "ue-pick-10", "model": "UR10e", "site": "A", "pop": "us-east", "reqCert": req_cert });
        let res = admin.post(app.url("/v1/robots")).json(&bad).send().await.unwrap();
        assert_eq!(error_of(res).await, (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body".into()), "reqCert {req_cert:?}");
    }
    let bad_id = json!({ "id": "Bad Id", "model": "UR10e", "site": "A", "pop": "us-east", "reqCert": "x" });
    assert_eq!(error_of(admin.post(app.url("/v1/robots")).json(&bad_id).send().await.unwrap()).await.0, StatusCode::UNPROCESSABLE_ENTITY);

    let operator = browser();
    sign_in(&operator, &app, OPERATOR).await;
    let res = operator.post(app.url("/v1/robots")).json(&new).send().await.unwrap();
    assert_eq!(error_of(res).await.0, StatusCode::FORBIDDEN);
    let res = app.robot(Method::POST, "ue-pick-01", "/v1/robots").json(&new).send().await.unwrap();
    assert_eq!(error_of(res).await.0, StatusCode::FORBIDDEN);
    app.finish().await;
});

both_backends!(openapi_describes_every_endpoint, |app: TestApp| async move {
    let doc: Value = reqwest::get(app.url("/v1/openapi.json")).await.unwrap().json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/sessions", "post"),
        ("/v1/sessions/{id}", "get"),
        ("/v1/sessions/{id}", "delete"),
        ("/v1/sessions/{id}/telemetry", "post"),
        ("/v1/robots", "post"),
        ("/v1/robots/{id}/heartbeat", "post"),
    ] {
        assert!(paths[path].get(method).is_some(), "{method} {path} missing");
    }
    // Every error code a client may match on is listed in the schema.
    let codes = doc["components"]["schemas"]["ErrorCode"]["enum"].as_array().expect("ErrorCode is an enum");
    for code in ["protective_stop_latched", "call_in_progress", "dispatched_elsewhere", "rate_limited"] {
        assert!(codes.iter().any(|c| c == code), "{code} missing from ErrorCode");
    }
    let responses = &paths["/v1/sessions"]["post"]["responses"];
    for code in ["201", "202", "400", "401", "403", "404", "409", "413", "422"] {
        assert!(responses.get(code).is_some(), "POST /v1/sessions lacks {code}");
    }
    for schema in ["CallMatched", "CallQueued", "Offer", "SessionRecord", "ErrorBody", "TelemetryBody"] {
        assert!(doc["components"]["schemas"].get(schema).is_some(), "schema {schema}");
    }
    app.finish().await;
});
