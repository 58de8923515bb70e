//! Dispatch core over real HTTP and the real engine, on both databases.
//! Test names carry the rule ids of shared/RULES.md (A01–A14, D01–D07).
//! Demo org floors to us-east: Austin 96, Manchester 205, BLR 275 ms.

mod common;

use common::{browser, sign_in, TestApp, ADMIN, OPERATOR};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use domain::events::{Event, OperatorEvent, Topic};
use domain::presence::MISSED_OFFER;
use server::bus::Delivery;
use domain::models::{LifecycleState, PresenceState};

const ORG: &str = "org-northstar";

fn rfc3339_ms(v: &Value) -> i64 {
    domain::rules::parse_rfc3339(v.as_str().expect("timestamp string")).expect("RFC 3339")
}

async fn ready(app: &TestApp, operator: &str) {
    app.engine().operator_ready(ORG, operator, true).await.expect("operator ready");
}

async fn presence(app: &TestApp, operator: &str) -> server::engine::OperatorPresence {
    app.engine().presences(ORG).await.into_iter().find(|p| p.operator_id == operator).expect("present")
}

async fn open_offer_of(app: &TestApp, operator: &str) -> Option<String> {
    app.running().store.open_offers().await.unwrap().into_iter().find(|o| o.operator_id == operator).map(|o| o.session_id)
}

both_backends!(a01_call_identifies_the_robot_and_pop_comes_from_its_record, |app: TestApp| async move {
    ready(&app, "u-asha").await; // BLR
    let (status, body) = app.raise("uw-pick-01").await; // us-west
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["rttMs"], 238, "BLR → us-west floor: the PoP came from the robot record");
    let session: Value = app.robot(Method::GET, "uw-pick-01", &format!("/v1/sessions/{}", body["sessionId"].as_str().unwrap()))
        .send().await.unwrap().json().await.unwrap();
    assert_eq!(session["robot"], "uw-pick-01");
    assert_eq!(session["pop"], "us-west");
    assert_eq!(session["site"], "Reno DC-4");
    assert_eq!(session["lifecycle"], "PENDING");
    app.finish().await;
});

both_backends!(a02_skill_is_the_first_token_of_req_cert, |app: TestApp| async move {
    // uk-weld-01's reqCert is "welding tier-1" (whitespace); ue-insp-01's "inspection tier-3".
    let (status, body) = app.raise("uk-weld-01").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["skill"], "welding");
    let (_, body) = app.raise("uk-mm-01").await; // "mobile-manipulation · tier-1"
    assert_eq!(body["skill"], "mobile-manipulation");
    app.finish().await;
});

both_backends!(a03_matched_is_201_with_session_operator_and_rtt_queued_is_202, |app: TestApp| async move {
    ready(&app, "u-tom").await; // Manchester: pick-place, welding
    let (status, body) = app.raise("uk-pick-01").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body["status"], "matched");
    assert!(body["sessionId"].as_str().unwrap().starts_with("ses-"));
    assert_eq!(body["operator"], json!({ "id": "u-tom", "name": "Tom Whitfield", "region": "Manchester" }));
    assert_eq!(body["rttMs"], 177);

    let (status, body) = app.raise("uk-pal-01").await; // palletize: nobody ready holds it
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["status"], "queued");
    assert_eq!(body["position"], 1);
    assert!(body["sessionId"].as_str().unwrap().starts_with("ses-"));
    app.finish().await;
});

both_backends!(a04_a05_offer_carries_every_field_and_expires_thirty_seconds_after_it_was_raised, |app: TestApp| async move {
    ready(&app, "u-carla").await;
    let before = server::clock::now_ms();
    let (_, body) = app.raise("ue-pick-01").await;
    let after = server::clock::now_ms();
    let offer = &body["offer"];
    assert_eq!(offer["sessionId"], body["sessionId"]);
    assert_eq!(offer["robotId"], "ue-pick-01");
    assert_eq!(offer["robotModel"], "UR10e");
    assert_eq!(offer["site"], "Ashburn FC-2");
    assert_eq!(offer["rttMs"], 96);
    assert_eq!(offer["operatorId"], "u-carla");
    let offered = rfc3339_ms(&offer["offeredAt"]);
    assert!((before..=after).contains(&offered), "offeredAt is when the offer was raised");
    assert_eq!(rfc3339_ms(&offer["expiresAt"]) - offered, 30_000);
    app.finish().await;
});

