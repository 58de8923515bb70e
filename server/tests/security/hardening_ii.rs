//! Issue "Hardening II": one test per numbered finding (`s01_…` for
//! finding 1, and so on), each first doing the legitimate thing and then
//! the attack, over real HTTP and WebSocket connections. Storage-related
//! findings run on both databases. Findings whose rule is pure are proven
//! where the rule lives (s05 in `domain::people`, s12 in `server::http::client`).

use crate::{both_backends, both_backends_with};
use crate::common::{self, browser, browser_from, call, relay, scalar, session_cookie, sign_in, Tab, TestApp, ADMIN, OPERATOR};
use domain::people::{InvitationState, InvitationView, InviteLink};
use futures::StreamExt;
use reqwest::StatusCode;
use std::time::Duration;

const ORG: &str = "org-northstar";
const PASSWORD: &str = "a long new password";
/// Every revocation reaches its sockets within this (the bound).
const REVOKED_WITHIN: Duration = Duration::from_secs(1);

fn token_of(link: &InviteLink) -> String {
    link.url.rsplit('/').next().unwrap().to_string()
}

/// A second org of the test's own, with its admin signed in.
async fn other_org(app: &TestApp, name: &str) -> (String, reqwest::Client) {
    let email = format!("admin@{}.example", name.to_lowercase());
    let org_id = server::seed::create_first_admin(app.running().store.as_ref(), name, &email, "Other Admin", PASSWORD).await.expect("org made");
    let admin = browser();
    let res = call(&admin, app, "sign_in", &[("email", &email), ("password", PASSWORD)]).await;
    assert_eq!(res.status(), StatusCode::OK);
    (org_id, admin)
}

async fn invite_client(admin: &reqwest::Client, app: &TestApp, email: &str) -> InviteLink {
    let res = call(admin, app, "invite_person", &[("email", email), ("display_name", "Pat Pending"), ("role", "client")]).await;
    assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
    res.json().await.unwrap()
}

async fn accept(client: &reqwest::Client, app: &TestApp, token: &str) -> reqwest::Response {
    call(client, app, "accept_invitation", &[("token", token), ("password", PASSWORD), ("confirm", PASSWORD)]).await
}

async fn signs_in(app: &TestApp, email: &str, password: &str) -> bool {
    call(&browser(), app, "sign_in", &[("email", email), ("password", password)]).await.status() == StatusCode::OK
}

async fn dana(app: &TestApp) -> reqwest::Client {
    let admin = browser();
    assert_eq!(sign_in(&admin, app, ADMIN).await.status(), StatusCode::OK);
    admin
}

// ---- 1. Pending invitees belong to the org that invited them --------------

both_backends!(s01_another_orgs_link_never_sets_a_pending_persons_password, |app: TestApp| async move {
    const PAT: &str = "pat.pending@example.org";
    let northstar = invite_client(&dana(&app).await, &app, PAT).await;
    let (_, harbor_admin) = other_org(&app, "Harbor Test").await;
    let harbor = invite_client(&harbor_admin, &app, PAT).await;
    // Harbor's link does not offer to set the pending account's password…
    let view: InvitationView = call(&browser(), &app, "load_invitation", &[("token", &token_of(&harbor))]).await.json().await.unwrap();
    assert_eq!(view.state, InvitationState::SignInFirst);
    // …and refuses to when asked anyway: nobody signs in with it.
    assert_eq!(accept(&browser(), &app, &token_of(&harbor)).await.status(), StatusCode::CONFLICT);
    assert!(!signs_in(&app, PAT, PASSWORD).await, "Harbor's admin did not take over Northstar's invitee");
    // The store refuses it on its own too, whatever door asks.
    use server::store::{AcceptOutcome, Acceptance};
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let set = Acceptance::SetPassword(server::auth::hash_password(PASSWORD));
    let outcome = app.running().store.accept_invitation(&server::auth::token_hash(&token_of(&harbor)), &set, now).await.unwrap();
    assert!(matches!(outcome, AcceptOutcome::SignInFirst), "{outcome:?}");
    // Northstar's own link still works, once.
    let view: InvitationView = call(&browser(), &app, "load_invitation", &[("token", &token_of(&northstar))]).await.json().await.unwrap();
    assert_eq!(view.state, InvitationState::SetPassword);
    let set = accept(&browser(), &app, &token_of(&northstar)).await;
    assert!(set.status().is_success() || set.status().is_redirection(), "{}", set.status());
    assert!(signs_in(&app, PAT, PASSWORD).await);
});

