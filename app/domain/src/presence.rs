//! The operator presence machine (seed 003 states; DESIGN "States"): one pure
//! function the engine applies on every change, so the browser and the
//! server agree on what each event does.

use crate::models::PresenceState;

/// Aux reason of an operator whose console just signed in.
pub const NOT_READY: &str = "not ready";
/// Aux reason recorded when an offer goes unanswered (rule D04).
pub const MISSED_OFFER: &str = "missed offer";

/// What can happen to an operator's presence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresenceEvent {
    /// A console tab connected.
    SignedIn,
    /// Pressed Ready (live) or marked ready on the roster.
    Ready,
    /// Stepped away with a reason.
    Aux,
    /// An offer started ringing.
    Offered,
    /// The offer stopped ringing unanswered (declined or withdrawn).
    OfferReleased,
    /// The offer expired unanswered.
    OfferMissed,
    /// Accepted: attached to the session.
    Attached,
    /// The attached session ended: wrap-up follows.
    SessionEnded,
    /// Wrap-up time is over.
    WrapUpDone,
    /// The last console stopped heartbeating.
    Lapsed,
}

/// The state after `event`. Attached operators stay `on_call` until their
/// session ends (a roster-fallback offer rings beside it); ringing ends only
/// through an answer, a withdrawal or expiry.
pub fn next_presence(current: PresenceState, event: PresenceEvent) -> PresenceState {
    use PresenceEvent as E;
    use PresenceState as S;
    match (current, event) {
        (S::Offline, E::SignedIn) => S::Aux,
        (_, E::SignedIn) => current,
        (S::OnCall | S::Ringing, E::Ready) => current,
        (_, E::Ready) => S::Ready,
        (_, E::Aux) => S::Aux,
        (S::OnCall, E::Offered) => S::OnCall,
        (_, E::Offered) => S::Ringing,
        (S::Ringing, E::OfferReleased) => S::Ready,
        (S::Ringing, E::OfferMissed) => S::Aux,
        (_, E::OfferReleased | E::OfferMissed) => current,
        (_, E::Attached) => S::OnCall,
        (S::OnCall, E::SessionEnded) => S::Acw,
        (_, E::SessionEnded) => current,
        (S::Acw, E::WrapUpDone) => S::Ready,
        (_, E::WrapUpDone) => current,
        (_, E::Lapsed) => S::Offline,
    }
}

/// Whether an operator in `state` may be offered a call at all, and from
/// which pool (seed 000, rules A07/A08): live-Ready operators form the pool
/// whenever any exist; otherwise the roster of `ready` or attached ones.
pub fn in_live_pool(state: PresenceState, live_ready: bool) -> bool {
    state == PresenceState::Ready && live_ready
}

pub fn in_roster_pool(state: PresenceState) -> bool {
    matches!(state, PresenceState::Ready | PresenceState::OnCall)
}

#[cfg(test)]
mod tests {
    use super::*;
    use PresenceEvent as E;
    use PresenceState as S;

    #[test]
    fn r03_the_call_path_is_ready_ringing_on_call_acw_ready() {
        let mut s = S::Offline;
        for (event, expected) in [
            (E::SignedIn, S::Aux),
            (E::Ready, S::Ready),
            (E::Offered, S::Ringing),
            (E::Attached, S::OnCall),
            (E::SessionEnded, S::Acw),
            (E::WrapUpDone, S::Ready),
            (E::Lapsed, S::Offline),
        ] {
            s = next_presence(s, event);
            assert_eq!(s, expected, "after {event:?}");
        }
    }

    #[test]
    fn d04_a_missed_offer_puts_a_ringing_operator_in_aux_and_a_declined_one_back_to_ready() {
        assert_eq!(next_presence(S::Ringing, E::OfferMissed), S::Aux);
        assert_eq!(next_presence(S::Ringing, E::OfferReleased), S::Ready);
        // An attached operator rung through the roster fallback stays attached.
        assert_eq!(next_presence(S::OnCall, E::Offered), S::OnCall);
        assert_eq!(next_presence(S::OnCall, E::OfferMissed), S::OnCall);
    }

    #[test]
    fn ready_never_interrupts_a_call_or_a_ringing_offer() {
        assert_eq!(next_presence(S::OnCall, E::Ready), S::OnCall);
        assert_eq!(next_presence(S::Ringing, E::Ready), S::Ringing);
        assert_eq!(next_presence(S::Aux, E::Ready), S::Ready);
        assert_eq!(next_presence(S::Acw, E::Ready), S::Ready, "ready ends wrap-up early");
        assert_eq!(next_presence(S::Ready, E::SignedIn), S::Ready, "a second tab changes nothing");
    }

    #[test]
    fn a07_a08_pools_by_state() {
        assert!(in_live_pool(S::Ready, true));
        assert!(!in_live_pool(S::Ready, false));
        assert!(!in_live_pool(S::OnCall, true));
        for s in PresenceState::ALL {
            assert_eq!(in_roster_pool(s), matches!(s, S::Ready | S::OnCall), "{s:?}");
        }
    }
}
