//! The ring channel with real WebSocket clients, on both databases.

mod common;

use domain::models::PresenceState;
use domain::ring::{ConsoleMsg, OfferEnd, RingMsg};
use common::{session_cookie, Tab, TestApp, OPERATOR};
use reqwest::{Method, StatusCode};
use std::time::{Duration, Instant};

const ORG: &str = "org-northstar";
const CARLA: &str = "carla.mendes@northstar.example";

async fn welcome(tab: &mut Tab) -> (domain::ring::MyPresence, Option<domain::models::Offer>) {
    tab.until(|m| match m {
        RingMsg::Welcome { presence, offer, pops, .. } => {
            assert_eq!(pops, vec!["uk-london", "us-east", "us-west"], "PoPs to measure");
            Some((presence, offer))
        }
        _ => None,
    })
    .await
}

/// Waits until the tab shows `state`.
async fn shows(tab: &mut Tab, state: PresenceState) -> domain::ring::MyPresence {
    tab.until(|m| match m {
        RingMsg::Presence { presence } if presence.state == state => Some(presence),
        _ => None,
    })
    .await
}

/// A console tab of `email` that has said Ready and seen it confirmed.
async fn ready_tab(app: &TestApp, email: &str) -> Tab {
    let mut tab = Tab::open(app, &session_cookie(app, email).await).await;
    welcome(&mut tab).await;
    tab.send(ConsoleMsg::Ready).await;
    shows(&mut tab, PresenceState::Ready).await;
    tab
}

fn offer(msg: RingMsg) -> Option<domain::models::Offer> {
    match msg {
        RingMsg::Offer { offer } => Some(offer),
        _ => None,
    }
}

both_backends!(a12_two_tabs_ring_and_accept_in_one_stops_the_other, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    let mut first = Tab::open(&app, &cookie).await;
    let mut second = Tab::open(&app, &cookie).await;
    let (signed_in, _) = welcome(&mut first).await;
    assert_eq!(signed_in.state, PresenceState::Aux, "online but not ready until they say so");
    welcome(&mut second).await;

    // Readiness is one per operator: Ready in one tab shows in both.
    first.send(ConsoleMsg::Ready).await;
    shows(&mut first, PresenceState::Ready).await;
    shows(&mut second, PresenceState::Ready).await;

    let (status, body) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::CREATED);
    let session = body["sessionId"].as_str().unwrap().to_string();
    let rung_first = first.until(offer).await;
    let rung_second = second.until(offer).await;
    assert_eq!(rung_first, rung_second);
    assert_eq!((rung_first.session_id.as_str(), rung_first.robot_id.as_str(), rung_first.rtt_ms), (session.as_str(), "ue-pick-01", 275));
    assert_eq!(rung_first.expires_at - rung_first.offered_at, 30_000);

    first.send(ConsoleMsg::Accept { session_id: session.clone() }).await;
    let accepted = first.until(|m| match m { RingMsg::Accepted { session_id } => Some(session_id), _ => None }).await;
    assert_eq!(accepted, session);
    let stopped = second.until(|m| match m { RingMsg::OfferClosed { session_id, how } => Some((session_id, how)), _ => None }).await;
    assert_eq!(stopped, (session.clone(), OfferEnd::Accepted));
    shows(&mut second, PresenceState::OnCall).await;
    let record: serde_json::Value = app.robot(Method::GET, "ue-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(record["lifecycle"], "ACTIVE");
    assert_eq!(record["operatorName"], "Asha Rao");
    app.finish().await;
});

both_backends_with!(d04_an_unanswered_offer_goes_aux_missed_and_rings_the_next_operator, |c: &mut server::config::Config| c.offer_window_ms = 500, |app: TestApp| async move {
    let mut carla = ready_tab(&app, CARLA).await; // Austin: 96 ms
    let mut asha = ready_tab(&app, OPERATOR).await; // BLR: 275 ms

    let (_, body) = app.raise("ue-pick-01").await;
    assert_eq!(body["operator"]["id"], "u-carla");
    let session = body["sessionId"].as_str().unwrap().to_string();
    carla.until(offer).await;
    let missed = carla.until(|m| match m { RingMsg::OfferClosed { how, .. } => Some(how), _ => None }).await;
    assert_eq!(missed, OfferEnd::Expired);
    let aux = shows(&mut carla, PresenceState::Aux).await;
    assert_eq!(aux.aux_reason.as_deref(), Some(domain::presence::MISSED_OFFER));
    assert_eq!(asha.until(offer).await.session_id, session, "the call went to the next operator");
    app.finish().await;
});

