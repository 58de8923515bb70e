//! Attacks on a running server, one test per attack (issue "Hardening"):
//! each test does what an attacker would, over real HTTP and WebSocket
//! connections, and checks that it gets nowhere. Storage-related attacks
//! run on both databases.

mod common;
#[path = "security/hardening_ii.rs"]
mod hardening_ii;

use domain::ring::{ConsoleMsg, RingError, RingMsg};
use common::process::{command, ServerProcess};
use common::{browser, browser_from, call, session_cookie, sign_in, Tab, TestApp, ADMIN, OPERATOR};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

const EVIL: &str = "http://evil.example";

fn retry_after(res: &reqwest::Response) -> u64 {
    res.headers()["retry-after"].to_str().unwrap().parse().unwrap()
}

// ---- Sign-in ---------------------------------------------------------------

/// 100,000 wrong sign-ins with distinct emails, from one address, against
/// the real binary: its memory barely moves, no password check piles up,
/// and the person signs in from another address meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_100k_distinct_emails_keeps_memory_flat_and_the_person_still_gets_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = command(dir.path());
    cmd.env("CLUTCHCALL_ADDR", "127.0.0.1:0").env("CLUTCHCALL_DEMO", "1");
    let server = ServerProcess::start(cmd).await;
    let (base, url) = (server.base.clone(), format!("{}/api/sign_in", server.base));
    // Warm up (the first sign-in allocates argon2's memory), then measure.
    let warm = browser_from([127, 0, 0, 3]).post(&url).header("origin", &base).form(&[("email", "warm@example.test"), ("password", "x")]).send().await.unwrap();
    assert_eq!(warm.status(), StatusCode::UNAUTHORIZED);
    let before = server.rss_bytes();

    let attacker = browser();
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let statuses = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<u16, usize>::new()));
    let workers: Vec<_> = (0..32)
        .map(|w| {
            let (attacker, url, base, sent, statuses) = (attacker.clone(), url.clone(), base.clone(), sent.clone(), statuses.clone());
            tokio::spawn(async move {
                let mut i = w;
                while i < 100_000 {
                    let email = format!("victim-{i}@example.test");
                    let res = attacker.post(&url).header("origin", &base).form(&[("email", email.as_str()), ("password", "guess")]).send().await.unwrap();
                    *statuses.lock().unwrap().entry(res.status().as_u16()).or_default() += 1;
                    sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    i += 32;
                }
            })
        })
        .collect();
    // Mid-flood, the real person signs in from their own machine.
    while sent.load(std::sync::atomic::Ordering::Relaxed) < 20_000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let person = browser_from([127, 0, 0, 2]).post(&url).header("origin", &base).form(&[("email", OPERATOR), ("password", server::seed::DEMO_PASSWORD)]).send().await.unwrap();
    assert_eq!(person.status(), StatusCode::OK, "a correct password from another address gets in during the flood");
    for w in workers {
        w.await.unwrap();
    }
    let after = server.rss_bytes();
    let statuses = statuses.lock().unwrap().clone();
    assert_eq!(statuses.values().sum::<usize>(), 100_000);
    assert!(statuses.keys().all(|s| matches!(s, 401 | 429)), "only refusals: {statuses:?}");
    assert!(statuses.get(&429).copied().unwrap_or(0) >= 99_000, "the address is limited: {statuses:?}");
    let grown = after.saturating_sub(before);
    assert!(grown < 20 << 20, "RSS grew {} MiB over 100,000 distinct emails", grown >> 20);
    server.kill9().await;
}

both_backends!(sixty_four_parallel_guesses_let_at_most_five_reach_the_password_check, |app: TestApp| async move {
    let guesses: Vec<_> = (0..64)
        .map(|_| {
            let (url, base) = (app.url("/api/sign_in"), app.base.clone());
            tokio::spawn(async move {
                let res = browser().post(url).header("origin", base).form(&[("email", OPERATOR), ("password", "guess")]).send().await.unwrap();
                res.status().as_u16()
            })
        })
        .collect();
    let mut verdicts = 0;
    for g in guesses {
        match g.await.unwrap() {
            401 => verdicts += 1,
            429 | 503 => {}
            other => panic!("a guess answered {other}"),
        }
    }
    assert!(verdicts <= server::services::throttle::PAIR_BURST as usize, "{verdicts} guesses got a password verdict");
    app.finish().await;
});

