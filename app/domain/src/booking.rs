//! Bookings and the planned end (seed 001 "Extending a session", rule
//! L13): a client books a robot for a time window; a session raised during
//! a booking is that client's and ends at the booking's end; an extension
//! is refused when the robot is booked by someone else before the new end.
//! Billable time per month for the client screen.

use serde::{Deserialize, Serialize};

/// The session length when no booking sets the end (`CLUTCHCALL_SESSION_MIN`).
pub const DEFAULT_SESSION_MIN: i64 = 30;
/// Longest task description of a booking (the dataset episodes' task).
pub const MAX_TASK_CHARS: usize = 200;
/// The operator is told this long before the planned end.
pub const PLANNED_END_NOTICE_MS: i64 = 2 * 60_000;
/// Why the platform completes a session at its planned end.
pub const PLANNED_END_REACHED: &str = "planned end reached";

/// Whether the operator's notice of a planned end at `at` stands at `now`:
/// from `PLANNED_END_NOTICE_MS` before it until it.
pub fn planned_end_notice_stands(at: i64, now: i64) -> bool {
    (at - PLANNED_END_NOTICE_MS..at).contains(&now)
}
/// Extensions offered, in minutes.
pub const EXTENSION_CHOICES_MIN: [i64; 3] = [10, 15, 30];
pub const MAX_EXTENSION_MIN: i64 = 120;
/// A booking is at most this long and starts at most this far ahead.
pub const MAX_BOOKING_MS: i64 = 12 * 3_600_000;
pub const MAX_BOOKING_AHEAD_MS: i64 = 90 * 24 * 3_600_000;

/// A client's hold on a robot for a time window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Booking {
    pub id: String,
    pub robot_id: String,
    pub client_id: String,
    pub client_name: String,
    /// Unix ms.
    pub starts_at_ms: i64,
    pub ends_at_ms: i64,
}

/// Half-open windows `[start, end)` overlap.
pub fn overlaps(a: (i64, i64), b: (i64, i64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// What is wrong with a requested booking window, if anything.
pub fn booking_problem(starts_at_ms: i64, ends_at_ms: i64, now_ms: i64) -> Option<String> {
    if ends_at_ms <= starts_at_ms {
        return Some("The booking must end after it starts.".into());
    }
    if ends_at_ms <= now_ms {
        return Some("That window is already over.".into());
    }
    if ends_at_ms - starts_at_ms > MAX_BOOKING_MS {
        return Some(format!("A booking is at most {} hours.", MAX_BOOKING_MS / 3_600_000));
    }
    if starts_at_ms - now_ms > MAX_BOOKING_AHEAD_MS {
        return Some(format!("Bookings open at most {} days ahead.", MAX_BOOKING_AHEAD_MS / 86_400_000));
    }
    None
}

/// The first booking of the robot, other than `own`, that a window collides with.
pub fn first_collision<'a>(bookings: &'a [Booking], own: Option<&str>, window: (i64, i64)) -> Option<&'a Booking> {
    bookings
        .iter()
        .filter(|b| Some(b.id.as_str()) != own && overlaps((b.starts_at_ms, b.ends_at_ms), window))
        .min_by_key(|b| b.starts_at_ms)
}

/// Rule L13: extending a running session from `planned_end_ms` by
/// `minutes` — refused for a bad length, or when the robot is booked by
/// someone else before the new end (the session's own booking never
/// conflicts). Returns the new planned end.
pub fn extension(planned_end_ms: i64, minutes: i64, bookings: &[Booking], own: Option<&str>) -> Result<i64, String> {
    if !(1..=MAX_EXTENSION_MIN).contains(&minutes) {
        return Err(format!("Extend by 1 to {MAX_EXTENSION_MIN} minutes."));
    }
    let new_end = planned_end_ms + minutes * 60_000;
    match first_collision(bookings, own, (planned_end_ms, new_end)) {
        Some(b) => Err(format!(
            "The robot is booked from {}: the session cannot run past then.",
            utc_when(b.starts_at_ms)
        )),
        None => Ok(new_end),
    }
}

/// `2026-11-30 14:05 UTC`: a moment people book by.
pub fn utc_when(ms: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000)) {
        Ok(at) => format!("{:04}-{:02}-{:02} {:02}:{:02} UTC", at.year(), u8::from(at.month()), at.day(), at.hour(), at.minute()),
        Err(_) => crate::rules::utc_clock(ms),
    }
}