both_backends!(s01_a_pending_person_removed_from_every_org_can_still_be_invited_elsewhere, |app: TestApp| async move {
    const QUINN: &str = "quinn.pending@example.org";
    let dana = dana(&app).await;
    invite_client(&dana, &app, QUINN).await;
    let people: domain::people::PeopleAdmin = call(&dana, &app, "load_people", &[]).await.json().await.unwrap();
    let quinn = people.members.iter().find(|m| m.person.email == QUINN).unwrap().user_id.clone();
    assert_eq!(call(&dana, &app, "remove_member", &[("user_id", &quinn)]).await.status(), StatusCode::OK);
    // Quinn's account belongs to no org now: another org's link may set its password.
    let (_, harbor_admin) = other_org(&app, "Harbor Test").await;
    let harbor = invite_client(&harbor_admin, &app, QUINN).await;
    let view: InvitationView = call(&browser(), &app, "load_invitation", &[("token", &token_of(&harbor))]).await.json().await.unwrap();
    assert_eq!(view.state, InvitationState::SetPassword);
    let set = accept(&browser(), &app, &token_of(&harbor)).await;
    assert!(set.status().is_success() || set.status().is_redirection(), "{}", set.status());
    assert!(signs_in(&app, QUINN, PASSWORD).await);
});

// ---- 2. Relay sockets end with their credential ---------------------------

both_backends!(s02_relay_sockets_close_on_sign_out_and_on_token_rotation, |app: TestApp| async move {
    let session = common::attach_asha(&app, "uk-pick-01").await;
    let cookie = session_cookie(&app, OPERATOR).await;
    let mut cockpit = relay(&app, &session, None, Some(&cookie)).await.expect("the operator in control joins");
    let mut robot = relay(&app, &session, Some("uk-pick-01"), None).await.expect("the robot joins");
    // Signing the cookie out closes the open cockpit socket, not only new ones.
    let signed_in = browser();
    signed_in.post(app.url("/api/sign_out")).header("origin", &app.base).header("cookie", &cookie).send().await.unwrap();
    assert!(closes_within(&mut cockpit, REVOKED_WITHIN).await, "the cockpit's socket outlived its sign-out");
    assert_eq!(relay(&app, &session, None, Some(&cookie)).await.err(), Some(401));
    // Rotating the robot's token closes the socket opened with the old one.
    let rotated = call(&dana(&app).await, &app, "rotate_robot_token", &[("robot_id", "uk-pick-01")]).await;
    assert_eq!(rotated.status(), StatusCode::OK);
    assert!(closes_within(&mut robot, REVOKED_WITHIN).await, "the robot's socket outlived its token");
    assert_eq!(relay(&app, &session, Some("uk-pick-01"), None).await.err(), Some(401), "the old token opens nothing");
});

async fn closes_within(socket: &mut common::RelaySocket, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, socket.next()).await {
            Err(_) => return false,
            Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_)))) => return true,
            Ok(Some(Ok(_))) => continue,
        }
    }
}

// ---- 3. Watch sockets end when the role they were opened with does ---------

both_backends!(s03_a_demoted_admins_watch_socket_closes_and_stays_shut, |app: TestApp| async move {
    let dana = dana(&app).await;
    assert_eq!(call(&dana, &app, "set_member_role", &[("user_id", "u-asha"), ("role", "admin")]).await.status(), StatusCode::OK);
    let cookie = session_cookie(&app, OPERATOR).await;
    let mut watch = Tab::open_path(&app, &cookie, "/ws?watch=org").await;
    let mut console = Tab::open(&app, &cookie).await;
    assert!(matches!(console.next().await, domain::ring::RingMsg::Welcome { .. }));
    assert_eq!(call(&dana, &app, "set_member_role", &[("user_id", "u-asha"), ("role", "client")]).await.status(), StatusCode::OK);
    assert!(watch.closed_within(REVOKED_WITHIN).await, "the org's events kept flowing to a client");
    assert!(console.closed_within(REVOKED_WITHIN).await, "so did the console");
    assert_eq!(Tab::refused(&app, &cookie, "/ws?watch=org").await, 403, "and a new one is judged on the new role");
    // Removal too: an operator's console in the org closes.
    let vikram = session_cookie(&app, "vikram.iyer@northstar.example").await;
    let mut tab = Tab::open(&app, &vikram).await;
    assert!(matches!(tab.next().await, domain::ring::RingMsg::Welcome { .. }));
    assert_eq!(call(&dana, &app, "remove_member", &[("user_id", "u-vikram")]).await.status(), StatusCode::OK);
    assert!(tab.closed_within(REVOKED_WITHIN).await);
});