both_backends!(a_backslash_next_does_not_redirect_off_site, |app: TestApp| async move {
    for next in ["/\\evil.example", "//evil.example", "https://evil.example", "/\t/evil.example", "/%5cevil.example/../x:y"] {
        let res = call(&browser(), &app, "sign_in", &[("email", ADMIN), ("password", server::seed::DEMO_PASSWORD), ("next", next)]).await;
        assert_eq!(res.status(), StatusCode::OK);
        let location = common::landing(res).await;
        let location = location.as_str();
        assert!(location.starts_with('/') && !location.starts_with("//") && !location.contains('\\'), "{next:?} → {location}");
        assert!(!location.contains("evil"), "{next:?} → {location}");
    }
    app.finish().await;
});

both_backends!(a_cross_site_sign_in_or_sign_out_is_refused, |app: TestApp| async move {
    let form = [("email", ADMIN), ("password", server::seed::DEMO_PASSWORD)];
    // Login CSRF: another site posts its own credentials into the victim's browser.
    let res = browser().post(app.url("/api/sign_in")).header("origin", EVIL).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(res.headers().get("set-cookie").is_none());
    // No Origin and no fetch metadata: not a page of ours either.
    let res = browser().post(app.url("/api/sign_in")).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    // A same-origin fetch that omits Origin is fine.
    let res = browser().post(app.url("/api/sign_in")).header("sec-fetch-site", "same-origin").form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);

    // Logout CSRF: the victim stays signed in.
    let victim = browser();
    sign_in(&victim, &app, ADMIN).await;
    let res = victim.post(app.url("/api/sign_out")).header("origin", EVIL).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert_eq!(call(&victim, &app, "load_directory", &[]).await.status(), StatusCode::OK);
    app.finish().await;
});

