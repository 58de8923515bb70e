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
