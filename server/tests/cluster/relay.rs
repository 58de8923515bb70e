//! The relay across instances (issue "Scale out"): the edge agent on one
//! instance, the cockpit on another, the relay panel on a third.

use super::{accept_offer, call_at, cookie_at, ready_console, raise, within, Cluster, ORG};
use crate::common::{self, close_code, next_on, robot_left};
use domain::events::OrgEvent;
use domain::relay::{CameraFrame, RelayMsg, RelayStat};
use domain::ring::{ConsoleMsg, RingMsg};
use futures::{SinkExt, StreamExt};
use reqwest::StatusCode;
use tokio_tungstenite::tungstenite::Message;

/// Waits until the relay tells `ws` that the robot and a cockpit are on
/// the channel, wherever they are.
async fn both_on(ws: &mut common::RelaySocket) {
    next_on(ws, |m| match m {
        Message::Text(text) => matches!(serde_json::from_str(text), Ok(RelayMsg::Peers { robot: true, cockpits: 1.., .. })).then_some(()),
        _ => None,
    })
    .await
}

fn text(message: &RelayMsg) -> Message {
    Message::Text(serde_json::to_string(message).unwrap().into())
}

/// The next relay counts for `session` an admin's watch socket hears.
async fn counts(watch: &mut common::Tab, session: &str) -> Option<RelayStat> {
    loop {
        if let RingMsg::Org { event: OrgEvent::Relay { stats, .. } } = watch.next().await {
            return stats.into_iter().find(|s| s.session_id == session);
        }
    }
}

/// Asha's call raised on the second instance and accepted on the third
/// (the first dispatches): the session's id.
async fn asha_attached(cluster: &Cluster) -> String {
    let mut console = ready_console(cluster.base(2), common::OPERATOR).await;
    let raised = raise(cluster.base(1), "ue-pick-01").await;
    assert_eq!(raised.status(), StatusCode::CREATED);
    let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    accept_offer(&mut console, &session).await;
    session
}

/// The edge agent of `session` on the third instance and Asha's cockpit on
/// the second, each told the other is on the channel.
async fn robot_on_third_cockpit_on_second(cluster: &Cluster, session: &str) -> (common::RelaySocket, common::RelaySocket) {
    let mut robot = common::relay_at(cluster.base(2), session, Some("ue-pick-01"), None).await.expect("the robot joins on the third");
    let asha = cookie_at(cluster.base(1), common::OPERATOR).await;
    let mut cockpit = common::relay_at(cluster.base(1), session, None, Some(&asha)).await.expect("the cockpit joins on the second");
    both_on(&mut robot).await;
    both_on(&mut cockpit).await;
    (robot, cockpit)
}

/// The joints of the next robot state `ws` is sent.
async fn next_state(ws: &mut common::RelaySocket) -> Vec<f32> {
    next_on(ws, |m| match m {
        Message::Text(text) => match serde_json::from_str(text) {
            Ok(RelayMsg::State { joints, .. }) => Some(joints),
            _ => None,
        },
        _ => None,
    })
    .await
}

