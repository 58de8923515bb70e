//! The teleop relay, recording and datasets over real sockets: frames pass
//! both ways between the edge agent and the cockpit; the relay's counts
//! reach the org's watch sockets and tell a stalled session (rule W15);
//! nobody outside the session joins; recording covers ACTIVE time only
//! (L12); COMPLETED makes an episode and CANCELLED does not (L11); the
//! LeRobot exports (v3.0, v2.1) pass the pyarrow check. Both databases.

mod common;

use domain::events::OrgEvent;
use domain::models::LifecycleState;
use domain::relay::{relay_health, CameraFrame, RelayHealth, RelayMsg, RelayStat};
use domain::ring::RingMsg;
use common::{attach_asha, close_code, relay, robot_left, scalar, session_cookie, RelaySocket as Socket, Tab, TestApp, ADMIN, HARBOR_OPERATOR};
use futures::{SinkExt, StreamExt};
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const ORG: &str = "org-northstar";
/// The next data message (peer notices skipped), within 5 s.
async fn next_data(ws: &mut Socket) -> Message {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("a frame within 5 s").expect("open").expect("frame");
        match &message {
            Message::Text(text) if matches!(serde_json::from_str(text), Ok(RelayMsg::Peers { .. })) => continue,
            Message::Ping(_) | Message::Pong(_) => continue,
            _ => return message,
        }
    }
}

/// Waits until the relay tells `ws` that both sides are on the channel
/// (a socket joins just after its upgrade answers).
async fn both_joined(ws: &mut Socket) {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("peers within 5 s").expect("open").expect("frame");
        if let Message::Text(text) = &message {
            if let Ok(RelayMsg::Peers { robot: true, cockpits, .. }) = serde_json::from_str(text) {
                if cockpits >= 1 {
                    return;
                }
            }
        }
    }
}

fn state(v: f32) -> Message {
    Message::Text(serde_json::to_string(&RelayMsg::State { t_ms: 0, joints: vec![v; 6], fields: Default::default() }).unwrap().into())
}

fn action(v: f32) -> Message {
    Message::Text(serde_json::to_string(&RelayMsg::Action { t_ms: 0, values: vec![v; 6] }).unwrap().into())
}

/// A real 64×48 JPEG (made once with Pillow): the export's image shape
/// comes from it, and `lerobot` decodes it.
fn jpeg() -> Vec<u8> {
    include_bytes!("fixtures/camera-64x48.jpg").to_vec()
}

/// The org's relay counts for `session`, from an admin's watch socket.
async fn relay_stat(watch: &mut Tab, session: &str, pick: impl Fn(&RelayStat, i64) -> bool) -> RelayStat {
    // Heard first (counts before its Pong are skipped; later ones are
    // waited for): a screen silent for the presence TTL is closed.
    watch.ping(0).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    loop {
        assert!(std::time::Instant::now() < deadline, "the relay counts never showed it");
        if let RingMsg::Org { event: OrgEvent::Relay { stats, at_ms } } = watch.next().await {
            if let Some(stat) = stats.into_iter().find(|s| s.session_id == session) {
                if pick(&stat, at_ms) {
                    return stat;
                }
            }
        }
    }
}