both_backends!(a_planted_cookie_of_the_same_name_does_not_shadow_the_real_sign_in, |app: TestApp| async move {
    let real = session_cookie(&app, ADMIN).await; // "cc_session=<token>"
    let res = common::http()
        .post(app.url("/api/load_directory"))
        .header("origin", &app.base)
        .header("cookie", format!("cc_session=planted-by-a-sibling; {real}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "the live sign-in among same-named cookies counts");
    app.finish().await;
});

both_backends_with!(behind_https_the_cookie_is_host_prefixed_and_secure, |c: &mut server::config::Config| c.public_origin = Some("https://ops.example.com".into()), |app: TestApp| async move {
    let res = browser()
        .post(app.url("/api/sign_in"))
        .header("origin", "https://ops.example.com")
        .form(&[("email", ADMIN), ("password", server::seed::DEMO_PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cookie = res.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.starts_with("__Host-cc_session=") && cookie.contains("Secure") && cookie.contains("Path=/"), "{cookie}");
    // The page origin is the configured one: the bound address is foreign now.
    let res = browser().post(app.url("/api/sign_in")).header("origin", &app.base).form(&[("email", ADMIN), ("password", "x")]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    app.finish().await;
});

// ---- The ring channel --------------------------------------------------------

both_backends!(a_cross_site_or_originless_socket_is_refused, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    assert_eq!(Tab::connect(&app.base, &cookie, "/ws", Some(EVIL)).await.err(), Some(403));
    assert_eq!(Tab::connect(&app.base, &cookie, "/ws", None).await.err(), Some(403));
    assert!(Tab::connect(&app.base, &cookie, "/ws", Some(&app.base)).await.is_ok());
    app.finish().await;
});

both_backends!(an_oversize_frame_closes_the_socket_and_nothing_else, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    let mut tab = Tab::open(&app, &cookie).await;
    tab.next().await; // welcome
    let huge = format!("{{\"type\":\"aux\",\"reason\":\"{}\"}}", "x".repeat(2 << 20));
    tab.send_text(huge).await;
    assert!(tab.closed_within(Duration::from_secs(5)).await, "a 2 MB frame ends the socket");
    let mut again = Tab::open(&app, &cookie).await;
    assert!(matches!(again.next().await, RingMsg::Welcome { .. }), "the server and the person's next tab are fine");
    app.finish().await;
});

both_backends!(a_client_that_floods_and_never_reads_is_disconnected, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    let mut tab = Tab::open(&app, &cookie).await;
    // 20,000 pings, each answered by a pong the client never reads: the
    // tab's bounded queue fills and the server lets go of it.
    let ping = serde_json::to_string(&ConsoleMsg::Ping { nonce: 1 }).unwrap();
    let mut sent = 0;
    for _ in 0..20_000 {
        if !tab.send_text(ping.clone()).await {
            break;
        }
        sent += 1;
    }
    assert!(tab.closed_within(Duration::from_secs(10)).await, "a client that never reads is cut off (sent {sent})");
    assert_eq!(common::http().get(app.url("/healthz")).send().await.unwrap().status(), StatusCode::OK);
    app.finish().await;
});

both_backends!(a_ninth_socket_of_one_person_is_refused, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    let mut tabs = Vec::new();
    for _ in 0..server::services::tabs::TABS_PER_PERSON {
        tabs.push(Tab::open(&app, &cookie).await);
    }
    assert_eq!(Tab::connect(&app.base, &cookie, "/ws", Some(&app.base)).await.err(), Some(429));
    tabs.pop().unwrap().kill();
    // The closed tab's place frees as soon as the server sees it go.
    let mut reopened = None;
    for _ in 0..50 {
        if let Ok(tab) = Tab::connect(&app.base, &cookie, "/ws", Some(&app.base)).await {
            reopened = Some(tab);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reopened.is_some(), "a closed tab frees its place");
    app.finish().await;
});

both_backends!(a_socket_is_closed_at_sign_out_and_a_ready_after_it_does_nothing, |app: TestApp| async move {
    let client = browser();
    let res = sign_in(&client, &app, OPERATOR).await;
    let cookie = res.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let mut tab = Tab::open(&app, &cookie).await;
    tab.next().await; // welcome
    let mut other = Tab::open(&app, &cookie).await;
    other.next().await; // welcome
    assert_eq!(call(&client, &app, "sign_out", &[]).await.status(), StatusCode::OK);
    // Another tab of the sign-in says Ready once sign-out has answered: the
    // server reads it (and must refuse it) or has stopped reading.
    other.send_text(serde_json::to_string(&ConsoleMsg::Ready).unwrap()).await;
    let ended = tab.until(|m| match m {
        RingMsg::Error { code, .. } => Some(code),
        _ => None,
    });
    assert_eq!(tokio::time::timeout(Duration::from_secs(2), ended).await.expect("told at once"), RingError::SignedOut);
    assert!(tab.closed_within(Duration::from_secs(2)).await, "closed at once, not at the next command");
    tab.send_text(serde_json::to_string(&ConsoleMsg::Ready).unwrap()).await;
    // A socket is closed after its read loop ends: whatever the server read
    // on it was handled by then, the other tab's Ready included.
    assert!(other.closed_within(Duration::from_secs(2)).await);
    let presence = app.engine().presence_of("org-northstar", "u-asha").await.unwrap();
    assert_ne!(presence.state, domain::models::PresenceState::Ready, "a Ready after sign-out is not applied");
    app.finish().await;
});

both_backends!(a_socket_closes_when_its_sign_in_expires, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    // The sign-in has a second left (12 h in life).
    let soon = server::clock::now_ms() + 1_000;
    common::execute(&app.database_url(), &format!("UPDATE web_sessions SET expires_at = {soon}")).await;
    let mut tab = Tab::open(&app, &cookie).await;
    tab.next().await; // welcome
    let ended = tab.until(|m| match m {
        RingMsg::Error { code, .. } => Some(code),
        _ => None,
    });
    assert_eq!(tokio::time::timeout(Duration::from_secs(3), ended).await.expect("closed at expiry"), RingError::SignedOut);
    assert!(tab.closed_within(Duration::from_secs(2)).await);
    app.finish().await;
});

both_backends!(rtt_reports_for_unknown_pops_or_implausible_values_are_refused, |app: TestApp| async move {
    let cookie = session_cookie(&app, OPERATOR).await;
    let mut tab = Tab::open(&app, &cookie).await;
    tab.next().await;
    assert_eq!(refusal(&mut tab, ConsoleMsg::Rtt { pop: "x".repeat(4_000), rtt_ms: 1 }).await, RingError::UnknownPop);
    assert_eq!(refusal(&mut tab, ConsoleMsg::Rtt { pop: "us-east".into(), rtt_ms: 600_000 }).await, RingError::ImplausibleRtt);
    let presence = app.engine().presence_of("org-northstar", "u-asha").await.unwrap();
    assert!(presence.measured_rtt_ms.is_empty(), "nothing kept: {:?}", presence.measured_rtt_ms);
    app.finish().await;
});

/// Sends `msg` and returns the code it was refused with.
async fn refusal(tab: &mut Tab, msg: ConsoleMsg) -> RingError {
    tab.send(msg).await;
    tab.until(|m| match m {
        RingMsg::Error { code, .. } => Some(code),
        _ => None,
    })
    .await
}

// ---- Sessions, defaults and errors -------------------------------------------

both_backends!(error_bodies_carry_no_database_text, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    // The database breaks under the server's feet.
    common::execute(&app.database_url(), "ALTER TABLE robots RENAME TO robots_gone").await;
    let page = call(&admin, &app, "load_directory", &[]).await;
    assert_eq!(page.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let api = admin
        .post(app.url("/v1/robots"))
        .header("origin", &app.base)
        .json(&serde_json::json!({"id": "x-1", "model": "m", "site": "s", "pop": "us-east", "reqCert": "pick-place"}))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::INTERNAL_SERVER_ERROR);
    for body in [page.text().await.unwrap(), api.text().await.unwrap()] {
        let lower = body.to_lowercase();
        for leak in ["robots_gone", "sqlx", "sqlite", "postgres", "relation", "table", "syntax", "error returned from database"] {
            assert!(!lower.contains(leak), "{leak:?} leaked in {body}");
        }
    }
    app.finish().await;
});

