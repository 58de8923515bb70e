//! A supervisor's live view (issue "Integrators and supervisors", part 2):
//! an admin of the org joins a live session's relay read-only: frames and
//! the operator's actions reach them, nothing they send reaches the robot,
//! the cockpit hears who watches, and the activity log says when they
//! joined and left. A certified admin takes control without an accept and
//! the old cockpit's relay closes; an uncertified one is refused. Anyone
//! but the org's admins is refused. Both databases, real sockets.

mod common;

use common::{browser, call, relay, session_cookie, sign_in, RelaySocket as Socket, TestApp, ADMIN};
use domain::lifecycle::{ActivityKind, SessionActivity};
use domain::models::SessionRecord;
use domain::relay::RelayMsg;
use futures::{SinkExt, StreamExt};
use reqwest::StatusCode;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const ORG: &str = "org-northstar";
const PRIYA: &str = "priya.shah@northstar.example";

/// Priya (inspection) answers a call of uk-insp-01: the session's id.
async fn priyas_session(app: &TestApp) -> String {
    app.engine().operator_ready(ORG, "u-priya", true).await.unwrap();
    let (status, body) = app.raise("uk-insp-01").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["operator"]["id"], "u-priya", "{body}");
    let session = body["sessionId"].as_str().unwrap().to_string();
    app.engine().answer(ORG, "u-priya", &session).await.unwrap();
    session
}

/// The live view's socket, with a sign-in cookie.
async fn watch(app: &TestApp, session: &str, cookie: &str) -> Result<Socket, u16> {
    let mut request = format!("{}/relay/{session}/watch", app.base.replace("http://", "ws://")).into_client_request().unwrap();
    request.headers_mut().insert("cookie", cookie.parse().unwrap());
    request.headers_mut().insert("origin", app.base.parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
        Err(e) => panic!("upgrade failed: {e}"),
    }
}

fn text(msg: &RelayMsg) -> Message {
    Message::Text(serde_json::to_string(msg).unwrap().into())
}

/// The next relay message `pick` takes (others skipped), within 5 s.
async fn until<T>(ws: &mut Socket, pick: impl Fn(RelayMsg) -> Option<T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    if let Some(found) = serde_json::from_str(&t).ok().and_then(&pick) {
                        return found;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("the socket ended: {other:?}"),
            }
        }
    })
    .await
    .expect("the message within 5 s")
}

/// Whether the socket is closed within 5 s (frames before the close skipped).
async fn closes(ws: &mut Socket) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match ws.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return true,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .unwrap_or(false)
}

/// The session's activity log as `admin` (signed in) reads it.
async fn activity(app: &TestApp, admin: &reqwest::Client, session: &str) -> Vec<(ActivityKind, Option<String>, Option<String>)> {
    let log: SessionActivity = call(&admin, app, "load_session_activity", &[("session_id", session)]).await.json().await.unwrap();
    log.entries.into_iter().map(|e| (e.kind, e.operator_id, e.detail)).collect()
}

both_backends!(a_supervisor_sees_frames_and_actions_sends_nothing_and_is_seen_and_logged, |app: TestApp| async move {
    let session = priyas_session(&app).await;
    let reader = browser();
    sign_in(&reader, &app, ADMIN).await;
    let mut robot = relay(&app, &session, Some("uk-insp-01"), None).await.unwrap();
    let mut cockpit = relay(&app, &session, None, Some(&session_cookie(&app, PRIYA).await)).await.unwrap();
    let mut view = watch(&app, &session, &session_cookie(&app, ADMIN).await).await.expect("an admin of the org watches");

    // The cockpit hears who is watching.
    let watching = until(&mut cockpit, |m| match m {
        RelayMsg::Peers { watching, .. } if !watching.is_empty() => Some(watching),
        _ => None,
    })
    .await;
    assert_eq!(watching, ["Dana Okafor"]);

    // The robot's frames reach the live view, and so do the operator's actions.
    robot.send(text(&RelayMsg::State { t_ms: 1, joints: vec![0.25; 6], fields: Default::default() })).await.unwrap();
    let joints = until(&mut view, |m| match m {
        RelayMsg::State { joints, .. } => Some(joints),
        _ => None,
    })
    .await;
    assert_eq!(joints, vec![0.25; 6]);
    cockpit.send(text(&RelayMsg::Action { t_ms: 2, values: vec![1.0; 6] })).await.unwrap();
    let seen = until(&mut view, |m| match m {
        RelayMsg::Action { values, .. } => Some(values),
        _ => None,
    })
    .await;
    assert_eq!(seen, vec![1.0; 6]);
    // The robot gets the action, and was never told who watches.
    let mut named = Vec::new();
    let action = loop {
        match until(&mut robot, |m| match m {
            RelayMsg::Action { values, .. } => Some(Ok(values)),
            RelayMsg::Peers { watching, .. } => Some(Err(watching)),
            _ => None,
        })
        .await
        {
            Ok(values) => break values,
            Err(watching) => named.extend(watching),
        }
    };
    assert_eq!(action, vec![1.0; 6]);
    assert!(named.is_empty(), "names reached the robot: {named:?}");

    // What the live view sends is refused and reaches nobody: the robot's
    // next action is the operator's probe, not the supervisor's.
    view.send(text(&RelayMsg::Action { t_ms: 3, values: vec![9.0; 6] })).await.unwrap();
    let refused = until(&mut view, |m| match m { RelayMsg::Refused { reason } => Some(reason), _ => None }).await;
    assert!(refused.contains("read-only"), "{refused}");
    cockpit.send(text(&RelayMsg::Action { t_ms: 4, values: vec![2.0; 6] })).await.unwrap();
    assert_eq!(until(&mut robot, |m| match m { RelayMsg::Action { values, .. } => Some(values), _ => None }).await, vec![2.0; 6]);

    // Joined and left, in the activity log.
    let joined = activity(&app, &reader, &session).await;
    assert!(joined.iter().any(|(k, who, _)| *k == ActivityKind::SupervisorJoined && who.as_deref() == Some("u-dana")), "{joined:?}");
    let lefts = |n: usize| {
        let (app, reader) = (&app, &reader);
        let session = session.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(5), async {
                while activity(app, reader, &session).await.iter().filter(|(k, _, _)| *k == ActivityKind::SupervisorLeft).count() < n {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("{n} SUPERVISOR_LEFT within 5 s"))
        }
    };
    drop(view);
    lefts(1).await;
    // Watching again until the session ends: the end closes the view, and
    // its leave is logged too.
    let mut view = watch(&app, &session, &session_cookie(&app, ADMIN).await).await.unwrap();
    until(&mut view, |m| matches!(m, RelayMsg::Peers { .. }).then_some(())).await;
    app.engine().steer_session(ORG, &session, domain::models::LifecycleState::Completed, Some("u-priya")).await.unwrap();
    assert!(closes(&mut view).await, "the session's end closes the live view");
    lefts(2).await;
    let log = activity(&app, &reader, &session).await;
    assert_eq!(log.iter().filter(|(k, _, _)| *k == ActivityKind::SupervisorJoined).count(), 2, "{log:?}");
    app.finish().await;
});