both_backends!(a06_a10_certification_filters_before_rtt, |app: TestApp| async move {
    ready(&app, "u-carla").await; // Austin, 96 ms to us-east, no palletize
    ready(&app, "u-asha").await; // BLR, 275 ms, palletize
    let (status, body) = app.raise("ue-pal-01").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body["operator"]["id"], "u-asha", "the nearer uncertified operator never wins");
    // The dispatch record says why the others were not chosen.
    let records = app.running().store.dispatch_records(ORG, body["sessionId"].as_str().unwrap()).await.unwrap();
    let summary: Value = serde_json::from_str(&records[0].candidates).unwrap();
    // The record lists the walk of the ready index and counts the rest by verdict.
    let listed = summary["candidates"].as_array().unwrap();
    assert_eq!((listed[0]["operatorId"].as_str(), listed[0]["verdict"].as_str()), (Some("u-asha"), Some("chosen")));
    assert!(listed.iter().all(|c| c["operatorId"] != "u-carla"), "uncertified operators are never ranked");
    assert_eq!(summary["omitted"]["uncertified"], 1, "Carla, counted as uncertified: {summary}");
    assert_eq!(records[0].outcome, "offered");
    assert_eq!(records[0].pool_source, "live_readiness");
    app.finish().await;
});

both_backends!(a07_a_live_ready_operator_is_preferred_over_the_roster, |app: TestApp| async move {
    // Carla is ready on the roster only (no Ready screen); Asha broadcasts live.
    app.engine().operator_ready(ORG, "u-carla", false).await.unwrap();
    ready(&app, "u-asha").await;
    let (_, body) = app.raise("ue-pick-01").await;
    assert_eq!(body["operator"]["id"], "u-asha", "nearer roster-only Carla is not in the pool");
    app.finish().await;
});

both_backends!(a08_roster_fallback_when_nobody_broadcasts_readiness, |app: TestApp| async move {
    app.engine().operator_ready(ORG, "u-carla", false).await.unwrap();
    let (status, body) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body["operator"]["id"], "u-carla");
    let session = body["sessionId"].as_str().unwrap().to_string();
    let records = app.running().store.dispatch_records(ORG, &session).await.unwrap();
    assert_eq!(records[0].pool_source, "roster_fallback");

    // Attached (on_call) operators are part of the roster pool too.
    app.engine().accept(ORG, "u-carla", &session).await.unwrap();
    let (status, body) = app.raise("ue-pick-02").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["operator"]["id"], "u-carla");
    app.finish().await;
});

both_backends!(a09_presences_carry_name_region_certs_and_since, |app: TestApp| async move {
    ready(&app, "u-vikram").await;
    let p = presence(&app, "u-vikram").await;
    assert_eq!(p.name, "Vikram Iyer");
    assert_eq!(p.region, "BLR");
    assert_eq!(p.skills, vec!["inspection", "pick-place"], "skill names, not certification strings");
    assert_eq!(p.state, PresenceState::Ready);
    assert!(p.since > 0);
    app.finish().await;
});

both_backends!(a11_an_emptied_pool_queues_and_names_the_unserved_skill, |app: TestApp| async move {
    ready(&app, "u-asha").await; // pick-place, palletize
    let (status, body) = app.raise("uw-weld-01").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["skill"], "welding");
    app.finish().await;
});

both_backends!(a12_a_matched_call_rings_the_named_operator_and_accept_starts_the_session, |app: TestApp| async move {
    let mut events = app.engine().subscribe(&Topic::operator(ORG, "u-owen"));
    ready(&app, "u-owen").await;
    let (_, body) = app.raise("uk-mm-01").await;
    let session = body["sessionId"].as_str().unwrap().to_string();
    let raised = loop {
        match events.recv().await {
            Delivery::Event(Event::Operator(OperatorEvent::Offer { offer })) => break offer,
            Delivery::Closed => panic!("bus closed"),
            _ => continue,
        }
    };
    assert_eq!(raised.operator_id, "u-owen");
    assert_eq!(raised.session_id, session);
    assert_eq!(presence(&app, "u-owen").await.state, PresenceState::Ringing);
    assert_eq!(presence(&app, "u-owen").await.current_call.as_deref(), Some(session.as_str()));

    let record = app.engine().accept(ORG, "u-owen", &session).await.unwrap();
    assert_eq!(record.lifecycle, LifecycleState::Active);
    assert_eq!(record.operator_name.as_deref(), Some("Owen Davies"));
    assert_eq!(record.region.as_deref(), Some("Manchester"));
    assert!(record.started_at.is_some());
    assert_eq!(presence(&app, "u-owen").await.state, PresenceState::OnCall);
    ready(&app, "u-owen").await;
    assert_eq!(presence(&app, "u-owen").await.state, PresenceState::OnCall, "attached until the session ends");
    let events = app.running().store.activity_events(&session).await.unwrap();
    assert_eq!(events, vec![("SESSION_START".to_string(), Some("u-owen".to_string()))]);
    // An offer is answered once.
    assert!(app.engine().accept(ORG, "u-owen", &session).await.is_err());
    app.finish().await;
});