both_backends!(probing_another_orgs_robot_ids_neither_collides_nor_reveals, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    assert_eq!(call(&admin, &app, "select_org", &[("org_id", "org-harbor")]).await.status(), StatusCode::OK);
    let register = |id: &'static str| {
        let (admin, url, origin) = (admin.clone(), app.url("/v1/robots"), app.base.clone());
        async move {
            let body = serde_json::json!({"id": id, "model": "UR5e", "site": "Rotterdam Pier 3", "pop": "uk-london", "reqCert": "pick-place · tier-1"});
            admin.post(url).header("origin", origin).json(&body).send().await.unwrap()
        }
    };
    // Northstar's id is free in Harbor: no 409 that would say it exists elsewhere.
    let created = register("ue-pick-01").await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let token = created.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_string();
    assert_eq!(register("hb-pick-01").await.status(), StatusCode::CONFLICT, "a duplicate within the org is still refused");
    // Each robot answers to its own token, in its own org.
    let harbor = common::http().post(app.url("/v1/sessions")).bearer_auth(&token).json(&serde_json::json!({"robotId": "ue-pick-01"})).send().await.unwrap();
    assert!(harbor.status().is_success(), "{}", harbor.status());
    let harbor: Value = harbor.json().await.unwrap();
    let (status, northstar) = app.raise("ue-pick-01").await;
    assert!(status.is_success(), "the Northstar robot of the same id is independent: {northstar}");
    assert_ne!(harbor["sessionId"], northstar["sessionId"]);
    app.finish().await;
});

both_backends!(overlong_robot_fields_and_unknown_pops_are_refused, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let register = |body: Value| {
        let (admin, url, origin) = (admin.clone(), app.url("/v1/robots"), app.base.clone());
        async move { admin.post(url).header("origin", origin).json(&body).send().await.unwrap() }
    };
    let long = "x".repeat(10_000);
    for (field, value) in [("model", long.as_str()), ("site", long.as_str()), ("pop", "mars-1"), ("reqCert", long.as_str())] {
        let mut body = serde_json::json!({"id": "ok-1", "model": "UR10e", "site": "Leeds Hub", "pop": "uk-london", "reqCert": "pick-place · tier-1"});
        body[field] = Value::from(value);
        let res = register(body).await;
        assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY, "{field}");
        let error: Value = res.json().await.unwrap();
        assert!(error["error"]["message"].as_str().unwrap().contains(field), "{error}");
    }
    let ok = register(serde_json::json!({"id": "ok-1", "model": "UR10e", "site": "Leeds Hub", "pop": "uk-london", "reqCert": "pick-place · tier-1"})).await;
    assert_eq!(ok.status(), StatusCode::CREATED);
    app.finish().await;
});