/// A robot's token holds relay sockets on two instances (its agent's, and
/// one more opened with its token) and floods the session from both: the
/// cockpit on a third gets no more than one socket may send (a second's
/// burst of the cap), not one cap per instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robots_sockets_on_two_instances_send_a_cockpit_no_more_than_one_may() {
    let Some(nats) = super::nats_url().await else { return };
    let Some(cluster) = Cluster::start_with(Some(&nats), 3, vec![("CLUTCHCALL_RELAY_MAX_FPS", "5".into())]).await else { return };
    let session = asha_attached(&cluster).await;
    let mut first = common::relay_at(cluster.base(0), &session, Some("ue-pick-01"), None).await.expect("the robot joins on the first");
    let mut second = common::relay_at(cluster.base(1), &session, Some("ue-pick-01"), None).await.expect("and on the second");
    let asha = cookie_at(cluster.base(2), common::OPERATOR).await;
    let mut cockpit = common::relay_at(cluster.base(2), &session, None, Some(&asha)).await.expect("the cockpit joins on the third");
    for side in [&mut first, &mut second, &mut cockpit] {
        both_on(side).await;
    }
    // 40 frames from each at once: one second's burst of 5 passes in all,
    // and one more every 200 ms while they arrive.
    let sent = std::time::Instant::now();
    for i in 0..40 {
        let state = text(&RelayMsg::State { t_ms: i, joints: vec![i as f32; 6], fields: Default::default() });
        first.send(state.clone()).await.unwrap();
        second.send(state).await.unwrap();
    }
    let (mut states, mut last) = (0, sent);
    while let Ok(Some(Ok(message))) = tokio::time::timeout(std::time::Duration::from_millis(700), cockpit.next()).await {
        if let Message::Text(text) = message {
            if text.contains("\"state\"") {
                (states, last) = (states + 1, std::time::Instant::now());
            }
        }
    }
    let refilled = ((last - sent).as_secs_f64() * 5.0).ceil() as usize;
    assert!((1..=5 + refilled + 1).contains(&states), "{states} frames reached the cockpit in {:?}", last - sent);
    cluster.finish().await;
}