// A sign-in that switches org stops speaking for the org it left: its
// sockets there close at once (they are judged on the pass, not on a
// database read per command), and another sign-in of the same person
// stays open.
both_backends!(s03_switching_org_closes_the_sign_ins_sockets_in_the_org_it_left, |app: TestApp| async move {
    let dana = browser();
    let signed_in = sign_in(&dana, &app, ADMIN).await;
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let mut console = Tab::open(&app, &cookie).await;
    assert!(matches!(console.next().await, domain::ring::RingMsg::Welcome { .. }));
    let mut watch = Tab::open_path(&app, &cookie, "/ws?watch=org").await;
    let elsewhere = session_cookie(&app, ADMIN).await;
    let mut other = Tab::open(&app, &elsewhere).await;
    assert!(matches!(other.next().await, domain::ring::RingMsg::Welcome { .. }));
    assert_eq!(call(&dana, &app, "select_org", &[("org_id", "org-harbor")]).await.status(), StatusCode::OK);
    assert!(console.closed_within(REVOKED_WITHIN).await, "the console kept acting in Northstar for a sign-in now in Harbor");
    assert!(watch.closed_within(REVOKED_WITHIN).await, "Northstar's events kept flowing to a sign-in now in Harbor");
    other.send(domain::ring::ConsoleMsg::Ping { nonce: 7 }).await;
    loop {
        match other.next().await {
            domain::ring::RingMsg::Pong { nonce } => break assert_eq!(nonce, 7),
            domain::ring::RingMsg::Error { .. } => panic!("the other sign-in's console was closed too"),
            _ => continue,
        }
    }
});

// ---- 4. No unauthenticated work of the attacker's size ---------------------

/// Declares 4 MB to the import endpoint with no sign-in: the answer comes
/// before a byte of the body is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s04_an_unauthenticated_import_is_refused_before_its_body_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::spawn(common::Db::Sqlite).await.unwrap();
    let head = |cookie: &str| {
        format!(
            "POST /api/preview_people_import HTTP/1.1\r\nhost: {}\r\norigin: {}\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 4000000\r\n{cookie}\r\n",
            app.base.trim_start_matches("http://"),
            app.base
        )
    };
    let answer = |request: String| {
        let addr = app.running().addr;
        async move {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(request.as_bytes()).await.unwrap();
            let mut buf = vec![0u8; 256];
            let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await.expect("answered without the body").unwrap();
            String::from_utf8_lossy(&buf[..n]).to_string()
        }
    };
    assert!(answer(head("")).await.starts_with("HTTP/1.1 413"), "signed out: refused unread");
    // An operator is no admin either.
    let operator = session_cookie(&app, OPERATOR).await;
    assert!(answer(head(&format!("cookie: {operator}\r\n"))).await.starts_with("HTTP/1.1 413"));
    // The org's admin may send a large CSV: nothing is answered until it comes.
    let admin = session_cookie(&app, ADMIN).await;
    let addr = app.running().addr;
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(head(&format!("cookie: {admin}\r\n")).as_bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    assert!(tokio::time::timeout(Duration::from_millis(500), tcp.read(&mut buf)).await.is_err(), "an admin's body is waited for");
}

/// Taking up invitation links is throttled like signing in, and a link
/// that does not exist is answered without hashing the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s04_invitation_guesses_are_throttled_like_sign_ins() {
    let app = TestApp::spawn(common::Db::Sqlite).await.unwrap();
    let guesser = browser_from([127, 0, 0, 41]);
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(accept(&guesser, &app, "no-such-link").await.status());
    }
    assert_eq!(statuses[0], StatusCode::NOT_FOUND);
    assert_eq!(statuses.last(), Some(&StatusCode::TOO_MANY_REQUESTS), "{statuses:?}");
    // Another address is not held back by it.
    assert_eq!(accept(&browser_from([127, 0, 0, 42]), &app, "no-such-link").await.status(), StatusCode::NOT_FOUND);
}

