//! Clients, bookings, the planned end and extensions (seed 001, rule L13),
//! through the server functions the client screen and the cockpit use, on
//! both databases.

mod common;

use domain::booking::{Booking, ClientSessions, PLANNED_END_REACHED};
use domain::events::{Event, OperatorEvent, Topic};
use domain::lifecycle::SessionActivity;
use domain::models::{LifecycleState, SessionRecord};
use common::{attach_asha, browser, call, sign_in, TestApp, OPERATOR};
use reqwest::StatusCode;
use server::bus::Delivery;

const ORG: &str = "org-northstar";
const CARLA: &str = "carla.mendes@northstar.example";
const KOFI: &str = "kofi.mensah@leeds-logistics.example";
const MIN: i64 = 60_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// `2026-11-30T14:05` for the minute holding `ms` (the booking form's format).
fn minute(ms: i64) -> String {
    domain::booking::utc_when(ms).trim_end_matches(" UTC").replacen(' ', "T", 1)
}

/// The session an org event is about, if any.
fn about(event: &domain::events::OrgEvent) -> Option<&str> {
    use domain::events::OrgEvent::*;
    match event {
        Lifecycle { session_id, .. } | Chat { session_id, .. } | PlannedEnd { session_id, .. } => Some(session_id),
        Telemetry { session } => Some(&session.id),
        Audit { entry } => entry.session_id.as_deref(),
        Presence { .. } | RobotStatus { .. } | Bookings { .. } | Relay { .. } => None,
    }
}

async fn book(client: &reqwest::Client, app: &TestApp, robot: &str, from_ms: i64, minutes: i64, for_client: Option<&str>) -> reqwest::Response {
    let minutes = minutes.to_string();
    let mut form = vec![("robot_id", robot), ("starts_at", ""), ("minutes", minutes.as_str())];
    let start = minute(from_ms);
    form[1].1 = &start;
    if let Some(c) = for_client {
        form.push(("client_id", c));
    }
    call(client, app, "book_robot", &form).await
}

async fn extend(client: &reqwest::Client, app: &TestApp, session: &str, minutes: i64) -> reqwest::Response {
    call(client, app, "extend_session", &[("session_id", session), ("minutes", &minutes.to_string())]).await
}

