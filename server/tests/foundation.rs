//! Foundation: storage on both databases, first-start seeding, sign-in,
//! roles and org isolation, over real HTTP against the real server.

mod common;

use common::{browser, call, sign_in, Db, TestApp, ADMIN, HARBOR_OPERATOR, OPERATOR};
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::Connection;

const TABLES: &[&str] = &[
    "orgs",
    "users",
    "memberships",
    "operator_profiles",
    "operator_certifications",
    "robots",
    "sessions",
    "offers",
    "activity_events",
    "audit_records",
    "chat_messages",
    "link_floors",
    "web_sessions",
];

async fn count(url: &str, table: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {table}");
    if url.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar(&sql).fetch_one(&mut conn).await.unwrap()
    } else {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_scalar(&sql).fetch_one(&mut conn).await.unwrap()
    }
}

both_backends!(migrations_create_every_table, |app: TestApp| async move {
    let url = app.database_url();
    for table in TABLES {
        // Panics if the table is missing.
        count(&url, table).await;
    }
    app.finish().await;
});

both_backends!(healthz_checks_the_database, |app: TestApp| async move {
    let res = reqwest::get(app.url("/healthz")).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    let expected = match app.db {
        common::Db::Sqlite => "sqlite",
        common::Db::Postgres => "postgres",
    };
    assert_eq!(body["database"], expected);
    app.finish().await;
});

both_backends!(first_start_seeds_the_demo_and_a_restart_does_not_reseed, |mut app: TestApp| async move {
    assert!(app.running().seeded_demo, "an empty database gets the demo org");
    let url = app.database_url();
    let robots = count(&url, "robots").await;
    let users = count(&url, "users").await;
    assert!(robots >= 12, "at least 12 demo robots, got {robots}");
    assert!(count(&url, "link_floors").await >= 3);

    let again = app.restart().await;
    assert!(!again.seeded_demo, "a database with data is never reseeded");
    assert_eq!(count(&url, "robots").await, robots);
    assert_eq!(count(&url, "users").await, users);
    app.finish().await;
});

both_backends!(sign_in_sets_an_httponly_cookie_and_lands_by_role, |app: TestApp| async move {
    let admin = browser();
    let res = sign_in(&admin, &app, ADMIN).await;
    assert_eq!(res.status(), StatusCode::OK);
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("cc_session="), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
    assert_eq!(common::landing(res).await, "/admin/directory");

    let operator = browser();
    let res = sign_in(&operator, &app, OPERATOR).await;
    assert_eq!(common::landing(res).await, "/operator");

    // The signed-in user knows their org and role.
    let me: Value = call(&operator, &app, "signed_in_user", &[]).await.json().await.unwrap();
    assert_eq!(me["email"], OPERATOR);
    assert_eq!(me["selected_org"]["org_id"], "org-northstar");
    assert_eq!(me["selected_org"]["role"], "operator");
    app.finish().await;
});

both_backends!(sign_in_follows_a_local_next_path_only, |app: TestApp| async move {
    let client = browser();
    let res = call(&client, &app, "sign_in", &[("email", ADMIN), ("password", "clutchcall-demo"), ("next", "/operator")]).await;
    assert_eq!(common::landing(res).await, "/operator");
    let client = browser();
    let res = call(&client, &app, "sign_in", &[("email", ADMIN), ("password", "clutchcall-demo"), ("next", "//evil.example/x")]).await;
    assert_eq!(common::landing(res).await, "/admin/directory", "no open redirect");
    // Browsers read a backslash as a slash: `/\evil.example` is another site.
    let client = browser();
    let res = call(&client, &app, "sign_in", &[("email", ADMIN), ("password", "clutchcall-demo"), ("next", "/\\evil.example")]).await;
    assert_eq!(common::landing(res).await, "/admin/directory", "backslash open redirect");
    app.finish().await;
});