// ---- 5. CSV cells that start a formula --------------------------------------

both_backends!(s05_a_formula_in_a_name_is_exported_as_text_and_imports_as_it_was, |app: TestApp| async move {
    const FORMULA: &str = "=HYPERLINK(\"http://evil.example/?x\",\"open\")";
    let dana = dana(&app).await;
    let res = call(&dana, &app, "invite_person", &[("email", "mal@example.org"), ("display_name", FORMULA), ("role", "client")]).await;
    assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
    let csv = dana.get(app.url("/admin/directory/people.csv")).send().await.unwrap().text().await.unwrap();
    let row = csv.lines().find(|l| l.contains("mal@example.org")).unwrap();
    assert!(row.contains("'=HYPERLINK"), "neutralised: {row}");
    assert!(!csv.lines().any(|line| line.split(',').any(|cell| cell.trim_start_matches('"').starts_with('='))), "no cell starts a formula:\n{csv}");
    // The exported line imports as the same name (for an email not yet a member).
    let again = format!("{}\n{}\n", domain::people::CSV_HEADER.join(","), row.replace("mal@example.org", "mal2@example.org"));
    let preview: domain::people::ImportPreview = call(&dana, &app, "preview_people_import", &[("csv", &again)]).await.json().await.unwrap();
    assert_eq!(preview.problems, vec![]);
    assert_eq!(preview.people[0].display_name, FORMULA);
});

// ---- 6. Framing and script policy --------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s06_every_page_forbids_framing_and_limits_scripts() {
    let app = TestApp::spawn(common::Db::Sqlite).await.unwrap();
    let dana = dana(&app).await;
    for path in ["/signin", "/admin", "/admin/directory", "/no-such-page"] {
        let res = dana.get(app.url(path)).send().await.unwrap();
        let header = |name: &str| res.headers().get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        assert!(header("content-security-policy").contains("frame-ancestors 'none'"), "{path}");
        assert!(header("content-security-policy").contains("script-src 'self'"), "{path}");
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "same-origin", "{path}");
    }
}

// ---- 7. Read-then-write races on PostgreSQL ------------------------------------

both_backends!(s07_one_link_accepted_twice_at_once_joins_once, |app: TestApp| async move {
    let dana = dana(&app).await;
    for round in 0..5 {
        let link = invite_client(&dana, &app, &format!("twice{round}@example.org")).await;
        let token = token_of(&link);
        let (one, two) = (browser_from([127, 0, 1, 1]), browser_from([127, 0, 1, 2]));
        let (a, b) = tokio::join!(accept(&one, &app, &token), accept(&two, &app, &token));
        let joined = [a.status(), b.status()].iter().filter(|s| s.is_success() || s.is_redirection()).count();
        assert_eq!(joined, 1, "round {round}: {} and {}", a.status(), b.status());
    }
    assert_eq!(scalar(&app.database_url(), "SELECT COUNT(*) FROM audit_records WHERE action = 'member_joined'").await, 5);
});

both_backends!(s07_two_admins_demoting_each_other_at_once_leave_one_admin, |app: TestApp| async move {
    let dana = dana(&app).await;
    for round in 0..5 {
        assert_eq!(call(&dana, &app, "set_member_role", &[("user_id", "u-asha"), ("role", "admin")]).await.status(), StatusCode::OK);
        let asha = browser();
        assert_eq!(sign_in(&asha, &app, OPERATOR).await.status(), StatusCode::OK);
        let (x, y) = tokio::join!(
            call(&dana, &app, "set_member_role", &[("user_id", "u-asha"), ("role", "operator")]),
            call(&asha, &app, "set_member_role", &[("user_id", "u-dana"), ("role", "operator")]),
        );
        let admins = scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM memberships WHERE org_id = '{ORG}' AND role = 'admin'")).await;
        assert_eq!(admins, 1, "round {round}: {} and {}", x.status(), y.status());
        // Dana stays or becomes the admin for the next round.
        if scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM memberships WHERE org_id = '{ORG}' AND user_id = 'u-dana' AND role = 'admin'")).await == 0 {
            assert_eq!(call(&asha, &app, "set_member_role", &[("user_id", "u-dana"), ("role", "admin")]).await.status(), StatusCode::OK);
            assert_eq!(call(&asha, &app, "set_member_role", &[("user_id", "u-asha"), ("role", "operator")]).await.status(), StatusCode::OK);
        }
    }
});

