//! Seed 001's lifecycle steered from the cockpit's server functions: pause,
//! resume, complete, each committed with its activity event and published on
//! the org's topic (rules L01, L03, L04, L05), on both databases.

mod common;

use domain::events::{Event, OrgEvent, Topic};
use domain::lifecycle::{ActivityEntry, ActivityKind};
use domain::models::{LifecycleState, SessionRecord};
use common::{attach_asha, browser, call, sign_in, TestApp, OPERATOR};
use reqwest::StatusCode;
use server::bus::Delivery;

const ORG: &str = "org-northstar";
const CARLA: &str = "carla.mendes@northstar.example";

async fn steer(client: &reqwest::Client, app: &TestApp, session: &str, to: &str) -> reqwest::Response {
    call(client, app, "steer_session", &[("session_id", session), ("to", to)]).await
}

async fn activity(client: &reqwest::Client, app: &TestApp, session: &str) -> Vec<ActivityEntry> {
    let res = call(client, app, "load_session_activity", &[("session_id", session)]).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json::<domain::lifecycle::SessionActivity>().await.unwrap().entries
}

both_backends!(l01_l03_l04_l05_the_attached_operator_pauses_resumes_and_completes_and_the_log_tells_it, |app: TestApp| async move {
    let session = attach_asha(&app, "uk-pick-01").await;
    let mut org_events = app.engine().subscribe(&Topic::org(ORG));
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;

    let paused = steer(&asha, &app, &session, "PAUSED").await;
    assert_eq!(paused.status(), StatusCode::OK);
    assert_eq!(paused.json::<SessionRecord>().await.unwrap().lifecycle, LifecycleState::Paused);
    // Published on the org's topic, so the live screens move.
    // (The start may still be in flight: it is published after its answer.)
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), org_events.recv()).await.expect("the PAUSED event") {
            Delivery::Event(Event::Org(OrgEvent::Lifecycle { session_id, lifecycle: LifecycleState::Paused, .. })) if session_id == session => break,
            Delivery::Closed => panic!("bus closed"),
            _ => continue,
        }
    }

    // L01: PAUSED → PAUSED is no transition: a clear refusal, nothing changes.
    let again = steer(&asha, &app, &session, "PAUSED").await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert!(again.text().await.unwrap().contains("PAUSED session cannot become PAUSED"));
    // Another operator cannot steer Asha's session.
    let carla = browser();
    sign_in(&carla, &app, CARLA).await;
    assert_eq!(steer(&carla, &app, &session, "ACTIVE").await.status(), StatusCode::NOT_FOUND);
    assert_eq!(call(&carla, &app, "load_session_activity", &[("session_id", &session)]).await.status(), StatusCode::NOT_FOUND);

    // L03: PAUSED returns to ACTIVE on resume, or ends from there.
    assert_eq!(steer(&asha, &app, &session, "ACTIVE").await.status(), StatusCode::OK);
    assert_eq!(steer(&asha, &app, &session, "PAUSED").await.status(), StatusCode::OK);
    let done = steer(&asha, &app, &session, "COMPLETED").await;
    assert_eq!(done.status(), StatusCode::OK);
    let done: SessionRecord = done.json().await.unwrap();
    assert_eq!(done.lifecycle, LifecycleState::Completed);
    assert!(done.ended_at.is_some());

    // L04: terminal, never reopened.
    for to in ["ACTIVE", "PAUSED", "COMPLETED"] {
        assert_eq!(steer(&asha, &app, &session, to).await.status(), StatusCode::CONFLICT, "{to}");
    }
    // Only pause, resume and complete are the cockpit's to ask.
    assert_eq!(steer(&asha, &app, &session, "PENDING").await.status(), StatusCode::UNPROCESSABLE_ENTITY);

    // L05: the log reconstructs the session exactly, in order, with who.
    let log = activity(&asha, &app, &session).await;
    let kinds: Vec<_> = log.iter().map(|e| e.kind).collect();
    use ActivityKind::*;
    assert_eq!(kinds, [SessionStart, Pause, Resume, Pause, SessionEnd]);
    // Billing time excludes the paused stretches and stops at the end.
    let billed: domain::lifecycle::SessionActivity = call(&asha, &app, "load_session_activity", &[("session_id", &session)]).await.json().await.unwrap();
    assert_eq!(billed.billable_ms, (log[1].at_ms - log[0].at_ms) + (log[3].at_ms - log[2].at_ms));
    assert!(log.iter().all(|e| e.operator_id.as_deref() == Some("u-asha")));
    assert!(log.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    assert_eq!(log.last().unwrap().detail.as_deref(), Some("COMPLETED · completed by the operator"));
    let mut state = LifecycleState::Pending;
    for entry in &log {
        state = match entry.kind {
            SessionStart | Resume => LifecycleState::Active,
            Pause => LifecycleState::Paused,
            SessionEnd => LifecycleState::Completed,
            other => panic!("unexpected {other:?}"),
        };
    }
    assert_eq!(state, done.lifecycle, "replaying the log gives the record's state");
    // Asha is free again: the ended session released her (wrap-up).
    let presence = app.engine().presence_of(ORG, "u-asha").await.unwrap();
    assert_eq!(presence.current_call, None);
    app.finish().await;
});

