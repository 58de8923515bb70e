//! The desk as a pure state machine: decisions, timers and effects with
//! explicit times, no database and no sleeping.

use super::busy::BusyOperators;
use super::calls::CallingRobot;
use super::desk::Desk;
use super::timers::Timer;
use super::types::{CallOutcome, Settings};
use crate::store::{OperatorRecord, Write};
use domain::dispatch::{LinkFloors, OfferStatus};
use domain::inactivity::InactivityPolicy;
use domain::events::{Event, OperatorEvent};
use domain::models::{LifecycleState, LinkFloor, PresenceState, Role};
use std::sync::Arc;

/// Engine timings for the desk's tests and the engine's (mod.rs).
pub(super) const SETTINGS: Settings = Settings { offer_window_ms: 30_000, wrap_up_ms: 60_000, presence_ttl_ms: 20_000, cooloff_ms: 60_000, pending_timeout_ms: 900_000, inactivity: InactivityPolicy { check_ms: 30_000, warning_after_ms: 120_000, stop_after_warning_ms: 60_000 }, session_ms: 1_800_000 };

fn operator(id: &str, region: &str, certs: &[&str]) -> OperatorRecord {
    OperatorRecord {
        in_other_orgs: false,
        user_id: id.into(),
        display_name: id.to_uppercase(),
        email: format!("{id}@example.test"),
        external_id: None,
        role: Role::Operator,
        region: region.into(),
        certifications: certs.iter().map(|c| c.to_string()).collect(),
        active: true,
    }
}

fn robot(id: &str, pop: &str, req_cert: &str) -> CallingRobot {
    CallingRobot { id: id.into(), model: "UR10e".into(), site: "Site".into(), pop: pop.into(), req_cert: req_cert.into() }
}

fn desk_with(busy: Arc<BusyOperators>, org: &str, operators: &[OperatorRecord]) -> Desk {
    let floors = LinkFloors::new([
        LinkFloor { region: "Austin".into(), pop: "us-east".into(), floor_ms: 96, note: None },
        LinkFloor { region: "BLR".into(), pop: "us-east".into(), floor_ms: 275, note: None },
    ]);
    let mut desk = Desk::new(org, SETTINGS, Arc::new(floors), busy);
    for op in operators {
        desk.load_operator(op.clone());
    }
    desk.take_effects();
    desk
}

fn desk(operators: &[OperatorRecord]) -> Desk {
    desk_with(Arc::new(BusyOperators::default()), "org", operators)
}

/// Runs what a dispatcher does at `now`: due timers, then the queues.
fn tick(desk: &mut Desk, now: i64) {
    for timer in desk.timers.due(now) {
        desk.fire(timer, now);
    }
    desk.serve_queues(now);
}

fn offered_to(desk: &mut Desk, operator_id: &str) -> Option<String> {
    desk.take_effects().writes.into_iter().rev().find_map(|w| match w {
        Write::Offer { session_id, offer, .. } if offer.operator_id == operator_id => Some(session_id),
        _ => None,
    })
}

fn session_of(outcome: &CallOutcome) -> String {
    match outcome {
        CallOutcome::Matched { session_id, .. } | CallOutcome::Queued { session_id, .. } => session_id.clone(),
    }
}

#[test]
fn d08_the_cool_off_keeps_a_decliner_from_the_same_call_for_its_length_never_longer() {
    let mut desk = desk(&[operator("carla", "Austin", &["pick-place"])]);
    desk.ready("carla", true, 0).unwrap();
    let call = session_of(&desk.raise(&robot("r1", "us-east", "pick-place · tier-2"), 1_000).unwrap());
    assert_eq!(offered_to(&mut desk, "carla"), Some(call.clone()));
    desk.decline("carla", &call, 2_000).unwrap();
    tick(&mut desk, 2_000);
    assert_eq!(offered_to(&mut desk, "carla"), None, "queued: she just declined it");
    tick(&mut desk, 2_000 + SETTINGS.cooloff_ms - 1);
    assert_eq!(offered_to(&mut desk, "carla"), None, "one ms before the cool-off ends");
    tick(&mut desk, 2_000 + SETTINGS.cooloff_ms);
    assert_eq!(offered_to(&mut desk, "carla"), Some(call), "the cool-off is over: offered again");
}

