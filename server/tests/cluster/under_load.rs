//! Failover and a rolling restart under load (rule D14): consoles spread
//! over the instances, robots raising through them, and every acknowledged
//! call accounted for.

use super::{nats_url, owner, ready_console, taken_from_first, Cluster};
use crate::common::{self, scalar};
use reqwest::StatusCode;

/// The demo org's operators, whose consoles the load test opens.
const OPERATORS: [&str; 8] = ["asha.rao", "vikram.iyer", "meera.nair", "tom.whitfield", "priya.shah", "owen.davies", "carla.mendes", "jamal.brooks"];

/// What one console heard while the load ran.
#[derive(Default)]
struct Heard {
    /// Welcomes after the first (the org's dispatcher moved: rejoined).
    welcomes: usize,
    /// The presence the last of them showed.
    welcomed_as: Option<domain::models::PresenceState>,
    offers: usize,
    closed: bool,
}

/// Reads a console until `stop`, so that it never falls behind.
fn listen(mut tab: common::Tab, stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<Heard> {
    use domain::ring::{ConsoleMsg, RingMsg};
    tokio::spawn(async move {
        let mut heard = Heard::default();
        // Heartbeats as a browser's console sends them: a tab silent for
        // the presence TTL (20 s) is closed by the server, as it should be.
        let heartbeat = serde_json::to_string(&ConsoleMsg::Heartbeat).unwrap();
        let mut beaten = std::time::Instant::now();
        while !*stop.borrow() {
            if beaten.elapsed() >= std::time::Duration::from_secs(5) {
                tab.send_text(heartbeat.clone()).await;
                beaten = std::time::Instant::now();
            }
            match tab.try_next(std::time::Duration::from_millis(200)).await {
                Ok(Some(RingMsg::Welcome { presence, .. })) => {
                    heard.welcomes += 1;
                    heard.welcomed_as = Some(presence.state);
                }
                Ok(Some(RingMsg::Offer { .. })) => heard.offers += 1,
                Ok(_) => {}
                Err(()) => {
                    heard.closed = true;
                    break;
                }
            }
        }
        heard
    })
}

/// What the robots' edge agents were told.
#[derive(Clone, Default)]
struct Calls {
    /// Every call acknowledged (201 or 202), by id.
    acknowledged: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// How many of them were matched to a ready operator at once (201).
    matched: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Calls {
    fn count(&self) -> usize {
        self.acknowledged.lock().unwrap().len()
    }

    fn matched(&self) -> usize {
        self.matched.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits (at most a minute) until `count` calls were acknowledged.
    async fn at_least(&self, count: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.count() < count {
            assert!(std::time::Instant::now() < deadline, "the robots' calls stopped being acknowledged");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Every acknowledged call is in the database, none is left open, and
    /// no operator ever held two offers at once.
    async fn none_lost(&self, url: &str) {
        let acknowledged = self.acknowledged.lock().unwrap().clone();
        let ids = acknowledged.iter().map(|id| format!("'{id}'")).collect::<Vec<_>>().join(",");
        let found = scalar(url, &format!("SELECT COUNT(*) FROM sessions WHERE id IN ({ids})")).await;
        assert_eq!(found, acknowledged.len() as i64, "every acknowledged call is in the database");
        // (A call committed whose answer was lost with its instance, never
        // retried once the robots stopped, is pending: its robot was never told.)
        let open = format!("SELECT COUNT(*) FROM sessions WHERE id IN ({ids}) AND lifecycle IN ('PENDING', 'ACTIVE', 'PAUSED')");
        assert_eq!(scalar(url, &open).await, 0, "every acknowledged call was withdrawn: none is stuck");
        let overlapping = "SELECT COUNT(*) FROM offers a JOIN offers b ON a.operator_id = b.operator_id AND a.id < b.id \
             AND a.offered_at < COALESCE(b.answered_at, b.expires_at) AND b.offered_at < COALESCE(a.answered_at, a.expires_at)";
        assert_eq!(scalar(url, overlapping).await, 0, "no operator held two offers at once");
    }
}

/// Four robots' edge agents calling through `bases` (which the test may
/// change as instances come and go) until `stop`.
fn start_robots(bases: &std::sync::Arc<std::sync::Mutex<Vec<String>>>, calls: &Calls, stop: &tokio::sync::watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<()>> {
    ["uk-pick-01", "ue-pick-02", "uw-weld-01", "uk-insp-01"]
        .into_iter()
        .map(|robot| tokio::spawn(keep_calling(robot, bases.clone(), calls.clone(), stop.clone())))
        .collect()
}

/// A robot's edge agent: raises a call on one instance and withdraws it
/// on another, again and again. A 503 (the org between owners) or an
/// instance that does not answer (stopping, restarting) is tried again on
/// the next.
async fn keep_calling(robot: &'static str, bases: std::sync::Arc<std::sync::Mutex<Vec<String>>>, calls: Calls, stop: tokio::sync::watch::Receiver<bool>) {
    let token = server::seed::demo_robot_token(robot);
    let base = |turn: usize| {
        let bases = bases.lock().unwrap();
        bases[turn % bases.len()].clone()
    };
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(100));
    let mut turn = 0usize;
    while !*stop.borrow() {
        turn += 1;
        let raised = common::http().post(format!("{}/v1/sessions", base(turn))).bearer_auth(&token).json(&serde_json::json!({ "robotId": robot })).send().await;
        let Ok(res) = raised else {
            pause().await;
            continue;
        };
        let status = res.status();
        let body: serde_json::Value = res.json().await.unwrap_or_default();
        let session = match status {
            StatusCode::CREATED | StatusCode::ACCEPTED => {
                let id = body["sessionId"].as_str().unwrap().to_string();
                calls.acknowledged.lock().unwrap().push(id.clone());
                if status == StatusCode::CREATED {
                    calls.matched.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                id
            }
            // A call committed whose answer was lost with its instance: the robot withdraws it too.
            StatusCode::CONFLICT => {
                let message = body["error"]["message"].as_str().unwrap().to_string();
                message.rsplit('(').next().unwrap().trim_end_matches(')').to_string()
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                pause().await;
                continue;
            }
            other => panic!("{robot}: raise answered {other}: {body}"),
        };
        let mut retried = false;
        loop {
            turn += 1;
            let withdrawn = common::http().delete(format!("{}/v1/sessions/{session}", base(turn))).bearer_auth(&token).send().await;
            match withdrawn.as_ref().map(|res| res.status()) {
                Ok(StatusCode::OK) => break,
                // An earlier try was committed, its answer lost with the owner.
                Ok(StatusCode::CONFLICT) if retried => break,
                Ok(StatusCode::SERVICE_UNAVAILABLE) | Err(_) => {
                    retried = true;
                    pause().await;
                }
                Ok(other) => panic!("{robot}: withdrawing {session} answered {other}: {}", withdrawn.unwrap().text().await.unwrap()),
            }
        }
    }
}

/// Failover under load (rule D14): twelve consoles spread over three
/// instances, four robots raising and withdrawing through the two that
/// survive; the owner is killed (-9) after 60 acknowledged calls. Another
/// instance takes the org; every acknowledged call is in the database and
/// none is left open; no operator ever held two offers at once; the
/// consoles on the survivors keep their sockets, register with the new
/// dispatcher (ready again) and are rung by calls raised after the takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d14_failover_under_load_loses_no_acknowledged_call_and_survivors_consoles_stay() {
    let Some(nats) = nats_url().await else { return };
    let Some(mut cluster) = Cluster::start(Some(&nats), 3).await else { return };
    assert!(owner(&cluster.url).await.starts_with("first/"));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (mut survivors, mut on_owner) = (Vec::new(), Vec::new());
    for i in 0..12 {
        let email = format!("{}@northstar.example", OPERATORS[i % OPERATORS.len()]);
        let tab = ready_console(cluster.base(i % 3), &email).await;
        match i % 3 {
            0 => on_owner.push(listen(tab, stopped.clone())),
            _ => survivors.push(listen(tab, stopped.clone())),
        }
    }
    let calls = Calls::default();
    let bases = std::sync::Arc::new(std::sync::Mutex::new(vec![cluster.base(1).to_string(), cluster.base(2).to_string()]));
    let robots = start_robots(&bases, &calls, &stopped);
    calls.at_least(60).await;
    cluster.servers[0].child.start_kill().unwrap();
    cluster.servers[0].child.wait().await.unwrap();
    let matched_before = calls.matched();
    let new_owner = taken_from_first(&cluster.url).await;
    calls.at_least(calls.count() + 40).await;
    assert!(cluster.dispatching(new_owner).await && !cluster.dispatching(3 - new_owner).await, "the new owner says so on /metrics");
    stop.send(true).unwrap();
    for robot in robots {
        robot.await.unwrap();
    }
    for tab in on_owner {
        assert!(tab.await.unwrap().closed, "a console on the killed instance lost its socket");
    }
    for tab in survivors {
        let heard = tab.await.unwrap();
        assert!(!heard.closed, "a console on a surviving instance never reconnects");
        assert!(heard.welcomes >= 1, "a console on a survivor registered with the new dispatcher");
        use domain::models::PresenceState::{Ready, Ringing};
        assert!(matches!(heard.welcomed_as, Some(Ready | Ringing)), "and is in the pool there, as before: {:?}", heard.welcomed_as);
    }
    assert!(calls.matched() > matched_before, "ready consoles on the survivors are rung after the takeover");
    calls.none_lost(&cluster.url).await;
    cluster.finish().await;
}

/// A rolling restart under load: each of the three instances in turn is
/// stopped (SIGTERM: it gives its leases up) and started again under its
/// name while four robots raise and withdraw through whichever instances
/// answer. No acknowledged call is lost or left open, and no operator ever
/// held two offers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_of_every_instance_loses_no_acknowledged_call() {
    let Some(nats) = nats_url().await else { return };
    let Some(mut cluster) = Cluster::start(Some(&nats), 3).await else { return };
    // A ready console on each instance (each ends with its instance).
    let mut consoles = Vec::new();
    for i in 0..3 {
        consoles.push(ready_console(cluster.base(i), &format!("{}@northstar.example", OPERATORS[i])).await);
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let calls = Calls::default();
    let bases = std::sync::Arc::new(std::sync::Mutex::new((0..3).map(|i| cluster.base(i).to_string()).collect::<Vec<_>>()));
    let robots = start_robots(&bases, &calls, &stopped);
    for i in 0..3 {
        calls.at_least((i + 1) * 20).await;
        cluster.servers[i].terminate().await;
        cluster.restart(i, Some(&nats)).await;
        bases.lock().unwrap()[i] = cluster.base(i).to_string();
    }
    calls.at_least(80).await;
    stop.send(true).unwrap();
    for robot in robots {
        robot.await.unwrap();
    }
    assert!(calls.matched() > 0, "ready operators were offered calls");
    calls.none_lost(&cluster.url).await;
    drop(consoles);
    cluster.finish().await;
}
