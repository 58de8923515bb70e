//! The presence roster (`load_roster`, seed 003) on both databases.

mod common;

use domain::models::PresenceState;
use domain::roster::{counters, Roster};
use common::{browser, call, session_cookie, sign_in, Tab, TestApp, ADMIN, OPERATOR};
use reqwest::StatusCode;
use std::time::Duration;

const ORG: &str = "org-northstar";

async fn roster(client: &reqwest::Client, app: &TestApp) -> Roster {
    let res = call(client, app, "load_roster", &[]).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

both_backends!(r01_r02_one_row_per_operator_of_the_selected_org_for_its_admins_only, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    // Tom answers a call: still one row, carrying that call.
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let (status, body) = app.raise("uk-pick-01").await;
    assert_eq!(status, StatusCode::CREATED);
    let session = body["sessionId"].as_str().unwrap().to_string();
    app.engine().answer(ORG, "u-tom", &session).await.unwrap();

    let r = roster(&admin, &app).await;
    assert_eq!(r.rows.len(), 9, "eight operators and the admin who operates; nobody from Harbor");
    assert!(r.rows.iter().all(|row| row.email.as_deref() != Some(common::HARBOR_OPERATOR)));
    let tom: Vec<_> = r.rows.iter().filter(|row| row.agent_id == "u-tom").collect();
    assert_eq!(tom.len(), 1, "R02: keyed on the agent, never one row per call");
    assert_eq!((tom[0].state, tom[0].current_call_id.as_deref()), (PresenceState::OnCall, Some(session.as_str())));
    assert_eq!(tom[0].display_name.as_deref(), Some("Tom Whitfield"));
    assert_eq!(tom[0].external_agent_id.as_deref(), Some("NS-0201"));
    let never = r.rows.iter().find(|row| row.agent_id == "u-vikram").unwrap();
    assert_eq!(never.state, PresenceState::Offline, "never connected: a row, offline");
    let c = counters(&r.rows);
    assert_eq!((c.online, c.on_call), (1, 1));

    // Another org's admin sees another roster; an operator none.
    assert_eq!(call(&admin, &app, "select_org", &[("org_id", "org-harbor")]).await.status(), StatusCode::OK);
    let harbor = roster(&admin, &app).await;
    assert!(harbor.rows.iter().all(|row| row.agent_id != "u-tom"), "R01: no cross-org roster");
    let operator = browser();
    sign_in(&operator, &app, OPERATOR).await;
    assert_eq!(call(&operator, &app, "load_roster", &[]).await.status(), StatusCode::FORBIDDEN);
    app.finish().await;
});

both_backends_with!(r08_an_operator_whose_console_stops_reporting_turns_offline_with_the_time_since, |c: &mut server::config::Config| c.presence_ttl_ms = 1_000, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let mut tab = Tab::open(&app, &session_cookie(&app, OPERATOR).await).await;
    tab.next().await; // welcome: online, not ready
    let asha = |r: &Roster| r.rows.iter().find(|row| row.agent_id == "u-asha").cloned().unwrap();
    let online = asha(&roster(&admin, &app).await);
    assert_eq!((online.state, online.aux_reason.as_deref()), (PresenceState::Aux, Some("not ready")));
    let killed_at = server::clock::now_ms();
    tab.kill();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let row = asha(&roster(&admin, &app).await);
        if row.state == PresenceState::Offline {
            assert!(row.state_since_ms.unwrap() >= killed_at, "the age counts from the lapse");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {:?} 10 s after the console died", row.state);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    app.finish().await;
});
