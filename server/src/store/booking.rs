//! Bookings of robots by clients, and a client's sessions (seed 001,
//! rule L13).

use super::journal::SessionRow;
use super::sql::{PgStore, SqliteStore};
use super::StoreResult;
use domain::event_log::{self as log, LogEvent};
use async_trait::async_trait;
use std::sync::LazyLock;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct BookingRow {
    pub id: String,
    pub robot_id: String,
    pub client_id: String,
    pub client_name: String,
    pub starts_at: i64,
    pub ends_at: i64,
}

impl BookingRow {
    pub fn booking(self) -> domain::booking::Booking {
        domain::booking::Booking {
            id: self.id,
            robot_id: self.robot_id,
            client_id: self.client_id,
            client_name: self.client_name,
            starts_at_ms: self.starts_at,
            ends_at_ms: self.ends_at,
        }
    }
}

#[derive(Clone, Debug)]
pub struct NewBooking {
    pub id: String,
    pub org_id: String,
    pub robot_id: String,
    pub client_id: String,
    pub starts_at: i64,
    pub ends_at: i64,
    pub created_by: String,
    pub created_at: i64,
    pub task: Option<String>,
}

/// What a new booking is judged on, read in the transaction that writes it.
#[derive(Clone, Debug)]
pub struct BookingsSeen {
    /// The robot's bookings still running after the given instant.
    pub robot: Vec<domain::booking::Booking>,
    /// The client's bookings starting in the given month.
    pub client_in_month: usize,
    /// The robot's live session and its planned end, if it has one: read
    /// under the robot's row lock, which an extension's write takes too
    /// (store/apply.rs), so a booking and an extension made at once are
    /// judged one after the other.
    pub live_session: Option<(String, i64)>,
}

/// The service's judgement of a booking: `Some(why)` refuses it.
pub type BookingJudge<'a> = &'a (dyn Fn(&BookingsSeen) -> Option<String> + Send + Sync);

/// The judgement of an extension on the robot's bookings after the old
/// planned end and the session's own booking: `Some(why)` refuses it.
pub type ExtensionJudge<'a> = &'a (dyn Fn(&[domain::booking::Booking], Option<&str>) -> Option<String> + Send + Sync);

/// What became of an extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extension {
    Done,
    /// The judge refused it: why.
    Refused(String),
    /// The session is no longer live, or its planned end is no longer `from`.
    Moved,
}