// ---- 11. One org's admin renames nobody of another org --------------------------

both_backends!(s11_an_admin_cannot_rename_a_person_who_belongs_to_other_orgs, |app: TestApp| async move {
    let (_, harbor_admin) = other_org(&app, "Harbor Test").await;
    let link = invite_client(&harbor_admin, &app, OPERATOR).await;
    let asha = browser();
    assert_eq!(sign_in(&asha, &app, OPERATOR).await.status(), StatusCode::OK);
    let joined = call(&asha, &app, "accept_invitation", &[("token", &token_of(&link))]).await;
    assert!(joined.status().is_success() || joined.status().is_redirection(), "{}", joined.status());
    let renamed = call(&harbor_admin, &app, "edit_member", &[("user_id", "u-asha"), ("display_name", "Someone Else"), ("active", "on")]).await;
    assert_eq!(renamed.status(), StatusCode::CONFLICT);
    let name: i64 = scalar(&app.database_url(), "SELECT COUNT(*) FROM users WHERE id = 'u-asha' AND display_name = 'Asha Rao'").await;
    assert_eq!(name, 1, "Northstar still sees Asha Rao");
    // Her own org's admin may still edit what is the org's (and, as before, a one-org person's name).
    let kept = call(&dana(&app).await, &app, "edit_member", &[("user_id", "u-asha"), ("display_name", "Asha Rao"), ("external_id", "NS-0101"), ("region", "BLR"), ("certifications[0]", "pick-place · tier-2"), ("active", "on")]).await;
    assert_eq!(kept.status(), StatusCode::OK, "{}", kept.text().await.unwrap());
});

// ---- 14. No oracles ----------------------------------------------------------------

both_backends!(s14_an_expired_link_is_reissued_and_the_new_one_works, |app: TestApp| async move {
    let dana = dana(&app).await;
    let first = invite_client(&dana, &app, "late@example.org").await;
    // While the link is open, inviting again is refused (it is on the list).
    let again = call(&dana, &app, "invite_person", &[("email", "late@example.org"), ("display_name", "Pat Pending"), ("role", "client")]).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    common::execute(&app.database_url(), "UPDATE invitations SET expires_at = 1 WHERE email = 'late@example.org'").await;
    assert_eq!(accept(&browser(), &app, &token_of(&first)).await.status(), StatusCode::NOT_FOUND, "expired");
    let second = invite_client(&dana, &app, "late@example.org").await;
    let set = accept(&browser(), &app, &token_of(&second)).await;
    assert!(set.status().is_success() || set.status().is_redirection(), "{}", set.status());
    assert!(signs_in(&app, "late@example.org", PASSWORD).await);
});

// ---- 9. The relay cannot flood a link or the disk -------------------------------

fn robot_state(v: f32) -> tokio_tungstenite::tungstenite::Message {
    let state = domain::relay::RelayMsg::State { t_ms: 0, joints: vec![v; 6], fields: Default::default() };
    tokio_tungstenite::tungstenite::Message::Text(serde_json::to_string(&state).unwrap().into())
}

