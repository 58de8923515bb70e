//! What instances tell each other besides the events on topics (cluster
//! mode): revocations, and which operators ring where (rule D10).
//!
//! A sign-out, a password change, a removal or a role change, a token
//! rotation or a retirement made on one instance ends the affected sockets
//! and forgets the cached robot token on every other one
//! (`services::tabs::Revocation`), over one NATS subject. NATS core
//! delivers at most once, so each instance numbers its revocations and
//! tallies them every few seconds (so a lost last one shows too); after a
//! gap, a short tally, a reconnect or a slow-consumer warning an instance
//! checks its sockets' credentials and its cached robot tokens against the
//! store (`reconcile`), so a lost revocation still takes effect.
//!
//! A desk that rings someone who is in other orgs too tells the other
//! instances, and tells them again once the offer's close is committed
//! (`share_busy`, `hear_busy`; `engine/busy.rs` keeps what it hears).

use crate::bus::nats::NatsBus;
use crate::engine::busy::{BusyNews, BusyOperators, TellBusy};
use crate::services::tabs::{Credential, Ended, Revocation, TellOthers};
use crate::services::{OpenTabs, RobotRegistry};
use crate::store::{SharedStore, StoreResult};
use crate::task::OwnedTask;
use futures::StreamExt;
use std::sync::Arc;

/// The subject every instance's revocations travel on (in the cluster's namespace).
pub const REVOCATIONS: &str = "revocations";
/// The subject of every instance's claims and releases of ringing operators.
pub const BUSY: &str = "busy";
/// A claim from elsewhere stands this long beyond the offer window
/// without news (its release may have been lost).
const BUSY_MARGIN_MS: i64 = 2_000;
/// Reconciles after lost revocations run at most this often.
const RECONCILE_AT_MOST_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// How often each instance tallies its revocations (`NatsBus::tally`): a
/// lost last revocation is noticed within this.
const TALLY_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// Store lookups a reconcile runs at once.
const RECONCILE_LOOKUPS_AT_ONCE: usize = 8;
/// How often claims from elsewhere that stood their time are let go.
const BUSY_LAPSE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What this instance tells the others on one of the cluster's subjects
/// (`REVOCATIONS`, `BUSY`), numbered and in order (`NatsBus::send`).
pub struct ToOthers {
    bus: Arc<NatsBus>,
    subject: String,
}

impl ToOthers {
    fn new(bus: &Arc<NatsBus>, name: &str) -> Arc<ToOthers> {
        Arc::new(ToOthers { bus: bus.clone(), subject: bus.cluster_subject(name) })
    }

    /// Tallies what was sent on the subject (`NatsBus::tally`).
    fn tally(&self) {
        self.bus.tally(&self.subject);
    }

    fn send(&self, news: &impl serde::Serialize) {
        match serde_json::to_vec(news) {
            Ok(payload) => self.bus.send(&self.subject, payload),
            Err(e) => tracing::error!(subject = %self.subject, error = %e, "news for the other instances could not be written"),
        }
    }
}

impl TellOthers for ToOthers {
    fn tell(&self, revocation: &Revocation) {
        self.send(revocation);
    }
}

impl TellBusy for ToOthers {
    fn tell(&self, news: &BusyNews) {
        self.send(news);
    }
}