both_backends!(only_the_orgs_admins_watch, |app: TestApp| async move {
    let session = priyas_session(&app).await;
    // The operator in control, another operator, another org's operator: refused.
    assert_eq!(watch(&app, &session, &session_cookie(&app, PRIYA).await).await.err(), Some(403));
    assert_eq!(watch(&app, &session, &session_cookie(&app, "carla.mendes@northstar.example").await).await.err(), Some(403));
    assert_eq!(watch(&app, &session, &session_cookie(&app, common::HARBOR_OPERATOR).await).await.err(), Some(403));
    // An admin working in another org: the session does not exist there.
    let cookie = session_cookie(&app, ADMIN).await;
    let moved = common::http().post(app.url("/api/select_org")).header("cookie", &cookie).header("origin", &app.base).form(&[("org_id", "org-harbor")]).send().await.unwrap();
    assert!(!moved.status().is_client_error() && !moved.status().is_server_error(), "{}", moved.status());
    assert_eq!(watch(&app, &session, &cookie).await.err(), Some(404));
    // Nobody signed in.
    assert_eq!(watch(&app, &session, "cc_session=nope").await.err(), Some(401));
    app.finish().await;
});

both_backends!(a_certified_admin_takes_control_and_the_old_cockpit_lets_go_an_uncertified_one_may_not, |app: TestApp| async move {
    let session = priyas_session(&app).await;
    let mut cockpit = relay(&app, &session, None, Some(&session_cookie(&app, PRIYA).await)).await.unwrap();
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let reader = admin.clone();
    let take_first = call(&admin, &app, "take_over_session", &[("session_id", session.as_str()), ("reason", "now")]).await;
    assert_eq!(take_first.status(), StatusCode::CONFLICT);
    assert!(take_first.text().await.unwrap().contains("Open your Ready screen"), "control goes to a console");
    // Dana's console is open (the Ready screen's socket), not Ready: known
    // to the desk once its Welcome came (the upgrade alone races it).
    let mut console = common::Tab::open(&app, &session_cookie(&app, ADMIN).await).await;
    console.until(|m| matches!(m, domain::ring::RingMsg::Welcome { .. }).then_some(())).await;
    let take = |session: String, reason: &'static str| {
        let (admin, app) = (admin.clone(), &app);
        async move { call(&admin, app, "take_over_session", &[("session_id", session.as_str()), ("reason", reason)]).await }
    };
    assert_eq!(take(session.clone(), "  ").await.status(), StatusCode::UNPROCESSABLE_ENTITY, "a reason is required");
    let taken = take(session.clone(), "robot drifting toward the pit edge").await;
    assert_eq!(taken.status(), StatusCode::OK);
    let record: SessionRecord = taken.json().await.unwrap();
    assert_eq!(record.operator_id.as_deref(), Some("u-dana"));
    assert!(closes(&mut cockpit).await, "Priya's cockpit lets go");
    let switch = activity(&app, &reader, &session).await.into_iter().find(|(k, _, _)| *k == ActivityKind::OperatorSwitch).expect("OPERATOR_SWITCH");
    assert_eq!(switch.1.as_deref(), Some("u-dana"));
    assert!(switch.2.as_deref().unwrap().contains("robot drifting toward the pit edge"), "{switch:?}");
    // Dana's own cockpit joins now.
    assert!(relay(&app, &session, None, Some(&session_cookie(&app, ADMIN).await)).await.is_ok());
    assert_eq!(take(session.clone(), "again").await.status(), StatusCode::CONFLICT, "already in control");

    // A pick-place session: Dana is not certified for it.
    let other = common::attach_asha(&app, "uk-pick-01").await;
    let refused = take(other.clone(), "help").await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    assert!(refused.text().await.unwrap().contains("certified for pick-place"));
    // An operator may not take over at all.
    let carla = browser();
    sign_in(&carla, &app, "carla.mendes@northstar.example").await;
    assert_eq!(call(&carla, &app, "take_over_session", &[("session_id", other.as_str()), ("reason", "mine")]).await.status(), StatusCode::FORBIDDEN);
    app.finish().await;
});