both_backends!(l01_an_admin_can_steer_any_session_of_the_org_and_a_pending_call_cannot_be_paused, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    // A call nobody can take waits PENDING in the queue: nothing to pause.
    let (queued, body) = app.raise("uw-weld-01").await;
    assert_eq!(queued, StatusCode::ACCEPTED);
    let pending = body["sessionId"].as_str().unwrap().to_string();
    let refused = steer(&admin, &app, &pending, "PAUSED").await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    assert!(refused.text().await.unwrap().contains("PENDING session cannot become PAUSED"));

    let session = attach_asha(&app, "uk-pick-01").await;
    assert_eq!(steer(&admin, &app, &session, "PAUSED").await.status(), StatusCode::OK);
    assert_eq!(steer(&admin, &app, &session, "COMPLETED").await.status(), StatusCode::OK);
    let log = activity(&admin, &app, &session).await;
    assert_eq!(log.last().unwrap().detail.as_deref(), Some("COMPLETED · completed by an admin"));
    assert_eq!(steer(&admin, &app, "ses-nonexistent", "PAUSED").await.status(), StatusCode::NOT_FOUND);
    app.finish().await;
});

both_backends_with!(l02_a_pending_call_nobody_takes_is_cancelled_after_the_pending_timeout_and_counted_abandoned, |c: &mut server::config::Config| c.pending_timeout_ms = 400, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    let (queued, body) = app.raise("uw-weld-01").await; // welding: nobody ready holds it
    assert_eq!(queued, StatusCode::ACCEPTED);
    let session = body["sessionId"].as_str().unwrap().to_string();
    // The platform cancels it on the engine's deadline queue; wait for that.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let record = loop {
        let res = app.robot(reqwest::Method::GET, "uw-weld-01", &format!("/v1/sessions/{session}")).send().await.unwrap();
        let record: SessionRecord = res.json().await.unwrap();
        if record.lifecycle != LifecycleState::Pending || tokio::time::Instant::now() > deadline {
            break record;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(record.lifecycle, LifecycleState::Cancelled, "the edge agent sees it in the session record");
    let log = activity(&admin, &app, &session).await;
    assert_eq!(log.last().unwrap().detail.as_deref(), Some("CANCELLED · no operator took it"));
    let board: domain::board::OpsBoard = call(&admin, &app, "load_ops_board", &[]).await.json().await.unwrap();
    assert_eq!((board.today.abandoned, board.today.withdrawn), (1, 0), "counted as abandoned on the overview");
    // The robot may raise again.
    let (again, _) = app.raise("uw-weld-01").await;
    assert_eq!(again, StatusCode::ACCEPTED);
    app.finish().await;
});

const SHORT_CHAIN: domain::inactivity::InactivityPolicy = domain::inactivity::InactivityPolicy { check_ms: 150, warning_after_ms: 600, stop_after_warning_ms: 400 };
/// How long after its last input an idle session is cancelled.
const IDLE_STOP_MS: i64 = SHORT_CHAIN.warning_after_ms + SHORT_CHAIN.stop_after_warning_ms;

fn short_chain(c: &mut server::config::Config) {
    c.inactivity = SHORT_CHAIN;
}

