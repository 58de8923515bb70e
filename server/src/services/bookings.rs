//! Bookings (seed 001, rule L13): a client books a robot for a time
//! window (an admin may book for a client), lists and cancels them. Checked
//! against the pure rules in `domain::booking`, written to the store, handed
//! to the org's dispatcher (a raise and an extension decide on the bookings
//! it holds) and published on the org's topic so open screens update.

use crate::bus::SharedBus;
use crate::clock::now_ms;
use crate::store::{NewBooking, SharedStore, StoreError};
use domain::booking::{booking_problem, cap_problem, first_collision, Booking, BookingCaps};
use domain::events::{Event, OrgEvent, Topic};

#[derive(Debug, thiserror::Error)]
pub enum BookingError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct BookingService {
    store: SharedStore,
    bus: SharedBus,
    engine: std::sync::Arc<crate::engine::Engine>,
    caps: BookingCaps,
}

/// Who books: the client for themself, or an admin for a client.
pub struct Booker<'a> {
    pub user_id: &'a str,
    pub client_id: &'a str,
    /// What the client wants done: the episodes' task.
    pub task: Option<&'a str>,
}

impl BookingService {
    pub fn new(store: SharedStore, bus: SharedBus, engine: std::sync::Arc<crate::engine::Engine>, caps: BookingCaps) -> BookingService {
        BookingService { store, bus, engine, caps }
    }

    /// A committed change of the robot's bookings reaches its dispatcher and the org's screens.
    async fn changed(&self, org_id: &str, robot_id: String) {
        if let Err(e) = self.engine.bookings_changed(org_id, &robot_id).await {
            // Committed all the same: the dispatcher reads it when it next loads the org.
            tracing::warn!(org = %org_id, robot = %robot_id, error = %e, "the dispatcher did not take the booking change");
        }
        self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Bookings { robot_id }));
    }

    /// Books `robot_id` for `[starts_at, ends_at)`: refused for a bad
    /// window, a client who is not one of the org's clients, an unknown
    /// robot, another booking it overlaps, or a session running into it.
    pub async fn book(&self, org_id: &str, booker: Booker<'_>, robot_id: &str, starts_at: i64, ends_at: i64) -> Result<Booking, BookingError> {
        let now = now_ms();
        if let Some(why) = booking_problem(starts_at, ends_at, now) {
            return Err(BookingError::Invalid(why));
        }
        let clients = self.store.clients(org_id).await?;
        let Some((_, client_name)) = clients.into_iter().find(|(id, _)| id == booker.client_id) else {
            return Err(BookingError::Invalid("Bookings are made for one of the organisation's clients.".into()));
        };
        if self.store.robot(org_id, robot_id).await?.is_none() {
            return Err(BookingError::NotFound("robot"));
        }
        let booking = NewBooking {
            id: format!("bkg-{}", uuid::Uuid::now_v7().simple()),
            org_id: org_id.to_string(),
            robot_id: robot_id.to_string(),
            client_id: booker.client_id.to_string(),
            starts_at,
            ends_at,
            created_by: booker.user_id.to_string(),
            created_at: now,
            task: booker.task.map(str::to_string),
        };
        // Judged on what the write's own transaction reads: two bookings
        // made at once cannot both take one window or pass one cap, and a
        // session extended meanwhile is seen with its new end.
        let (client, caps) = (booker.client_id, self.caps);
        let judge = move |seen: &crate::store::BookingsSeen| -> Option<String> {
            if let Some((session_id, planned_end)) = seen.live_session.as_ref().filter(|(_, end)| *end > starts_at) {
                return Some(format!("{robot_id} is in session {session_id} until {}.", domain::booking::utc_when(*planned_end)));
            }
            if let Some(taken) = first_collision(&seen.robot, None, (starts_at, ends_at)) {
                // Not by whom: another client's name is theirs.
                return Some(format!(
                    "{robot_id} is already booked from {} to {}.",
                    domain::booking::utc_when(taken.starts_at_ms),
                    domain::booking::utc_when(taken.ends_at_ms)
                ));
            }
            let mine_ahead = seen.robot.iter().filter(|b| b.client_id == client).count();
            cap_problem(caps, mine_ahead, seen.client_in_month)
        };
        if let Some(refused) = self.store.insert_booking_judged(&booking, now, domain::booking::utc_month(starts_at), &judge).await? {
            return Err(BookingError::Conflict(refused));
        }
        self.changed(org_id, robot_id.to_string()).await;
        Ok(Booking {
            id: booking.id,
            robot_id: booking.robot_id,
            client_id: booking.client_id,
            client_name,
            starts_at_ms: starts_at,
            ends_at_ms: ends_at,
        })
    }

    /// Cancels a booking: a client only their own (`client_id`), an admin any.
    pub async fn cancel(&self, org_id: &str, booking_id: &str, client_id: Option<&str>) -> Result<(), BookingError> {
        match self.store.cancel_booking(org_id, booking_id, client_id, now_ms()).await? {
            Some(robot_id) => {
                self.changed(org_id, robot_id).await;
                Ok(())
            }
            None => Err(BookingError::NotFound("booking")),
        }
    }

    /// Bookings not over yet: one client's, or (`None`) the org's.
    pub async fn upcoming(&self, org_id: &str, client_id: Option<&str>) -> Result<Vec<Booking>, BookingError> {
        Ok(self.store.bookings(org_id, client_id, now_ms()).await?.into_iter().map(|b| b.booking()).collect())
    }

    /// The org's clients: (id, name).
    pub async fn clients(&self, org_id: &str) -> Result<Vec<(String, String)>, BookingError> {
        Ok(self.store.clients(org_id).await?)
    }
}