/// What the booking form offers: the org's robots, and the clients the
/// caller may book for (a client: only themself).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BookingOptions {
    /// (robot id, "model · site").
    pub robots: Vec<(String, String)>,
    /// (user id, name).
    pub clients: Vec<(String, String)>,
}

/// One finished session on the client screen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PastSession {
    pub session: crate::models::SessionRecord,
    pub billable_ms: i64,
    pub rating: Option<crate::rating::SessionRating>,
}

/// The client screen: live sessions, past ones, billable time by month.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSessions {
    pub live: Vec<crate::models::SessionRecord>,
    pub past: Vec<PastSession>,
    pub months: Vec<MonthBill>,
}

/// `2026-11-30T14:05` (an `<input type="datetime-local">`, read as UTC) → Unix ms.
pub fn parse_utc_minute(value: &str) -> Option<i64> {
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let at = time::PrimitiveDateTime::parse(value.trim(), &format).ok()?;
    Some(at.assume_utc().unix_timestamp() * 1000)
}

/// How much one client may hold (issue "Hardening II", finding 13: a
/// client could book unlimited 12 h slots 90 days ahead and starve
/// everyone else): bookings still ahead on one robot, and bookings
/// starting in one UTC month across the org's robots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookingCaps {
    pub per_robot: usize,
    pub per_month: usize,
}

impl Default for BookingCaps {
    fn default() -> Self {
        BookingCaps { per_robot: 10, per_month: 100 }
    }
}

/// Why one more booking would pass a cap: `on_robot` of the client's
/// bookings are still ahead on the robot, `in_month` start in its month.
pub fn cap_problem(caps: BookingCaps, on_robot: usize, in_month: usize) -> Option<String> {
    if on_robot >= caps.per_robot {
        return Some(format!("A client holds at most {} upcoming bookings of one robot: cancel one first.", caps.per_robot));
    }
    if in_month >= caps.per_month {
        return Some(format!("A client makes at most {} bookings starting in one month.", caps.per_month));
    }
    None
}

/// The UTC calendar month holding `ms`, as `[start, end)` in Unix ms.
pub fn utc_month(ms: i64) -> (i64, i64) {
    let at = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000)).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let first = |year: i32, month: time::Month| time::Date::from_calendar_date(year, month, 1).map_or(0, |d| d.midnight().assume_utc().unix_timestamp() * 1000);
    let next = if at.month() == time::Month::December { (at.year() + 1, time::Month::January) } else { (at.year(), at.month().next()) };
    (first(at.year(), at.month()), first(next.0, next.1))
}

/// Billable time of one calendar month (UTC).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MonthBill {
    /// `2026-11`.
    pub month: String,
    pub sessions: u32,
    pub billable_ms: i64,
}