both_backends!(d03_decline_over_the_socket_moves_the_call_on, |app: TestApp| async move {
    let mut carla = ready_tab(&app, CARLA).await;
    let mut asha = ready_tab(&app, OPERATOR).await;
    let (_, body) = app.raise("ue-pick-01").await;
    let session = body["sessionId"].as_str().unwrap().to_string();
    carla.until(offer).await;
    carla.send(ConsoleMsg::Decline { session_id: session.clone() }).await;
    assert_eq!(asha.until(offer).await.session_id, session);
    shows(&mut carla, PresenceState::Ready).await; // a decliner is ready again
    // Answering a closed offer is refused with a clear message.
    carla.send(ConsoleMsg::Accept { session_id: session.clone() }).await;
    let refused = carla.until(|m| match m { RingMsg::Error { message, .. } => Some(message), _ => None }).await;
    assert!(refused.contains("no longer open"), "{refused}");
    app.finish().await;
});

// A console that stays connected but sends nothing (a frozen page, a
// half-open connection) is closed a TTL after it was last heard from; one
// that heartbeats stays, however many TTLs go by.
both_backends_with!(r08_a_silent_console_is_closed_after_the_ttl_and_a_heartbeating_one_stays, |c: &mut server::config::Config| c.presence_ttl_ms = 1_000, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    // (Before the upgrade: the server hears the tab from a later instant.)
    let opened = Instant::now();
    let mut silent = Tab::open(&app, &cookie).await;
    let mut beating = Tab::open(&app, &cookie).await;
    welcome(&mut beating).await;
    // Heartbeats every 300 ms (a browser's cadence, scaled to the 1 s TTL)
    // from the start, while the silent one is closed, and for three TTLs.
    let silent_closed = loop {
        beating.send(ConsoleMsg::Heartbeat).await;
        if silent.closed_within(Duration::from_millis(300)).await {
            break opened.elapsed();
        }
        assert!(opened.elapsed() < Duration::from_secs(5), "the silent console is closed");
    };
    assert!(silent_closed >= Duration::from_millis(990), "closed {silent_closed:?} after it opened, before the TTL");
    while opened.elapsed() < Duration::from_millis(3_000) {
        beating.send(ConsoleMsg::Heartbeat).await;
        assert!(!beating.closed_within(Duration::from_millis(300)).await, "a heartbeating console is kept");
    }
    let last_sent = Instant::now();
    beating.send(ConsoleMsg::Ping { nonce: 7 }).await;
    assert_eq!(beating.until(|m| match m { RingMsg::Pong { nonce } => Some(nonce), _ => None }).await, 7);
    // Silent from its last frame on, it is closed a TTL after that frame:
    // not at a deadline from an earlier one, nor never.
    let closed = loop {
        if beating.closed_within(Duration::from_millis(300)).await {
            break last_sent.elapsed();
        }
        assert!(last_sent.elapsed() < Duration::from_secs(5), "a console silent after heartbeating is closed");
    };
    assert!(closed >= Duration::from_millis(990), "closed {closed:?} after its last frame, before the TTL");
    app.finish().await;
});

both_backends_with!(r08_a_killed_console_lapses_to_offline_and_gets_no_offers, |c: &mut server::config::Config| c.presence_ttl_ms = 1_000, |app: TestApp| async move {
    let mut tab = Tab::open(&app, &session_cookie(&app, OPERATOR).await).await;
    welcome(&mut tab).await;
    // The console is last heard from at its Ready, sent after this instant:
    // the lapse is due a TTL after that (not after the kill, which a loaded
    // machine may reach well after the Ready).
    let heard_from = Instant::now();
    tab.send(ConsoleMsg::Ready).await;
    shows(&mut tab, PresenceState::Ready).await;
    let killed_at = Instant::now();
    tab.kill();
    // TTL (1 s here, 20 s in production) plus one sweep (0.5 s), and a margin.
    loop {
        let state = app.engine().presence_of(ORG, "u-asha").await.map(|p| p.state);
        if state == Some(PresenceState::Offline) {
            break;
        }
        assert!(killed_at.elapsed() < Duration::from_millis(3_000), "still {state:?} after {:?}", killed_at.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(heard_from.elapsed() >= Duration::from_millis(1_000), "lapsed {:?} after the console was last heard from, before the TTL", heard_from.elapsed());
    let (status, _) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::ACCEPTED, "a lapsed operator is never offered a call");
    app.finish().await;
});

both_backends_with!(heartbeats_keep_a_quiet_console_present, |c: &mut server::config::Config| c.presence_ttl_ms = 1_000, |app: TestApp| async move {
    let mut tab = ready_tab(&app, OPERATOR).await;
    // Time is the input: heartbeats every 0.4 s, and nothing else, for over twice the TTL.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        tab.send(ConsoleMsg::Heartbeat).await;
    }
    // Had they not counted, the server would have closed the tab as silent
    // a TTL after its Ready (and it would have lapsed): it still answers.
    tab.ping(1).await;
    let state = app.engine().presence_of(ORG, "u-asha").await.unwrap().state;
    assert_eq!(state, PresenceState::Ready, "2.4 s of heartbeats every 0.4 s keep a 1 s TTL alive");
    app.finish().await;
});