// The limits cluster mode keeps in the database (one GCRA row per key):
// a burst, then one more per interval; keys apart; recovered keys swept.
both_backends!(a_limit_kept_in_the_database_spends_a_burst_then_one_per_interval, |app: TestApp| async move {
    let store = &app.running().store;
    // An hour ahead: the server's own sweep (at its clock) leaves these rows alone.
    let now = server::clock::now_ms() + 3_600_000;
    assert_eq!(store.spend_limit("t:a", now, 1_000, 2).await.unwrap(), None);
    assert_eq!(store.spend_limit("t:a", now, 1_000, 2).await.unwrap(), None);
    assert_eq!(store.spend_limit("t:a", now + 10, 1_000, 2).await.unwrap(), Some(990), "spent: one is back a second after the first");
    assert_eq!(store.spend_limit("t:b", now + 10, 1_000, 2).await.unwrap(), None, "another key has its own budget");
    assert_eq!(store.spend_limit("t:a", now + 1_000, 1_000, 2).await.unwrap(), None, "one came back");
    assert_eq!(store.spend_limit("t:a", now + 1_000, 1_000, 2).await.unwrap(), Some(1_000));
    assert_eq!(store.forget_recovered_limits(now + 2_000).await.unwrap(), 1, "b's budget is whole again; a's is not");
    assert_eq!(store.forget_recovered_limits(now + 3_000).await.unwrap(), 1);
    app.finish().await;
});

both_backends!(a_public_robot_token_flood_gets_429_with_retry_after, |app: TestApp| async move {
    // Twice the burst at once: well over 50 a second on any machine.
    let flood = (0..2 * server::http::robot_rate::BURST).map(|_| app.robot(Method::POST, "uk-mm-01", "/v1/robots/uk-mm-01/heartbeat").send());
    let mut limited = None;
    for res in futures::future::join_all(flood).await {
        let res = res.unwrap();
        match res.status() {
            StatusCode::OK => {}
            StatusCode::TOO_MANY_REQUESTS => limited = Some(res),
            other => panic!("a flooded heartbeat answered {other}"),
        }
    }
    let res = limited.expect("the token is limited");
    assert!(retry_after(&res) >= 1);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    // Another robot's token is not affected.
    assert_eq!(app.robot(Method::POST, "uk-pick-01", "/v1/robots/uk-pick-01/heartbeat").send().await.unwrap().status(), StatusCode::OK);
    app.finish().await;
});

/// A server reachable from other machines starts without the public demo
/// credentials and says how to create the first admin; `create-admin`
/// does, reading the password from the environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_credentials_never_reach_a_non_loopback_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = command(dir.path());
    cmd.env("CLUTCHCALL_ADDR", "0.0.0.0:0");
    let server = ServerProcess::start(cmd).await;
    assert!(server.banner.contains("create-admin"), "says how to begin: {}", server.banner);
    let base = server.base.replace("0.0.0.0", "127.0.0.1");
    let demo = browser()
        .post(format!("{base}/api/sign_in"))
        .header("origin", &server.base)
        .form(&[("email", ADMIN), ("password", server::seed::DEMO_PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(demo.status(), StatusCode::UNAUTHORIZED, "no demo admin");
    let token = browser().post(format!("{base}/v1/robots/ue-pick-01/heartbeat")).bearer_auth(server::seed::demo_robot_token("ue-pick-01")).send().await.unwrap();
    assert_eq!(token.status(), StatusCode::UNAUTHORIZED, "no demo robot tokens");
    server.kill9().await;

    let created = command(dir.path())
        .args(["create-admin", "--org", "Acme Robotics", "--email", "ops@acme.example", "--name", "Ops Lead"])
        .env("CLUTCHCALL_ADMIN_PASSWORD", "a long enough secret")
        .output()
        .await
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let short = command(dir.path())
        .args(["create-admin", "--org", "B", "--email", "b@acme.example", "--name", "B"])
        .env("CLUTCHCALL_ADMIN_PASSWORD", "short")
        .output()
        .await
        .unwrap();
    assert!(!short.status.success(), "a short password is refused");

    let mut cmd = command(dir.path());
    cmd.env("CLUTCHCALL_ADDR", "127.0.0.1:0");
    let server = ServerProcess::start(cmd).await;
    assert!(!server.banner.contains("DEMO DATA"), "a database with an org is not seeded: {}", server.banner);
    let res = browser()
        .post(format!("{}/api/sign_in", server.base))
        .header("origin", &server.base)
        .form(&[("email", "ops@acme.example"), ("password", "a long enough secret")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(common::landing(res).await, "/admin/directory");
    server.kill9().await;
}