both_backends_with!(l07_an_idle_session_is_checked_warned_over_the_ring_channel_and_cancelled, short_chain, |app: TestApp| async move {
    let mut tab = common::Tab::open(&app, &common::session_cookie(&app, OPERATOR).await).await;
    let session = attach_asha(&app, "uk-pick-01").await;
    // Nobody gives input: the warning reaches Asha's console with the moment it stops.
    let stop_at = tab
        .until(|m| match m {
            domain::ring::RingMsg::InactivityWarning { session_id, stop_at_ms } if session_id == session => Some(stop_at_ms),
            _ => None,
        })
        .await;
    assert!(stop_at > 0);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let record = loop {
        let record = app.running().sessions.session(ORG, &session).await.unwrap().unwrap();
        if record.lifecycle.is_terminal() || tokio::time::Instant::now() > deadline {
            break record;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(record.lifecycle, LifecycleState::Cancelled, "the platform cancels it");
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    let kinds: Vec<_> = activity(&admin, &app, &session).await.into_iter().map(|e| e.kind).collect();
    use ActivityKind::*;
    assert_eq!(kinds.first(), Some(&SessionStart));
    assert!(kinds.iter().filter(|k| **k == ActivityCheck).count() >= 3, "periodic checks: {kinds:?}");
    let tail: Vec<_> = kinds.iter().copied().filter(|k| *k != ActivityCheck).collect();
    assert_eq!(tail, [SessionStart, InactivityWarning, InactivityStop, SessionEnd]);
    app.finish().await;
});

both_backends_with!(
    l07_a_console_opened_after_the_warning_is_warned_too,
    |c: &mut server::config::Config| c.inactivity = domain::inactivity::InactivityPolicy { stop_after_warning_ms: 30_000, ..SHORT_CHAIN },
    |app: TestApp| async move {
        use domain::ring::RingMsg;
        let cookie = common::session_cookie(&app, OPERATOR).await;
        let mut tab = common::Tab::open(&app, &cookie).await;
        let session = attach_asha(&app, "uk-pick-01").await;
        let warning = |m: RingMsg| match m {
            RingMsg::InactivityWarning { session_id, stop_at_ms } if session_id == session => Some(stop_at_ms),
            _ => None,
        };
        let stop_at = tab.until(warning).await;
        // A tab opened after it (a reload, a reconnect) is told it too,
        // after its Welcome (which would otherwise be all it hears).
        let mut reloaded = common::Tab::open(&app, &cookie).await;
        assert!(matches!(reloaded.next().await, RingMsg::Welcome { .. }));
        assert_eq!(reloaded.until(warning).await, stop_at);
        // A tab that resyncs (it fell behind) asks for them again.
        let standing = app.engine().standing_notices(ORG, "u-asha").await.unwrap();
        assert_eq!(standing, [domain::events::OperatorEvent::InactivityWarning { session_id: session.clone(), stop_at_ms: stop_at }]);
        app.finish().await;
    }
);

both_backends_with!(l03_l07_input_keeps_a_session_alive_and_a_paused_one_takes_no_input, short_chain, |app: TestApp| async move {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let session = attach_asha(&app, "uk-pick-01").await;
    // Operator input reaches the server only through the relay, as actions.
    let mut cockpit = common::relay(&app, &session, None, Some(&common::session_cookie(&app, OPERATOR).await)).await.unwrap();
    let action = || Message::Text(serde_json::to_string(&domain::relay::RelayMsg::Action { t_ms: 0, values: vec![0.1; 6] }).unwrap().into());
    let started = app.running().sessions.session(ORG, &session).await.unwrap().unwrap().started_at.unwrap();
    // Time is the input: input every 150 ms for 1.5 s (well past warning + stop): never warned.
    for _ in 0..10 {
        cockpit.send(action()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }
    // Idle since its start, it would have been cancelled by now.
    common::after_engine_time(&app, ORG, started + IDLE_STOP_MS).await;
    let record = app.running().sessions.session(ORG, &session).await.unwrap().unwrap();
    assert_eq!(record.lifecycle, LifecycleState::Active, "input kept it alive");
    // Paused: the chain stops, and input is refused (rule L03).
    app.engine().steer_session(ORG, &session, LifecycleState::Paused, Some("u-asha")).await.unwrap();
    let paused_at = app.engine().clock().now_ms();
    // The relay hears of the pause as an event; until then an action passes
    // (unanswered: no robot is on the channel, so nothing records the pause
    // either). The cockpit acts, as its operator would, until one is refused.
    let refused = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            cockpit.send(action()).await.unwrap();
            tokio::select! {
                message = cockpit.next() => match message {
                    Some(Ok(Message::Text(text))) => {
                        if let Ok(domain::relay::RelayMsg::Refused { reason }) = serde_json::from_str(&text) {
                            return reason;
                        }
                    }
                    Some(Ok(_)) => {}
                    other => panic!("the cockpit's socket ended: {other:?}"),
                },
                _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
            }
        }
    })
    .await
    .expect("the refusal comes");
    assert!(refused.contains("paused"), "{refused}");
    // Time is the input: had the chain run on, it would have cancelled the session by then.
    common::after_engine_time(&app, ORG, paused_at + IDLE_STOP_MS).await;
    let record = app.running().sessions.session(ORG, &session).await.unwrap().unwrap();
    assert_eq!(record.lifecycle, LifecycleState::Paused, "a paused session runs no chain");
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    let kinds: Vec<_> = activity(&admin, &app, &session).await.into_iter().map(|e| e.kind).collect();
    assert!(!kinds.contains(&ActivityKind::InactivityWarning), "{kinds:?}");
    app.finish().await;
});