/// Joins the cluster's revocations: those made here go out, those made
/// elsewhere are applied here, and every `TALLY_EVERY` this instance
/// tallies what it sent. After any that may have been lost (a publisher
/// skipped a number or tallied more than was heard, the connection to
/// NATS came back, NATS found this instance too slow) the sockets and the
/// robot cache (tokens and records) here are checked against the store
/// (`reconcile`). Returns
/// the listening task. Every `sweep` they are checked whether or not any
/// seems lost: a revocation whose sender died before it went out, tallied
/// by nobody, leaves no trace, so that bounds how long it can be missed.
pub async fn join(
    bus: Arc<NatsBus>, store: SharedStore, tabs: Arc<OpenTabs>, robots: Arc<RobotRegistry>, sweep: std::time::Duration,
) -> Result<tokio::task::JoinHandle<()>, async_nats::SubscribeError> {
    let to_others = ToOthers::new(&bus, REVOCATIONS);
    let mut heard = Some(bus.client().subscribe(to_others.subject.clone()).await?);
    tabs.reach_others(to_others.clone());
    let me = bus.publisher().to_string();
    let mut losses = bus.losses();
    let lost = Arc::new(tokio::sync::Notify::new());
    // Revocations made before the subscription was live could not reach
    // it, and the token cache was loaded before: checked once now.
    crate::bus::nats::confirm(bus.client(), "the revocations subscription").await;
    lost.notify_one();
    Ok(tokio::spawn(async move {
        // Ends with this task, however it ends (an abort included).
        let _reconciler = OwnedTask::spawn(reconcile_after_losses(lost.clone(), store, tabs.clone(), robots.clone()));
        let mut numbers = crate::bus::nats::Heard::default();
        let mut tally = tokio::time::interval_at(tokio::time::Instant::now() + TALLY_EVERY, TALLY_EVERY);
        tally.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sweeps = tokio::time::interval_at(tokio::time::Instant::now() + sweep, sweep);
        sweeps.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let message = tokio::select! {
                message = next_heard(&mut heard) => match message {
                    Some(message) => message,
                    None => {
                        // The sweeps go on: they alone bound what is missed now.
                        tracing::error!("the revocations subscription ended: revocations from other instances no longer reach this one");
                        lost.notify_one();
                        continue;
                    }
                },
                changed = losses.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    lost.notify_one();
                    continue;
                }
                _ = tally.tick() => {
                    to_others.tally();
                    continue;
                }
                _ = sweeps.tick() => {
                    lost.notify_one();
                    continue;
                }
            };
            // A tally: lost unless all it counts was heard.
            if let Some((from, sent)) = crate::bus::nats::tally_of(&message) {
                if from != me && numbers.missed_by_tally(&from, sent) {
                    tracing::warn!(publisher = %from, "another instance's last revocations were lost: checking everything against the store");
                    lost.notify_one();
                }
                continue;
            }
            let Some((from, seq)) = crate::bus::nats::sender_seq(&message) else {
                tracing::warn!("a revocation without its publisher's number: checking everything against the store");
                lost.notify_one();
                continue;
            };
            if from == me {
                continue;
            }
            // A publisher's first revocation heard must be its first sent:
            // one that lost its first few (NATS away as it started) is a gap.
            if !numbers.follows_from_one(&from, seq) {
                tracing::warn!(publisher = %from, "revocations from another instance were lost: checking everything against the store");
                lost.notify_one();
            }
            match serde_json::from_slice::<Revocation>(&message.payload) {
                Ok(Revocation::RobotToken { org_id, robot_id, secret }) => robots.revoked_elsewhere(&org_id, &robot_id, secret.as_deref()),
                Ok(Revocation::RobotChanged { org_id, robot_id, pop }) => robots.changed_elsewhere(&org_id, &robot_id, &pop),
                Ok(revocation) => {
                    tabs.revoked_elsewhere(&revocation);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a revocation from another instance could not be read: checking everything against the store");
                    lost.notify_one();
                }
            }
        }
    }))
}

/// The next revocation heard; `None` once, when the subscription ends,
/// then never again (pending for ever).
async fn next_heard(heard: &mut Option<async_nats::Subscriber>) -> Option<async_nats::Message> {
    let Some(subscription) = heard else { return std::future::pending().await };
    let next = subscription.next().await;
    if next.is_none() {
        *heard = None;
    }
    next
}