both_backends!(a_plain_form_sign_in_is_sent_on_and_a_failed_one_back_to_its_form_with_the_error, |app: TestApp| async move {
    // Before the page's script has loaded, the sign-in form posts itself.
    let form_post = |client: &reqwest::Client, password: &str| {
        client
            .post(app.url("/api/sign_in"))
            .header("origin", &app.base)
            .header("accept", "text/html")
            .header("referer", app.url("/signin?next=/operator"))
            .form(&[("email", ADMIN), ("password", password), ("next", "/operator")])
            .send()
    };
    let client = browser();
    let failed = form_post(&client, "nope").await.unwrap();
    assert_eq!(failed.status(), StatusCode::FOUND, "back to the form, not the error's JSON");
    let back = failed.headers()["location"].to_str().unwrap();
    assert!(back.starts_with(&app.url("/signin?next=")) && back.contains("__err="), "{back}");
    assert!(failed.headers().get("set-cookie").is_none());

    let signed = form_post(&client, server::seed::DEMO_PASSWORD).await.unwrap();
    assert_eq!(signed.status(), StatusCode::FOUND);
    assert_eq!(signed.headers()["location"], "/operator");
    assert!(signed.headers()["set-cookie"].to_str().unwrap().starts_with("cc_session="));
    app.finish().await;
});

both_backends!(a_page_carries_who_is_signed_in_for_the_browser_to_read, |app: TestApp| async move {
    let signed_in_data = |page: &str| -> Value {
        let open = r#"<script id="signed-in-user" type="application/json">"#;
        let start = page.find(open).expect("the page carries its signed-in user") + open.len();
        serde_json::from_str(&page[start..start + page[start..].find("</script>").unwrap()]).unwrap()
    };
    let client = browser();
    let page = client.get(app.url("/signin")).header("accept", "text/html").send().await.unwrap().text().await.unwrap();
    assert_eq!(signed_in_data(&page), serde_json::json!({ "Ok": null }), "nobody yet");

    sign_in(&client, &app, ADMIN).await;
    let page = client.get(app.url("/admin/directory")).header("accept", "text/html").send().await.unwrap().text().await.unwrap();
    let user = signed_in_data(&page);
    assert_eq!(user["Ok"]["email"], ADMIN);
    assert_eq!(user["Ok"]["selected_org"]["role"], "admin");
    app.finish().await;
});

both_backends!(oversize_sign_in_emails_are_refused_before_any_password_check, |app: TestApp| async move {
    let client = browser();
    let huge = "a".repeat(1_500_000) + "@example.test";
    let sent = client.post(app.url("/api/sign_in")).header("origin", &app.base).form(&[("email", huge.as_str()), ("password", "x")]).send().await;
    // The server answers 413 without reading the body; it may close the
    // connection while the client is still sending, which the client sees
    // as a reset. Either way nothing was read or checked.
    match sent {
        Ok(res) => assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE, "a 1.5 MB body is not read"),
        Err(e) => assert!(e.is_request(), "refused while sending: {e}"),
    }
    assert_eq!(common::http().get(app.url("/healthz")).send().await.unwrap().status(), StatusCode::OK);
    let long = "a".repeat(300) + "@example.test";
    let res = call(&browser(), &app, "sign_in", &[("email", long.as_str()), ("password", "x")]).await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY, "an email over 254 characters");
    app.finish().await;
});

