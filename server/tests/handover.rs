//! Handover (rule L08): the operator in control offers a live session to a
//! ready, certified operator; on accept control moves with OPERATOR_SWITCH,
//! and the log says who held the session at any time. On both databases.

mod common;

use domain::events::{Event, OperatorEvent, Topic};
use domain::handover::{control_spans, HandoverOutcome};
use domain::lifecycle::{ActivityKind, SessionActivity};
use domain::models::{LifecycleState, Offer, PresenceState, SessionRecord};
use common::{attach_asha, browser, call, scalar, sign_in, TestApp, OPERATOR};
use reqwest::StatusCode;
use server::bus::{Delivery, Subscription};

const ORG: &str = "org-northstar";
const CARLA: &str = "carla.mendes@northstar.example";
const TOM: &str = "tom.whitfield@northstar.example";


async fn hand_over(client: &reqwest::Client, app: &TestApp, session: &str, to: &str) -> reqwest::Response {
    call(client, app, "hand_over_session", &[("session_id", session), ("to_operator_id", to)]).await
}

/// The next handover notice on an operator's topic.
async fn notice(events: &mut Subscription) -> HandoverOutcome {
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), events.recv()).await.expect("a handover notice") {
            Delivery::Event(Event::Operator(OperatorEvent::Handover { notice })) => return notice.outcome,
            Delivery::Closed => panic!("bus closed"),
            _ => continue,
        }
    }
}

async fn presence(app: &TestApp, operator: &str) -> (PresenceState, Option<String>) {
    let p = app.engine().presence_of(ORG, operator).await.unwrap();
    (p.state, p.current_call)
}

both_backends!(l08_the_operator_in_control_hands_over_and_the_log_shows_who_held_the_session, |app: TestApp| async move {
    let session = attach_asha(&app, "uk-pick-01").await;
    for operator in ["u-tom", "u-carla", "u-meera"] {
        app.engine().operator_ready(ORG, operator, true).await.unwrap();
    }
    let mut asha_hears = app.engine().subscribe(&Topic::operator(ORG, "u-asha"));
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;

    // Ready and certified for pick-place, best first (Manchester is nearer
    // uk-london than Austin); never Asha herself, never Meera (welding).
    let listed = call(&asha, &app, "load_handover_candidates", &[("session_id", &session)]).await;
    assert_eq!(listed.status(), StatusCode::OK);
    let listed: Vec<domain::dispatch::Candidate> = listed.json().await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|c| c.operator_id.as_str()).collect();
    assert_eq!(ids, ["u-tom", "u-carla"]);

    // Only the operator in control (or an admin) hands over; only to a candidate.
    let carla = browser();
    sign_in(&carla, &app, CARLA).await;
    assert_eq!(hand_over(&carla, &app, &session, "u-tom").await.status(), StatusCode::NOT_FOUND);
    let meera = hand_over(&asha, &app, &session, "u-meera").await;
    assert_eq!(meera.status(), StatusCode::CONFLICT);
    assert!(meera.text().await.unwrap().contains("certified"));

    // Tom is offered it, like a call, marked as a handover from Asha.
    let offered = hand_over(&asha, &app, &session, "u-tom").await;
    assert_eq!(offered.status(), StatusCode::OK);
    let offer: Offer = offered.json().await.unwrap();
    assert_eq!((offer.operator_id.as_str(), offer.handover_from.as_deref()), ("u-tom", Some("Asha Rao")));
    assert_eq!(notice(&mut asha_hears).await, HandoverOutcome::Ringing);
    assert_eq!(presence(&app, "u-tom").await, (PresenceState::Ringing, Some(session.clone())));
    // One handover rings at a time.
    let second = hand_over(&asha, &app, &session, "u-carla").await;
    assert_eq!(second.status(), StatusCode::CONFLICT);
    assert!(second.text().await.unwrap().contains("already ringing"));

    // Tom declines: Asha keeps control and is told.
    app.engine().decline(ORG, "u-tom", &session).await.unwrap();
    assert_eq!(notice(&mut asha_hears).await, HandoverOutcome::Declined);
    let record: SessionRecord = call(&asha, &app, "load_session", &[("session_id", &session)]).await.json().await.unwrap();
    assert_eq!(record.operator_id.as_deref(), Some("u-asha"));
    assert_eq!(presence(&app, "u-tom").await, (PresenceState::Ready, None));

    // Offered again, Tom accepts: control moves, Asha wraps up.
    assert_eq!(hand_over(&asha, &app, &session, "u-tom").await.status(), StatusCode::OK);
    assert_eq!(notice(&mut asha_hears).await, HandoverOutcome::Ringing);
    app.engine().answer(ORG, "u-tom", &session).await.unwrap();
    assert_eq!(notice(&mut asha_hears).await, HandoverOutcome::Accepted);
    assert_eq!(presence(&app, "u-tom").await, (PresenceState::OnCall, Some(session.clone())));
    assert_eq!(presence(&app, "u-asha").await, (PresenceState::Acw, None));
    let tom = browser();
    sign_in(&tom, &app, TOM).await;
    let record: SessionRecord = call(&tom, &app, "load_session", &[("session_id", &session)]).await.json().await.unwrap();
    assert_eq!((record.operator_id.as_deref(), record.lifecycle), (Some("u-tom"), LifecycleState::Active));
    assert_eq!(record.region.as_deref(), Some("Manchester"));
    // Asha no longer steers it; Tom does.
    let steer = |client: &reqwest::Client, to: &'static str| {
        let (client, app, session) = (client.clone(), &app, session.clone());
        async move { call(&client, app, "steer_session", &[("session_id", &session), ("to", to)]).await.status() }
    };
    assert_eq!(steer(&asha, "PAUSED").await, StatusCode::NOT_FOUND, "not hers: answered as if it did not exist");
    assert_eq!(steer(&tom, "COMPLETED").await, StatusCode::OK);

    // The log: who held it at any time.
    let log: SessionActivity = call(&tom, &app, "load_session_activity", &[("session_id", &session)]).await.json().await.unwrap();
    let kinds: Vec<ActivityKind> = log.entries.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [ActivityKind::SessionStart, ActivityKind::OperatorSwitch, ActivityKind::SessionEnd]);
    assert_eq!(log.entries[1].detail.as_deref(), Some("from Asha Rao to Tom Whitfield"));
    let spans = control_spans(&log.entries);
    let held: Vec<&str> = spans.iter().map(|s| s.operator_id.as_str()).collect();
    assert_eq!(held, ["u-asha", "u-tom"]);
    assert_eq!(spans[0].to_ms, Some(spans[1].from_ms));
    assert_eq!(spans[1].to_ms, Some(log.entries[2].at_ms));
    app.finish().await;
});