/// Runs `reconcile` each time revocations may have been lost (or a sweep
/// is due); losses told while it runs make one more run (a `Notify` keeps
/// one permit), at most one run every `RECONCILE_AT_MOST_EVERY` (losses
/// come in bursts, when the instance is already struggling).
async fn reconcile_after_losses(lost: Arc<tokio::sync::Notify>, store: SharedStore, tabs: Arc<OpenTabs>, robots: Arc<RobotRegistry>) {
    loop {
        lost.notified().await;
        loop {
            match reconcile(&store, &tabs, &robots).await {
                Ok(0) => {
                    tracing::debug!("sockets and cached tokens checked against the store: all still hold");
                    break;
                }
                Ok(ended) => {
                    tracing::warn!(ended, "sockets and cached tokens checked against the store: some no longer held and were ended here");
                    break;
                }
                Err(e) => {
                    // The store is away too: try again until it answers.
                    tracing::warn!(error = %e, "could not check sockets against the store; trying again");
                    tokio::time::sleep(RECONCILE_AT_MOST_EVERY).await;
                }
            }
        }
        tokio::time::sleep(RECONCILE_AT_MOST_EVERY).await;
    }
}

/// Checks every credential a socket here stands on, and every cached robot
/// token, against the store, as if each had just been presented: what no
/// longer holds ends its sockets here (only those open before the check
/// began: a newer one was judged on the store as it is). A few lookups run
/// at once. Returns how many credentials ended.
pub async fn reconcile(store: &SharedStore, tabs: &OpenTabs, robots: &RobotRegistry) -> StoreResult<usize> {
    // Taken before the robots' tokens are read: a robot socket judged
    // against that read was opened before it.
    let (credentials, opened_before) = tabs.credentials();
    let (mut ended, robot_tokens) = robots.reconcile().await?;
    let robot_tokens = &robot_tokens;
    let now = crate::clock::now_ms();
    let judged = futures::stream::iter(credentials)
        .map(|credential| async move {
            let why = match &credential {
                Credential::SignIn { sign_in, org_id, role, .. } => match store.signed_in_role(sign_in, org_id, now).await? {
                    Some(held) if held == *role => None,
                    // A sign-in that is gone ends; one that holds another
                    // role (or acts in another org) is judged again on reconnect.
                    _ if store.web_session(sign_in).await?.is_none_or(|s| s.expires_at <= now) => Some(Ended::CredentialEnded),
                    _ => Some(Ended::AccessChanged),
                },
                Credential::ApiKey { token, .. } => store.api_key(token).await?.is_none().then_some(Ended::CredentialEnded),
                // Judged against every token the store holds, not only those
                // cached here (a lookup that raced a revocation answers
                // without remembering): the registry ended the cached ones.
                Credential::Robot { token, .. } => (!robot_tokens.contains(token)).then_some(Ended::CredentialEnded),
            };
            StoreResult::Ok((credential, why))
        })
        .buffer_unordered(RECONCILE_LOOKUPS_AT_ONCE);
    let mut judged = std::pin::pin!(judged);
    while let Some(next) = judged.next().await {
        // (A robot token the registry's reconcile forgot had its sockets
        // ended and counted there already.)
        if let (credential, Some(why)) = next? {
            if tabs.end_here(&credential, why, opened_before) > 0 {
                ended += 1;
            }
        }
    }
    Ok(ended)
}

/// Cluster mode, before the engine starts (its desks claim operators as
/// they load): claims made here go out, and the subscription to the
/// others' is live (`hear_busy` reads it once the engine runs).
pub async fn share_busy(bus: &Arc<NatsBus>, busy: &BusyOperators, offer_window_ms: i64) -> Result<async_nats::Subscriber, async_nats::SubscribeError> {
    let heard = bus.client().subscribe(bus.cluster_subject(BUSY)).await?;
    crate::bus::nats::confirm(bus.client(), "the busy operators' subscription").await;
    let hold = std::time::Duration::from_millis((offer_window_ms + BUSY_MARGIN_MS).max(0) as u64);
    busy.reach_others(ToOthers::new(bus, BUSY), hold);
    Ok(heard)
}

