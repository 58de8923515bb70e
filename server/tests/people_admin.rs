//! Directory administration of people and link floors, through the
//! admin's server functions: invitations (one-time links, no account
//! enumeration), roles and the last-admin guard, profiles taking effect on
//! the next dispatch decision (rule A08), CSV import (preview with line
//! numbers, all or nothing) and export, per-org floors (rules D02, W16),
//! and robot registration from the browser. Both databases.

mod common;

use domain::people::{ImportPreview, ImportResult, InviteLink, PeopleAdmin};
use domain::ring::{ConsoleMsg, RingError, RingMsg};
use common::{browser, call, scalar, sign_in, Tab, TestApp, ADMIN, HARBOR_OPERATOR, OPERATOR};
use reqwest::StatusCode;

const ORG: &str = "org-northstar";
const PASSWORD: &str = "a long new password";

async fn audits(app: &TestApp, action: &str) -> i64 {
    scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM audit_records WHERE action = '{action}'")).await
}

async fn admin(app: &TestApp) -> reqwest::Client {
    let admin = browser();
    assert_eq!(sign_in(&admin, app, ADMIN).await.status(), StatusCode::OK);
    admin
}

async fn invite(admin: &reqwest::Client, app: &TestApp, email: &str, role: &str, certs: &[&str]) -> reqwest::Response {
    let mut form = vec![("email", email.to_string()), ("display_name", "Nia Clarke".to_string()), ("external_id", "NS-0909".into()), ("region", "Manchester".into()), ("role", role.into())];
    for (i, cert) in certs.iter().enumerate() {
        form.push((["certifications[0]", "certifications[1]", "certifications[2]"][i], cert.to_string()));
    }
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    call(admin, app, "invite_person", &form).await
}

fn token_of(link: &InviteLink) -> String {
    link.url.rsplit('/').next().unwrap().to_string()
}

/// Signs in with a password; the `cc_session=…` pair, or the status.
async fn cookie_for(app: &TestApp, email: &str, password: &str) -> Result<String, StatusCode> {
    let res = call(&browser(), app, "sign_in", &[("email", email), ("password", password)]).await;
    match res.headers().get("set-cookie") {
        Some(cookie) if res.status().is_success() || res.status().is_redirection() => Ok(cookie.to_str().unwrap().split(';').next().unwrap().to_string()),
        _ => Err(res.status()),
    }
}

