//! One dispatch decision over 10,000 ready operators (target ≤ 50 µs):
//! a call is raised on a desk whose ready index holds them all, then
//! withdrawn, so every iteration decides over the same pool; once without
//! and once with an RTT ceiling on the call's skill (rule A15) that leaves
//! two regions of three above it, so the record counts them.
//!
//! cargo bench -p clutchcall-bench --bench decision

use app::dispatch::LinkFloors;
use app::models::{LifecycleState, LinkFloor, Role};
use criterion::{criterion_group, criterion_main, Criterion};
use server::engine::{CallOutcome, CallingRobot, Desk, Settings};
use server::store::OperatorRecord;

const REGIONS: [&str; 3] = ["BLR", "Manchester", "Austin"];
const POPS: [&str; 3] = ["us-east", "us-west", "uk-london"];
const SKILLS: [&str; 6] = ["pick-place", "palletize", "welding", "inspection", "mobile-manipulation", "sorting"];

fn desk(operators: usize) -> Desk {
    let floors = REGIONS
        .iter()
        .enumerate()
        .flat_map(|(i, region)| {
            POPS.iter().enumerate().map(move |(j, pop)| LinkFloor {
                region: region.to_string(),
                pop: pop.to_string(),
                floor_ms: (90 + 60 * i + 20 * j) as u32,
                note: None,
            })
        })
        .collect::<Vec<_>>();
    let settings = Settings { offer_window_ms: 30_000, wrap_up_ms: 0, presence_ttl_ms: 20_000, cooloff_ms: 60_000, pending_timeout_ms: 900_000, inactivity: Default::default(), session_ms: 1_800_000 };
    let mut desk = Desk::standalone("org-bench", settings, LinkFloors::new(floors));
    for i in 0..operators {
        let id = format!("u-{i:05}");
        desk.load_operator(OperatorRecord {
            user_id: id.clone(),
            display_name: format!("Operator {i}"),
            email: format!("{id}@bench.example"),
            external_id: None,
            role: Role::Operator,
            region: REGIONS[i % REGIONS.len()].to_string(),
            certifications: vec![format!("{} · tier-1", SKILLS[i % SKILLS.len()]), format!("{} · tier-2", SKILLS[(i / 7) % SKILLS.len()])],
            active: true,
            in_other_orgs: false,
        });
        desk.ready(&id, true, i as i64).unwrap();
    }
    desk.serve_queues(0);
    desk.take_effects();
    desk
}

fn decision(c: &mut Criterion) {
    raise_and_withdraw(c, "raise + withdraw over 10,000 ready operators", desk(10_000));
    let mut ceiled = desk(10_000);
    // us-east: BLR 90 ms, Manchester 150 ms, Austin 210 ms.
    ceiled.set_ceilings(vec![app::dispatch::RttCeiling::new("pick-place", 120)], 0);
    ceiled.take_effects();
    raise_and_withdraw(c, "raise + withdraw over 10,000 ready operators, 2/3 above the call's RTT ceiling", ceiled);
}

fn raise_and_withdraw(c: &mut Criterion, name: &str, mut desk: Desk) {
    let robot = CallingRobot {
        id: "r-bench".into(),
        model: "UR10e".into(),
        site: "Bench".into(),
        pop: "us-east".into(),
        req_cert: "pick-place · tier-2".into(),
    };
    let mut now = 1_000_000;
    c.bench_function(name, |b| {
        b.iter(|| {
            now += 1;
            let outcome = desk.raise(&robot, now).unwrap();
            let CallOutcome::Matched { session_id, .. } = outcome else { panic!("someone is ready") };
            desk.finish(&session_id, LifecycleState::Cancelled, "bench", now).unwrap();
            desk.serve_queues(now);
            desk.take_effects()
        })
    });
}

criterion_group!(benches, decision);
criterion_main!(benches);
