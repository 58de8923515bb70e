//! Rate limits hold across instances (issue "Scale out"): guesses and
//! requests spread over the instances spend from one budget.

use super::{nats_url, Cluster};
use crate::common;
use reqwest::StatusCode;
use server::http::robot_rate::{BURST, PER_SECOND};
use server::services::throttle::PAIR_BURST;

async fn sign_in_at(base: &str, email: &str, password: &str) -> reqwest::Response {
    common::browser().post(format!("{base}/api/sign_in")).header("origin", base).form(&[("email", email), ("password", password)]).send().await.unwrap()
}

/// One email's guesses from one address, alternated over two instances,
/// are limited as one: after the burst even the right password waits, on
/// either instance (per instance, each would have allowed the burst again).
/// A robot token's requests spread over both get one budget, not two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guesses_and_robot_requests_spread_over_instances_share_one_limit() {
    let Some(nats) = nats_url().await else { return };
    let Some(cluster) = Cluster::start(Some(&nats), 2).await else { return };
    for guess in 0..PAIR_BURST as usize {
        let answered = sign_in_at(cluster.base(guess % 2), common::OPERATOR, "a guess").await;
        assert_eq!(answered.status(), StatusCode::UNAUTHORIZED, "guess {guess} is checked");
    }
    for instance in 0..2 {
        let right = sign_in_at(cluster.base(instance), common::OPERATOR, server::seed::DEMO_PASSWORD).await;
        assert_eq!(right.status(), StatusCode::TOO_MANY_REQUESTS, "spent on the cluster, so on instance {instance} too");
        assert!(right.headers().contains_key("retry-after"));
    }
    assert_eq!(sign_in_at(cluster.base(1), common::ADMIN, server::seed::DEMO_PASSWORD).await.status(), StatusCode::OK, "another person is not held back");

    // Twice the burst at once, half on each instance.
    let http = common::http();
    let token = server::seed::demo_robot_token("uk-mm-01");
    let started = std::time::Instant::now();
    let flood = (0..2 * BURST as usize).map(|i| http.post(format!("{}/v1/robots/uk-mm-01/heartbeat", cluster.base(i % 2))).bearer_auth(&token).send());
    let statuses: Vec<StatusCode> = futures::future::join_all(flood).await.into_iter().map(|r| r.unwrap().status()).collect();
    let seconds = started.elapsed().as_secs_f64();
    let admitted = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert!(statuses.iter().all(|s| matches!(*s, StatusCode::OK | StatusCode::TOO_MANY_REQUESTS)), "{statuses:?}");
    assert!(admitted < statuses.len(), "some of twice the burst were refused");
    // One budget: the burst and what refilled meanwhile (two budgets would
    // have let about twice the burst through).
    let budget = BURST as usize + (f64::from(PER_SECOND) * seconds).ceil() as usize + 1;
    assert!(admitted <= budget, "{admitted} admitted in {seconds:.2} s; one budget allows {budget}");
    cluster.finish().await;
}
