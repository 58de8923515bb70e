//! Bookings on the desk (rule L13): each robot's bookings that are not yet
//! over, loaded with the org and replaced whenever the booking service
//! commits a change, so a raise and an extension decide from memory. The
//! store stays the judge of a booking and an extension made at once: both
//! commit under the robot's row lock (`insert_booking_judged`,
//! `extend_planned_end`).

use super::desk::{BookingHold, Desk};
use domain::booking::Booking;

impl Desk {
    /// The robot's bookings as just committed (the ones not over by `now` are kept).
    pub fn set_bookings(&mut self, robot_id: &str, mut bookings: Vec<Booking>, now: i64) {
        bookings.retain(|b| b.ends_at_ms > now);
        if bookings.is_empty() {
            self.bookings.remove(robot_id);
        } else {
            self.bookings.insert(robot_id.to_string(), bookings);
        }
    }

    /// Every robot's bookings, at load.
    pub fn load_bookings(&mut self, bookings: Vec<Booking>, now: i64) {
        self.bookings.clear();
        for booking in bookings.into_iter().filter(|b| b.ends_at_ms > now) {
            self.bookings.entry(booking.robot_id.clone()).or_default().push(booking);
        }
    }

    /// The robot's bookings not yet over.
    pub(super) fn bookings_of(&self, robot_id: &str) -> &[Booking] {
        self.bookings.get(robot_id).map_or(&[], Vec::as_slice)
    }

    /// The booking the robot is in at `now`: a call it raises is its client's.
    pub(super) fn booking_now(&self, robot_id: &str, now: i64) -> Option<BookingHold> {
        self.bookings_of(robot_id)
            .iter()
            .find(|b| b.starts_at_ms <= now && now < b.ends_at_ms)
            .map(|b| BookingHold { id: b.id.clone(), client_id: b.client_id.clone(), ends_at: b.ends_at_ms })
    }
}