both_backends!(wrong_password_and_unknown_email_get_the_same_answer, |app: TestApp| async move {
    let client = browser();
    let wrong = call(&client, &app, "sign_in", &[("email", ADMIN), ("password", "nope")]).await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.headers().get("set-cookie").is_none());
    let wrong: Value = wrong.json().await.unwrap();
    let unknown: Value = call(&client, &app, "sign_in", &[("email", "nobody@nowhere.example"), ("password", "nope")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(wrong, unknown, "no hint whether the email exists");
    assert_eq!(wrong, serde_json::json!("BadCredentials"));

    let empty = call(&client, &app, "sign_in", &[("email", " "), ("password", "")]).await;
    assert_eq!(empty.status(), StatusCode::UNPROCESSABLE_ENTITY);
    app.finish().await;
});

both_backends!(repeated_guesses_for_one_email_from_one_address_wait, |app: TestApp| async move {
    let client = browser();
    for _ in 0..server::services::throttle::PAIR_BURST {
        let res = call(&client, &app, "sign_in", &[("email", OPERATOR), ("password", "guess")]).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    // Spent: even the right password waits, from this address.
    let res = sign_in(&client, &app, OPERATOR).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    let body: Value = res.json().await.unwrap();
    let wait = body["TooManyAttempts"].as_u64().expect("wait seconds");
    assert!((1..=12).contains(&wait) && retry_after == wait, "{wait} {retry_after}");
    // Other people are not limited by it, nor is the person from elsewhere.
    assert_eq!(sign_in(&browser(), &app, ADMIN).await.status(), StatusCode::OK);
    assert_eq!(sign_in(&common::browser_from([127, 0, 0, 2]), &app, OPERATOR).await.status(), StatusCode::OK);
    app.finish().await;
});

both_backends!(the_sign_in_page_sends_someone_signed_in_to_their_landing_screen, |app: TestApp| async move {
    let client = browser();
    let page = client.get(app.url("/signin")).header("accept", "text/html").send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK, "signed out: the form");
    sign_in(&client, &app, ADMIN).await;
    let page = client.get(app.url("/signin?next=/operator")).header("accept", "text/html").send().await.unwrap();
    assert!(page.status().is_redirection(), "signed in: {}", page.status());
    assert_eq!(page.headers()["location"], "/admin/directory", "the admin's landing screen");
    let operator = browser();
    sign_in(&operator, &app, OPERATOR).await;
    let page = operator.get(app.url("/signin")).header("accept", "text/html").send().await.unwrap();
    assert_eq!(page.headers()["location"], "/operator");
    app.finish().await;
});

both_backends!(signed_out_callers_are_refused_and_sign_out_ends_the_session, |app: TestApp| async move {
    let client = browser();
    let res = call(&client, &app, "load_directory", &[]).await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);

    sign_in(&client, &app, ADMIN).await;
    assert_eq!(call(&client, &app, "load_directory", &[]).await.status(), StatusCode::OK);
    let res = call(&client, &app, "sign_out", &[]).await;
    assert!(res.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(call(&client, &app, "load_directory", &[]).await.status(), StatusCode::UNAUTHORIZED);
    let me: Value = call(&client, &app, "signed_in_user", &[]).await.json().await.unwrap();
    assert_eq!(me, Value::Null);

    // A page that needs a sign-in redirects there, remembering where to return.
    let page = client.get(app.url("/admin/directory")).header("accept", "text/html").send().await.unwrap();
    assert_eq!(page.status(), StatusCode::FOUND);
    assert_eq!(page.headers()["location"], "/signin?next=/admin/directory");
    app.finish().await;
});

both_backends!(operators_cannot_use_admin_functions_or_screens, |app: TestApp| async move {
    let operator = browser();
    sign_in(&operator, &app, OPERATOR).await;
    let res = call(&operator, &app, "load_directory", &[]).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = call(&operator, &app, "load_robot", &[("robot_id", "ue-pick-01")]).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let page = operator.get(app.url("/admin/directory")).header("accept", "text/html").send().await.unwrap();
    assert_eq!(page.status(), StatusCode::FORBIDDEN);
    assert!(page.text().await.unwrap().contains("This screen is for admins"));

    // Their own screen works.
    let profile: Value = call(&operator, &app, "my_operator_profile", &[]).await.json().await.unwrap();
    assert_eq!(profile["region"], "BLR");
    assert_eq!(profile["skills"], serde_json::json!(["palletize", "pick-place"]));

    // An admin may also operate.
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    assert_eq!(call(&admin, &app, "my_operator_profile", &[]).await.status(), StatusCode::OK);
    app.finish().await;
});

both_backends!(another_orgs_ids_answer_404, |app: TestApp| async move {
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    // Northstar selected: Harbor's robot does not exist here.
    let res = call(&admin, &app, "load_robot", &[("robot_id", "hb-pick-01")]).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let ok: Value = call(&admin, &app, "load_robot", &[("robot_id", "ue-pick-01")]).await.json().await.unwrap();
    assert_eq!(ok["skill"], "pick-place");
    assert_eq!(ok["pop"], "us-east");
    let dir: Value = call(&admin, &app, "load_directory", &[]).await.json().await.unwrap();
    let ids: Vec<&str> = dir["robots"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"ue-pick-01") && !ids.iter().any(|id| id.starts_with("hb-")), "{ids:?}");
    assert!(dir["operators"].as_array().unwrap().iter().all(|o| o["email"] != HARBOR_OPERATOR));

    // Switching org flips what exists.
    let res = call(&admin, &app, "select_org", &[("org_id", "org-harbor")]).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(call(&admin, &app, "load_robot", &[("robot_id", "hb-pick-01")]).await.status(), StatusCode::OK);
    assert_eq!(call(&admin, &app, "load_robot", &[("robot_id", "ue-pick-01")]).await.status(), StatusCode::NOT_FOUND);

    // An org you do not belong to cannot be selected, and looks absent.
    let operator = browser();
    sign_in(&operator, &app, OPERATOR).await;
    let res = call(&operator, &app, "select_org", &[("org_id", "org-harbor")]).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    app.finish().await;
});