both_backends!(l08_a_handover_still_ringing_when_the_session_ends_or_the_server_restarts_is_withdrawn, |mut app: TestApp| async move {
    let session = attach_asha(&app, "uk-pick-01").await;
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let mut asha_hears = app.engine().subscribe(&Topic::operator(ORG, "u-asha"));
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    // An admin may hand over any live session of the org.
    assert_eq!(hand_over(&admin, &app, &session, "u-tom").await.status(), StatusCode::OK);
    assert_eq!(notice(&mut asha_hears).await, HandoverOutcome::Ringing);
    app.engine().finish_session(ORG, &session, None, LifecycleState::Completed, "completed by an admin").await.unwrap();
    assert_eq!(notice(&mut asha_hears).await, HandoverOutcome::Withdrawn);
    assert_eq!(presence(&app, "u-tom").await, (PresenceState::Ready, None), "Tom's ring stopped");
    assert!(app.engine().answer(ORG, "u-tom", &session).await.is_err(), "nothing left to accept");

    // Ringing across a restart: nobody heard it since, so it is withdrawn
    // and control stays; Tom can be offered calls again.
    app.engine().operator_aux(ORG, "u-tom", "lunch").await.unwrap();
    let second = attach_asha(&app, "uw-pick-01").await;
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    assert_eq!(hand_over(&admin, &app, &second, "u-tom").await.status(), StatusCode::OK);
    app.restart().await;
    let open = scalar(&app.database_url(), "SELECT COUNT(*) FROM offers WHERE status = 'open'").await;
    assert_eq!(open, 0, "the ringing handover was withdrawn at load");
    let holder = scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM sessions WHERE id = '{second}' AND operator_id = 'u-asha'")).await;
    assert_eq!(holder, 1, "control stayed with Asha");
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let (status, body) = app.raise("uk-pick-01").await;
    assert_eq!((status, body["operator"]["id"].as_str()), (StatusCode::CREATED, Some("u-tom")), "{body}");
    app.finish().await;
});

// A console that opens (or reconnects) while its operator's handover rings
// is told so after its Welcome, which drops what it showed before; once
// answered, its outcome stands instead: a console away when it was told
// learns it on its return.
both_backends!(l08_a_console_that_opens_is_told_where_its_handover_stands, |app: TestApp| async move {
    use domain::ring::RingMsg;
    let session = attach_asha(&app, "uk-pick-01").await;
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    assert_eq!(hand_over(&asha, &app, &session, "u-tom").await.status(), StatusCode::OK);

    let cookie = common::session_cookie(&app, OPERATOR).await;
    let mut tab = common::Tab::open(&app, &cookie).await;
    tab.until(|m| matches!(m, RingMsg::Welcome { .. }).then_some(())).await;
    let handover = |m: RingMsg| match m {
        RingMsg::Handover { notice } => Some(notice),
        _ => None,
    };
    let told = tab.until(handover).await;
    assert_eq!((told.session_id.as_str(), told.to_name.as_str(), told.outcome), (session.as_str(), "Tom Whitfield", HandoverOutcome::Ringing));
    let standing = app.engine().standing_notices(ORG, "u-asha").await.unwrap();
    assert!(standing.iter().any(|n| matches!(n, OperatorEvent::Handover { notice } if notice.outcome == HandoverOutcome::Ringing)), "{standing:?}");

    // Tom declines while Asha's console is away: it is told on its return.
    drop(tab);
    app.engine().decline(ORG, "u-tom", &session).await.unwrap();
    let mut tab = common::Tab::open(&app, &cookie).await;
    tab.until(|m| matches!(m, RingMsg::Welcome { .. }).then_some(())).await;
    let told = tab.until(handover).await;
    assert_eq!((told.session_id.as_str(), told.outcome), (session.as_str(), HandoverOutcome::Declined));
    let standing = app.engine().standing_notices(ORG, "u-asha").await.unwrap();
    assert!(matches!(&standing[..], [OperatorEvent::Handover { notice }] if notice.outcome == HandoverOutcome::Declined), "{standing:?}");
    drop(tab);
    app.finish().await;
});