both_backends!(l06_an_edge_agent_reports_errors_into_the_session_log, |app: TestApp| async move {
    let session = attach_asha(&app, "uk-pick-01").await;
    let report = |robot: &'static str, detail: &'static str| {
        let (app, session) = (&app, session.clone());
        async move {
            app.robot(reqwest::Method::POST, robot, &format!("/v1/sessions/{session}/errors"))
                .json(&serde_json::json!({ "detail": detail }))
                .send()
                .await
                .unwrap()
        }
    };
    let logged = report("uk-pick-01", "camera stream dropped").await;
    assert_eq!(logged.status(), StatusCode::CREATED);
    let entry: ActivityEntry = logged.json().await.unwrap();
    assert_eq!((entry.kind, entry.detail.as_deref()), (ActivityKind::Error, Some("camera stream dropped")));
    assert_eq!(report("uk-pick-01", "   ").await.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(report("ue-pick-01", "not mine").await.status(), StatusCode::NOT_FOUND, "another robot's session answers as an unknown one");
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    let log = activity(&asha, &app, &session).await;
    let last = log.last().unwrap();
    assert_eq!((last.kind, last.operator_id.as_deref()), (ActivityKind::Error, Some("u-asha")), "logged against whoever held it");
    assert_eq!(steer(&asha, &app, &session, "COMPLETED").await.status(), StatusCode::OK);
    assert_eq!(report("uk-pick-01", "too late").await.status(), StatusCode::CONFLICT, "nothing reports into a finished session");
    app.finish().await;
});

both_backends!(the_session_detail_shows_who_the_acd_considered_with_rtt_and_verdict, |app: TestApp| async move {
    let session = attach_asha(&app, "uk-pick-01").await;
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    let res = call(&admin, &app, "load_dispatch_decisions", &[("session_id", &session)]).await;
    assert_eq!(res.status(), StatusCode::OK);
    let decisions: Vec<domain::dispatch::DispatchDecision> = res.json().await.unwrap();
    assert_eq!(decisions.len(), 1);
    let d = &decisions[0];
    assert_eq!((d.trigger, d.outcome, d.operator_id.as_deref()), (domain::dispatch::Trigger::Raised, domain::dispatch::Outcome::Offered, Some("u-asha")));
    let chosen = &d.considered.candidates[0];
    assert_eq!((chosen.operator_id.as_str(), chosen.verdict), ("u-asha", domain::dispatch::Verdict::Chosen));
    assert_eq!(chosen.rtt_ms, d.rtt_ms);
    // Operators do not read the ACD's reasoning about their colleagues.
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    assert_eq!(call(&asha, &app, "load_dispatch_decisions", &[("session_id", &session)]).await.status(), StatusCode::FORBIDDEN);
    app.finish().await;
});

both_backends!(l09_operator_and_admins_chat_on_the_session_live_and_the_transcript_outlives_it, |app: TestApp| async move {
    let mut console = common::Tab::open(&app, &common::session_cookie(&app, OPERATOR).await).await;
    let session = attach_asha(&app, "uk-pick-01").await;
    let (asha, admin, carla) = (browser(), browser(), browser());
    sign_in(&asha, &app, OPERATOR).await;
    sign_in(&admin, &app, common::ADMIN).await;
    sign_in(&carla, &app, CARLA).await;
    let post = |who: &reqwest::Client, body: &'static str| {
        let (who, app, session) = (who.clone(), &app, session.clone());
        async move { call(&who, app, "post_chat", &[("session_id", &session), ("body", body)]).await }
    };
    assert_eq!(post(&asha, "Gripper feels slow, checking.").await.status(), StatusCode::OK);
    assert_eq!(post(&admin, "<b>Thanks</b> — take your time").await.status(), StatusCode::OK);
    // Pushed to the operator's console.
    let pushed = console
        .until(|m| match m {
            domain::ring::RingMsg::Chat { session_id, message } if session_id == session && message.author_id == "u-dana" => Some(message.body),
            _ => None,
        })
        .await;
    assert_eq!(pushed, "<b>Thanks</b> — take your time", "stored and sent as text, as typed");
    assert_eq!(post(&asha, "   ").await.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(post(&carla, "hello?").await.status(), StatusCode::NOT_FOUND, "not her session");
    assert_eq!(call(&carla, &app, "load_chat", &[("session_id", &session)]).await.status(), StatusCode::NOT_FOUND);

    assert_eq!(steer(&asha, &app, &session, "COMPLETED").await.status(), StatusCode::OK);
    assert_eq!(post(&asha, "one more thing").await.status(), StatusCode::CONFLICT, "read-only once ended");
    let transcript: Vec<domain::chat::ChatMessage> = call(&admin, &app, "load_chat", &[("session_id", &session)]).await.json().await.unwrap();
    let lines: Vec<_> = transcript.iter().map(|m| (m.author_name.as_str(), m.body.as_str())).collect();
    assert_eq!(lines, [("Asha Rao", "Gripper feels slow, checking."), ("Dana Okafor", "<b>Thanks</b> — take your time")]);
    app.finish().await;
});

both_backends!(l10_a_completed_session_is_rated_once_and_the_score_shows_where_operators_are_listed, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    let rate = |session: String, stars: &'static str, feedback: &'static str| {
        let (admin, app) = (&admin, &app);
        async move { call(admin, app, "rate_session", &[("session_id", &session), ("stars", stars), ("feedback", feedback)]).await }
    };
    let first = attach_asha(&app, "uk-pick-01").await;
    assert_eq!(rate(first.clone(), "5", "").await.status(), StatusCode::CONFLICT, "not before it completes");
    assert_eq!(steer(&admin, &app, &first, "COMPLETED").await.status(), StatusCode::OK);
    assert_eq!(rate(first.clone(), "6", "").await.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    let own = call(&asha, &app, "rate_session", &[("session_id", &first), ("stars", "5"), ("feedback", "")]).await;
    assert_eq!(own.status(), StatusCode::FORBIDDEN, "an operator does not rate herself");
    let rated = rate(first.clone(), "5", "Smooth pick, good comms.").await;
    assert_eq!(rated.status(), StatusCode::OK);
    let given: domain::rating::SessionRating = rated.json().await.unwrap();
    assert_eq!((given.stars, given.feedback.as_str(), given.rated_by_name.as_str()), (5, "Smooth pick, good comms.", "Dana Okafor"));
    assert_eq!(rate(first.clone(), "1", "changed my mind").await.status(), StatusCode::CONFLICT, "once");

    // A cancelled session is not rated (Tom takes the robot's next call).
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let (status, body) = app.raise("uk-pick-01").await;
    assert_eq!((status, body["operator"]["id"].as_str()), (StatusCode::CREATED, Some("u-tom")), "{body}");
    let second = body["sessionId"].as_str().unwrap().to_string();
    app.engine().answer(ORG, "u-tom", &second).await.unwrap();
    app.engine().finish_session(ORG, &second, None, LifecycleState::Cancelled, "robot withdrew").await.unwrap();
    let refused = rate(second.clone(), "4", "").await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    assert!(refused.text().await.unwrap().contains("CANCELLED"));

    // The score shows wherever operators are listed.
    let five = Some(domain::rating::OperatorScore::new(5.0, 1));
    let roster: domain::roster::Roster = call(&admin, &app, "load_roster", &[]).await.json().await.unwrap();
    let score = |id: &str| roster.rows.iter().find(|r| r.agent_id == id).unwrap().score;
    assert_eq!((score("u-asha"), score("u-tom")), (five, None));
    let board: domain::board::OpsBoard = call(&admin, &app, "load_ops_board", &[]).await.json().await.unwrap();
    assert_eq!(board.operators.iter().find(|o| o.id == "u-asha").unwrap().score, five);
    let directory: domain::models::Directory = call(&admin, &app, "load_directory", &[]).await.json().await.unwrap();
    assert_eq!(directory.operators.iter().find(|o| o.id == "u-asha").unwrap().score, five);
    app.finish().await;
});