both_backends!(a_reconnecting_tab_resynchronises_a_ringing_offer, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    let mut tab = Tab::open(&app, &cookie).await;
    welcome(&mut tab).await;
    tab.send(ConsoleMsg::Ready).await;
    shows(&mut tab, PresenceState::Ready).await;
    let (_, body) = app.raise("ue-pick-01").await;
    tab.until(offer).await;
    tab.kill();
    let mut again = Tab::open(&app, &cookie).await;
    let (presence_now, ringing) = welcome(&mut again).await;
    assert_eq!(presence_now.state, PresenceState::Ringing);
    assert_eq!(ringing.expect("still ringing").session_id, body["sessionId"].as_str().unwrap());
    app.finish().await;
});

both_backends_with!(after_a_session_wrap_up_ends_in_ready, |c: &mut server::config::Config| c.wrap_up_ms = 400, |app: TestApp| async move {
    let mut tab = ready_tab(&app, OPERATOR).await;
    let (_, body) = app.raise("ue-pick-01").await;
    let session = body["sessionId"].as_str().unwrap().to_string();
    tab.until(offer).await;
    tab.send(ConsoleMsg::Accept { session_id: session.clone() }).await;
    tab.until(|m| match m { RingMsg::Accepted { .. } => Some(()), _ => None }).await;
    shows(&mut tab, PresenceState::OnCall).await;
    app.robot(Method::DELETE, "ue-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap();
    let acw = shows(&mut tab, PresenceState::Acw).await;
    let ready = shows(&mut tab, PresenceState::Ready).await;
    assert!(ready.since_ms - acw.since_ms >= 400, "wrap-up lasts its configured time");
    app.finish().await;
});

both_backends!(the_ring_channel_needs_a_signed_in_operator, |app: TestApp| async move {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("{}/ws", app.base.replace("http://", "ws://")).into_client_request().unwrap();
    request.headers_mut().insert("origin", app.base.parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!("expected 401, got {other:?}"),
    }
    app.finish().await;
});

/// A console tab whose client takes nothing of what it is told (a frozen
/// page, a network that still accepts but delivers nothing) is let go once
/// its queue is full: its connection ends, and its place among the
/// person's sockets is free, so the tab opened next is served. (Left to
/// its writes, it would be cut only after the client's stall, 60 s.)
/// SQLite only: the socket is the same on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_tab_that_takes_nothing_is_let_go() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let app = TestApp::spawn_with(common::Db::Sqlite, |config| config.tabs_per_person = 1).await.unwrap();
    let asha = session_cookie(&app, OPERATOR).await;
    // Asha's tab, read only for its Welcome.
    let tab = common::slow_reader(&app, &asha, "/ws").await;
    let (mut sends, mut hears) = tab.split();
    common::next_on(&mut hears, |m| match m {
        Message::Text(text) => matches!(serde_json::from_str(text), Ok(RingMsg::Welcome { .. })).then_some(()),
        _ => None,
    })
    .await;
    // Pings, each answered to this tab alone, until the server lets the
    // tab go: its connection ends, and a send fails.
    let ping = Message::Text(serde_json::to_string(&ConsoleMsg::Ping { nonce: 1 }).unwrap().into());
    let flood = async { while sends.send(ping.clone()).await.is_ok() {} };
    // (About 3 MB of answers fill the kernel's buffers first; well within
    // the 60 s after which its writes alone would cut it.)
    tokio::time::timeout(Duration::from_secs(30), flood).await.expect("the tab is let go");
    // One socket a person here: the next tab is served only if the first
    // one's place was given back.
    let mut next = Tab::open(&app, &asha).await;
    welcome(&mut next).await;
    drop(hears);
    app.finish().await;
}