#[test]
fn d08_an_rtt_report_that_makes_an_operator_rankable_serves_the_queue() {
    // Lagos has no floor to us-east: unrankable until the console measures.
    let mut desk = desk(&[operator("ade", "Lagos", &["welding"])]);
    desk.ready("ade", true, 0).unwrap();
    let outcome = desk.raise(&robot("w1", "us-east", "welding tier-1"), 10).unwrap();
    assert!(matches!(outcome, CallOutcome::Queued { .. }));
    desk.take_effects();
    desk.report_rtt("ade", "us-east", 140).unwrap();
    tick(&mut desk, 20);
    assert_eq!(offered_to(&mut desk, "ade"), Some(session_of(&outcome)));
}

#[test]
fn d04_an_offer_expires_at_its_deadline_to_aux_and_the_call_moves_on() {
    let mut desk = desk(&[operator("carla", "Austin", &["pick-place"]), operator("asha", "BLR", &["pick-place"])]);
    desk.ready("carla", true, 0).unwrap();
    desk.ready("asha", true, 0).unwrap();
    let call = session_of(&desk.raise(&robot("r1", "us-east", "pick-place"), 1_000).unwrap());
    assert_eq!(offered_to(&mut desk, "carla"), Some(call.clone()));
    tick(&mut desk, 1_000 + SETTINGS.offer_window_ms - 1);
    assert!(desk.take_effects().writes.is_empty(), "still ringing");
    tick(&mut desk, 1_000 + SETTINGS.offer_window_ms);
    let carla = desk.presence("carla").unwrap();
    assert_eq!((carla.state, carla.aux_reason.as_deref()), (PresenceState::Aux, Some("missed offer")));
    assert_eq!(offered_to(&mut desk, "asha"), Some(call));
}

#[test]
fn d05_d06_one_offer_per_operator_and_the_oldest_call_first() {
    let mut desk = desk(&[operator("carla", "Austin", &["pick-place", "welding"])]);
    desk.ready("carla", true, 0).unwrap();
    let first = session_of(&desk.raise(&robot("r1", "us-east", "pick-place"), 1).unwrap());
    let weld = desk.raise(&robot("w1", "us-east", "welding"), 2).unwrap();
    let pick = desk.raise(&robot("r2", "us-east", "pick-place"), 3).unwrap();
    assert!(matches!(weld, CallOutcome::Queued { position: 1, .. }));
    assert!(matches!(pick, CallOutcome::Queued { position: 1, .. }), "positions count per skill");
    desk.take_effects();
    desk.accept("carla", &first, 10).unwrap();
    desk.finish(&first, LifecycleState::Completed, "done", 20).unwrap();
    tick(&mut desk, 20);
    assert_eq!(desk.presence("carla").unwrap().state, PresenceState::Acw);
    desk.take_effects();
    // Wrap-up ends from the deadline queue; the oldest queued call (welding) rings.
    tick(&mut desk, 20 + SETTINGS.wrap_up_ms);
    assert_eq!(offered_to(&mut desk, "carla"), Some(session_of(&weld)));
}

#[test]
fn r08_presence_lapses_a_ttl_after_the_last_tab_unless_a_tab_reopens() {
    let mut desk = desk(&[operator("asha", "BLR", &["pick-place"])]);
    desk.tab_opened("asha", "tab-1", 0).unwrap();
    desk.ready("asha", true, 0).unwrap();
    desk.tab_closed("asha", "tab-1", 1_000);
    // A reload: a new tab before the TTL keeps her present.
    desk.tab_opened("asha", "tab-2", 5_000).unwrap();
    tick(&mut desk, 1_000 + SETTINGS.presence_ttl_ms);
    assert_eq!(desk.presence("asha").unwrap().state, PresenceState::Ready);
    desk.tab_closed("asha", "tab-2", 30_000);
    tick(&mut desk, 30_000 + SETTINGS.presence_ttl_ms);
    assert_eq!(desk.presence("asha").unwrap().state, PresenceState::Offline);
}

