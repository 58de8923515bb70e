//! Events across instances over NATS (issue "Scale out"): delivered, a
//! lost one told as a `Resync`, and screens and consoles brought back up to
//! date after a NATS restart.

use super::{accept_offer, admin_cookie, nats_url, owner, raise, ready_console, within, Cluster, OwnNats};
use crate::common;
use reqwest::StatusCode;

fn bookings_changed(robot: &str) -> domain::events::Event {
    domain::events::Event::Org(domain::events::OrgEvent::Bookings { robot_id: robot.into() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_cross_instances_over_nats_and_a_lost_one_is_a_resync() {
    use domain::events::Topic;
    use server::bus::{nats::NatsBus, Delivery, EventBus};
    let Some(url) = nats_url().await else { return };
    // One cluster (one database's id) for a and b; another cluster's instance on the same NATS.
    let cluster = server::auth::new_token()[..12].to_lowercase();
    let (a, b) = (NatsBus::connect(&url, "a/1", &cluster).await.unwrap(), NatsBus::connect(&url, "b/1", &cluster).await.unwrap());
    let stranger = NatsBus::connect(&url, "s/1", "another-cluster").await.unwrap();
    let org = format!("org-{}", server::auth::new_token()[..10].to_lowercase());
    let topic = Topic::org(&org);
    let mut on_b = b.subscribe(&topic);
    assert_eq!(within(on_b.recv()).await, Delivery::Resync, "live: what came before could not reach it");
    a.publish(topic.clone(), bookings_changed("r1"));
    assert_eq!(within(on_b.recv()).await, Delivery::Event(bookings_changed("r1")));
    // Another org's topic never reaches it, nor another cluster's event on
    // the same topic; its own events come back in order.
    a.publish(Topic::org("org-other"), bookings_changed("x"));
    stranger.publish(topic.clone(), bookings_changed("elsewhere"));
    b.publish(topic.clone(), bookings_changed("r2"));
    a.publish(topic.clone(), bookings_changed("r3"));
    let mut next = Vec::new();
    for _ in 0..2 {
        next.push(within(on_b.recv()).await);
    }
    next.sort_by_key(|d| format!("{d:?}"));
    assert_eq!(next, vec![Delivery::Event(bookings_changed("r2")), Delivery::Event(bookings_changed("r3"))]);

    // "a/1" skips a number (a message NATS lost): the subscriber resyncs, then reads on.
    let raw = async_nats::connect(url.as_str()).await.unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("CC-Publisher", "a/1");
    headers.insert("CC-Seq", "9");
    let payload = serde_json::to_vec(&bookings_changed("r9")).unwrap();
    raw.publish_with_headers(server::bus::nats::subject(&cluster, &topic), headers, payload.into()).await.unwrap();
    raw.flush().await.unwrap();
    assert_eq!(within(on_b.recv()).await, Delivery::Resync);
    assert_eq!(within(on_b.recv()).await, Delivery::Event(bookings_changed("r9")));
}

/// A topic whose NATS subscription ends under it (here: its connection is
/// drained) is no longer live: nothing relays it any more, so a socket
/// opened on it must not be told it hears everything from now on (before,
/// the topic stayed live with nothing relaying it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_whose_nats_subscription_ended_is_no_longer_live() {
    use domain::events::Topic;
    use server::bus::{nats::NatsBus, Delivery, EventBus};
    let Some(url) = nats_url().await else { return };
    let cluster = server::auth::new_token()[..12].to_lowercase();
    let b = NatsBus::connect(&url, "b/1", &cluster).await.unwrap();
    let topic = Topic::org(&format!("org-{}", server::auth::new_token()[..10].to_lowercase()));
    let mut on_b = b.subscribe(&topic);
    assert_eq!(within(on_b.recv()).await, Delivery::Resync);
    assert!(b.is_live(&topic));
    b.client().drain().await.unwrap();
    // Nothing is delivered when a subscription ends: its state is what tells.
    within(async {
        while b.is_live(&topic) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// A topic's `Resync` promises that everything published after it is
/// heard: the subscription must be in the NATS server by then, not only
/// written to this client's socket (a flush: the first topic here was
/// lost that way, as a CI run once lost one). Fresh topics, each
/// subscribed behind a backlog on b's connection and published to from
/// another connection the moment it resyncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_published_after_a_resync_is_heard() {
    use domain::events::Topic;
    use futures::StreamExt;
    use server::bus::{nats::NatsBus, Delivery, EventBus};
    let Some(url) = nats_url().await else { return };
    let cluster = server::auth::new_token()[..12].to_lowercase();
    let (a, b) = (NatsBus::connect(&url, "a/1", &cluster).await.unwrap(), NatsBus::connect(&url, "b/1", &cluster).await.unwrap());
    // Each message of b's backlog goes to five listeners: the server
    // reads b's connection slower than b writes it.
    let listener = async_nats::connect(url.as_str()).await.unwrap();
    let mut listening = Vec::new();
    for _ in 0..5 {
        let mut heard = listener.subscribe(format!("backlog.{cluster}")).await.unwrap();
        listening.push(tokio::spawn(async move { while heard.next().await.is_some() {} }));
    }
    server::bus::nats::settled(&listener).await.unwrap();
    for i in 0..5 {
        // b's connection is busy: the server has its subscription only
        // once it has read the backlog before it.
        for _ in 0..10_000 {
            b.client().publish(format!("backlog.{cluster}"), bytes::Bytes::from_static(&[0; 64])).await.unwrap();
        }
        let topic = Topic::org(&format!("org-{i}"));
        let mut on_b = b.subscribe(&topic);
        assert_eq!(within(on_b.recv()).await, Delivery::Resync);
        a.publish(topic.clone(), bookings_changed("r1"));
        let heard = tokio::time::timeout(std::time::Duration::from_secs(5), on_b.recv()).await;
        assert_eq!(heard.ok(), Some(Delivery::Event(bookings_changed("r1"))), "topic {i}: published after its Resync, so heard");
    }
}

/// The owner's events reach a wallboard on another instance through NATS:
/// a call raised on the instance that dispatches the org moves the
/// wallboard of an admin signed in on the other one, with no reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wallboard_on_another_instance_hears_the_owners_events_through_nats() {
    use domain::events::OrgEvent;
    use domain::ring::RingMsg;
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    let (first, second) = (&cluster.servers[0], &cluster.servers[1]);
    assert!(owner(&cluster.url).await.starts_with("first/"));
    let cookie = admin_cookie(&second.base).await;
    let mut wallboard = common::Tab::open_at(&second.base, &cookie, "/ws?watch=org").await;
    // Its topic's NATS subscription is live: the screen is told to reload once.
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;
    let raised = raise(&first.base, "uk-pick-01").await;
    assert_eq!(raised.status(), StatusCode::ACCEPTED);
    let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    let heard = wallboard
        .until(|m| match m {
            RingMsg::Org { event: OrgEvent::Lifecycle { session_id, .. } } if session_id == session => Some(session_id),
            _ => None,
        })
        .await;
    assert_eq!(heard, session);
    cluster.finish().await;
}

/// NATS restarted mid-run: the instances reconnect by themselves, a live
/// screen on a non-owner is told to resync (never left silent), and the
/// owner's events and the forwarded requests flow again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_ride_out_a_nats_restart_and_screens_resync() {
    use domain::events::OrgEvent;
    use domain::ring::RingMsg;
    let Some(nats) = OwnNats::start(None).await else { return };
    let Some(cluster) = Cluster::start(Some(&nats.url()), 2).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    let second = cluster.base(1).to_string();
    let mut wallboard = common::Tab::open_at(&second, &admin_cookie(&second).await, "/ws?watch=org").await;
    wallboard.until(|m| matches!(m, RingMsg::Resync).then_some(())).await;

    let nats = nats.restart().await;
    // Within the reconnects (as l07's console below).
    wallboard.until_within(std::time::Duration::from_secs(15), |m| matches!(m, RingMsg::Resync).then_some(())).await;
    // Heard now (its Pong ends what came before): the raises below may take
    // a while, and a screen silent for the presence TTL is closed.
    wallboard.ping(1).await;
    // Raised on the second, which forwards it to the first once both are back on NATS.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let session = loop {
        let raised = raise(&second, "uk-pick-01").await;
        match raised.status() {
            StatusCode::ACCEPTED => break raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string(),
            StatusCode::SERVICE_UNAVAILABLE => assert!(std::time::Instant::now() < deadline, "forwarding never came back"),
            other => panic!("raise answered {other}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    wallboard
        .until(|m| match m {
            RingMsg::Org { event: OrgEvent::Lifecycle { session_id, .. } } if session_id == session => Some(()),
            _ => None,
        })
        .await;
    assert!(owner(&cluster.url).await.starts_with("first/"), "a NATS outage moves no org");
    cluster.finish().await;
    drop(nats);
}

/// A console told to resync (here: its instance's NATS connection came
/// back after a NATS restart) hears the notices that stand once more,
/// after its Welcome: the inactivity warning (rule L07) may be what it
/// missed. The console is on an instance that does not dispatch the org,
/// so the notices come from the owner (`Request::Notices` over NATS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l07_a_console_told_to_resync_is_warned_again() {
    use domain::ring::RingMsg;
    let Some(nats) = OwnNats::start(None).await else { return };
    let chain = vec![
        ("CLUTCHCALL_ACTIVITY_CHECK_S", "1".to_string()),
        ("CLUTCHCALL_INACTIVITY_WARNING_S", "2".to_string()),
        ("CLUTCHCALL_INACTIVITY_STOP_S", "120".to_string()),
    ];
    let Some(cluster) = Cluster::start_with(Some(&nats.url()), 2, chain).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    // Asha's console on the second; the call raised on the first, the owner.
    let mut console = ready_console(cluster.base(1), common::OPERATOR).await;
    let raised = raise(cluster.base(0), "ue-pick-01").await;
    assert_eq!(raised.status(), StatusCode::CREATED);
    let session = raised.json::<serde_json::Value>().await.unwrap()["sessionId"].as_str().unwrap().to_string();
    accept_offer(&mut console, &session).await;
    let warning = |m: RingMsg| match m {
        RingMsg::InactivityWarning { session_id, stop_at_ms } if session_id == session => Some(stop_at_ms),
        _ => None,
    };
    let stop_at = console.until(warning).await;
    // Heard now: the restart and the reconnects take a few seconds.
    console.ping(1).await;

    let nats = nats.restart().await;
    // Heard again (the presence TTL counts from the tab's last word), then
    // within the reconnects and the resync's wait for the owner's.
    console.send(domain::ring::ConsoleMsg::Heartbeat).await;
    let welcome = |m: RingMsg| matches!(m, RingMsg::Welcome { .. }).then_some(());
    console.until_within(std::time::Duration::from_secs(15), welcome).await;
    // Told once, two minutes before the stop: only the retelling says it now.
    assert_eq!(console.until(warning).await, stop_at);
    cluster.finish().await;
    drop(nats);
}