/// Applies other instances' claims and releases to this one's desks: an
/// operator freed elsewhere, or whose claim lapsed, is offered the calls
/// this instance's desks queued for them. Returns the listening task.
pub fn hear_busy(mut heard: async_nats::Subscriber, me: String, engine: Arc<crate::engine::Engine>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut lapse = tokio::time::interval(BUSY_LAPSE_EVERY);
        lapse.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let freed = tokio::select! {
                message = heard.next() => {
                    let Some(message) = message else { return };
                    let from = crate::bus::nats::publisher_of(&message).unwrap_or_default();
                    if from == me {
                        continue;
                    }
                    match serde_json::from_slice::<BusyNews>(&message.payload) {
                        Ok(news) => engine.busy().heard(&from, news),
                        Err(e) => {
                            tracing::warn!(error = %e, "a ringing operator's claim from another instance could not be read");
                            continue;
                        }
                    }
                }
                _ = lapse.tick() => engine.busy().lapse(),
            };
            engine.poke(freed);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewOrg, NewRobot, RobotChange, Seed};

    fn robot_socket(token: &str) -> Credential {
        Credential::Robot { org_id: "org".into(), robot_id: "r-1".into(), token: token.into() }
    }

    /// The sweep judges a robot's sockets against the tokens the store
    /// holds, whether or not this instance cached the token: one opened
    /// with a token never cached here (a lookup that raced a revocation
    /// answers without remembering) ends once the store no longer holds
    /// it, and one on the robot's current token, also never cached here,
    /// stays open.
    #[tokio::test]
    async fn a_sweep_ends_robot_sockets_whose_token_the_store_no_longer_holds_cached_here_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::sqlite_with_a_robot(dir.path()).await;
        let tabs = OpenTabs::new();
        let (robots, lapses) = RobotRegistry::load(store.clone(), crate::bus::InProcessBus::new(), tabs.clone()).await.unwrap();
        // Loaded with `hash-1`; another instance then rotates the token to
        // `hash-2`, and its revocation never reaches this one.
        let rotated = store.rotate_robot_token("org", "r-1", "hash-2", "admin", crate::clock::now_ms()).await.unwrap();
        assert!(matches!(rotated, RobotChange::Done(_, _, Some(ref ended)) if ended == "hash-1"));
        // A robot of another org, enrolled elsewhere after this instance
        // loaded: the store's tokens are read for every org.
        let robot = NewRobot {
            id: "r-9".into(), org_id: "other".into(), model: "UR5e".into(), site: "Leeds".into(), pop: "uk-london".into(),
            req_cert: "pick-place · tier-1".into(), token_hash: "hash-9".into(),
        };
        store.seed(&Seed { orgs: vec![NewOrg { id: "other".into(), name: "Other".into() }], robots: vec![robot], ..Seed::default() }).await.unwrap();
        let in_another_org = tabs.open(Credential::Robot { org_id: "other".into(), robot_id: "r-9".into(), token: "hash-9".into() }, None).await.unwrap();

        let on_the_cached_token = tabs.open(robot_socket("hash-1"), None).await.unwrap();
        let on_a_token_never_cached = tabs.open(robot_socket("hash-0"), None).await.unwrap();
        let on_the_current_token = tabs.open(robot_socket("hash-2"), None).await.unwrap();
        assert!(on_a_token_never_cached.holds(), "nothing told this instance about hash-0");

        let ended = reconcile(&store, &tabs, &robots).await.unwrap();
        assert!(!on_the_cached_token.holds(), "the cached token the store no longer holds ends its socket");
        assert!(!on_a_token_never_cached.holds(), "a token never cached here is judged against the store too");
        assert!(on_the_current_token.holds(), "the robot's current token holds, cached here or not");
        assert!(in_another_org.holds(), "another org's robot's token holds");
        assert_eq!(ended, 2, "each ended credential is counted once");
        lapses.abort();
    }
}