async fn record(client: &reqwest::Client, app: &TestApp, session: &str) -> SessionRecord {
    let res = call(client, app, "load_session", &[("session_id", session)]).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

both_backends!(l13_a_call_in_a_booking_is_its_clients_and_extensions_stop_at_the_next_booking, |app: TestApp| async move {
    let kofi = browser();
    sign_in(&kofi, &app, KOFI).await;
    let now = now_ms();
    let start = now - now.rem_euclid(MIN);
    // Kofi books uk-pick-01 from this minute for an hour.
    let booked = book(&kofi, &app, "uk-pick-01", start, 60, None).await;
    assert_eq!(booked.status(), StatusCode::OK);
    let booking: Booking = booked.json().await.unwrap();
    assert_eq!((booking.client_id.as_str(), booking.ends_at_ms), ("u-kofi", start + 60 * MIN));
    // An overlapping booking is refused, saying when but never by whom.
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    let overlap = book(&admin, &app, "uk-pick-01", start + 30 * MIN, 60, Some("u-kofi")).await;
    assert_eq!(overlap.status(), StatusCode::CONFLICT);
    let why = overlap.text().await.unwrap();
    assert!(why.contains("already booked from") && !why.contains("Kofi"), "{why}");
    // An admin books the next window for the client; an operator cannot book.
    let next = book(&admin, &app, "uk-pick-01", start + 70 * MIN, 30, Some("u-kofi")).await;
    assert_eq!(next.status(), StatusCode::OK);
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    assert_eq!(book(&asha, &app, "uk-pick-02", start, 30, None).await.status(), StatusCode::FORBIDDEN);
    let listed: Vec<Booking> = call(&kofi, &app, "load_bookings", &[]).await.json().await.unwrap();
    assert_eq!(listed.len(), 2);

    // The call raised during the booking is Kofi's and ends with the booking.
    let session = attach_asha(&app, "uk-pick-01").await;
    let s = record(&kofi, &app, &session).await;
    assert_eq!((s.client_id.as_deref(), s.planned_end_at), (Some("u-kofi"), Some(start + 60 * MIN)));
    assert_eq!(s.client_name.as_deref(), Some("Kofi Mensah (Leeds Logistics)"));
    // The client watches and chats on its session; other operators do not see it.
    let carla = browser();
    sign_in(&carla, &app, CARLA).await;
    assert_eq!(call(&carla, &app, "load_session", &[("session_id", &session)]).await.status(), StatusCode::NOT_FOUND);
    let chat = call(&kofi, &app, "post_chat", &[("session_id", &session), ("body", "Please start with bay 3.")]).await;
    assert_eq!(chat.status(), StatusCode::OK);

    // L13: extended while it runs, up to the next booking and no further.
    let extended = extend(&asha, &app, &session, 5).await;
    assert_eq!(extended.status(), StatusCode::OK);
    assert_eq!(extended.json::<SessionRecord>().await.unwrap().planned_end_at, Some(start + 65 * MIN));
    let refused = extend(&kofi, &app, &session, 10).await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    let why = refused.text().await.unwrap();
    assert!(why.contains("booked from") && !why.contains("Kofi"), "a refused extension says why, naming nobody: {why}");
    assert_eq!(record(&kofi, &app, &session).await.planned_end_at, Some(start + 65 * MIN), "nothing changed");
    assert_eq!(extend(&kofi, &app, &session, 5).await.status(), StatusCode::OK, "the client extends too");
    assert_eq!(extend(&carla, &app, &session, 1).await.status(), StatusCode::NOT_FOUND);
    // Paused, it can still be extended; ended, never.
    assert_eq!(call(&asha, &app, "steer_session", &[("session_id", &session), ("to", "PAUSED")]).await.status(), StatusCode::OK);
    assert_eq!(extend(&admin, &app, &session, 0).await.status(), StatusCode::CONFLICT, "1 to 120 minutes");
    assert_eq!(call(&asha, &app, "steer_session", &[("session_id", &session), ("to", "COMPLETED")]).await.status(), StatusCode::OK);
    assert_eq!(extend(&asha, &app, &session, 5).await.status(), StatusCode::CONFLICT);

    // L10: the client rates; the operator cannot rate themself.
    let rate = |client: reqwest::Client| {
        let (app, session) = (&app, session.clone());
        async move { call(&client, app, "rate_session", &[("session_id", &session), ("stars", "5"), ("feedback", "Quick and careful")]).await.status() }
    };
    assert_eq!(rate(asha.clone()).await, StatusCode::FORBIDDEN);
    assert_eq!(rate(kofi.clone()).await, StatusCode::OK);

    // The client screen: the past session with its billable time and rating, by month.
    let mine: ClientSessions = call(&kofi, &app, "load_client_sessions", &[]).await.json().await.unwrap();
    assert!(mine.live.is_empty());
    assert_eq!(mine.past.len(), 1);
    assert_eq!(mine.past[0].rating.as_ref().map(|r| r.stars), Some(5));
    let log: SessionActivity = call(&kofi, &app, "load_session_activity", &[("session_id", &session)]).await.json().await.unwrap();
    assert_eq!(mine.past[0].billable_ms, log.billable_ms, "billable time excludes the pause");
    assert_eq!((mine.months.len(), mine.months[0].sessions, mine.months[0].billable_ms), (1, 1, log.billable_ms));
    // Cancelling: the client its own.
    let id = listed.iter().find(|b| b.starts_at_ms == start + 70 * MIN).unwrap().id.clone();
    assert_eq!(call(&kofi, &app, "cancel_booking", &[("booking_id", &id)]).await.status(), StatusCode::OK);
    assert_eq!(call(&kofi, &app, "cancel_booking", &[("booking_id", &id)]).await.status(), StatusCode::NOT_FOUND);
    app.finish().await;
});

// The dispatcher decides from the bookings it holds: it loads them with the
// org after a restart, and a cancelled booking stops counting at once.
both_backends!(l13_the_dispatcher_holds_bookings_across_a_restart_and_forgets_a_cancelled_one, |mut app: TestApp| async move {
    let kofi = browser();
    sign_in(&kofi, &app, KOFI).await;
    let now = now_ms();
    let start = now - now.rem_euclid(MIN);
    let booked: Booking = book(&kofi, &app, "uk-pick-01", start, 60, None).await.json().await.unwrap();
    app.restart().await;
    let session = attach_asha(&app, "uk-pick-01").await;
    let kofi = browser();
    sign_in(&kofi, &app, KOFI).await;
    let s = record(&kofi, &app, &session).await;
    assert_eq!((s.client_id.as_deref(), s.planned_end_at), (Some("u-kofi"), Some(start + 60 * MIN)), "loaded with the org");
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    assert_eq!(call(&asha, &app, "steer_session", &[("session_id", &session), ("to", "COMPLETED")]).await.status(), StatusCode::OK);

    assert_eq!(call(&kofi, &app, "cancel_booking", &[("booking_id", &booked.id)]).await.status(), StatusCode::OK);
    // (Asha is wrapping up: the call queues, which is all this needs.)
    let (status, body) = app.raise("uk-pick-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let next = body["sessionId"].as_str().unwrap();
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    assert_eq!(record(&admin, &app, next).await.client_id, None, "the cancelled booking no longer makes calls the client's");
    app.finish().await;
});

both_backends_with!(l13_at_the_planned_end_the_session_completes_unless_extended_and_the_operator_is_told_first, |c: &mut server::config::Config| c.session_ms = 1_500, |app: TestApp| async move {
    let mut asha_hears = app.engine().subscribe(&Topic::operator(ORG, "u-asha"));
    let session = attach_asha(&app, "uk-pick-01").await;
    // No booking: the planned end is attach time + the session length.
    let admin = browser();
    sign_in(&admin, &app, common::ADMIN).await;
    let s = record(&admin, &app, &session).await;
    assert_eq!((s.client_id, s.planned_end_at), (None, s.started_at.map(|t| t + 1_500)));
    // Told first (the two-minute notice is already due with a 1.5 s session).
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), asha_hears.recv()).await.expect("the planned-end notice") {
            Delivery::Event(Event::Operator(OperatorEvent::PlannedEndSoon { session_id, planned_end_ms })) => {
                assert_eq!((session_id.as_str(), Some(planned_end_ms)), (session.as_str(), s.planned_end_at));
                break;
            }
            Delivery::Closed => panic!("bus closed"),
            _ => continue,
        }
    }
    // Then completed by the platform on the engine's deadline queue.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let ended = loop {
        let s = record(&admin, &app, &session).await;
        if s.lifecycle.is_terminal() || tokio::time::Instant::now() > deadline {
            break s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(ended.lifecycle, LifecycleState::Completed);
    let log: SessionActivity = call(&admin, &app, "load_session_activity", &[("session_id", &session)]).await.json().await.unwrap();
    assert_eq!(log.entries.last().unwrap().detail, Some(format!("COMPLETED · {PLANNED_END_REACHED}")));
    // Admins act as the client of sessions without one: their client screen lists it.
    let theirs = call(&admin, &app, "load_client_sessions", &[]).await;
    assert_eq!(theirs.status(), StatusCode::OK);
    let theirs: ClientSessions = theirs.json().await.unwrap();
    assert!(theirs.past.iter().any(|p| p.session.id == session), "the admins' sessions without a client");

    // Extended at once, it runs past the old end.
    let second = attach_asha(&app, "uw-pick-01").await;
    let old_end = record(&admin, &app, &second).await.planned_end_at.expect("a planned end");
    let extended = extend(&admin, &app, &second, 1).await;
    assert_eq!(extended.status(), StatusCode::OK);
    assert_eq!(extended.json::<SessionRecord>().await.unwrap().planned_end_at, Some(old_end + MIN));
    // Time is the input: the engine's clock passes the old end and its timer fires.
    common::after_engine_time(&app, ORG, old_end).await;
    assert_eq!(record(&admin, &app, &second).await.lifecycle, LifecycleState::Active, "the old end passed without effect");
    app.finish().await;
});