/// Sums sessions `(started_at_ms, billable_ms)` by the UTC month they
/// started in, newest month first.
pub fn monthly_billable(sessions: &[(i64, i64)]) -> Vec<MonthBill> {
    let mut months: std::collections::BTreeMap<String, MonthBill> = Default::default();
    for &(started_at_ms, billable_ms) in sessions {
        let Ok(at) = time::OffsetDateTime::from_unix_timestamp(started_at_ms.div_euclid(1000)) else { continue };
        let month = format!("{:04}-{:02}", at.year(), u8::from(at.month()));
        let bill = months.entry(month.clone()).or_insert(MonthBill { month, sessions: 0, billable_ms: 0 });
        bill.sessions += 1;
        bill.billable_ms += billable_ms;
    }
    months.into_values().rev().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l13_the_planned_end_notice_stands_from_two_minutes_before_until_the_end() {
        let at = 10 * 60_000;
        assert!(!planned_end_notice_stands(at, at - PLANNED_END_NOTICE_MS - 1));
        assert!(planned_end_notice_stands(at, at - PLANNED_END_NOTICE_MS));
        assert!(planned_end_notice_stands(at, at - 1));
        assert!(!planned_end_notice_stands(at, at), "ended");
    }

    const MIN: i64 = 60_000;

    fn booking(id: &str, client: &str, from_min: i64, to_min: i64) -> Booking {
        Booking {
            id: id.into(),
            robot_id: "uk-pick-01".into(),
            client_id: format!("u-{client}"),
            client_name: client.into(),
            starts_at_ms: from_min * MIN,
            ends_at_ms: to_min * MIN,
        }
    }

    #[test]
    fn l13_an_extension_is_refused_only_by_another_clients_booking_before_the_new_end() {
        let own = booking("b-own", "Kofi", 0, 60);
        let next = booking("b-next", "Acme", 90, 120);
        let bookings = [own.clone(), next];
        // 60 → 80 min: free until 90.
        assert_eq!(extension(60 * MIN, 20, &bookings, Some("b-own")), Ok(80 * MIN));
        // 60 → 90: ends exactly as the next booking starts: allowed (half-open).
        assert_eq!(extension(60 * MIN, 30, &bookings, Some("b-own")), Ok(90 * MIN));
        // 60 → 91: collides with Acme's booking, and says when, not whose.
        let refused = extension(60 * MIN, 31, &bookings, Some("b-own")).unwrap_err();
        assert!(refused.contains("booked from") && !refused.contains("Acme"), "{refused}");
        // The session's own booking never conflicts; without it, it would.
        assert!(extension(30 * MIN, 10, &[own.clone()], Some("b-own")).is_ok());
        assert!(extension(30 * MIN, 10, &[own], None).is_err());
        assert!(extension(60 * MIN, 0, &bookings, None).is_err() && extension(60 * MIN, MAX_EXTENSION_MIN + 1, &[], None).is_err());
    }

    #[test]
    fn s13_a_client_holds_a_capped_number_of_bookings_per_robot_and_per_month() {
        let caps = BookingCaps { per_robot: 2, per_month: 3 };
        assert_eq!(cap_problem(caps, 1, 2), None);
        assert!(cap_problem(caps, 2, 0).is_some_and(|why| why.contains("at most 2 upcoming")));
        assert!(cap_problem(caps, 0, 3).is_some_and(|why| why.contains("at most 3 bookings")));
        // 2026-12-01T00:00Z .. 2027-01-01T00:00Z holds 2026-12-31T23:59Z.
        assert_eq!(utc_month(1_798_761_540_000), (1_796_083_200_000, 1_798_761_600_000));
        assert_eq!(utc_month(1_796_083_200_000).0, 1_796_083_200_000, "a month starts at its first instant");
    }

    #[test]
    fn l13_booking_windows_must_be_sane_and_collisions_are_half_open() {
        let now = 1_000 * MIN;
        assert!(booking_problem(now + MIN, now + 60 * MIN, now).is_none());
        assert!(booking_problem(now - 10 * MIN, now + 10 * MIN, now).is_none(), "a booking may start now-ish and run on");
        assert!(booking_problem(now + 60 * MIN, now + MIN, now).is_some());
        assert!(booking_problem(now - 60 * MIN, now - MIN, now).is_some(), "already over");
        assert!(booking_problem(now, now + MAX_BOOKING_MS + 1, now).is_some());
        assert!(booking_problem(now + MAX_BOOKING_AHEAD_MS + MIN, now + MAX_BOOKING_AHEAD_MS + 2 * MIN, now).is_some());
        let held = [booking("a", "Acme", 10, 20), booking("b", "Kofi", 30, 40)];
        assert_eq!(first_collision(&held, None, (20 * MIN, 30 * MIN)), None, "back to back is fine");
        assert_eq!(first_collision(&held, None, (15 * MIN, 35 * MIN)).map(|b| b.id.as_str()), Some("a"), "the earliest collision");
        assert_eq!(first_collision(&held, Some("a"), (15 * MIN, 35 * MIN)).map(|b| b.id.as_str()), Some("b"));
    }

    #[test]
    fn booking_times_are_read_as_utc_minutes() {
        assert_eq!(parse_utc_minute("2026-10-31T23:59"), Some(1_793_491_140_000));
        assert_eq!(parse_utc_minute("2026-10-31 23:59"), None);
        assert_eq!(parse_utc_minute("yesterday"), None);
    }

    #[test]
    fn billable_time_sums_by_the_utc_month_the_session_started_newest_first() {
        // 2026-10-31T23:59:00Z and 2026-11-01T00:01:00Z.
        let oct = 1_793_491_140_000;
        let nov = oct + 2 * MIN;
        let bills = monthly_billable(&[(oct, 5 * MIN), (nov, 7 * MIN), (nov + MIN, 3 * MIN)]);
        assert_eq!(bills.iter().map(|b| (b.month.as_str(), b.sessions, b.billable_ms)).collect::<Vec<_>>(), [
            ("2026-11", 2, 10 * MIN),
            ("2026-10", 1, 5 * MIN)
        ]);
    }
}