both_backends!(a13_a_queued_call_is_served_when_a_certified_operator_frees, |app: TestApp| async move {
    let (status, body) = app.raise("ue-insp-01").await; // inspection
    assert_eq!(status, StatusCode::ACCEPTED);
    let session = body["sessionId"].as_str().unwrap().to_string();
    ready(&app, "u-meera").await; // not certified for inspection
    assert_eq!(open_offer_of(&app, "u-meera").await, None);
    ready(&app, "u-priya").await; // inspection
    assert_eq!(open_offer_of(&app, "u-priya").await, Some(session));
    app.finish().await;
});

both_backends!(a14_an_admin_raises_a_call_through_the_same_endpoint, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    ready(&app, "u-jamal").await;
    let res = admin.post(app.url("/v1/sessions")).json(&json!({ "robotId": "uw-weld-01" })).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["operator"]["id"], "u-jamal");
    // Another org's robot does not exist for this admin.
    let res = admin.post(app.url("/v1/sessions")).json(&json!({ "robotId": "hb-pick-01" })).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    // An operator's session may not raise calls.
    let operator = browser();
    sign_in(&operator, &app, OPERATOR).await;
    let res = operator.post(app.url("/v1/sessions")).json(&json!({ "robotId": "uw-weld-01" })).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    app.finish().await;
});

both_backends!(d01_rtt_ties_go_to_the_longest_waiting_then_the_smaller_id, |app: TestApp| async move {
    // Vikram and Asha are both BLR (275 ms to us-east) and pick-place.
    ready(&app, "u-vikram").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    ready(&app, "u-asha").await;
    let (_, body) = app.raise("ue-pick-01").await;
    assert_eq!(body["operator"]["id"], "u-vikram", "ready longer wins, though his id sorts later");
    app.finish().await;
});

both_backends!(d02_measured_rtt_is_floored_by_the_link_floor, |app: TestApp| async move {
    ready(&app, "u-carla").await; // Austin floor to us-east: 96
    ready(&app, "u-asha").await; // BLR floor: 275
    app.engine().report_rtt(ORG, "u-carla", "us-east", 400).await.unwrap();
    app.engine().report_rtt(ORG, "u-asha", "us-east", 90).await.unwrap(); // below physics: floored
    let (_, body) = app.raise("ue-pick-01").await;
    assert_eq!(body["operator"]["id"], "u-asha");
    assert_eq!(body["rttMs"], 275);
    app.finish().await;
});

both_backends!(d03_decline_offers_the_call_to_the_next_best_then_queues_it, |app: TestApp| async move {
    ready(&app, "u-carla").await; // 96 ms
    ready(&app, "u-tom").await; // 205 ms
    let (_, body) = app.raise("ue-pick-01").await;
    let session = body["sessionId"].as_str().unwrap().to_string();
    assert_eq!(body["operator"]["id"], "u-carla");

    app.engine().decline(ORG, "u-carla", &session).await.unwrap();
    assert_eq!(open_offer_of(&app, "u-tom").await, Some(session.clone()), "next best");
    assert_eq!(presence(&app, "u-carla").await.state, PresenceState::Ready);
    assert_eq!(open_offer_of(&app, "u-carla").await, None, "a decliner is not re-offered the same call");

    app.engine().decline(ORG, "u-tom", &session).await.unwrap();
    let res: Value = app.robot(Method::GET, "ue-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(res["lifecycle"], "PENDING");
    assert!(app.running().store.open_offers().await.unwrap().is_empty(), "queued: nobody left who has not declined");
    let outcomes: Vec<String> = app.running().store.dispatch_records(ORG, &session).await.unwrap().into_iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, vec!["offered", "offered", "queued"]);
    app.finish().await;
});