#[async_trait]
pub trait BookingStore: Send + Sync {
    /// The robot's bookings still running after `after`, not cancelled, by start.
    async fn robot_bookings(&self, org_id: &str, robot_id: &str, after: i64) -> StoreResult<Vec<BookingRow>>;
    /// The org's (or one client's) bookings still running after `after`.
    async fn bookings(&self, org_id: &str, client_id: Option<&str>, after: i64) -> StoreResult<Vec<BookingRow>>;
    /// Writes the booking unless `judge` refuses what it sees: the robot's
    /// bookings running after `after` and the client's in `month`, read
    /// under the robot's and the client's row locks, so two bookings made
    /// at once are judged one after the other (PostgreSQL included).
    async fn insert_booking_judged(&self, booking: &NewBooking, after: i64, month: (i64, i64), judge: BookingJudge<'_>) -> StoreResult<Option<String>>;
    /// Moves a live session's planned end from `from` to `to` with its
    /// audit record, unless `judge` refuses the robot's bookings as read
    /// under the robot's row lock, which a new booking's transaction takes
    /// too: a booking and an extension made at once are judged one after
    /// the other (PostgreSQL included), never both on what was before.
    async fn extend_planned_end(&self, org_id: &str, session_id: &str, from: i64, to: i64, actor: &str, at: i64, judge: ExtensionJudge<'_>) -> StoreResult<Extension>;
    /// Cancels a booking (only `client_id`'s, when given); false when there
    /// is no such live booking.
    async fn cancel_booking(&self, org_id: &str, booking_id: &str, client_id: Option<&str>, at: i64) -> StoreResult<Option<String>>;
    /// The org's members holding the client role: (id, display name), by name.
    async fn clients(&self, org_id: &str) -> StoreResult<Vec<(String, String)>>;
    /// A client's sessions, or (`None`) those no client owns, newest first.
    async fn client_sessions(&self, org_id: &str, client_id: Option<&str>, limit: i64) -> StoreResult<Vec<SessionRow>>;
}

const BOOKING_SELECT: &str = "SELECT b.id, b.robot_id, b.client_id, u.display_name AS client_name, b.starts_at, b.ends_at \
     FROM bookings b JOIN users u ON u.id = b.client_id";

macro_rules! booking_store {
    ($store:ident) => {
        #[async_trait]
        impl BookingStore for $store {
            async fn robot_bookings(&self, org_id: &str, robot_id: &str, after: i64) -> StoreResult<Vec<BookingRow>> {
                Ok(sqlx::query_as(&format!(
                    "{BOOKING_SELECT} WHERE b.org_id = $1 AND b.robot_id = $2 AND b.ends_at > $3 AND b.cancelled_at IS NULL \
                     ORDER BY b.starts_at, b.id"
                ))
                .bind(org_id).bind(robot_id).bind(after).fetch_all(&self.pool).await?)
            }

            async fn bookings(&self, org_id: &str, client_id: Option<&str>, after: i64) -> StoreResult<Vec<BookingRow>> {
                Ok(sqlx::query_as(&format!(
                    "{BOOKING_SELECT} WHERE b.org_id = $1 AND ($2 IS NULL OR b.client_id = $2) AND b.ends_at > $3 \
                     AND b.cancelled_at IS NULL ORDER BY b.starts_at, b.id"
                ))
                .bind(org_id).bind(client_id).bind(after).fetch_all(&self.pool).await?)
            }

            async fn insert_booking_judged(&self, b: &NewBooking, after: i64, month: (i64, i64), judge: BookingJudge<'_>) -> StoreResult<Option<String>> {
                let mut tx = <Self as super::sql::StoreDb>::begin_write(&self.pool).await?;
                // Held until the commit, and found still as they were checked:
                // a robot in the fleet, a client of the org.
                let robot = sqlx::query("UPDATE robots SET model = model WHERE org_id = $1 AND id = $2 AND retired_at IS NULL")
                    .bind(&b.org_id).bind(&b.robot_id).execute(&mut *tx).await?;
                if robot.rows_affected() != 1 {
                    return Ok(Some(format!("{} is not in the fleet.", b.robot_id)));
                }
                let client = sqlx::query("UPDATE memberships SET role = role WHERE org_id = $1 AND user_id = $2 AND role = 'client'")
                    .bind(&b.org_id).bind(&b.client_id).execute(&mut *tx).await?;
                if client.rows_affected() != 1 {
                    return Ok(Some("Bookings are made for one of the organisation's clients.".into()));
                }
                let robot: Vec<BookingRow> = sqlx::query_as(&format!(
                    "{BOOKING_SELECT} WHERE b.org_id = $1 AND b.robot_id = $2 AND b.ends_at > $3 AND b.cancelled_at IS NULL ORDER BY b.starts_at, b.id"
                ))
                .bind(&b.org_id).bind(&b.robot_id).bind(after).fetch_all(&mut *tx).await?;
                let in_month: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM bookings WHERE org_id = $1 AND client_id = $2 AND starts_at >= $3 AND starts_at < $4 AND cancelled_at IS NULL",
                )
                .bind(&b.org_id).bind(&b.client_id).bind(month.0).bind(month.1).fetch_one(&mut *tx).await?;
                let live_session: Option<(String, i64)> = sqlx::query_as(BOOKED_SESSION_OF_ROBOT)
                .bind(&b.org_id).bind(&b.robot_id).fetch_optional(&mut *tx).await?;
                let seen = BookingsSeen {
                    robot: robot.into_iter().map(BookingRow::booking).collect(),
                    client_in_month: in_month.max(0) as usize,
                    live_session,
                };
                if let Some(refused) = judge(&seen) {
                    return Ok(Some(refused));
                }
                sqlx::query(
                    "INSERT INTO bookings (id, org_id, robot_id, client_id, starts_at, ends_at, created_by, created_at, task) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&b.id).bind(&b.org_id).bind(&b.robot_id).bind(&b.client_id).bind(b.starts_at).bind(b.ends_at)
                .bind(&b.created_by).bind(b.created_at).bind(&b.task)
                .execute(&mut *tx).await?;
                let event = LogEvent::BookingMade(log::Booking {
                    booking_id: b.id.clone(),
                    client_id: b.client_id.clone(),
                    starts_at: domain::rules::rfc3339(b.starts_at),
                    ends_at: domain::rules::rfc3339(b.ends_at),
                });
                Self::log_event(&mut tx, super::Logged { org_id: &b.org_id, at: b.created_at, session_id: None, robot_id: Some(&b.robot_id), event }).await?;
                tx.commit().await?;
                Ok(None)
            }

            async fn extend_planned_end(&self, org_id: &str, session_id: &str, from: i64, to: i64, actor: &str, at: i64, judge: ExtensionJudge<'_>) -> StoreResult<Extension> {
                let mut tx = <Self as super::sql::StoreDb>::begin_write(&self.pool).await?;
                let Some((robot_id, own)): Option<(String, Option<String>)> = sqlx::query_as(
                    "SELECT robot_id, booking_id FROM sessions WHERE org_id = $1 AND id = $2 AND planned_end_at = $3 AND lifecycle IN ('ACTIVE', 'PAUSED')",
                )
                .bind(org_id).bind(session_id).bind(from).fetch_optional(&mut *tx).await?
                else {
                    return Ok(Extension::Moved);
                };
                sqlx::query("UPDATE robots SET model = model WHERE org_id = $1 AND id = $2").bind(org_id).bind(&robot_id).execute(&mut *tx).await?;
                let bookings: Vec<BookingRow> = sqlx::query_as(&format!(
                    "{BOOKING_SELECT} WHERE b.org_id = $1 AND b.robot_id = $2 AND b.ends_at > $3 AND b.cancelled_at IS NULL ORDER BY b.starts_at, b.id"
                ))
                .bind(org_id).bind(&robot_id).bind(from).fetch_all(&mut *tx).await?;
                let bookings: Vec<domain::booking::Booking> = bookings.into_iter().map(BookingRow::booking).collect();
                if let Some(why) = judge(&bookings, own.as_deref()) {
                    return Ok(Extension::Refused(why));
                }
                // Compared with `from` again: two extensions at once move it once.
                let moved = sqlx::query(
                    "UPDATE sessions SET planned_end_at = $1 WHERE org_id = $2 AND id = $3 AND planned_end_at = $4 AND lifecycle IN ('ACTIVE', 'PAUSED')",
                )
                .bind(to).bind(org_id).bind(session_id).bind(from).execute(&mut *tx).await?;
                if moved.rows_affected() != 1 {
                    return Ok(Extension::Moved);
                }
                sqlx::query(
                    "INSERT INTO audit_records (org_id, at, actor_kind, actor_id, action, session_id, robot_id, detail) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(org_id).bind(at).bind(domain::events::ActorKind::User.as_str()).bind(actor)
                .bind(domain::events::AuditAction::SessionExtended.as_str()).bind(session_id).bind(&robot_id)
                .bind(format!("planned end {} → {}", domain::booking::utc_when(from), domain::booking::utc_when(to)))
                .execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(Extension::Done)
            }

            async fn cancel_booking(&self, org_id: &str, booking_id: &str, client_id: Option<&str>, at: i64) -> StoreResult<Option<String>> {
                let mut tx = <Self as super::sql::StoreDb>::begin_write(&self.pool).await?;
                let robot_id: Option<String> = sqlx::query_scalar(
                    "UPDATE bookings SET cancelled_at = $1 WHERE org_id = $2 AND id = $3 AND ($4 IS NULL OR client_id = $4) \
                     AND cancelled_at IS NULL RETURNING robot_id",
                )
                .bind(at).bind(org_id).bind(booking_id).bind(client_id).fetch_optional(&mut *tx).await?;
                if let Some(robot_id) = &robot_id {
                    let event = LogEvent::BookingCancelled(log::BookingCancelled { booking_id: booking_id.into() });
                    Self::log_event(&mut tx, super::Logged { org_id, at, session_id: None, robot_id: Some(robot_id), event }).await?;
                }
                tx.commit().await?;
                Ok(robot_id)
            }

            async fn clients(&self, org_id: &str) -> StoreResult<Vec<(String, String)>> {
                Ok(sqlx::query_as(
                    "SELECT u.id, u.display_name FROM memberships m JOIN users u ON u.id = m.user_id \
                     WHERE m.org_id = $1 AND m.role = 'client' ORDER BY u.display_name, u.id",
                )
                .bind(org_id).fetch_all(&self.pool).await?)
            }

            async fn client_sessions(&self, org_id: &str, client_id: Option<&str>, limit: i64) -> StoreResult<Vec<SessionRow>> {
                Ok(sqlx::query_as(client_sessions_read(client_id.is_some()))
                    .bind(org_id).bind(client_id).bind(limit).fetch_all(&self.pool).await?)
            }
        }
    };
}

/// The robot's call in progress if it is booked (has a planned end), by
/// the index of open sessions (test `tests/dispatch.rs`,
/// `a_robots_call_in_progress_is_read_through_open_sessions_only`).
pub const BOOKED_SESSION_OF_ROBOT: &str =
    concat!("SELECT id, planned_end_at FROM sessions WHERE org_id = $1 AND robot_id = $2 AND ", open_lifecycle_read!(), " AND planned_end_at IS NOT NULL");

/// A client's sessions (`$2`), or with none the calls no client owns (`$2`
/// NULL), newest start first, at most `$3`. Each text is made once.
pub fn client_sessions_read(with_client: bool) -> &'static str {
    static WITH_CLIENT: LazyLock<String> = LazyLock::new(|| client_sessions_text("s.client_id = $2"));
    // Calls no client owns: `raised_at >= 0` is always true, and lets the
    // org's day index (migrations postgres/0028 and sqlite/0020, partial on
    // `raised_at IS NOT NULL`, which a comparison implies) walk the org's
    // sessions, where PostgreSQL would otherwise read every org's. (A
    // written `IS NOT NULL` would not do: PostgreSQL 18 drops it on a NOT
    // NULL column.) Neither backend's client index holds them (sqlite/0025).
    static WITHOUT_CLIENT: LazyLock<String> =
        LazyLock::new(|| client_sessions_text("s.client_id IS NULL AND $2 IS NULL AND s.raised_at >= 0"));
    if with_client { &WITH_CLIENT } else { &WITHOUT_CLIENT }
}

fn client_sessions_text(filter: &str) -> String {
    format!(
        "{} WHERE s.org_id = $1 AND {filter} AND s.started_at IS NOT NULL ORDER BY s.started_at DESC, s.id LIMIT $3",
        super::dispatch::SESSION_SELECT
    )
}

booking_store!(SqliteStore);
booking_store!(PgStore);

#[cfg(test)]
mod tests {
    /// The client index holds only sessions with a client (sqlite/0025):
    /// a client's page still searches it, and the page of calls no client
    /// owns reads the org's day index, never a whole scan. (PostgreSQL:
    /// tests/cluster/store.rs, `a_session_named_by_its_id_is_read_by_its_key`.)
    #[tokio::test]
    async fn a_clients_page_takes_the_client_index_and_the_page_without_one_the_day_index() {
        let (_dir, _store, connection) = crate::store::sqlite_to_explain().await;
        let plan = |with_client| crate::store::explained(&connection, &format!("EXPLAIN QUERY PLAN {}", super::client_sessions_read(with_client)), "detail");
        let with_client = plan(true);
        assert!(with_client.iter().any(|line| line.starts_with("SEARCH s USING INDEX sessions_by_client (org_id=? AND client_id=?)")), "{with_client:#?}");
        let without = plan(false);
        assert!(without.iter().any(|line| line.starts_with("SEARCH s USING INDEX sessions_by_org_day (org_id=?")), "{without:#?}");
        for plan in [with_client, without] {
            assert!(!plan.iter().any(|line| line.starts_with("SCAN s")), "{plan:#?}");
        }
    }
}