#[test]
fn d10_a_desk_skips_an_operator_ringing_for_another_org_and_is_poked_when_they_free_up() {
    let busy = Arc::new(BusyOperators::default());
    let dana = operator("dana", "Austin", &["inspection"]);
    let mut north = desk_with(busy.clone(), "north", &[dana.clone()]);
    let mut harbor = desk_with(busy.clone(), "harbor", &[dana]);
    north.ready("dana", true, 0).unwrap();
    harbor.ready("dana", true, 0).unwrap();
    let north_call = session_of(&north.raise(&robot("n1", "us-east", "inspection"), 1).unwrap());
    let harbor_call = harbor.raise(&robot("h1", "us-east", "inspection"), 2).unwrap();
    assert!(matches!(harbor_call, CallOutcome::Queued { .. }), "busy in north");
    harbor.take_effects();
    north.take_effects();
    north.decline("dana", &north_call, 3).unwrap();
    assert_eq!(north.take_effects().pokes, vec!["harbor".to_string()]);
    harbor.poke();
    tick(&mut harbor, 4);
    assert_eq!(offered_to(&mut harbor, "dana"), Some(session_of(&harbor_call)));
}

#[test]
fn effects_close_offers_before_reoffering_and_tell_the_operator() {
    let mut desk = desk(&[operator("carla", "Austin", &["pick-place"]), operator("asha", "BLR", &["pick-place"])]);
    desk.ready("carla", true, 0).unwrap();
    desk.ready("asha", true, 0).unwrap();
    let call = session_of(&desk.raise(&robot("r1", "us-east", "pick-place"), 1).unwrap());
    desk.take_effects();
    desk.decline("carla", &call, 2).unwrap();
    let fx = desk.take_effects();
    let close = fx.writes.iter().position(|w| matches!(w, Write::CloseOffer { status: OfferStatus::Declined, .. }));
    let reoffer = fx.writes.iter().position(|w| matches!(w, Write::Offer { offer, .. } if offer.operator_id == "asha"));
    assert!(close.unwrap() < reoffer.unwrap(), "the unique open-offer index never sees two");
    assert!(fx.events.iter().any(|(_, e)| matches!(e, Event::Operator(OperatorEvent::Offer { offer }) if offer.operator_id == "asha")));
    assert!(desk.timers.due(i64::MAX).iter().any(|t| matches!(t, Timer::CoolOff { operator_id, .. } if operator_id == "carla")));
}