async fn people(admin: &reqwest::Client, app: &TestApp) -> PeopleAdmin {
    let res = call(admin, app, "load_people", &[]).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

both_backends!(an_invited_operator_sets_a_password_signs_in_and_is_rung_by_a_robot_registered_in_the_browser, |app: TestApp| async move {
    let admin = admin(&app).await;
    let res = invite(&admin, &app, "Nia.Clarke@Northstar.example", "operator", &["welding · tier-3"]).await;
    assert_eq!(res.status(), StatusCode::OK);
    let link: InviteLink = res.json().await.unwrap();
    assert_eq!(link.email, "nia.clarke@northstar.example");
    assert!(link.url.starts_with("http") && link.url.contains("/invite/"), "{}", link.url);
    assert_eq!(audits(&app, "member_invited").await, 1);
    // Before the link is used there is no password: no sign-in.
    assert!(cookie_for(&app, "nia.clarke@northstar.example", "").await.is_err());
    let roster = people(&admin, &app).await;
    let nia = roster.members.iter().find(|m| m.person.email == "nia.clarke@northstar.example").unwrap();
    assert!(!nia.has_password && nia.active);
    assert_eq!(roster.invitations.len(), 1);
    // Inviting a member again is refused; the link works once.
    assert_eq!(invite(&admin, &app, "nia.clarke@northstar.example", "operator", &[]).await.status(), StatusCode::CONFLICT);
    let token = token_of(&link);
    let stranger = browser();
    let short = call(&stranger, &app, "accept_invitation", &[("token", &token), ("password", "short"), ("confirm", "short")]).await;
    assert_eq!(short.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let set = call(&stranger, &app, "accept_invitation", &[("token", &token), ("password", PASSWORD), ("confirm", PASSWORD)]).await;
    assert!(set.status().is_success() || set.status().is_redirection(), "{}", set.status());
    let again = call(&browser(), &app, "accept_invitation", &[("token", &token), ("password", PASSWORD), ("confirm", PASSWORD)]).await;
    assert_eq!(again.status(), StatusCode::NOT_FOUND, "one time only");
    let cookie = cookie_for(&app, "nia.clarke@northstar.example", PASSWORD).await.expect("signs in with the new password");

    // A robot registered from the directory page, with the skill she holds.
    let registered = call(&admin, &app, "register_robot", &[("robot_id", "ue-weld-09"), ("model", "KUKA KR 10"), ("site", "Ashburn FC-2"), ("pop", "us-east"), ("req_cert", "welding · tier-3")]).await;
    assert_eq!(registered.status(), StatusCode::OK);
    let robot: domain::people::RegisteredRobot = registered.json().await.unwrap();
    assert_eq!(robot.skill, "welding");
    assert_eq!(audits(&app, "robot_registered").await, 1);
    let bad = call(&admin, &app, "register_robot", &[("robot_id", "ue-weld-10"), ("model", "X"), ("site", "Y"), ("pop", "us-east"), ("req_cert", "  ")]).await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY, "a reqCert naming no skill");
    let taken = call(&admin, &app, "register_robot", &[("robot_id", "ue-weld-09"), ("model", "X"), ("site", "Y"), ("pop", "us-east"), ("req_cert", "welding")]).await;
    assert_eq!(taken.status(), StatusCode::CONFLICT);

    // She presses Ready; the new robot's call rings her.
    let mut tab = Tab::open(&app, &cookie).await;
    tab.send(ConsoleMsg::Ready).await;
    tab.until(|m| matches!(m, RingMsg::Presence { presence } if presence.state == domain::models::PresenceState::Ready).then_some(())).await;
    let raised = common::http().post(app.url("/v1/sessions")).bearer_auth(&robot.token).json(&serde_json::json!({ "robotId": "ue-weld-09" })).send().await.unwrap();
    assert_eq!(raised.status(), StatusCode::CREATED);
    let offer = tab.until(|m| match m { RingMsg::Offer { offer } => Some(offer), _ => None }).await;
    assert_eq!(offer.robot_id, "ue-weld-09");
    app.finish().await;
});

both_backends!(an_existing_account_joins_by_opening_the_link_signed_in_and_the_answer_does_not_enumerate, |app: TestApp| async move {
    let admin = admin(&app).await;
    // Lena has an account (in Harbor); a brand-new email: the same answer.
    let known = invite(&admin, &app, HARBOR_OPERATOR, "operator", &["pick-place · tier-1"]).await;
    let fresh = invite(&admin, &app, "someone.new@example.org", "operator", &[]).await;
    assert_eq!((known.status(), fresh.status()), (StatusCode::OK, StatusCode::OK));
    let known: InviteLink = known.json().await.unwrap();
    let fresh: serde_json::Value = fresh.json().await.unwrap();
    let mut keys_known: Vec<String> = serde_json::to_value(&known).unwrap().as_object().unwrap().keys().cloned().collect();
    let mut keys_fresh: Vec<String> = fresh.as_object().unwrap().keys().cloned().collect();
    keys_known.sort();
    keys_fresh.sort();
    assert_eq!(keys_known, keys_fresh);
    // Not a member until she opens it signed in; a password cannot be set over hers.
    assert!(!people(&admin, &app).await.members.iter().any(|m| m.person.email == HARBOR_OPERATOR));
    let token = token_of(&known);
    let anonymous = call(&browser(), &app, "accept_invitation", &[("token", &token), ("password", PASSWORD), ("confirm", PASSWORD)]).await;
    assert_eq!(anonymous.status(), StatusCode::CONFLICT);
    let other = browser();
    sign_in(&other, &app, OPERATOR).await;
    assert_eq!(call(&other, &app, "accept_invitation", &[("token", &token)]).await.status(), StatusCode::CONFLICT, "another account");
    let lena = browser();
    sign_in(&lena, &app, HARBOR_OPERATOR).await;
    let view: domain::people::InvitationView = call(&lena, &app, "load_invitation", &[("token", &token)]).await.json().await.unwrap();
    assert_eq!(view.state, domain::people::InvitationState::Join);
    let joined = call(&lena, &app, "accept_invitation", &[("token", &token)]).await;
    assert!(joined.status().is_success() || joined.status().is_redirection(), "{}", joined.status());
    assert!(people(&admin, &app).await.members.iter().any(|m| m.person.email == HARBOR_OPERATOR));
    assert_eq!(scalar(&app.database_url(), "SELECT COUNT(*) FROM memberships WHERE user_id = 'u-lena'").await, 2, "both orgs");
    assert_eq!(audits(&app, "member_joined").await, 1);
    app.finish().await;
});

both_backends!(the_last_admin_stays_and_a_removed_operator_loses_access_at_once, |app: TestApp| async move {
    let admin = admin(&app).await;
    assert_eq!(call(&admin, &app, "set_member_role", &[("user_id", "u-dana"), ("role", "operator")]).await.status(), StatusCode::CONFLICT);
    assert_eq!(call(&admin, &app, "remove_member", &[("user_id", "u-dana")]).await.status(), StatusCode::CONFLICT);
    assert_eq!(call(&admin, &app, "set_member_role", &[("user_id", "u-dana"), ("role", "pilot")]).await.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(call(&admin, &app, "remove_member", &[("user_id", "u-lena")]).await.status(), StatusCode::NOT_FOUND, "another org's member");
    // Promote Tom, then Dana may step down.
    assert_eq!(call(&admin, &app, "set_member_role", &[("user_id", "u-tom"), ("role", "admin")]).await.status(), StatusCode::OK);
    assert_eq!(audits(&app, "member_role_changed").await, 1);
    // Asha's console closes when she is removed, and her sign-in no longer reaches the org.
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    let mut tab = Tab::open(&app, &common::session_cookie(&app, OPERATOR).await).await;
    tab.send(ConsoleMsg::Ready).await;
    assert_eq!(call(&admin, &app, "remove_member", &[("user_id", "u-asha")]).await.status(), StatusCode::OK);
    assert!(tab.closed_within(std::time::Duration::from_secs(5)).await, "the console closes");
    let me: Option<domain::models::CurrentUser> = call(&asha, &app, "signed_in_user", &[]).await.json().await.unwrap();
    assert!(me.is_some_and(|me| me.selected_org.is_none() && me.memberships.is_empty()), "no longer in the org");
    // Never offered again: a pick-place call goes to someone else.
    app.engine().operator_ready(ORG, "u-tom", true).await.unwrap();
    let (_, body) = app.raise("uk-pick-01").await;
    assert_ne!(body["operator"]["id"], "u-asha", "{body}");
    assert_eq!(audits(&app, "member_removed").await, 1);
    app.finish().await;
});

both_backends!(a08_changed_certifications_and_inactivity_apply_to_the_next_decision_without_a_restart, |app: TestApp| async move {
    let admin = admin(&app).await;
    let edit = |certs: Vec<&'static str>, active: bool| {
        let (admin, app) = (admin.clone(), &app);
        async move {
            let mut form = vec![("user_id", "u-asha".to_string()), ("display_name", "Asha Rao".into()), ("external_id", "NS-0101".into()), ("region", "BLR".into())];
            for (i, cert) in certs.iter().enumerate() {
                form.push((["certifications[0]", "certifications[1]", "certifications[2]"][i], cert.to_string()));
            }
            if active {
                form.push(("active", "on".into()));
            }
            let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            call(&admin, app, "edit_member", &form).await
        }
    };
    assert_eq!(edit(vec!["  "], true).await.status(), StatusCode::OK, "blank certifications are dropped");
    assert_eq!(edit(vec!["welding"], true).await.status(), StatusCode::OK);
    let mut bad = edit(vec!["welding"], true).await;
    assert_eq!(bad.status(), StatusCode::OK);
    bad = call(&admin, &app, "edit_member", &[("user_id", "u-asha"), ("display_name", "Asha Rao"), ("region", "Mars")]).await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY, "a region the org does not have");
    // Only Asha holds welding now and she is ready: a welding call is hers.
    app.engine().operator_ready(ORG, "u-asha", true).await.unwrap();
    let (status, body) = app.raise("uw-weld-01").await;
    assert_eq!((status, body["operator"]["id"].as_str()), (StatusCode::CREATED, Some("u-asha")), "{body}");
    app.engine().decline(ORG, "u-asha", body["sessionId"].as_str().unwrap()).await.unwrap();
    // Inactive: Ready is refused.
    assert_eq!(edit(vec!["welding"], false).await.status(), StatusCode::OK);
    assert!(matches!(app.engine().operator_ready(ORG, "u-asha", true).await, Err(server::engine::EngineError::Inactive)));
    let cookie = common::session_cookie(&app, OPERATOR).await;
    let mut tab = Tab::open(&app, &cookie).await;
    tab.send(ConsoleMsg::Ready).await;
    let code = tab.until(|m| match m { RingMsg::Error { code, .. } => Some(code), _ => None }).await;
    assert_eq!(code, RingError::InactiveProfile);
    assert!(audits(&app, "member_edited").await >= 3);
    app.finish().await;
});