both_backends_with!(d04_an_unanswered_offer_expires_to_aux_and_the_call_moves_on, |c: &mut server::config::Config| c.offer_window_ms = 300, |app: TestApp| async move {
    ready(&app, "u-carla").await;
    ready(&app, "u-tom").await;
    let (_, body) = app.raise("ue-pick-01").await;
    let session = body["sessionId"].as_str().unwrap().to_string();
    assert_eq!(body["operator"]["id"], "u-carla");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // The call moved on to Tom. (Asked once: his own offer lasts 300 ms
    // too, so a later look may find it expired on a busy machine.)
    while open_offer_of(&app, "u-tom").await != Some(session.clone()) {
        assert!(std::time::Instant::now() < deadline, "offer never moved on");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let carla = presence(&app, "u-carla").await;
    assert_eq!(carla.state, PresenceState::Aux);
    assert_eq!(carla.aux_reason.as_deref(), Some(MISSED_OFFER));

    // Tom misses it too: nobody is left, so the call waits in the queue.
    while app.running().store.open_offers().await.unwrap().iter().any(|o| o.session_id == session) {
        assert!(std::time::Instant::now() < deadline, "second offer never expired");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(presence(&app, "u-tom").await.state, PresenceState::Aux);
    let triggers: Vec<(String, String)> = app.running().store.dispatch_records(ORG, &session).await.unwrap()
        .into_iter().map(|r| (r.trigger, r.outcome)).collect();
    assert_eq!(triggers.last().unwrap(), &("expired".to_string(), "queued".to_string()));
    app.finish().await;
});

both_backends!(d05_an_operator_never_holds_two_open_offers, |app: TestApp| async move {
    ready(&app, "u-carla").await;
    let (first, _) = app.raise("ue-pick-01").await;
    let (second, body) = app.raise("ue-pick-02").await;
    assert_eq!(first, StatusCode::CREATED);
    assert_eq!(second, StatusCode::ACCEPTED, "the only certified operator is ringing already: {body}");
    let offers = app.running().store.open_offers().await.unwrap();
    assert_eq!(offers.iter().filter(|o| o.operator_id == "u-carla").count(), 1);
    app.finish().await;
});

both_backends!(d06_the_queue_is_per_skill_oldest_first, |app: TestApp| async move {
    let (_, a) = app.raise("ue-pick-01").await;
    let (_, w) = app.raise("uw-weld-01").await;
    let (_, b) = app.raise("uw-pick-01").await;
    assert_eq!((a["position"].clone(), b["position"].clone(), w["position"].clone()), (json!(1), json!(2), json!(1)));
    ready(&app, "u-tom").await; // pick-place and welding: the oldest call he can serve
    assert_eq!(open_offer_of(&app, "u-tom").await.as_deref(), a["sessionId"].as_str());
    ready(&app, "u-carla").await; // pick-place only
    assert_eq!(open_offer_of(&app, "u-carla").await.as_deref(), b["sessionId"].as_str());
    app.finish().await;
});

both_backends!(withdrawing_a_ringing_call_cancels_it_and_frees_the_operator, |app: TestApp| async move {
    ready(&app, "u-carla").await;
    let (_, body) = app.raise("ue-pick-01").await;
    let session = body["sessionId"].as_str().unwrap();
    // Another robot of the org may not withdraw it: unknown to it (404), and it rings on.
    let other = app.robot(Method::DELETE, "ue-pick-02", &format!("/v1/sessions/{session}")).send().await.unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    assert_eq!(open_offer_of(&app, "u-carla").await.as_deref(), Some(session));
    let res = app.robot(Method::DELETE, "ue-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let record: Value = res.json().await.unwrap();
    assert_eq!(record["lifecycle"], "CANCELLED");
    assert!(record["endedAt"].is_string());
    assert_eq!(open_offer_of(&app, "u-carla").await, None);
    assert_eq!(presence(&app, "u-carla").await.state, PresenceState::Ready);
    let events = app.running().store.activity_events(session).await.unwrap();
    assert_eq!(events.last().unwrap().0, "SESSION_END");
    // Terminal states never reopen.
    let again = app.robot(Method::DELETE, "ue-pick-01", &format!("/v1/sessions/{session}")).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["error"]["code"], "session_ended");
    // To another robot an ended session is as unknown as an open one (no oracle).
    let other = app.robot(Method::DELETE, "ue-pick-02", &format!("/v1/sessions/{session}")).send().await.unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    // The robot can call again.
    assert_eq!(app.raise("ue-pick-01").await.0, StatusCode::CREATED);
    app.finish().await;
});

both_backends!(a_robot_with_a_call_in_progress_cannot_raise_another, |app: TestApp| async move {
    let (status, first) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, body) = app.raise("ue-pick-01").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "call_in_progress");
    assert!(body["error"]["message"].as_str().unwrap().contains(first["sessionId"].as_str().unwrap()));
    app.finish().await;
});