both_backends_with!(
    s09_frames_over_the_rate_cap_and_samples_past_the_recording_cap_are_held_back_and_counted,
    |config: &mut server::config::Config| config.relay = server::relay::RelayLimits { max_fps: 5, max_kib_per_s: 1024, recording_max_bytes: 400 },
    |app: TestApp| async move {
        use futures::SinkExt;
        let session = common::attach_asha(&app, "uk-pick-01").await;
        let mut watch = Tab::open_path(&app, &session_cookie(&app, ADMIN).await, "/ws?watch=org").await;
        let cookie = session_cookie(&app, OPERATOR).await;
        let mut cockpit = relay(&app, &session, None, Some(&cookie)).await.unwrap();
        let mut robot = relay(&app, &session, Some("uk-pick-01"), None).await.unwrap();
        // 40 frames at once: a one-second burst of 5 passes, the rest do not.
        for i in 0..40 {
            robot.send(robot_state(i as f32)).await.unwrap();
        }
        let mut states = 0;
        while let Ok(Some(Ok(message))) = tokio::time::timeout(Duration::from_millis(700), cockpit.next()).await {
            if let tokio_tungstenite::tungstenite::Message::Text(text) = message {
                states += usize::from(text.contains("\"state\""));
            }
        }
        assert!((1..=7).contains(&states), "{states} frames reached the cockpit");
        // The wallboard's relay panel hears what was held back.
        let deadline = std::time::Instant::now() + Duration::from_secs(8);
        loop {
            assert!(std::time::Instant::now() < deadline, "the counts never showed the held-back frames");
            if let domain::ring::RingMsg::Org { event: domain::events::OrgEvent::Relay { stats, .. } } = watch.next().await {
                if let Some(stat) = stats.iter().find(|s| s.session_id == session) {
                    if stat.robot_frames.over_rate >= 30 && stat.unrecorded > 0 {
                        assert!(domain::relay::overflow_note(stat).is_some_and(|note| note.contains("rate cap") && note.contains("recording cap")));
                        break;
                    }
                }
            }
        }
    }
);

// ---- 15. A page load cut off at any point never panics ---------------------------