/// The edge agent on the first instance, the cockpit on the second:
/// state, camera frames and actions pass both ways; the panel on the
/// third shows one channel with both sides and every count, from every
/// report; the session's end (committed by the owner on a steer made at
/// the third) closes both sockets normally; the recording is made once,
/// where the robot is: one episode, each action in it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_cross_instances_both_ways_are_counted_once_and_the_end_closes_both_sides() {
    let Some(nats) = super::nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 3).await else { return };
    let session = asha_attached(&cluster).await;
    let admin = cookie_at(cluster.base(2), common::ADMIN).await;
    let mut panel = common::Tab::open_at(cluster.base(2), &admin, "/ws?watch=org").await;

    let mut robot = common::relay_at(cluster.base(0), &session, Some("ue-pick-01"), None).await.expect("the robot joins on the first");
    let asha = cookie_at(cluster.base(1), common::OPERATOR).await;
    let mut cockpit = common::relay_at(cluster.base(1), &session, None, Some(&asha)).await.expect("the cockpit joins on the second");
    both_on(&mut robot).await;
    both_on(&mut cockpit).await;
    // The panel heard from (the presence TTL closes a silent screen).
    panel.ping(1).await;

    robot.send(text(&RelayMsg::State { t_ms: 1, joints: vec![0.5; 6], fields: Default::default() })).await.unwrap();
    assert_eq!(next_state(&mut cockpit).await, vec![0.5; 6], "robot state reaches the cockpit on another instance");
    let frame = CameraFrame { name: "wrist".into(), t_ms: 2, jpeg: vec![0xFF, 0xD8, 7, 7, 7] }.encode();
    robot.send(Message::Binary(frame.clone().into())).await.unwrap();
    let camera = next_on(&mut cockpit, |m| match m {
        Message::Binary(data) => Some(data.to_vec()),
        _ => None,
    });
    assert_eq!(camera.await, frame, "camera frames cross unchanged");
    cockpit.send(text(&RelayMsg::Action { t_ms: 3, values: vec![0.25; 6] })).await.unwrap();
    let values = next_on(&mut robot, |m| match m {
        Message::Text(text) => match serde_json::from_str(text) {
            Ok(RelayMsg::Action { values, .. }) => Some(values),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(values.await, vec![0.25; 6], "the action reaches the robot on another instance");

    // One row with both sides and every count, in every count the panel
    // hears from now on (not one instance's part, then another's).
    let whole = |stat: &Option<RelayStat>| {
        stat.as_ref().is_some_and(|s| s.robot_connected && s.cockpits == 1 && s.robot_frames.frames == 2 && s.operator_frames.frames == 1)
    };
    within(async {
        while !whole(&counts(&mut panel, &session).await) {}
    })
    .await;
    for _ in 0..3 {
        let heard = within(counts(&mut panel, &session)).await;
        assert!(whole(&heard), "every count after is the whole channel: {heard:?}");
    }

    // A second state, seconds after the first (the episode has frames between).
    robot.send(text(&RelayMsg::State { t_ms: 4, joints: vec![0.75; 6], fields: Default::default() })).await.unwrap();
    assert_eq!(next_state(&mut cockpit).await, vec![0.75; 6]);

    // The end, committed by the owner (the first) on a steer made at the third.
    let steered = call_at(cluster.base(2), &admin, "steer_session", &[("session_id", &session), ("to", "COMPLETED")]).await;
    assert_eq!(steered.status(), StatusCode::OK);
    for (side, ws) in [("robot", &mut robot), ("cockpit", &mut cockpit)] {
        assert_eq!(close_code(ws).await, Some(1000), "the {side}'s socket is let go");
    }

    // Recorded once, where the robot was: one episode, the action in it once.
    let episode = cluster.dir.path().join("datasets").join(ORG).join("episodes").join(format!("{session}.jsonl"));
    within(async {
        while common::scalar(&cluster.url, &format!("SELECT COUNT(*) FROM episodes WHERE session_id = '{session}'")).await == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    let samples = server::relay::recording::read_samples(&episode).expect("the episode's samples");
    let actions = samples.iter().filter(|s| matches!(s, server::relay::recording::Sample::Action { .. })).count();
    let states = samples.iter().filter(|s| matches!(s, server::relay::recording::Sample::State { .. })).count();
    assert_eq!((states, actions), (2, 1), "each sample recorded once: {samples:?}");
    drop((robot, cockpit, panel));
    cluster.finish().await;
}

/// An instance that stops (SIGTERM: a deploy's restart) says farewell to
/// the others' relays: its last report carries no part, so its edge agent
/// is not counted, nor told to the cockpit on another instance as still
/// there, for the seconds a last report otherwise stands (`REPORT_KEPT`),
/// while the robot reconnects elsewhere. And the edge agent is told to
/// (close code 1012, "restart"), not left to find its connection reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_stops_tells_the_others_it_carries_nothing() {
    let Some(nats) = super::nats_url().await else { return };
    let Some(mut cluster) = Cluster::start(Some(&nats), 3).await else { return };
    let session = asha_attached(&cluster).await;
    // Every instance's relay reports (of every test's cluster on this NATS).
    let client = async_nats::connect(nats.as_str()).await.expect("NATS answers");
    let mut reports = client.subscribe("clutchcall.*.relay.reports").await.unwrap();

    let (mut robot, mut cockpit) = robot_on_third_cockpit_on_second(&cluster, &session).await;
    // The third's name: the one whose report carries the robot.
    let third = within(async {
        loop {
            let message = reports.next().await.expect("reports go on");
            let report: server::relay::link::Report = serde_json::from_slice(&message.payload).unwrap();
            if report.parts.iter().any(|p| p.stat.session_id == session && p.stat.robot_connected) {
                return report.publisher;
            }
        }
    })
    .await;

    within(cluster.servers[2].terminate()).await;
    // Everything it published, NATS confirmed before it exited (its
    // farewell waits for that); a round trip of this connection now is
    // answered behind all of it, so it is all in the subscription. The
    // last is its farewell, empty, sent after every report begun before
    // it (without it, the last carries the robot's part).
    server::bus::nats::settled(&client).await.expect("NATS answers");
    let mut last = None;
    tokio::task::unconstrained(async {
        while let Some(Some(message)) = futures::FutureExt::now_or_never(reports.next()) {
            let report: server::relay::link::Report = serde_json::from_slice(&message.payload).unwrap();
            if report.publisher == third {
                last = Some(report.parts.len());
            }
        }
    })
    .await;
    assert_eq!(last, Some(0), "the stopped instance's last report carries no part");
    assert_eq!(close_code(&mut robot).await, Some(1012), "the edge agent is told to connect again");
    // And the cockpit on the second hears the robot gone (this only says
    // it does; the 3 s a report stands fall within the wait too).
    robot_left(&mut cockpit).await;
    drop((robot, cockpit, client));
    cluster.finish().await;
}

/// A handover across instances: Asha's cockpit on the second, the edge
/// agent on the first, Tom's console on the third. When Tom accepts,
/// Asha's cockpit is let go (1000) where it is, and Tom's cockpit on the
/// third gets the robot's frames from the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_lets_the_old_cockpit_go_on_its_instance_and_the_new_one_drives_from_another() {
    const TOM: &str = "tom.whitfield@northstar.example";
    let Some(nats) = super::nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 3).await else { return };
    let session = asha_attached(&cluster).await;
    let mut robot = common::relay_at(cluster.base(0), &session, Some("ue-pick-01"), None).await.expect("the robot joins on the first");
    let asha = cookie_at(cluster.base(1), common::OPERATOR).await;
    let mut old_cockpit = common::relay_at(cluster.base(1), &session, None, Some(&asha)).await.expect("Asha's cockpit joins on the second");
    both_on(&mut old_cockpit).await;

    let mut tom_console = ready_console(cluster.base(2), TOM).await;
    let handed = call_at(cluster.base(1), &asha, "hand_over_session", &[("session_id", &session), ("to_operator_id", "u-tom")]).await;
    assert_eq!(handed.status(), StatusCode::OK);
    let offered = tom_console.until(|m| match m {
        RingMsg::Offer { offer } => Some(offer.session_id),
        _ => None,
    });
    assert_eq!(offered.await, session);
    tom_console.send(ConsoleMsg::Accept { session_id: session.clone() }).await;
    assert_eq!(close_code(&mut old_cockpit).await, Some(1000), "Asha's cockpit is let go on the second");

    let tom = cookie_at(cluster.base(2), TOM).await;
    let mut new_cockpit = common::relay_at(cluster.base(2), &session, None, Some(&tom)).await.expect("Tom's cockpit joins on the third");
    // The edge agent streams its state, as it does, until Tom's cockpit has
    // it (the first instance learns of Tom's cockpit from the third's report).
    let state = text(&RelayMsg::State { t_ms: 1, joints: vec![0.5; 6], fields: Default::default() });
    within(async {
        loop {
            robot.send(state.clone()).await.unwrap();
            tokio::select! {
                message = new_cockpit.next() => {
                    let message = message.expect("open").expect("a frame");
                    if let Message::Text(text) = &message {
                        if matches!(serde_json::from_str(text), Ok(RelayMsg::State { .. })) {
                            return;
                        }
                    }
                }
                _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
            }
        }
    })
    .await;
    assert_eq!(common::relay_at(cluster.base(1), &session, None, Some(&asha)).await.err(), Some(404), "Asha is no longer let in, on any instance");
    drop((robot, new_cockpit, tom_console));
    cluster.finish().await;
}

/// A supervisor's live view on a third instance (issue "Integrators and
/// supervisors", part 2): the edge agent on the first, the cockpit on the
/// second, Dana watching on the third gets the robot's frames and the
/// operator's actions, the cockpit names her, and what she sends reaches
/// nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_view_on_a_third_instance_gets_the_robots_frames_and_the_operators_actions() {
    let Some(nats) = super::nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 3).await else { return };
    let session = asha_attached(&cluster).await;
    let mut robot = common::relay_at(cluster.base(0), &session, Some("ue-pick-01"), None).await.expect("the robot joins on the first");
    let asha = cookie_at(cluster.base(1), common::OPERATOR).await;
    let mut cockpit = common::relay_at(cluster.base(1), &session, None, Some(&asha)).await.expect("the cockpit joins on the second");
    both_on(&mut robot).await;
    both_on(&mut cockpit).await;
    let dana = cookie_at(cluster.base(2), common::ADMIN).await;
    let mut view = common::relay_at(cluster.base(2), &format!("{session}/watch"), None, Some(&dana)).await.expect("Dana watches on the third");
    // The cockpit on the second names her (the third's report carries the name).
    let watching = next_on(&mut cockpit, |m| match m {
        Message::Text(t) => match serde_json::from_str(t) {
            Ok(RelayMsg::Peers { watching, .. }) if !watching.is_empty() => Some(watching),
            _ => None,
        },
        _ => None,
    })
    .await;
    assert_eq!(watching, ["Dana Okafor"], "a cockpit names who watches on another instance");

    // Each side sends until the view has it (the other instances learn of
    // the view from the third's report, within a second).
    fn is(got: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>, want: fn(RelayMsg) -> bool) -> bool {
        matches!(got, Some(Ok(Message::Text(text))) if serde_json::from_str(&text).is_ok_and(want))
    }
    let state = text(&RelayMsg::State { t_ms: 1, joints: vec![0.5; 6], fields: Default::default() });
    within(async {
        loop {
            robot.send(state.clone()).await.unwrap();
            tokio::select! {
                got = view.next() => if is(got, |m| matches!(m, RelayMsg::State { .. })) { return },
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            }
        }
    })
    .await;
    let action = text(&RelayMsg::Action { t_ms: 2, values: vec![0.25; 6] });
    within(async {
        loop {
            cockpit.send(action.clone()).await.unwrap();
            tokio::select! {
                got = view.next() => if is(got, |m| matches!(m, RelayMsg::Action { .. })) { return },
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            }
        }
    })
    .await;
    // The view's own message is refused; the robot hears only the cockpit.
    view.send(text(&RelayMsg::Action { t_ms: 3, values: vec![9.0; 6] })).await.unwrap();
    let refused = next_on(&mut view, |m| match m {
        Message::Text(t) => matches!(serde_json::from_str(t), Ok(RelayMsg::Refused { .. })).then_some(()),
        _ => None,
    });
    refused.await;
    drop((robot, cockpit, view));
    cluster.finish().await;
}