/// The robot sends its state every 20 ms for `ms`.
async fn send_for(ws: &mut Socket, value: f32, ms: u64) {
    let end = tokio::time::Instant::now() + Duration::from_millis(ms);
    while tokio::time::Instant::now() < end {
        ws.send(state(value)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Seen {
    Active,
    Paused,
}

/// Waits until the relay has seen the session's lifecycle move: the
/// cockpit sends an action, which the relay either passes to the robot
/// (it sees the session ACTIVE) or refuses (PAUSED), until it answers `to`.
/// Every action gets one of the two answers: nothing waits on silence.
async fn relay_sees(cockpit: &mut Socket, robot: &mut Socket, to: Seen) {
    const PROBE: f32 = 5.0;
    let is = |message: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>, want: fn(RelayMsg) -> bool| match message {
        Some(Ok(Message::Text(text))) => serde_json::from_str(&text).is_ok_and(want),
        Some(Ok(_)) => false,
        other => panic!("a relay socket ended: {other:?}"),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        cockpit.send(action(PROBE)).await.unwrap();
        let seen = loop {
            tokio::select! {
                m = robot.next() => if is(m, |m| matches!(m, RelayMsg::Action { values, .. } if values.first() == Some(&PROBE))) { break Seen::Active },
                m = cockpit.next() => if is(m, |m| matches!(m, RelayMsg::Refused { .. })) { break Seen::Paused },
                _ = tokio::time::sleep_until(deadline) => panic!("the relay never saw the session {to:?}"),
            }
        };
        if seen == to {
            return;
        }
    }
}

async fn episode_frames(app: &TestApp, session: &str) -> i64 {
    for _ in 0..100 {
        let frames = scalar(&app.database_url(), &format!("SELECT COALESCE(MAX(frames), -1) FROM episodes WHERE session_id = '{session}'")).await;
        if frames >= 0 {
            return frames;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    -1
}

both_backends!(w15_frames_pass_both_ways_are_counted_and_a_silent_robot_shows_stalled, |app: TestApp| async move {
    let session = attach_asha(&app, "uk-pick-01").await;
    let asha = session_cookie(&app, common::OPERATOR).await;
    let mut watch = Tab::open_path(&app, &session_cookie(&app, ADMIN).await, "/ws?watch=org").await;
    let mut robot = relay(&app, &session, Some("uk-pick-01"), None).await.expect("the robot joins its session");
    let mut cockpit = relay(&app, &session, None, Some(&asha)).await.expect("the operator in control joins");
    both_joined(&mut cockpit).await;
    both_joined(&mut robot).await;

    robot.send(state(0.5)).await.unwrap();
    match next_data(&mut cockpit).await {
        Message::Text(text) => assert!(matches!(serde_json::from_str(&text), Ok(RelayMsg::State { .. })), "{text}"),
        other => panic!("expected the state frame, got {other:?}"),
    }
    let camera = CameraFrame { name: "front".into(), t_ms: 1, jpeg: jpeg() };
    robot.send(Message::Binary(camera.encode().into())).await.unwrap();
    match next_data(&mut cockpit).await {
        Message::Binary(bytes) => assert_eq!(CameraFrame::decode(&bytes), Some(camera)),
        other => panic!("expected the camera frame, got {other:?}"),
    }
    cockpit.send(action(0.25)).await.unwrap();
    match next_data(&mut robot).await {
        Message::Text(text) => assert!(matches!(serde_json::from_str(&text), Ok(RelayMsg::Action { .. })), "{text}"),
        other => panic!("expected the action, got {other:?}"),
    }
    // Garbage is refused with a reason, and the socket stays.
    cockpit.send(Message::Text("{\"type\":\"state\",\"t_ms\":0,\"joints\":[]}".into())).await.unwrap();
    match next_data(&mut cockpit).await {
        Message::Text(text) => assert!(matches!(serde_json::from_str(&text), Ok(RelayMsg::Refused { .. })), "{text}"),
        other => panic!("expected a refusal, got {other:?}"),
    }

    let flowing = relay_stat(&mut watch, &session, |s, _| s.robot_frames.frames >= 2 && s.operator_frames.frames >= 1).await;
    assert!(flowing.robot_connected && flowing.cockpits == 1);
    assert!(flowing.robot_frames.bytes > 0);
    let started = app.running().store.session(ORG, &session).await.unwrap().unwrap().started_at.unwrap();
    // The robot goes quiet: after 2 s the panel's rule says stalled.
    let (stalled, at) = {
        let stat = relay_stat(&mut watch, &session, |s, at| s.robot_frames.last_frame_ms.is_some_and(|last| at - last > 2_000)).await;
        let at = stat.robot_frames.last_frame_ms.unwrap() + 2_001;
        (stat, at)
    };
    assert_eq!(relay_health(Some(&stalled), started, at), RelayHealth::Stalled);
    robot.send(state(0.6)).await.unwrap();
    let again = relay_stat(&mut watch, &session, |s, at| s.robot_frames.last_frame_ms.is_some_and(|last| at - last <= 2_000)).await;
    assert_eq!(relay_health(Some(&again), started, again.robot_frames.last_frame_ms.unwrap()), RelayHealth::Flowing);
    app.finish().await;
});

both_backends!(nobody_outside_the_session_joins_its_channel, |app: TestApp| async move {
    let session = attach_asha(&app, "uk-pick-01").await;
    // Another org's operator, another robot, an operator not in control, a stranger.
    assert_eq!(relay(&app, &session, None, Some(&session_cookie(&app, HARBOR_OPERATOR).await)).await.err(), Some(404));
    assert_eq!(relay(&app, &session, Some("uk-insp-01"), None).await.err(), Some(404));
    assert_eq!(relay(&app, &session, None, Some(&session_cookie(&app, "tom.whitfield@northstar.example").await)).await.err(), Some(404));
    assert_eq!(relay(&app, &session, None, None).await.err(), Some(401));
    assert_eq!(relay(&app, "no-such-session", Some("uk-pick-01"), None).await.err(), Some(404));
    // A cross-site page cannot open the operator's cockpit socket.
    let mut request = format!("{}/relay/{session}", app.base.replace("http://", "ws://")).into_client_request().unwrap();
    request.headers_mut().insert("cookie", session_cookie(&app, common::OPERATOR).await.parse().unwrap());
    request.headers_mut().insert("origin", "https://evil.example".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => assert_eq!(response.status().as_u16(), 403),
        other => panic!("a cross-site upgrade must be refused: {:?}", other.map(|_| ())),
    }
    app.finish().await;
});

both_backends!(l12_recording_covers_active_time_only_and_l11_completed_makes_an_episode_cancelled_none, |app: TestApp| async move {
    let session = attach_asha(&app, "uk-pick-01").await;
    let asha = session_cookie(&app, common::OPERATOR).await;
    let mut robot = relay(&app, &session, Some("uk-pick-01"), None).await.unwrap();
    let mut cockpit = relay(&app, &session, None, Some(&asha)).await.unwrap();
    send_for(&mut robot, 1.0, 400).await;
    cockpit.send(action(7.0)).await.unwrap();
    robot.send(Message::Binary(CameraFrame { name: "front".into(), t_ms: 0, jpeg: jpeg() }.encode().into())).await.unwrap();
    send_for(&mut robot, 1.5, 200).await;
    app.engine().steer_session(ORG, &session, LifecycleState::Paused, Some("u-asha")).await.unwrap();
    relay_sees(&mut cockpit, &mut robot, Seen::Paused).await;
    // Paused: frames still flow to the cockpit but are not recorded.
    send_for(&mut robot, 99.0, 300).await;
    app.engine().steer_session(ORG, &session, LifecycleState::Active, Some("u-asha")).await.unwrap();
    relay_sees(&mut cockpit, &mut robot, Seen::Active).await;
    send_for(&mut robot, 2.0, 300).await;
    app.engine().finish_session(ORG, &session, None, LifecycleState::Completed, "done").await.unwrap();
    // The channel closes with the session.
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(message)) = robot.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the robot's relay socket closes when the session ends");
    let frames = episode_frames(&app, &session).await;
    // ~0.9 s of ACTIVE time at 30 fps (the 0.3 s paused are not in it).
    assert!((15..=40).contains(&frames), "{frames} frames");
    let data_dir = app.config.data_dir.clone();
    let file = data_dir.join("datasets").join(ORG).join("episodes").join(format!("{session}.jsonl"));
    let text = std::fs::read_to_string(&file).expect("the episode's recording");
    assert!(!text.contains("99.0"), "nothing recorded while PAUSED");
    assert!(text.contains("\"k\":\"action\"") && text.contains("\"k\":\"camera\"") && text.contains("\"k\":\"pause\""));
    assert_eq!(scalar(&app.database_url(), "SELECT COUNT(*) FROM audit_records WHERE action = 'episode_recorded'").await, 1);

    // A cancelled session leaves no episode and no recording.
    let second = attach_asha(&app, "uk-pick-01").await;
    let mut robot = relay(&app, &second, Some("uk-pick-01"), None).await.unwrap();
    send_for(&mut robot, 3.0, 200).await;
    app.engine().finish_session(ORG, &second, None, LifecycleState::Cancelled, "robot fault").await.unwrap();
    // Recordings are finished, and episodes made, in the order sessions end:
    // once a later session's episode is made, the cancelled one was dealt with.
    record_episode(&app, "uk-pick-01", 4.0).await;
    assert_eq!(scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM episodes WHERE session_id = '{second}'")).await, 0);
    assert_eq!(scalar(&app.database_url(), "SELECT COUNT(*) FROM audit_records WHERE action = 'episode_recorded'").await, 2, "the first and the later one");
    let parts = server::relay::recording::Recorder::parts_of(&data_dir.join("recordings"), &second);
    assert!(parts.is_empty(), "the recording is deleted: {parts:?}");
    app.finish().await;
});

/// The Python that checks exports: the tools' venv (pyarrow), as setup.sh installs it.
fn python() -> Option<std::path::PathBuf> {
    let candidate = std::env::var_os("CLUTCHCALL_PYTHON").map(std::path::PathBuf::from).or_else(|| {
        let home = std::env::var_os("HOME")?;
        let tools = std::env::var_os("CLUTCHCALL_TOOLS_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| std::path::Path::new(&home).join(".cache/clutchcall-tools"));
        Some(tools.join("venv/bin/python"))
    })?;
    let has_pyarrow = std::process::Command::new(&candidate).args(["-c", "import pyarrow"]).status().is_ok_and(|s| s.success());
    if !has_pyarrow && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("pyarrow is required under CI=true (scripts/setup.sh installs it into the tools venv)");
    }
    has_pyarrow.then_some(candidate)
}

/// One recorded, completed session of Asha on `robot`.
async fn record_episode(app: &TestApp, robot: &str, value: f32) -> String {
    let session = attach_asha(app, robot).await;
    let cookie = session_cookie(app, common::OPERATOR).await;
    let mut edge = relay(app, &session, Some(robot), None).await.unwrap();
    let mut cockpit = relay(app, &session, None, Some(&cookie)).await.unwrap();
    edge.send(Message::Binary(CameraFrame { name: "front".into(), t_ms: 0, jpeg: jpeg() }.encode().into())).await.unwrap();
    send_for(&mut edge, value, 200).await;
    cockpit.send(action(value)).await.unwrap();
    send_for(&mut edge, value + 0.5, 200).await;
    app.engine().finish_session(ORG, &session, None, LifecycleState::Completed, "done").await.unwrap();
    assert!(episode_frames(app, &session).await > 0);
    session
}

both_backends!(l12_a_multi_episode_dataset_exports_as_lerobot_v3_0_and_v2_1_and_passes_the_pyarrow_check, |app: TestApp| async move {
    record_episode(&app, "uk-pick-01", 1.0).await;
    record_episode(&app, "uk-pick-01", 2.0).await;
    let admin = common::browser();
    common::sign_in(&admin, &app, ADMIN).await;
    let listed: Vec<domain::datasets::Episode> = common::call(&admin, &app, "load_datasets", &[]).await.json().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|e| e.environment == "Leeds Hub" && e.task == "pick-place" && e.frames > 0 && e.operator_name.as_deref() == Some("Asha Rao")));
    let work = tempfile::tempdir().unwrap();
    for version in ["v3.0", "v2.1"] {
        let res = admin.get(app.url(&format!("/datasets/Leeds%20Hub/lerobot.tar?version={version}"))).send().await.unwrap();
        assert_eq!(res.status(), reqwest::StatusCode::OK, "{version}");
        let bytes = res.bytes().await.unwrap();
        let into = work.path().join(version);
        tar::Archive::new(&bytes[..]).unpack(&into).unwrap();
        let root = into.join(format!("lerobot-leeds-hub-{version}"));
        // For loading by hand with the `lerobot` package (see BENCHMARKS.md / the issue note).
        if let Some(keep) = std::env::var_os("CLUTCHCALL_KEEP_EXPORTS") {
            let _ = tar::Archive::new(&bytes[..]).unpack(std::path::Path::new(&keep).join(app.config.database_url().starts_with("postgres").then_some("pg").unwrap_or("sqlite")));
        }
        let info: serde_json::Value = serde_json::from_slice(&std::fs::read(root.join("meta/info.json")).unwrap()).unwrap();
        assert_eq!((info["codebase_version"].as_str(), info["total_episodes"].as_i64(), info["fps"].as_i64()), (Some(version), Some(2), Some(30)));
        assert_eq!(info["features"]["observation.images.front"]["shape"], serde_json::json!([48, 64, 3]));
        match python() {
            Some(python) => {
                let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/check_lerobot.py");
                let out = std::process::Command::new(python).arg(script).arg(&root).arg(version).output().unwrap();
                assert!(out.status.success(), "{version}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                println!("{}", String::from_utf8_lossy(&out.stdout).trim());
            }
            None => eprintln!("SKIPPED the pyarrow check of the {version} export (no pyarrow; CI=true requires it)"),
        }
    }
    // Datasets belong to the clients who booked; an operator sees none, a
    // client none of these (unbooked), another org nothing.
    let asha = common::browser();
    common::sign_in(&asha, &app, common::OPERATOR).await;
    assert_eq!(asha.get(app.url("/datasets/Leeds%20Hub/lerobot.tar")).send().await.unwrap().status(), reqwest::StatusCode::FORBIDDEN);
    let kofi = common::browser();
    common::sign_in(&kofi, &app, server::seed::DEMO_CLIENT.2).await;
    assert_eq!(kofi.get(app.url("/datasets/Leeds%20Hub/lerobot.tar")).send().await.unwrap().status(), reqwest::StatusCode::NOT_FOUND);
    let kofis: Vec<domain::datasets::Episode> = common::call(&kofi, &app, "load_datasets", &[]).await.json().await.unwrap();
    assert!(kofis.is_empty());
    assert_eq!(admin.get(app.url("/datasets/Leeds%20Hub/lerobot.tar?version=v9")).send().await.unwrap().status(), reqwest::StatusCode::UNPROCESSABLE_ENTITY);
    app.finish().await;
});

both_backends!(a_booked_sessions_episode_has_the_bookings_task_and_belongs_to_its_client, |app: TestApp| async move {
    let kofi = common::browser();
    common::sign_in(&kofi, &app, server::seed::DEMO_CLIENT.2).await;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    // The booking starts at this minute (the form books whole minutes).
    let start = domain::booking::utc_when(now).trim_end_matches(" UTC").replacen(' ', "T", 1);
    let booked = common::call(&kofi, &app, "book_robot", &[("robot_id", "uk-pick-01"), ("starts_at", &start), ("minutes", "60"), ("task", "stack the blue totes")]).await;
    assert_eq!(booked.status(), reqwest::StatusCode::OK, "{}", booked.text().await.unwrap_or_default());
    let session = record_episode(&app, "uk-pick-01", 1.0).await;
    let episodes: Vec<domain::datasets::Episode> = common::call(&kofi, &app, "load_datasets", &[]).await.json().await.unwrap();
    assert_eq!(episodes.len(), 1, "the client who booked owns the episode");
    assert_eq!((episodes[0].session_id.as_str(), episodes[0].task.as_str()), (session.as_str(), "stack the blue totes"));
    let tar = kofi.get(app.url("/datasets/Leeds%20Hub/lerobot.tar?version=v2.1")).send().await.unwrap();
    assert_eq!(tar.status(), reqwest::StatusCode::OK);
    app.finish().await;
});

/// Whether `file` is gone within 5 s (looked at every 50 ms).
async fn gone_within_5_s(file: &std::path::Path) -> bool {
    for _ in 0..100 {
        if !file.exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    !file.exists()
}

fn tidy_every_second(c: &mut server::config::Config) {
    c.recording_tidy = Duration::from_secs(1);
}

// Left as an instance that stopped between putting a recording in place
// as its episode's file and writing the episode's row leaves it: the file
// there, the part kept (parts go only once the row is written), no row.
// The recording is looked at again once quiet, and the episode is made
// from the file in place, once; the part goes. And left as an instance
// that died mid-copy leaves it (a filesystem without links): the file in
// place shorter than the part; it is made again from the part.
both_backends_with!(an_episode_whose_row_was_never_written_is_made_when_its_recording_is_looked_at_again, tidy_every_second, |app: TestApp| async move {
    let data_dir = app.config.data_dir.clone();
    let episodes = data_dir.join("datasets").join(ORG).join("episodes");
    let recorded = std::fs::read(episodes.join(format!("{}.jsonl", record_episode(&app, "uk-pick-01", 1.0).await))).unwrap();
    let a_minute_ago = std::time::SystemTime::now() - Duration::from_secs(60);
    let mut left = Vec::new();
    for in_place in [&recorded[..], &recorded[..recorded.len() / 2]] {
        // A session that ended COMPLETED with nothing recorded here: its
        // episode's file (first, so no look finds the part alone) and its
        // part, written as above, as if elsewhere, a minute ago.
        let session = attach_asha(&app, "uk-pick-01").await;
        app.engine().finish_session(ORG, &session, None, LifecycleState::Completed, "done").await.unwrap();
        let episode = episodes.join(format!("{session}.jsonl"));
        let part = data_dir.join("recordings").join(format!("{session}.0000000000001-0000000000000000.part"));
        for (file, text) in [(&episode, in_place), (&part, &recorded[..])] {
            std::fs::write(file, text).unwrap();
            std::fs::File::options().write(true).open(file).unwrap().set_modified(a_minute_ago).unwrap();
        }
        left.push((session, episode, part));
    }
    for (session, episode, part) in left {
        assert!(episode_frames(&app, &session).await > 0, "the episode's row is written");
        assert!(gone_within_5_s(&part).await, "the part goes once the row is there");
        assert_eq!(std::fs::read(&episode).unwrap(), recorded, "the episode is the whole recording");
        assert_eq!(scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM audit_records WHERE action = 'episode_recorded' AND session_id = '{session}'")).await, 1);
    }
    app.finish().await;
});

// A part written after its session's episode was made (a batch that
// raced a hand-off, on a shared data directory) is deleted once quiet: the
// episode in place is neither read again nor made again from it, however
// large the part.
both_backends_with!(a_part_written_after_the_episode_goes_and_the_episode_stays, tidy_every_second, |app: TestApp| async move {
    let data_dir = app.config.data_dir.clone();
    let session = record_episode(&app, "uk-pick-01", 1.0).await;
    let episode = data_dir.join("datasets").join(ORG).join("episodes").join(format!("{session}.jsonl"));
    let made = std::fs::read(&episode).unwrap();
    let late = data_dir.join("recordings").join(format!("{session}.9999999999999-0000000000000000.part"));
    std::fs::write(&late, [&made[..], &made[..]].concat()).unwrap();
    std::fs::File::options().write(true).open(&late).unwrap().set_modified(std::time::SystemTime::now() - Duration::from_secs(60)).unwrap();
    // (Before the episode's file is quiet: a part read against it would wait.)
    assert!(gone_within_5_s(&late).await, "the late part goes");
    assert_eq!(std::fs::read(&episode).unwrap(), made, "the episode stays as it was made");
    assert_eq!(scalar(&app.database_url(), &format!("SELECT COUNT(*) FROM audit_records WHERE action = 'episode_recorded' AND session_id = '{session}'")).await, 1);
    app.finish().await;
});

/// Episodes of one environment made at once by several instances
/// (PostgreSQL, READ COMMITTED) would each read the same next index: they
/// take it in turn, and each is added with its own, 0, 1, … (before, all
/// but one failed on the index's unique key and waited a minute for the
/// janitor). The store on a PostgreSQL database of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_made_at_once_on_postgresql_each_get_their_own_index() {
    use domain::events::{ActorKind, AuditAction, AuditEntry};
    use server::store::{Lease, NewEpisode, NewOrg, NewRobot, NewSession, Seed, Write};
    let Some((url, database)) = common::scratch_pg_database().await else { return };
    let store = server::store::connect(&url).await.unwrap();
    let robots = (0..20).map(|i| NewRobot {
        id: format!("r-{i}"), org_id: "org".into(), model: "UR5e".into(), site: "Leeds".into(), pop: "uk-london".into(),
        req_cert: "pick-place · tier-1".into(), token_hash: format!("hash-{i}"),
    });
    store.seed(&Seed { orgs: vec![NewOrg { id: "org".into(), name: "Org".into() }], robots: robots.collect(), ..Default::default() }).await.unwrap();
    let lease: Lease = store.take_lease("org", "test", 60_000, 0).await.unwrap().expect("the org's lease");
    let calls = (0..20).map(|i| {
        Write::OpenSession(NewSession {
            id: format!("ses-{i}"), org_id: "org".into(), robot_id: format!("r-{i}"), skill: "pick-place".into(), pop: "uk-london".into(),
            raised_at: 1, client_id: None, booking_id: None, planned_end_at: None,
        })
    });
    store.commit(&lease, calls.collect()).await.unwrap();
    let entry = |index: i64| AuditEntry {
        at_ms: 7, actor_kind: ActorKind::System, actor_id: None, action: AuditAction::EpisodeRecorded,
        session_id: None, robot_id: None, detail: Some(format!("episode {index}")),
    };
    let made = futures::future::join_all((0..20).map(|i| {
        let store = store.clone();
        let episode = NewEpisode {
            session_id: format!("ses-{i}"), org_id: "org".into(), environment: "Leeds".into(), robot_id: format!("r-{i}"), operator_id: None,
            client_id: None, task: "pick-place".into(), fps: 30, frames: 90, duration_ms: 3_000, cameras: vec!["front".into()], created_at: 7,
        };
        async move { store.add_episode(&episode, &entry).await }
    }))
    .await;
    let mut indexes: Vec<String> = made.into_iter().map(|added| added.expect("added").expect("a row").detail.unwrap()).collect();
    indexes.sort_by_key(|detail| detail["episode ".len()..].parse::<i64>().unwrap());
    assert_eq!(indexes, (0..20).map(|i| format!("episode {i}")).collect::<Vec<_>>());
    drop(store);
    common::drop_pg_database(&database).await;
}

/// A cockpit whose client takes nothing of the robot's frames is cut off
/// once its writes have waited for the stall (`http::connections`; 1 s
/// here), and leaves the channel: the robot is told, and the operator's
/// cockpit can come back. (Before, a socket whose writer failed stayed on
/// the channel with its read half, every frame to it counted as dropped.)
/// SQLite only: the connection and the relay are the same on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cockpit_that_takes_nothing_is_cut_off_and_leaves_the_channel() {
    let app = TestApp::spawn_with(common::Db::Sqlite, |config| {
        config.client_stall = Duration::from_secs(1);
        config.relay.max_fps = 10_000;
        config.relay.max_kib_per_s = 1 << 20;
        // Nothing recorded: the frames are only a load.
        config.relay.recording_max_bytes = 0;
    })
    .await
    .unwrap();
    let session = attach_asha(&app, "uk-pick-01").await;
    let asha = session_cookie(&app, common::OPERATOR).await;
    let mut robot = relay(&app, &session, Some("uk-pick-01"), None).await.expect("the robot joins its session");
    // The cockpit's client, never read.
    let cockpit = common::slow_reader(&app, &asha, &format!("/relay/{session}")).await;
    both_joined(&mut robot).await;

    // Camera frames of 256 KiB until the robot hears the cockpit left.
    let (mut sends, mut hears) = robot.split();
    let frame = CameraFrame { name: "front".into(), t_ms: 1, jpeg: vec![0xAB; 256 * 1024] }.encode();
    let sending = tokio::spawn(async move {
        while sends.send(Message::Binary(frame.clone().into())).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let left = async {
        while let Some(message) = hears.next().await {
            if let Ok(Message::Text(text)) = message {
                if let Ok(RelayMsg::Peers { cockpits: 0, .. }) = serde_json::from_str(&text) {
                    return;
                }
            }
        }
        panic!("the robot's socket ended");
    };
    tokio::time::timeout(Duration::from_secs(30), left).await.expect("the cockpit that took nothing left the channel");
    sending.abort();
    drop(cockpit);
    // Asha's cockpit comes back, and finds the robot there.
    let mut again = relay(&app, &session, None, Some(&asha)).await.expect("the operator in control joins again");
    both_joined(&mut again).await;
    app.finish().await;
}

/// Asha attached to a call of uk-pick-01: the robot's and her cockpit's
/// relay sockets, both on the channel.
async fn asha_on_the_relay(app: &TestApp) -> (Socket, Socket) {
    let session = attach_asha(app, "uk-pick-01").await;
    let asha = session_cookie(app, common::OPERATOR).await;
    let mut robot = relay(app, &session, Some("uk-pick-01"), None).await.expect("the robot joins its session");
    let mut cockpit = relay(app, &session, None, Some(&asha)).await.expect("the operator in control joins");
    both_joined(&mut cockpit).await;
    both_joined(&mut robot).await;
    (robot, cockpit)
}

/// A server that stops (a deploy's restart) closes its relay sockets with
/// "restart" (1012), which edge agents and cockpits take as "connect
/// again" (1000 would tell a cockpit its session is over), even while the
/// robot streams: its unread frames would otherwise reset the connection,
/// the close frame lost with it. SQLite only: the relay is the same on
/// both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_tells_its_relay_sockets_to_connect_again() {
    let mut app = TestApp::spawn(common::Db::Sqlite).await.expect("SQLite");
    let (robot, mut cockpit) = asha_on_the_relay(&app).await;
    // The robot streams its state all along, as an edge agent does.
    let (mut robot_out, mut robot_in) = robot.split();
    let streaming = tokio::spawn(async move {
        while robot_out.send(state(0.5)).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    // Read only once the server has stopped, as a client far away would
    // find it: the close frame waits in its buffer when the connection ends.
    app.restart().await;
    assert_eq!(close_code(&mut cockpit).await, Some(1012), "the cockpit is told to connect again");
    assert_eq!(close_code(&mut robot_in).await, Some(1012), "the robot is told to connect again");
    streaming.abort();
    app.finish().await;
}

/// A cockpit that closes its socket (the page left) has its close
/// answered, as RFC 6455's closing handshake asks: the server's close
/// frame, then the end of the connection, even with the robot's frames
/// still queued for it. (Before, the relay tried to send a close of its
/// own after the client's, which the WebSocket refuses, and the answer
/// never went; a writer with frames queued fails on them the same way.)
/// SQLite only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cockpit_that_closes_has_its_close_answered() {
    let app = TestApp::spawn(common::Db::Sqlite).await.expect("SQLite");
    let (mut robot, mut cockpit) = asha_on_the_relay(&app).await;
    // Camera frames flood the cockpit as it closes: some are usually
    // still queued for it when its close is read. (Not always: a frame
    // being written when it is read carries the answer out with it.)
    let camera = Message::Binary(CameraFrame { name: "front".into(), t_ms: 1, jpeg: vec![0xAB; 200 * 1024] }.encode().into());
    for _ in 0..40 {
        robot.send(camera.clone()).await.unwrap();
    }
    cockpit.send(Message::Close(None)).await.unwrap();
    // The server's answer comes (a reset or the end without it fails).
    close_code(&mut cockpit).await;
    app.finish().await;
}

/// An edge agent that sends a frame larger than the relay carries (a
/// camera JPEG over 512 KiB) is told so by its close's code, 1009 (a
/// frame too large, RFC 6455), not left to guess from a bare close, even
/// as it streams on (its unread frames must not reset the close away);
/// the cockpit stays on the channel. SQLite only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_frame_is_refused_with_1009() {
    let app = TestApp::spawn(common::Db::Sqlite).await.expect("SQLite");
    let (robot, mut cockpit) = asha_on_the_relay(&app).await;
    let (mut robot_out, mut robot_in) = robot.split();
    // Sent on a task of its own: refused at its header, the frame's
    // payload is never read, and the send may wait on it.
    let streaming = tokio::spawn(async move {
        let huge = Message::Binary(CameraFrame { name: "front".into(), t_ms: 1, jpeg: vec![0xAB; 600 * 1024] }.encode().into());
        if robot_out.send(huge).await.is_ok() {
            while robot_out.send(state(0.5)).await.is_ok() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    assert_eq!(close_code(&mut robot_in).await, Some(1009), "the robot is told its frame was too large");
    streaming.abort();
    // The cockpit hears the robot leave, and is not closed itself.
    robot_left(&mut cockpit).await;
    app.finish().await;
}