const CSV_HEADER: &str = "email,display name,external id,region,certifications,role\n";

both_backends!(a_csv_import_is_previewed_by_line_and_lands_whole_or_not_at_all, |app: TestApp| async move {
    let admin = admin(&app).await;
    let members_before = scalar(&app.database_url(), "SELECT COUNT(*) FROM memberships").await;
    let bad = format!(
        "{CSV_HEADER}ana@x.io,Ana,AG-1,BLR,pick-place · tier-2;welding,operator\n\
         bo@x.io,Bo,,Mars,,operator\n\
         {OPERATOR},Asha again,,BLR,,operator\n\
         cy@x.io,Cy,,,,client\n"
    );
    let preview: ImportPreview = call(&admin, &app, "preview_people_import", &[("csv", &bad)]).await.json().await.unwrap();
    let lines: Vec<usize> = preview.problems.iter().map(|p| p.line).collect();
    assert_eq!(lines, vec![3, 4], "{:?}", preview.problems);
    assert_eq!(preview.people.len(), 2);
    let refused = call(&admin, &app, "import_people", &[("csv", &bad)]).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(scalar(&app.database_url(), "SELECT COUNT(*) FROM memberships").await, members_before, "nothing written");
    let header_only = call(&admin, &app, "import_people", &[("csv", CSV_HEADER)]).await;
    assert_eq!(header_only.status(), StatusCode::UNPROCESSABLE_ENTITY);

    let good = format!("{CSV_HEADER}ana@x.io,Ana,AG-1,BLR,pick-place · tier-2;welding,operator\n\"Cy, Ltd\"@x.io,Cy,,,,client\ncy@x.io,\"Cy, Ltd\",,,,client\n");
    let preview: ImportPreview = call(&admin, &app, "preview_people_import", &[("csv", &good)]).await.json().await.unwrap();
    assert_eq!(preview.problems.len(), 1, "a quoted comma is not an email: {:?}", preview.problems);
    let good = format!("{CSV_HEADER}ana@x.io,Ana,AG-1,BLR,pick-place · tier-2;welding,operator\ncy@x.io,\"Cy, Ltd\",,,,client\n");
    let imported = call(&admin, &app, "import_people", &[("csv", &good)]).await;
    assert_eq!(imported.status(), StatusCode::OK);
    let result: ImportResult = imported.json().await.unwrap();
    assert_eq!(result.imported, 2);
    assert_eq!(result.links_csv.lines().count(), 3, "a header and a link per person: {}", result.links_csv);
    assert!(result.links_csv.contains("/invite/"));
    assert_eq!(scalar(&app.database_url(), "SELECT COUNT(*) FROM memberships").await, members_before + 2);
    assert_eq!(scalar(&app.database_url(), "SELECT COUNT(*) FROM users WHERE email = 'ana@x.io' AND password_hash = ''").await, 1, "no password until set");
    assert_eq!(audits(&app, "people_imported").await, 1);

    // The export is the same format, and imports cleanly elsewhere.
    let export = admin.get(app.url("/admin/directory/people.csv")).send().await.unwrap();
    assert_eq!(export.status(), StatusCode::OK);
    assert!(export.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let text = export.text().await.unwrap();
    assert!(text.starts_with("email,display name,external id,region,certifications,role"), "{text}");
    assert!(text.contains("ana@x.io,Ana,AG-1,BLR,pick-place · tier-2;welding,operator"), "{text}");
    assert!(text.contains("cy@x.io,\"Cy, Ltd\",,,,client"), "{text}");
    let asha = browser();
    sign_in(&asha, &app, OPERATOR).await;
    assert_eq!(asha.get(app.url("/admin/directory/people.csv")).send().await.unwrap().status(), StatusCode::FORBIDDEN);
    app.finish().await;
});

both_backends!(w16_an_admin_edits_the_orgs_link_floors_and_the_next_decision_uses_them, |app: TestApp| async move {
    let admin = admin(&app).await;
    let before = people(&admin, &app).await.floors;
    assert_eq!(before.len(), 9, "the seed's defaults");
    // Manchester reaches uk-london at 177 ms, BLR at 162: Tom (Manchester) and
    // Asha (BLR) both hold pick-place · tier-2; unmeasured, BLR's floor wins.
    for who in ["u-tom", "u-asha"] {
        app.engine().operator_ready(ORG, who, true).await.unwrap();
    }
    let (_, first) = app.raise("uk-pick-01").await;
    assert_eq!(first["operator"]["id"], "u-asha", "{first}");
    let withdraw = app.robot(reqwest::Method::DELETE, "uk-pick-01", &format!("/v1/sessions/{}", first["sessionId"].as_str().unwrap()));
    assert!(withdraw.send().await.unwrap().status().is_success());
    // BLR → uk-london becomes 400 ms: Tom is nearer now (rule D02).
    let set = call(&admin, &app, "set_link_floor", &[("region", "BLR"), ("pop", "uk-london"), ("floor_ms", "400"), ("note", "subsea cut")]).await;
    assert_eq!(set.status(), StatusCode::OK);
    assert_eq!(call(&admin, &app, "set_link_floor", &[("region", "BLR"), ("pop", "uk-london"), ("floor_ms", "fast")]).await.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let floors = people(&admin, &app).await.floors;
    assert!(floors.iter().any(|f| f.region == "BLR" && f.pop == "uk-london" && f.floor_ms == 400 && f.note.as_deref() == Some("subsea cut")));
    for who in ["u-tom", "u-asha"] {
        app.engine().operator_ready(ORG, who, true).await.unwrap();
    }
    let (_, second) = app.raise("uk-pick-01").await;
    assert_eq!(second["operator"]["id"], "u-tom", "{second}");
    let audit = scalar(&app.database_url(), "SELECT COUNT(*) FROM audit_records WHERE action = 'link_floor_set' AND detail LIKE '%162 ms → 400 ms%'").await;
    assert_eq!(audit, 1, "before → after");
    // Another org keeps its own table.
    assert_eq!(scalar(&app.database_url(), "SELECT floor_ms FROM org_link_floors WHERE org_id = 'org-harbor' AND region = 'BLR' AND pop = 'uk-london'").await, 162);
    assert_eq!(call(&admin, &app, "remove_link_floor", &[("region", "BLR"), ("pop", "nowhere")]).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(call(&admin, &app, "remove_link_floor", &[("region", "Austin"), ("pop", "uk-london")]).await.status(), StatusCode::OK);
    assert_eq!(people(&admin, &app).await.floors.len(), 8);
    app.finish().await;
});

both_backends!(w16_removing_the_last_two_paths_at_once_leaves_one, |app: TestApp| async move {
    let admin = browser();
    assert_eq!(sign_in(&admin, &app, ADMIN).await.status(), StatusCode::OK);
    let mut floors = people(&admin, &app).await.floors;
    while floors.len() > 2 {
        let f = floors.pop().unwrap();
        let res = call(&admin, &app, "remove_link_floor", &[("region", f.region.as_str()), ("pop", f.pop.as_str())]).await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    for round in 0..6 {
        let floors = people(&admin, &app).await.floors;
        let (a, b) = (&floors[0], &floors[1]);
        // Two removals at once, each of a different path: one is refused.
        let (path_a, path_b) = ([("region", a.region.as_str()), ("pop", a.pop.as_str())], [("region", b.region.as_str()), ("pop", b.pop.as_str())]);
        let (first, second) = tokio::join!(call(&admin, &app, "remove_link_floor", &path_a), call(&admin, &app, "remove_link_floor", &path_b));
        let mut statuses = [first.status(), second.status()];
        statuses.sort();
        assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT], "round {round}");
        assert_eq!(people(&admin, &app).await.floors.len(), 1, "round {round}: an org keeps one path");
        // A second path again for the next round.
        let pop = format!("pop-{round}");
        let added = call(&admin, &app, "set_link_floor", &[("region", "BLR"), ("pop", pop.as_str()), ("floor_ms", "40")]).await;
        assert_eq!(added.status(), StatusCode::OK);
    }
    app.finish().await;
});