/// An admin on the first instance ends `session` COMPLETED; once its
/// episode's row is there, the first joint of each robot state in the
/// episode, in order (the relay stamps samples with its own clock: the
/// states are told apart by their joints).
async fn completed_into_an_episode(cluster: &Cluster, session: &str) -> Vec<f32> {
    let admin = cookie_at(cluster.base(0), common::ADMIN).await;
    let steered = call_at(cluster.base(0), &admin, "steer_session", &[("session_id", session), ("to", "COMPLETED")]).await;
    assert_eq!(steered.status(), StatusCode::OK);
    within(async {
        while common::scalar(&cluster.url, &format!("SELECT COUNT(*) FROM episodes WHERE session_id = '{session}'")).await == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    let episode = cluster.dir.path().join("datasets").join(ORG).join("episodes").join(format!("{session}.jsonl"));
    server::relay::recording::read_samples(&episode)
        .expect("the episode's samples")
        .into_iter()
        .filter_map(|s| match s {
            server::relay::recording::Sample::State { joints, .. } => Some(joints[0]),
            _ => None,
        })
        .collect()
}

/// The edge agent moves mid-session: recorded on the first instance, then
/// (after a reconnect) on the third; the cockpit stays on the second. On
/// the cluster's shared data directory each stint has a part of its own,
/// and the session's COMPLETED end makes one episode of both, in the
/// order they were recorded, with no part left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robot_that_moves_to_another_instance_mid_session_is_one_episode_in_order() {
    let Some(nats) = super::nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 3).await else { return };
    let session = asha_attached(&cluster).await;
    let asha = cookie_at(cluster.base(1), common::OPERATOR).await;
    let mut cockpit = common::relay_at(cluster.base(1), &session, None, Some(&asha)).await.expect("the cockpit joins on the second");
    let recordings = cluster.dir.path().join("recordings");
    let state = |t_ms| text(&RelayMsg::State { t_ms, joints: vec![t_ms as f32; 6], fields: Default::default() });

    let mut robot = common::relay_at(cluster.base(0), &session, Some("ue-pick-01"), None).await.expect("the robot joins on the first");
    both_on(&mut cockpit).await;
    robot.send(state(1)).await.unwrap();
    assert_eq!(next_state(&mut cockpit).await, vec![1.0; 6]);
    robot.close(None).await.unwrap();
    robot_left(&mut cockpit).await;

    let mut robot = common::relay_at(cluster.base(2), &session, Some("ue-pick-01"), None).await.expect("the robot joins again on the third");
    both_on(&mut cockpit).await;
    robot.send(state(2)).await.unwrap();
    assert_eq!(next_state(&mut cockpit).await, vec![2.0; 6]);
    // Both states written, each in its stint's part (each instance writes
    // what waits every second). The first may not have handed off yet
    // when the session ends: then both instances finish the recording,
    // and one episode is made all the same.
    let written = |parts: Vec<std::path::PathBuf>| -> Vec<f32> {
        let samples = parts.iter().flat_map(|p| server::relay::recording::read_samples(p).unwrap_or_default());
        samples.filter_map(|s| match s {
            server::relay::recording::Sample::State { joints, .. } => Some(joints[0]),
            _ => None,
        })
        .collect()
    };
    within(async {
        while written(server::relay::recording::Recorder::parts_of(&recordings, &session)) != [1.0, 2.0] {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(server::relay::recording::Recorder::parts_of(&recordings, &session).len(), 2, "a part each");

    let states = completed_into_an_episode(&cluster, &session).await;
    assert_eq!(states, vec![1.0, 2.0], "both stints, in the order they were recorded");
    let left = server::relay::recording::Recorder::parts_of(&recordings, &session);
    assert!(left.is_empty(), "no part is left behind: {left:?}");
    drop((robot, cockpit));
    cluster.finish().await;
}

/// The instance recording a session dies (SIGKILL) mid-session; the
/// session is then COMPLETED on another. Nobody held its recording when it
/// ended, so no instance finished it there: whichever instance looks first
/// (every `CLUTCHCALL_RECORDING_TIDY_S`) finds the part nothing writes to
/// any more and makes the episode of it, once, leaving no part behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_whose_instance_was_killed_mid_session_becomes_its_episode() {
    let Some(nats) = super::nats_url().await else { return };
    let Some(mut cluster) = Cluster::start_with(Some(&nats), 3, vec![("CLUTCHCALL_RECORDING_TIDY_S", "1".into())]).await else { return };
    let session = asha_attached(&cluster).await;
    let asha = cookie_at(cluster.base(1), common::OPERATOR).await;
    let mut cockpit = common::relay_at(cluster.base(1), &session, None, Some(&asha)).await.expect("the cockpit joins on the second");
    let mut robot = common::relay_at(cluster.base(2), &session, Some("ue-pick-01"), None).await.expect("the robot joins on the third");
    both_on(&mut cockpit).await;
    // Two states a moment apart (one sample spans no time: no episode).
    for t_ms in [1, 2] {
        robot.send(text(&RelayMsg::State { t_ms, joints: vec![t_ms as f32; 6], fields: Default::default() })).await.unwrap();
        assert_eq!(next_state(&mut cockpit).await, vec![t_ms as f32; 6]);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let recordings = cluster.dir.path().join("recordings");
    let parts = || server::relay::recording::Recorder::parts_of(&recordings, &session);
    within(async {
        while parts().iter().map(|p| server::relay::recording::read_samples(p).unwrap_or_default().len()).sum::<usize>() < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    // The third dies with the robot's socket; the first dispatches on.
    cluster.servers[2].child.start_kill().unwrap();
    cluster.servers[2].child.wait().await.unwrap();
    drop(robot);

    let states = completed_into_an_episode(&cluster, &session).await;
    assert_eq!(states, vec![1.0, 2.0], "what the dead instance recorded");
    within(async {
        while !parts().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(common::scalar(&cluster.url, &format!("SELECT COUNT(*) FROM audit_records WHERE session_id = '{session}' AND action = 'episode_recorded'")).await, 1, "one episode, recorded once");
    drop(cockpit);
    cluster.finish().await;
}

/// An instance killed without a farewell is known gone by the others at
/// once, not when its last relay report lapses: asked whether it is there,
/// NATS answers that nobody listens (its process's connection closed, its
/// subscriptions with it). One still listening is not gone, whether it
/// answers or not (paused, say); one whose link never connected is gone;
/// one that said farewell stops answering. Real NATS, the links in this
/// process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_relay_link_left_nats_is_known_gone() {
    use server::relay::link::RelayLink;
    let Some(nats) = super::nats_url().await else { return };
    // A cluster of this test's own on the shared NATS.
    let cluster = uuid::Uuid::now_v7().simple().to_string();
    let there = RelayLink::connect(&nats, "there", &cluster).await.expect("NATS");
    let leaving = RelayLink::connect(&nats, "leaving", &cluster).await.expect("NATS");
    let asking = RelayLink::connect(&nats, "asking", &cluster).await.expect("NATS");
    // (Each answers from its connection, once its subscription is live.)
    for publisher in ["there", "leaving"] {
        within(async {
            while asking.is_gone(publisher).await {
                tokio::task::yield_now().await;
            }
        })
        .await;
    }
    assert!(asking.is_gone("never-connected").await);
    // One that listens and does not answer (paused, say) is not gone: its
    // report stands its while.
    let paused = async_nats::connect(nats.as_str()).await.expect("NATS");
    let _listening = paused.subscribe(format!("clutchcall.{cluster}.relay.here.paused")).await.unwrap();
    server::bus::nats::settled(&paused).await.unwrap();
    assert!(!asking.is_gone("paused").await);
    // "there" goes: its subscription with it (as when its process is
    // killed and its kernel closes its connection to NATS).
    drop(there);
    // "leaving" says farewell: it answers no more.
    leaving.farewell().await;
    for publisher in ["there", "leaving"] {
        within(async {
            while !asking.is_gone(publisher).await {
                tokio::task::yield_now().await;
            }
        })
        .await;
    }
}

/// An instance killed (-9) while it carries a session's edge agent says no
/// farewell; the instance with the cockpit finds it gone from NATS while
/// its last report still stands (counted on `/metrics`,
/// `clutchcall_relay_instances_gone_total`), and its cockpit hears the
/// robot gone. (Without the asking, the report would lapse on its own and
/// nothing would be counted.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_with_the_edge_agent_is_found_gone_by_the_one_with_the_cockpit() {
    let Some(nats) = super::nats_url().await else { return };
    let Some(mut cluster) = Cluster::start(Some(&nats), 3).await else { return };
    let session = asha_attached(&cluster).await;
    let (robot, mut cockpit) = robot_on_third_cockpit_on_second(&cluster, &session).await;
    let gone = |metrics: &str| server::metrics::counter_value(metrics, server::metrics::RELAY_INSTANCES_GONE) > 0;
    assert!(!gone(&cluster.scrape(1).await), "nobody found gone yet");

    cluster.servers[2].child.start_kill().expect("SIGKILL");
    let _ = cluster.servers[2].child.wait().await;
    within(async {
        while !gone(&cluster.scrape(1).await) {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    robot_left(&mut cockpit).await;
    drop((robot, cockpit));
    cluster.finish().await;
}

/// A frame the NATS client cannot take now (its queue full: here NATS is
/// gone, so nothing drains it) is dropped at once and said so, as a
/// socket's full queue drops one (`relay::channel::Channel` counts it dropped): a
/// relay socket's task never waits on NATS (`send` is not async).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_frame_the_nats_client_cannot_take_is_dropped_at_once() {
    use server::relay::link::{ChannelLink, Direction, RelayLink};
    let Some(mut nats) = super::OwnNats::start(None).await else { return };
    let link = RelayLink::connect(&nats.url(), "here", &uuid::Uuid::now_v7().simple().to_string()).await.expect("NATS");
    let channel = ChannelLink::new(link, "ses-full");
    let frame = axum::extract::ws::Message::Binary(vec![7u8; 1024].into());
    assert!(channel.send(Direction::Up, &frame), "taken while NATS is there");
    // Killed (and gone): the client's queue takes frames until it is full.
    nats.process.kill().await.unwrap();
    let taken = (0..1_000_000).take_while(|_| channel.send(Direction::Up, &frame)).count();
    assert!(taken > 0, "refused at once: a closed client, not a full queue");
    assert!(taken < 1_000_000, "a million frames taken with NATS gone: none was ever dropped");
}