/// Panics of the reactive graph (a disposed owner read) in this process.
static REACTIVE_PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn count_reactive_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload().downcast_ref::<String>().map(String::as_str).or_else(|| info.payload().downcast_ref::<&str>().copied()).unwrap_or("");
            let file = info.location().map(|l| l.file()).unwrap_or("");
            if message.contains("disposed") || file.contains("reactive_graph") || file.contains("leptos") || file.contains("tachys") {
                REACTIVE_PANICS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

/// Sends a page request and cuts the connection `after` into it (a reset).
async fn cut_off(addr: std::net::SocketAddr, path: &str, cookie: &str, after: Duration) {
    use tokio::io::AsyncWriteExt;
    let Ok(mut tcp) = tokio::net::TcpStream::connect(addr).await else { return };
    let request = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\ncookie: {cookie}\r\naccept: text/html\r\n\r\n");
    if tcp.write_all(request.as_bytes()).await.is_err() {
        return;
    }
    tokio::time::sleep(after).await;
    let _ = tcp.set_zero_linger();
    drop(tcp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s15_page_loads_cut_off_at_random_points_never_panic() {
    use rand::Rng;
    count_reactive_panics();
    let app = TestApp::spawn(common::Db::Sqlite).await.unwrap();
    let session = common::attach_asha(&app, "uk-pick-01").await;
    let (admin, operator) = (session_cookie(&app, ADMIN).await, session_cookie(&app, OPERATOR).await);
    let screens: Vec<(String, &str)> = [
        "/admin", "/admin/directory", "/admin/people", "/admin/floors", "/ops/wallboard", "/ops/roster", "/account", "/orgs", "/datasets", "/client",
    ]
    .into_iter()
    .map(|path| (path.to_string(), admin.as_str()))
    .chain([(format!("/ops/sessions?s={session}"), admin.as_str()), ("/operator".to_string(), operator.as_str()), (format!("/cockpit/{session}"), operator.as_str())])
    .collect();
    let before = REACTIVE_PANICS.load(std::sync::atomic::Ordering::SeqCst);
    // The runtime's tasks (the server runs on the test's own runtime); the
    // fewest seen between loads is the server's own, with no request in flight.
    let alive = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let mut idle = alive();
    for (path, cookie) in &screens {
        idle = idle.min(alive());
        // How long a whole load takes: the cuts fall anywhere in it.
        let started = std::time::Instant::now();
        let whole = browser().get(app.url(path)).header("cookie", *cookie).send().await.unwrap();
        assert!(whole.status().is_success(), "{path}: {}", whole.status());
        whole.bytes().await.unwrap();
        idle = idle.min(alive());
        let whole_ms = started.elapsed().as_millis().max(2) as u64;
        let cuts: Vec<_> = (0..24)
            .map(|_| {
                let after = Duration::from_micros(rand::thread_rng().gen_range(0..whole_ms * 1000));
                cut_off(app.running().addr, path, cookie, after)
            })
            .collect();
        futures::future::join_all(cuts).await;
    }
    // Each render runs to its end in a task of its own (its resources in
    // theirs): back to the idle count, every render has finished or panicked.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while alive() > idle {
        assert!(std::time::Instant::now() < deadline, "renders still running: {} tasks, {idle} when idle", alive());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(REACTIVE_PANICS.load(std::sync::atomic::Ordering::SeqCst) - before, 0, "a cut-off page load panicked");
    // And the server still serves whole pages.
    assert!(browser().get(app.url("/admin")).header("cookie", &admin).send().await.unwrap().status().is_success());
}

// ---- 7 and 13. Bookings: one window once, and a capped number per client ----------

const KOFI: &str = "kofi.mensah@leeds-logistics.example";

/// Books `robot` for `minutes` from the minute `from_ms` falls in.
async fn book(client: &reqwest::Client, app: &TestApp, robot: &str, from_ms: i64, minutes: i64, for_client: Option<&str>) -> reqwest::Response {
    let start = domain::booking::utc_when(from_ms).trim_end_matches(" UTC").replacen(' ', "T", 1);
    let minutes = minutes.to_string();
    let mut form = vec![("robot_id", robot), ("starts_at", start.as_str()), ("minutes", minutes.as_str())];
    if let Some(c) = for_client {
        form.push(("client_id", c));
    }
    call(client, app, "book_robot", &form).await
}

fn hours_ahead(hours: i64) -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    (now / 3_600_000 + hours) * 3_600_000
}

both_backends!(s07_one_window_booked_twice_at_once_is_taken_once, |app: TestApp| async move {
    let (kofi, admin) = (browser(), dana(&app).await);
    assert_eq!(sign_in(&kofi, &app, KOFI).await.status(), StatusCode::OK);
    // Two clients, so nothing but the robot's window is shared.
    assert_eq!(call(&admin, &app, "set_member_role", &[("user_id", "u-asha"), ("role", "client")]).await.status(), StatusCode::OK);
    for round in 0..5 {
        let at = hours_ahead(2 + round);
        let (a, b) = tokio::join!(book(&kofi, &app, "uk-pick-01", at, 30, None), book(&admin, &app, "uk-pick-01", at + 10 * 60_000, 30, Some("u-asha")));
        let taken = [a.status(), b.status()].iter().filter(|s| **s == StatusCode::OK).count();
        assert_eq!(taken, 1, "round {round}: {} and {}", a.status(), b.status());
    }
});

async fn planned_end(admin: &reqwest::Client, app: &TestApp, session: &str) -> i64 {
    let res = call(admin, app, "load_session", &[("session_id", session)]).await;
    res.json::<domain::models::SessionRecord>().await.unwrap().planned_end_at.expect("a planned end")
}

both_backends!(s07_a_booking_and_an_extension_made_at_once_never_overlap, |app: TestApp| async move {
    // A live session of uk-pick-01 (planned end: 30 minutes on) and a
    // client booking the robot from just after that end, while an admin
    // extends the session past it, at once. One of them may win; never both.
    let session = common::attach_asha(&app, "uk-pick-01").await;
    let (kofi, admin) = (browser(), dana(&app).await);
    assert_eq!(sign_in(&kofi, &app, KOFI).await.status(), StatusCode::OK);
    let mut both = Vec::new();
    for round in 0..8 {
        let end = planned_end(&admin, &app, &session).await;
        // The minute two minutes after the end; the extension reaches five past it.
        let start = (end / 60_000 + 2) * 60_000;
        let extension = [("session_id", session.as_str()), ("minutes", "5")];
        let (booked, extended) = tokio::join!(book(&kofi, &app, "uk-pick-01", start, 30, None), call(&admin, &app, "extend_session", &extension));
        let (booked_ok, extended_ok) = (booked.status() == StatusCode::OK, extended.status() == StatusCode::OK);
        if booked_ok && extended_ok {
            both.push(round);
        }
        // One wins, and the other is told why (409), not asked to retry.
        assert!(booked_ok || extended_ok, "round {round}: neither won ({} and {})", booked.status(), extended.status());
        for (ok, status) in [(booked_ok, booked.status()), (extended_ok, extended.status())] {
            assert!(ok || status == StatusCode::CONFLICT, "round {round}: the loser answered {status}");
        }
        // What the database holds agrees: no live booking inside the session's time.
        let now_end = planned_end(&admin, &app, &session).await;
        if booked_ok {
            assert!(now_end <= start, "round {round}: the session runs to {now_end}, into a booking from {start}");
            let booking: domain::booking::Booking = booked.json().await.unwrap();
            let cancelled = call(&kofi, &app, "cancel_booking", &[("booking_id", booking.id.as_str())]).await;
            assert_eq!(cancelled.status(), StatusCode::OK);
        }
    }
    assert!(both.is_empty(), "rounds where the booking and the extension both won: {both:?}");
});

both_backends_with!(
    s13_a_client_holds_at_most_the_configured_bookings_of_one_robot,
    |config: &mut server::config::Config| config.booking_caps = domain::booking::BookingCaps { per_robot: 2, per_month: 100 },
    |app: TestApp| async move {
        let kofi = browser();
        assert_eq!(sign_in(&kofi, &app, KOFI).await.status(), StatusCode::OK);
        assert_eq!(book(&kofi, &app, "uk-pick-01", hours_ahead(2), 30, None).await.status(), StatusCode::OK);
        assert_eq!(book(&kofi, &app, "uk-pick-01", hours_ahead(3), 30, None).await.status(), StatusCode::OK);
        let third = book(&kofi, &app, "uk-pick-01", hours_ahead(4), 30, None).await;
        assert_eq!(third.status(), StatusCode::CONFLICT);
        assert!(third.text().await.unwrap().contains("at most 2 upcoming bookings"));
        assert_eq!(book(&kofi, &app, "uk-insp-01", hours_ahead(4), 30, None).await.status(), StatusCode::OK, "another robot has its own cap");
    }
);

/// Chat posts have a quota per person, answered 429 with `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s13_chat_posts_past_the_quota_wait() {
    let app = TestApp::spawn(common::Db::Sqlite).await.unwrap();
    let session = common::attach_asha(&app, "uk-pick-01").await;
    let asha = browser();
    assert_eq!(sign_in(&asha, &app, OPERATOR).await.status(), StatusCode::OK);
    let mut statuses = Vec::new();
    for i in 0..32 {
        let res = call(&asha, &app, "post_chat", &[("session_id", session.as_str()), ("body", &format!("note {i}"))]).await;
        statuses.push((res.status(), res.headers().get("retry-after").is_some()));
    }
    assert!(statuses[..30].iter().all(|(s, _)| *s == StatusCode::OK), "{statuses:?}");
    assert_eq!(statuses[31], (StatusCode::TOO_MANY_REQUESTS, true));
}

// ---- 12. X-Forwarded-For only from trusted proxies ----------------------------------

async fn wrong_sign_in(app: &TestApp, forwarded_for: &str) -> StatusCode {
    let res = browser()
        .post(app.url("/api/sign_in"))
        .header("origin", &app.base)
        .header("x-forwarded-for", forwarded_for)
        .form(&[("email", "someone@example.org"), ("password", "wrong")])
        .send()
        .await
        .unwrap();
    res.status()
}

/// Behind a trusted proxy each client has its own sign-in budget; a
/// client talking to the server directly cannot pick its address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_sign_in_limits_follow_the_client_behind_a_trusted_proxy_only() {
    let behind = TestApp::spawn_with(common::Db::Sqlite, |c| c.trusted_proxies = server::http::client::parse_trusted("127.0.0.1/32").unwrap()).await.unwrap();
    for _ in 0..5 {
        assert_eq!(wrong_sign_in(&behind, "198.51.100.1").await, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(wrong_sign_in(&behind, "198.51.100.1").await, StatusCode::TOO_MANY_REQUESTS, "one client spent its budget");
    assert_eq!(wrong_sign_in(&behind, "198.51.100.2").await, StatusCode::UNAUTHORIZED, "another client behind the proxy is not locked out");

    let direct = TestApp::spawn(common::Db::Sqlite).await.unwrap();
    for i in 0..5 {
        assert_eq!(wrong_sign_in(&direct, &format!("198.51.100.{i}")).await, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(wrong_sign_in(&direct, "198.51.100.99").await, StatusCode::TOO_MANY_REQUESTS, "a forged header buys no new budget");
}