both_backends!(a_client_watch_socket_hears_only_the_clients_own_sessions, |app: TestApp| async move {
    use domain::events::OrgEvent;
    use domain::ring::RingMsg;
    use common::{session_cookie, Tab};
    let kofi_cookie = session_cookie(&app, KOFI).await;
    assert_eq!(Tab::refused(&app, &kofi_cookie, "/ws?watch=org").await, 403, "the org's whole stream is the admins'");
    let mut watch = Tab::open_path(&app, &kofi_cookie, "/ws?watch=mine").await;
    watch.ping(1).await; // it hears the org's topic from here on
    // A session without a client: nothing of it reaches Kofi (the first
    // message Kofi hears is about the session of his that follows).
    let other = attach_asha(&app, "uw-pick-01").await;
    app.engine().finish_session(ORG, &other, None, LifecycleState::Completed, "done").await.unwrap();
    // A call in Kofi's booking: its moves and chat reach Kofi's screen.
    let kofi = browser();
    sign_in(&kofi, &app, KOFI).await;
    let now = now_ms();
    assert_eq!(book(&kofi, &app, "uk-pick-01", now - now.rem_euclid(MIN), 30, None).await.status(), StatusCode::OK);
    let mine = attach_asha(&app, "uk-pick-01").await;
    // One topic carries the org's events in order: every message up to
    // the start of Kofi's session is about it, so none about `other` came.
    let started = watch
        .until(|m| match m {
            RingMsg::Org { event: OrgEvent::Lifecycle { session_id, lifecycle: LifecycleState::Active, .. } } if session_id == mine => Some(session_id),
            RingMsg::Org { event } if about(&event) == Some(mine.as_str()) => None,
            unexpected => panic!("not Kofi's session: {unexpected:?}"),
        })
        .await;
    assert_eq!(started, mine);
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    assert_eq!(call(&asha, &app, "post_chat", &[("session_id", &mine), ("body", "Starting now.")]).await.status(), StatusCode::OK);
    let said = watch.until(|m| match m {
        RingMsg::Org { event: OrgEvent::Chat { session_id, message } } => Some((session_id, message.body)),
        _ => None,
    }).await;
    assert_eq!(said, (mine.clone(), "Starting now.".to_string()));
    app.finish().await;
});

// The client's screen with no session chosen asks nothing about "no
// session": it answers 200 (it answered 404, because its session panels
// loaded the session with an empty id and the not-found set the status).
both_backends!(the_client_screen_without_a_chosen_session_is_not_a_404, |app: TestApp| async move {
    let kofi = browser();
    sign_in(&kofi, &app, KOFI).await;
    let page = kofi.get(app.url("/client")).header("accept", "text/html").send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("Your sessions"), "the client's screen itself");
    app.finish().await;
});