// A robot's call in progress is read through an index of open sessions
// only (migrations postgres 0029 and sqlite 0021 dropped the robot's index
// by state, which no read needed): as store/dispatch.rs
// (live_session_for_robot) and directory.rs (retiring a robot) read it, and
// as booking.rs reads a booked robot's live session. SQLite takes the open
// session by robot (rule D09's index, "not closed" since migration 0022,
// whose condition the reads repeat: `open_lifecycle_read!`); PostgreSQL's
// generic plan, made on an empty table, may take the org's open sessions
// instead (both hold open sessions only, never a robot's history). The
// reads planned are the store's own texts (`store::planned_reads`).
both_backends!(a_robots_call_in_progress_is_read_through_open_sessions_only, |app: TestApp| async move {
    use server::store::planned_reads::{BOOKED_SESSION_OF_ROBOT, OPEN_SESSION_OF_ROBOT};
    let sqlite = app.database_url().starts_with("sqlite");
    for read in [OPEN_SESSION_OF_ROBOT, BOOKED_SESSION_OF_ROBOT] {
        let plan = common::plan(&app.database_url(), read, &["org", "robot"]).await;
        if sqlite {
            let by_robot = plan.lines().any(|line| line.starts_with("SEARCH ") && line.contains("USING INDEX sessions_one_open_per_robot (org_id=? AND robot_id=?)"));
            assert!(by_robot && !plan.lines().any(|line| line.starts_with("SCAN ")), "{read}\n{plan}");
        } else {
            assert!(plan.contains(" sessions_one_open_per_robot ") || plan.contains(" sessions_open_by_org "), "{read}\n{plan}");
        }
    }
    app.finish().await;
});

// The desk's load (D11) and the board read the org's open sessions through
// an index of open sessions only, never the org's history: on SQLite rule
// D09's, which they name by repeating its condition (migration sqlite/0023
// dropped the org's index by state, `offers_by_org_status` and the queue's,
// which cost the cycle's batches a page each); on PostgreSQL the org's open
// sessions (postgres/0028). The reads planned are the store's own texts
// (`store::planned_reads`: store/dispatch.rs's org snapshot, store/board.rs's
// live sessions and queue depths).
both_backends!(the_desk_and_the_board_read_open_sessions_only, |app: TestApp| async move {
    use server::store::planned_reads::{ANSWERED_OF_ORG, LIVE_BOARD, LIVE_OF_ORG, OPEN_OFFERS_OF_ORG, PENDING_OF_ORG, QUEUE_DEPTHS};
    let sqlite = app.database_url().starts_with("sqlite");
    // SQLite searches rule D09's index by the org. PostgreSQL's generic
    // plan, made on an empty table, may walk rule D09's index (every org's
    // open sessions) instead of the org's open sessions; it keeps an index
    // of queued calls.
    let open_sessions: &[&str] = &["sessions_one_open_per_robot", "sessions_open_by_org"];
    let queued: &[&str] = &["sessions_one_open_per_robot", "sessions_open_by_org", "sessions_queue"];
    let reads: [(&str, &[&str]); 6] = [
        (PENDING_OF_ORG, open_sessions),
        (ANSWERED_OF_ORG, open_sessions),
        (LIVE_OF_ORG, open_sessions),
        (LIVE_BOARD.as_str(), open_sessions),
        (QUEUE_DEPTHS, queued),
        (OPEN_OFFERS_OF_ORG, &["offers_one_open_per_operator", "offers_one_open_per_session"]),
    ];
    for (read, indexes) in reads {
        let plan = common::plan(&app.database_url(), read, &["org"]).await;
        if sqlite {
            let searched = |index: &str| plan.lines().any(|line| line.starts_with("SEARCH ") && line.contains(&format!("USING INDEX {index} (org_id=?")));
            let walked = |index: &str| plan.lines().any(|line| line.starts_with("SCAN ") && line.contains(&format!("USING INDEX {index}")));
            // The open offers: one step, a walk of an index of open offers.
            let fine = if read == OPEN_OFFERS_OF_ORG {
                plan.lines().count() == 1 && indexes.iter().any(|index| walked(index))
            } else {
                searched("sessions_one_open_per_robot")
            };
            assert!(fine, "{read}\n{plan}");
            assert!(read == OPEN_OFFERS_OF_ORG || !plan.lines().any(|line| line.starts_with("SCAN ")), "nothing walked whole: {read}\n{plan}");
            if read == ANSWERED_OF_ORG {
                assert!(plan.contains("SEARCH o USING INDEX offers_by_session (session_id=?)"), "{read}\n{plan}");
            }
        } else {
            assert!(indexes.iter().any(|index| plan.contains(&format!(" {index} "))), "{read} should take one of {indexes:?}:\n{plan}");
        }
    }
    app.finish().await;
});