both_backends!(a_sign_in_flood_is_checked_on_bounded_threads_and_answered_quickly, |app: TestApp| async move {
    // 96 wrong sign-ins at once (distinct emails): each is refused (401),
    // told to retry (503) when the password threads are full, or (429) when
    // the address has used its attempts; none fails otherwise, and the
    // server still signs in the right person (from another address) after.
    let client = common::browser();
    let flood: Vec<_> = (0..96)
        .map(|i| {
            let (client, url, origin) = (client.clone(), app.url("/api/sign_in"), app.base.clone());
            tokio::spawn(async move {
                let email = format!("nobody-{i}@example.test");
                client.post(url).header("origin", origin).form(&[("email", email.as_str()), ("password", "guess")]).send().await.unwrap().status().as_u16()
            })
        })
        .collect();
    for answer in flood {
        let status = answer.await.unwrap();
        assert!(matches!(status, 401 | 429 | 503), "a flooded sign-in answered {status}");
    }
    let res = common::sign_in(&common::browser_from([127, 0, 0, 2]), &app, common::OPERATOR).await;
    assert_eq!(res.status(), 200);
    app.finish().await;
});

/// The rare hang of the foundation suite: a page whose resource was first
/// polled while another server in the process generated its route list
/// waited forever. Route lists are generated in a tight loop here (as every
/// server start did) while an admin loads a page with a resource, whole
/// bodies read with a deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_answer_while_other_servers_start_in_the_same_process() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let app = TestApp::spawn(common::Db::Sqlite).await.expect("sqlite");
    let admin = browser();
    sign_in(&admin, &app, ADMIN).await;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let starts = {
        let (stop, runtime) = (stop.clone(), tokio::runtime::Handle::current());
        std::thread::spawn(move || {
            let _in_runtime = runtime.enter(); // as inside `server::start`
            while !stop.load(Ordering::Relaxed) {
                let _ = server::http::route_list();
            }
        })
    };
    for i in 0..200 {
        let page = async {
            let res = admin.get(app.url("/admin/directory")).header("accept", "text/html").send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            res.text().await.unwrap()
        };
        let body = tokio::time::timeout(std::time::Duration::from_secs(10), page).await;
        assert!(body.is_ok(), "page load {i} never finished");
    }
    stop.store(true, Ordering::Relaxed);
    starts.join().unwrap();
    app.finish().await;
}

// The site's files (the wasm, its lazily loaded chunks, JS, CSS) are served
// as files: a browser revalidating a cached chunk gets 304 (it got the app's
// not-found page, the chunk failed to load and the page never hydrated), a
// browser that accepts brotli gets the precompressed copy, and a missing
// file is a plain 404. Static files do not touch the database: SQLite only.
#[tokio::test]
async fn site_files_revalidate_and_come_precompressed() {
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("pkg")).unwrap();
    std::fs::write(site.path().join("pkg/chunk_1.wasm"), b"\0asm a chunk").unwrap();
    std::fs::write(site.path().join("pkg/chunk_1.wasm.br"), b"brotli bytes").unwrap();
    let root = site.path().to_path_buf();
    let app = TestApp::spawn_with(Db::Sqlite, move |config| config.site_root = root).await.unwrap();
    let client = reqwest::Client::new();
    let url = app.url("/pkg/chunk_1.wasm");

    let first = client.get(&url).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let modified = first.headers()["last-modified"].clone();
    assert_eq!(first.bytes().await.unwrap().as_ref(), b"\0asm a chunk");

    let again = client.get(&url).header("if-modified-since", modified).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "a revalidation is not a missing file");

    let brotli = client.get(&url).header("accept-encoding", "br, gzip").send().await.unwrap();
    assert_eq!(brotli.headers()["content-encoding"], "br");
    assert_eq!(brotli.bytes().await.unwrap().as_ref(), b"brotli bytes");

    let missing = client.get(app.url("/pkg/chunk_2.wasm")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}
