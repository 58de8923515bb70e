//! What the live screens (overview, wallboard) show of a waiting call's RTT
//! ceiling (rule A17): the ceiling it has now and when it next relaxes, on
//! the browser's ticking clock (`Live::now_ms`), not the snapshot's.

use crate::dispatch::RttCeiling;
use crate::live::LiveBoard;
use leptos::prelude::*;

/// A waiting call's ceiling at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CeilingNow {
    /// The skill has no ceiling.
    NoCeiling,
    /// It had one, lifted by now: every certified operator may be offered it.
    Lifted,
    /// The ceiling holds at `ms`; it next changes in `in_ms`, to `next_ms`
    /// (a step), or is lifted then (`next_ms` is `None`).
    Holding { ms: u32, in_ms: i64, next_ms: Option<u32> },
}

impl CeilingNow {
    /// The ceiling of the oldest call of a skill, raised at `raised_at_ms`,
    /// at `now_ms`.
    pub(crate) fn of(ceiling: Option<&RttCeiling>, raised_at_ms: i64, now_ms: i64) -> CeilingNow {
        let Some(c) = ceiling else { return CeilingNow::NoCeiling };
        let waited = (now_ms - raised_at_ms).max(0);
        let Some(ms) = c.after(waited) else { return CeilingNow::Lifted };
        // The next change: the next step, or the lifting (the domain's rule
        // knows a step of 0 ms changes nothing).
        let at = c.next_relaxation(waited).unwrap_or(i64::from(c.lifted_after_s) * 1000);
        CeilingNow::Holding { ms, in_ms: (at - waited).max(0), next_ms: c.after(at) }
    }

    /// The current ceiling, in a word: "200 ms", "none" once lifted, "—"
    /// for a skill without one.
    pub(crate) fn current(&self) -> String {
        match self {
            CeilingNow::NoCeiling => "—".into(),
            CeilingNow::Lifted => "none".into(),
            CeilingNow::Holding { ms, .. } => format!("{ms} ms"),
        }
    }

    /// Its next relaxation: "rises in 12 s", "lifted in 12 s"; nothing
    /// when there is none to come.
    pub(crate) fn next(&self) -> Option<String> {
        match self {
            CeilingNow::Holding { in_ms, next_ms: Some(_), .. } => Some(format!("rises in {}", in_duration(*in_ms))),
            CeilingNow::Holding { in_ms, next_ms: None, .. } => Some(format!("lifted in {}", in_duration(*in_ms))),
            _ => None,
        }
    }

    /// What the next relaxation does, for a tooltip.
    pub(crate) fn detail(&self) -> &'static str {
        match self {
            CeilingNow::NoCeiling => "No RTT ceiling for this skill",
            CeilingNow::Lifted => "The ceiling was lifted: every certified operator may be offered the call",
            CeilingNow::Holding { next_ms: Some(_), .. } => "Operators above the ceiling are not offered the call; it rises by a step while the call waits",
            CeilingNow::Holding { next_ms: None, .. } => "Operators above the ceiling are not offered the call; it is lifted next",
        }
    }
}

/// A time to come, rounded up to the second so it never reads "0 s" before
/// the change: "12 s", "4 min 5 s", "2 h 10 min".
pub(crate) fn in_duration(ms: i64) -> String {
    let s = (ms.max(0) + 999) / 1000;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 if s % 60 == 0 => format!("{} min", s / 60),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ if s % 3600 / 60 == 0 => format!("{} h", s / 3600),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// The browser's clock, ticking each second once the page is live; the
/// snapshot's time until then (the server's render, before hydration).
pub(crate) fn live_clock(live: LiveBoard, as_of_ms: i64) -> impl Fn() -> i64 + Send + Sync + Copy + 'static {
    move || {
        let n = live.now_ms.get();
        if n == 0 { as_of_ms } else { n }
    }
}

/// The ceiling of a skill's oldest waiting call and its next relaxation,
/// ticking: "200 ms · rises in 12 s", "none", "—".
#[component]
pub(crate) fn CeilingNowView(ceiling: Option<RttCeiling>, raised_at_ms: i64, now: impl Fn() -> i64 + Send + Sync + Copy + 'static) -> impl IntoView {
    let state = move || CeilingNow::of(ceiling.as_ref(), raised_at_ms, now());
    let state = Memo::new(move |_| state());
    view! {
        <span class="ceiling-now" title=move || state.get().detail()>
            <span class="ceiling-ms" data-testid="ceiling-current">{move || state.get().current()}</span>
            {move || state.get().next().map(|next| view! { " · "<span class="muted" data-testid="ceiling-next">{next}</span> })}
        </span>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick() -> RttCeiling {
        RttCeiling { skill: "pick-place".into(), ceiling_ms: 100, step_ms: 50, every_s: 30, lifted_after_s: 300 }
    }

    #[test]
    fn a17_the_ceiling_now_and_when_it_next_rises() {
        let now = CeilingNow::of(Some(&pick()), 1_000_000, 1_018_000);
        assert_eq!(now, CeilingNow::Holding { ms: 100, in_ms: 12_000, next_ms: Some(150) });
        assert_eq!(now.current(), "100 ms");
        assert_eq!(now.next().as_deref(), Some("rises in 12 s"));
        let later = CeilingNow::of(Some(&pick()), 1_000_000, 1_095_500);
        assert_eq!(later.current(), "250 ms");
        assert_eq!(later.next().as_deref(), Some("rises in 25 s"), "rounded up, never 0 s before the change");
    }

    #[test]
    fn a17_the_last_change_is_the_lifting_then_none_is_left() {
        let c = RttCeiling { lifted_after_s: 100, ..pick() };
        let before = CeilingNow::of(Some(&c), 0, 95_000);
        assert_eq!(before.current(), "250 ms");
        assert_eq!(before.next().as_deref(), Some("lifted in 5 s"));
        let lifted = CeilingNow::of(Some(&c), 0, 100_000);
        assert_eq!(lifted, CeilingNow::Lifted);
        assert_eq!(lifted.current(), "none");
        assert_eq!(lifted.next(), None);
    }

    #[test]
    fn a17_a_ceiling_that_never_steps_is_next_lifted() {
        let c = RttCeiling { step_ms: 0, ..pick() };
        let now = CeilingNow::of(Some(&c), 0, 40_000);
        assert_eq!(now.current(), "100 ms");
        assert_eq!(now.next().as_deref(), Some("lifted in 4 min 20 s"));
    }

    #[test]
    fn a17_a_skill_without_a_ceiling_reads_a_dash_and_a_clock_behind_the_raise_counts_no_wait() {
        assert_eq!(CeilingNow::of(None, 0, 5_000).current(), "—");
        assert_eq!(CeilingNow::of(None, 0, 5_000).next(), None);
        assert_eq!(CeilingNow::of(Some(&pick()), 10_000, 9_000).next().as_deref(), Some("rises in 30 s"));
    }

    #[test]
    fn times_to_come_read_in_seconds_minutes_then_hours() {
        assert_eq!(in_duration(0), "0 s");
        assert_eq!(in_duration(1), "1 s");
        assert_eq!(in_duration(59_000), "59 s");
        assert_eq!(in_duration(60_000), "1 min");
        assert_eq!(in_duration(245_000), "4 min 5 s");
        assert_eq!(in_duration(3_600_000), "1 h");
        assert_eq!(in_duration(7_800_000), "2 h 10 min");
    }
}