/// Effects moved out of the desk follow those already held (a batch held
/// while another commits gathers several rounds of decisions, in order),
/// and the desk starts the next round empty.
#[test]
fn effects_moved_out_follow_those_held_before_and_leave_the_desk_empty() {
    let mut desk = desk(&[]);
    let mut held = crate::engine::desk::Effects::default();
    let first = session_of(&desk.raise(&robot("r1", "us-east", "welding"), 1).unwrap());
    desk.move_effects_into(&mut held);
    let second = session_of(&desk.raise(&robot("r2", "us-east", "welding"), 2).unwrap());
    desk.move_effects_into(&mut held);
    let opened: Vec<&str> = held
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::OpenSession(session) => Some(session.id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(opened, [first.as_str(), second.as_str()]);
    assert!(!held.events.is_empty());
    let left = desk.take_effects();
    assert!(left.writes.is_empty() && left.events.is_empty() && left.pokes.is_empty() && left.freed.is_empty());
}

#[test]
fn a_pending_call_nobody_takes_is_cancelled_by_the_platform_after_the_pending_timeout() {
    let mut desk = desk(&[]);
    let CallOutcome::Queued { session_id, .. } = desk.raise(&robot("r1", "us-east", "welding · tier-1"), 1_000).unwrap() else {
        panic!("nobody holds welding: queued");
    };
    desk.take_effects();
    tick(&mut desk, 1_000 + SETTINGS.pending_timeout_ms - 1);
    assert!(desk.take_effects().writes.is_empty(), "not before the timeout");
    tick(&mut desk, 1_000 + SETTINGS.pending_timeout_ms);
    let writes = desk.take_effects().writes;
    assert!(
        writes.iter().any(|w| matches!(w, Write::End { session_id: s, to: LifecycleState::Cancelled, reason, .. } if *s == session_id && reason == domain::lifecycle::NOBODY_TOOK_IT)),
        "{writes:?}"
    );
    // The robot may raise again at once.
    assert!(desk.raise(&robot("r1", "us-east", "welding · tier-1"), 1_000 + SETTINGS.pending_timeout_ms + 1).is_ok());
}

#[test]
fn an_answered_call_is_not_touched_by_its_pending_timeout() {
    let mut desk = desk(&[operator("asha", "Austin", &["welding · tier-1"])]);
    desk.ready("asha", true, 0).unwrap();
    let CallOutcome::Matched { session_id, .. } = desk.raise(&robot("r1", "us-east", "welding · tier-1"), 1_000).unwrap() else {
        panic!("asha is ready");
    };
    desk.accept("asha", &session_id, 2_000).unwrap();
    desk.take_effects();
    tick(&mut desk, 1_000 + SETTINGS.pending_timeout_ms);
    assert!(!desk.take_effects().writes.iter().any(|w| matches!(w, Write::End { .. })), "ACTIVE: no longer pending");
}

/// Asha holds a live session from `t0`.
fn attached(t0: i64) -> (Desk, String) {
    let mut desk = desk(&[operator("asha", "Austin", &["welding · tier-1"])]);
    desk.ready("asha", true, 0).unwrap();
    let CallOutcome::Matched { session_id, .. } = desk.raise(&robot("r1", "us-east", "welding · tier-1"), t0).unwrap() else {
        panic!("asha is ready");
    };
    desk.accept("asha", &session_id, t0).unwrap();
    desk.take_effects();
    (desk, session_id)
}

fn activities(desk: &mut Desk) -> Vec<String> {
    let fx = desk.take_effects();
    fx.writes
        .iter()
        .filter_map(|w| match w {
            Write::Activity { kind, .. } => Some(kind.as_str().to_string()),
            Write::End { to, reason, .. } => Some(format!("END {} · {reason}", to.as_str())),
            _ => None,
        })
        .collect()
}

#[test]
fn l07_the_chain_checks_warns_the_operator_and_cancels_an_idle_session() {
    let (mut desk, session) = attached(0);
    tick(&mut desk, 29_999);
    assert!(activities(&mut desk).is_empty());
    tick(&mut desk, 30_000);
    assert_eq!(activities(&mut desk), ["ACTIVITY_CHECK"]);
    for t in [60_000, 90_000] {
        tick(&mut desk, t);
        desk.take_effects();
    }
    tick(&mut desk, 120_000);
    let fx = desk.take_effects();
    assert!(fx.writes.iter().any(|w| matches!(w, Write::Activity { kind: domain::lifecycle::ActivityKind::InactivityWarning, .. })));
    assert!(
        fx.events.iter().any(|(_, e)| matches!(e, Event::Operator(OperatorEvent::InactivityWarning { session_id, stop_at_ms: 180_000 }) if *session_id == session)),
        "the operator is told when it will stop"
    );
    tick(&mut desk, 150_000);
    desk.take_effects();
    tick(&mut desk, 180_000);
    assert_eq!(activities(&mut desk), ["ACTIVITY_CHECK", "INACTIVITY_STOP", "END CANCELLED · no operator input"]);
    assert!(matches!(desk.input("asha", &session, 181_000), Err(super::types::EngineError::NotFound(_))), "ended");
    tick(&mut desk, 10_000_000);
    assert!(activities(&mut desk).is_empty(), "the chain ended with the session");
}

/// Whether the desk told the operator's tabs `notice` just now.
fn told(desk: &mut Desk, notice: impl Fn(&OperatorEvent) -> bool) -> bool {
    desk.take_effects().events.iter().any(|(_, e)| matches!(e, Event::Operator(o) if notice(o)))
}

#[test]
fn l07_l13_a_tab_that_opens_is_told_the_warning_and_the_planned_end_notice_that_stand() {
    let (mut desk, session) = attached(0);
    for t in [30_000, 60_000, 90_000, 120_000] {
        tick(&mut desk, t);
    }
    desk.take_effects();
    // Warned at 120 s; then her tabs were gone past the TTL: she lapsed
    // offline, the session still hers (its chain runs on). A tab opened
    // since (a reload, a reconnect) is told the warning again.
    desk.offline("asha", 125_000).unwrap();
    desk.take_effects();
    desk.tab_opened("asha", "reloaded", 130_000).unwrap();
    let warning = |o: &OperatorEvent| matches!(o, OperatorEvent::InactivityWarning { session_id, stop_at_ms: 180_000 } if *session_id == session);
    assert!(told(&mut desk, warning), "the warning stands until input, whatever her presence");
    desk.input("asha", &session, 131_000).unwrap();
    desk.take_effects();
    desk.tab_opened("asha", "again", 132_000).unwrap();
    assert!(!told(&mut desk, |o| matches!(o, OperatorEvent::InactivityWarning { .. })), "input took it back");

    desk.plan_end(&session, 600_000);
    desk.take_effects();
    desk.tab_opened("asha", "early", 479_999).unwrap();
    let notice = |o: &OperatorEvent| matches!(o, OperatorEvent::PlannedEndSoon { session_id, planned_end_ms: 600_000 } if *session_id == session);
    assert!(!told(&mut desk, notice), "not yet two minutes before");
    desk.tab_opened("asha", "late", 480_000).unwrap();
    assert!(told(&mut desk, notice), "the notice stands from two minutes before");
}

#[test]
fn l07_input_resets_the_chain_and_a_paused_session_runs_none_and_takes_no_input() {
    let (mut desk, session) = attached(0);
    desk.input("asha", &session, 100_000).unwrap();
    tick(&mut desk, 120_000);
    assert_eq!(activities(&mut desk), ["ACTIVITY_CHECK"], "input at 100 s: no warning at 120 s");
    assert!(matches!(desk.input("bo", &session, 121_000), Err(super::types::EngineError::NotAttached)));
    // Paused: no chain, and no control input (rule L03).
    desk.steer(&session, LifecycleState::Paused, Some("asha"), 130_000).unwrap();
    desk.take_effects();
    for t in (150_000..=1_000_000).step_by(30_000) {
        tick(&mut desk, t);
    }
    assert_eq!(activities(&mut desk), Vec::<String>::new(), "a paused session runs no chain");
    assert!(matches!(desk.input("asha", &session, 1_000_000), Err(super::types::EngineError::Paused)));
    // Resumed: a fresh chain from the resume.
    desk.steer(&session, LifecycleState::Active, Some("asha"), 1_000_000).unwrap();
    desk.take_effects();
    tick(&mut desk, 1_030_000);
    assert_eq!(activities(&mut desk), ["ACTIVITY_CHECK"]);
    tick(&mut desk, 1_120_000);
    let kinds = activities(&mut desk);
    assert!(kinds.contains(&"INACTIVITY_WARNING".to_string()), "{kinds:?}");
}

fn booking(id: &str, robot: &str, client: &str, starts: i64, ends: i64) -> domain::booking::Booking {
    domain::booking::Booking { id: id.into(), robot_id: robot.into(), client_id: client.into(), client_name: client.to_uppercase(), starts_at_ms: starts, ends_at_ms: ends }
}

/// The session a raise opened, as written: (client, booking, planned end).
fn opened(desk: &mut Desk) -> (Option<String>, Option<String>, Option<i64>) {
    desk.take_effects()
        .writes
        .into_iter()
        .find_map(|w| match w {
            Write::OpenSession(s) => Some((s.client_id, s.booking_id, s.planned_end_at)),
            _ => None,
        })
        .expect("a session was opened")
}

#[test]
fn l13_a_call_raised_in_a_booking_the_desk_holds_is_its_clients_and_a_cancelled_one_is_nobodys() {
    let mut desk = desk(&[operator("carla", "Austin", &["pick-place"])]);
    let minute = 60_000;
    desk.load_bookings(vec![booking("b-now", "r1", "kofi", 0, 60 * minute), booking("b-later", "r2", "kofi", 90 * minute, 120 * minute)], 1_000);
    let call = session_of(&desk.raise(&robot("r1", "us-east", "pick-place · tier-2"), 1_000).unwrap());
    assert_eq!(opened(&mut desk), (Some("kofi".into()), Some("b-now".into()), Some(60 * minute)));
    // Not yet in its booking: nobody's.
    desk.raise(&robot("r2", "us-east", "pick-place · tier-2"), 2_000).unwrap();
    assert_eq!(opened(&mut desk), (None, None, None));
    // The booking service cancels r1's booking: its next call is nobody's.
    desk.finish(&call, LifecycleState::Cancelled, "test", 3_000).unwrap();
    desk.take_effects();
    desk.set_bookings("r1", Vec::new(), 4_000);
    desk.raise(&robot("r1", "us-east", "pick-place · tier-2"), 5_000).unwrap();
    assert_eq!(opened(&mut desk), (None, None, None));
}

#[test]
fn l13_an_extension_is_judged_on_the_bookings_the_desk_holds_and_its_own_booking_never_blocks_it() {
    let (mut desk, session) = attached(0);
    let minute = 60_000;
    let end = SETTINGS.session_ms;
    assert_eq!(desk.extension(&session, Some("asha"), 15).unwrap(), (end, end + 15 * minute));
    assert!(matches!(desk.extension(&session, Some("someone-else"), 15), Err(super::types::EngineError::NotAttached)));
    // Another client books the robot from ten minutes after the planned end.
    let robot = desk.live.get(&session).unwrap().robot_id.clone();
    desk.set_bookings(&robot, vec![booking("b-next", &robot, "kofi", end + 10 * minute, end + 70 * minute)], minute);
    assert!(desk.extension(&session, None, 5).is_ok());
    assert!(matches!(desk.extension(&session, None, 15), Err(super::types::EngineError::CannotExtend(_))));
    // Had the session run in that booking, it would not be in its own way.
    desk.live.get_mut(&session).unwrap().booking_id = Some("b-next".into());
    assert!(desk.extension(&session, None, 15).is_ok());
    // A session the desk does not hold live is over.
    assert!(matches!(desk.extension("ses-unknown", None, 15), Err(super::types::EngineError::SessionEnded)));
}

/// A tab that registers twice (with a dispatcher that was loading when it
/// opened, then again on `Rejoin`) is one tab: closing it lapses the presence.
#[test]
fn r08_a_tab_that_registers_again_is_still_one_tab() {
    let mut desk = desk(&[operator("asha", "BLR", &["pick-place"])]);
    desk.tab_opened("asha", "tab-1", 0).unwrap();
    desk.tab_opened("asha", "tab-1", 10).unwrap();
    desk.ready("asha", true, 10).unwrap();
    desk.tab_closed("asha", "tab-1", 1_000);
    tick(&mut desk, 1_000 + SETTINGS.presence_ttl_ms);
    assert_eq!(desk.presence("asha").unwrap().state, PresenceState::Offline);
}

#[test]
fn a16_a_removed_ceiling_offers_the_waiting_call_at_once_and_its_old_relaxation_does_nothing() {
    use domain::dispatch::{RttCeiling, Trigger};
    let mut desk = desk(&[operator("asha", "BLR", &["pick-place"])]);
    desk.set_ceilings(vec![RttCeiling { skill: "pick-place".into(), ceiling_ms: 100, step_ms: 50, every_s: 30, lifted_after_s: 300 }], 0);
    desk.ready("asha", true, 0).unwrap();
    let CallOutcome::Queued { session_id, .. } = desk.raise(&robot("r1", "us-east", "pick-place"), 1_000).unwrap() else {
        panic!("Asha (275 ms) is above the 100 ms ceiling: queued");
    };
    desk.take_effects();
    desk.set_ceilings(vec![], 2_000);
    tick(&mut desk, 2_000);
    assert_eq!(offered_to(&mut desk, "asha"), Some(session_id.clone()), "no ceiling: offered at once");
    desk.decline("asha", &session_id, 3_000).unwrap();
    desk.take_effects();
    // The relaxation armed under the old ceiling (at 31 s) is due: nothing
    // is looked at again because of it.
    tick(&mut desk, 31_000);
    let records = desk.take_effects().writes.into_iter().filter(|w| matches!(w, Write::Record { record, .. } if record.trigger == Trigger::CeilingRelaxed)).count();
    assert_eq!(records, 0, "a removed ceiling relaxes nothing");
}

/// Loads `desk` (with `operators`) as a restart finds it: Asha's live
/// session ses-1, its handover to Tom still ringing.
fn load_with_tom_rung(desk: &mut Desk, operators: &[OperatorRecord]) {
    use crate::store::{LiveSessionRow, OpenOfferRow, OrgSnapshot};
    let live = LiveSessionRow {
        session_id: "ses-1".into(),
        robot_id: "r1".into(),
        robot_model: "UR10e".into(),
        site: "Site".into(),
        skill: "pick-place".into(),
        pop: "us-east".into(),
        operator_id: Some("asha".into()),
        lifecycle: "ACTIVE".into(),
        planned_end_at: None,
        booking_id: None,
    };
    let ringing = OpenOfferRow { org_id: "org".into(), session_id: "ses-1".into(), operator_id: "tom".into(), rtt_ms: 96, offered_at: 1_000, expires_at: 31_000 };
    desk.load(OrgSnapshot { operators: operators.to_vec(), live: vec![live], open_offers: vec![ringing], ..OrgSnapshot::default() }, 2_000);
}

/// A handover that rang when the desk was loaded (a restart, a takeover, a
/// reload after a failed commit) is withdrawn, its holder told so and its
/// ring stopped: consoles still open would otherwise say "waiting" for an
/// offer gone, and offer it to accept.
#[test]
fn l08_a_handover_ringing_at_load_is_withdrawn_and_its_holder_told() {
    use domain::handover::HandoverOutcome;
    // Tom works in another org too: its desks, perhaps on other instances,
    // hold him busy for this ring until they are told it stopped.
    let operators = [operator("asha", "Austin", &["pick-place"]), OperatorRecord { in_other_orgs: true, ..operator("tom", "Austin", &["pick-place"]) }];
    let mut desk = desk(&operators);
    load_with_tom_rung(&mut desk, &operators);
    let fx = desk.take_effects();
    assert!(fx.writes.iter().any(|w| matches!(w, Write::CloseOffer { session_id, operator_id, status: OfferStatus::Withdrawn, .. } if session_id == "ses-1" && operator_id == "tom")));
    let told: Vec<_> = fx.events.iter().filter_map(|(topic, e)| match e {
        Event::Operator(OperatorEvent::Handover { notice }) => Some((topic.clone(), notice.session_id.as_str(), notice.to_operator_id.as_str(), notice.outcome)),
        _ => None,
    }).collect();
    assert_eq!(told, [(domain::events::Topic::operator("org", "asha"), "ses-1", "tom", HandoverOutcome::Withdrawn)]);
    let rings_stopped = fx.events.iter().any(|(topic, e)| {
        *topic == domain::events::Topic::operator("org", "tom") && matches!(e, Event::Operator(OperatorEvent::OfferClosed { session_id, .. }) if session_id == "ses-1")
    });
    assert!(rings_stopped, "Tom's ring stops where it still shows");
    assert_eq!(fx.freed, [("tom".to_string(), "org".to_string())], "the other orgs are told Tom is free once the withdrawal commits");
    assert!(desk.offers.is_empty(), "nothing rings for Tom");
    let standing = desk.standing_notices("asha", 2_000);
    assert!(matches!(&standing[..], [OperatorEvent::Handover { notice }] if notice.outcome == HandoverOutcome::Withdrawn), "nothing rings for her now; she is told it was withdrawn: {standing:?}");
}

/// A handover rung for someone removed from the org before the desk
/// loaded: withdrawn all the same, and the other orgs (this desk cannot
/// know whether there are any) told they are free.
#[test]
fn l08_a_handover_ringing_at_load_for_someone_since_removed_frees_them() {
    let operators = [operator("asha", "Austin", &["pick-place"])];
    let mut desk = desk(&operators);
    load_with_tom_rung(&mut desk, &operators);
    let fx = desk.take_effects();
    assert!(fx.writes.iter().any(|w| matches!(w, Write::CloseOffer { operator_id, status: OfferStatus::Withdrawn, .. } if operator_id == "tom")));
    assert_eq!(fx.freed, [("tom".to_string(), "org".to_string())]);
}

/// A handover's outcome stands for its holder (retold after a reconnect:
/// told while the console was away, it would be lost) until the next
/// handover rings or control moves.
#[test]
fn l08_a_handovers_outcome_stands_until_the_next_handover_or_control_moves() {
    use domain::handover::HandoverOutcome;
    let operators = [operator("asha", "Austin", &["welding · tier-1"]), operator("tom", "Austin", &["welding · tier-1"])];
    let mut desk = desk(&operators);
    desk.ready("asha", true, 0).unwrap();
    let CallOutcome::Matched { session_id, .. } = desk.raise(&robot("r1", "us-east", "welding · tier-1"), 1_000).unwrap() else {
        panic!("asha is ready");
    };
    desk.accept("asha", &session_id, 1_000).unwrap();
    let standing = |desk: &Desk, who: &str| -> Vec<HandoverOutcome> {
        desk.standing_notices(who, 2_000).into_iter().filter_map(|n| match n {
            OperatorEvent::Handover { notice } => Some(notice.outcome),
            _ => None,
        }).collect()
    };
    assert_eq!(standing(&desk, "asha"), [], "no handover yet");
    desk.ready("tom", true, 1_000).unwrap();
    desk.hand_over(&session_id, Some("asha"), "tom", 2_000).unwrap();
    assert_eq!(standing(&desk, "asha"), [HandoverOutcome::Ringing]);
    desk.decline("tom", &session_id, 3_000).unwrap();
    assert_eq!(standing(&desk, "asha"), [HandoverOutcome::Declined], "declined while she was away: she learns it");
    // (A handover's decline leaves Tom ready: no cool-off, that is a call's.)
    desk.hand_over(&session_id, Some("asha"), "tom", 4_000).unwrap();
    assert_eq!(standing(&desk, "asha"), [HandoverOutcome::Ringing], "the next handover replaces the outcome");
    desk.accept("tom", &session_id, 5_000).unwrap();
    assert_eq!(standing(&desk, "asha"), [], "control moved: nothing stands for her");
    assert_eq!(standing(&desk, "tom"), [], "nor for Tom, who holds it now");
}

/// Asha's session, whose handover to Tom Tom declined; Tom then rings for
/// another call (returned).
fn declined_handover() -> (Desk, String, String) {
    let operators = [operator("asha", "Austin", &["welding · tier-1"]), operator("tom", "Austin", &["welding · tier-1"]), operator("dana", "Austin", &["welding · tier-1"])];
    let mut desk = desk(&operators);
    desk.ready("asha", true, 0).unwrap();
    let CallOutcome::Matched { session_id, .. } = desk.raise(&robot("r1", "us-east", "welding · tier-1"), 1_000).unwrap() else {
        panic!("asha is ready");
    };
    desk.accept("asha", &session_id, 1_000).unwrap();
    desk.ready("tom", true, 1_000).unwrap();
    desk.hand_over(&session_id, Some("asha"), "tom", 2_000).unwrap();
    desk.decline("tom", &session_id, 3_000).unwrap();
    desk.take_effects();
    let next = session_of(&desk.raise(&robot("r2", "us-east", "welding · tier-1"), 4_000).unwrap());
    assert_eq!(offered_to(&mut desk, "tom"), Some(next.clone()), "Tom rings for the next call");
    (desk, session_id, next)
}

/// Only a ringing handover is in anyone's way: once declined (its outcome
/// still told to Asha), an admin may take control, and the session's end
/// leaves Tom's ring for another call alone.
#[test]
fn l08_a_declined_handover_is_in_nobodys_way() {
    let (mut desk, session_id, _) = declined_handover();
    desk.tab_opened("dana", "tab-d", 5_000).unwrap();
    desk.take_control(&session_id, "dana", "covering", 5_000).expect("nothing rings: the admin takes control");

    let (mut desk, session_id, next) = declined_handover();
    desk.finish(&session_id, LifecycleState::Completed, "done", 5_000).unwrap();
    assert_eq!(desk.offers.get("tom").map(|o| o.session_id.as_str()), Some(next.as_str()), "Tom still rings for the other call");
}
