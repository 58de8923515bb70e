//! Each org's link-health floors (region → PoP, rules D02 and W16):
//! edited by its admins, audited, starting from the defaults; and its RTT
//! ceilings per skill (rules A15–A17), none until an admin sets one.

use super::sql::StoreDb;
use super::sql::{PgStore, SqliteStore};
use super::{Store, StoreResult};
use domain::events::{AuditAction, AuditEntry};
use domain::dispatch::{FloorRemoval, RttCeiling};
use domain::models::LinkFloor;
use async_trait::async_trait;

#[derive(Clone, Debug)]
pub enum FloorChange {
    Done(AuditEntry),
    NotFound,
    /// An org keeps at least one path.
    LastPath,
}

#[async_trait]
pub trait FloorStore: Send + Sync {
    /// The org's floors by region and PoP; the defaults until it has its own.
    async fn org_link_floors(&self, org_id: &str) -> StoreResult<Vec<LinkFloor>>;
    /// Adds or changes one path.
    async fn set_link_floor(&self, org_id: &str, floor: &LinkFloor, actor: &str, at: i64) -> StoreResult<FloorChange>;
    /// Removes one path if `judge`, given the org's paths as read under the
    /// org's row lock (two admins removing the last two paths at once are
    /// judged one after the other), allows it.
    async fn remove_link_floor(&self, org_id: &str, region: &str, pop: &str, actor: &str, at: i64, judge: FloorJudge<'_>) -> StoreResult<FloorChange>;

    /// The org's RTT ceilings, by skill.
    async fn org_rtt_ceilings(&self, org_id: &str) -> StoreResult<Vec<RttCeiling>>;
    /// Sets (or changes) one skill's ceiling.
    async fn set_rtt_ceiling(&self, org_id: &str, ceiling: &RttCeiling, actor: &str, at: i64) -> StoreResult<AuditEntry>;
    /// Removes one skill's ceiling; `None` when it had none.
    async fn remove_rtt_ceiling(&self, org_id: &str, skill: &str, actor: &str, at: i64) -> StoreResult<Option<AuditEntry>>;
}

type CeilingRow = (String, i64, i64, i64, i64);

fn ceiling((skill, ceiling_ms, step_ms, every_s, lifted_after_s): CeilingRow) -> RttCeiling {
    let ms = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
    RttCeiling { skill, ceiling_ms: ms(ceiling_ms), step_ms: ms(step_ms), every_s: ms(every_s), lifted_after_s: ms(lifted_after_s) }
}

/// How an audit entry names a ceiling.
fn ceiling_text(c: &RttCeiling) -> String {
    format!("{} ms, +{} ms every {} s, lifted after {} s", c.ceiling_ms, c.step_ms, c.every_s, c.lifted_after_s)
}

const CEILINGS: &str = "SELECT skill, ceiling_ms, step_ms, every_s, lifted_after_s FROM org_rtt_ceilings WHERE org_id = $1";

/// The service's rule for a removal (`domain::dispatch::floor_removal`).
pub type FloorJudge<'a> = &'a (dyn Fn(&[LinkFloor], &str, &str) -> FloorRemoval + Send + Sync);

type FloorRow = (String, String, i64, Option<String>);

fn floor(row: FloorRow) -> LinkFloor {
    let (region, pop, floor_ms, note) = row;
    LinkFloor { region, pop, floor_ms: u32::try_from(floor_ms).unwrap_or(u32::MAX), note }
}

macro_rules! floor_store {
    ($store:ident) => {
        impl $store {
            /// An org edits a copy of the defaults, made on its first edit.
            async fn own_floors(tx: &mut sqlx::Transaction<'_, <Self as StoreDb>::Db>, org_id: &str) -> StoreResult<Vec<FloorRow>> {
                let own = || sqlx::query_as::<_, FloorRow>("SELECT region, pop, floor_ms, note FROM org_link_floors WHERE org_id = $1 ORDER BY region, pop").bind(org_id);
                let rows = own().fetch_all(&mut **tx).await?;
                if !rows.is_empty() {
                    return Ok(rows);
                }
                sqlx::query("INSERT INTO org_link_floors (org_id, region, pop, floor_ms, note) SELECT $1, region, pop, floor_ms, note FROM link_floors")
                    .bind(org_id).execute(&mut **tx).await?;
                Ok(own().fetch_all(&mut **tx).await?)
            }
        }

        #[async_trait]
        impl FloorStore for $store {
            async fn org_link_floors(&self, org_id: &str) -> StoreResult<Vec<LinkFloor>> {
                let own: Vec<FloorRow> = sqlx::query_as("SELECT region, pop, floor_ms, note FROM org_link_floors WHERE org_id = $1 ORDER BY region, pop")
                    .bind(org_id).fetch_all(&self.pool).await?;
                if own.is_empty() {
                    return self.link_floors().await;
                }
                Ok(own.into_iter().map(floor).collect())
            }

            async fn set_link_floor(&self, org_id: &str, f: &LinkFloor, actor: &str, at: i64) -> StoreResult<FloorChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                // As a removal does: the first edit copies the defaults, once.
                sqlx::query("UPDATE orgs SET name = name WHERE id = $1").bind(org_id).execute(&mut *tx).await?;
                let before = Self::own_floors(&mut tx, org_id).await?.into_iter().find(|(r, p, _, _)| *r == f.region && *p == f.pop);
                sqlx::query(
                    "INSERT INTO org_link_floors (org_id, region, pop, floor_ms, note) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (org_id, region, pop) DO UPDATE SET floor_ms = excluded.floor_ms, note = excluded.note",
                )
                .bind(org_id).bind(&f.region).bind(&f.pop).bind(i64::from(f.floor_ms)).bind(&f.note).execute(&mut *tx).await?;
                let detail = match before {
                    Some((_, _, ms, note)) => format!("{} → {}: {ms} ms → {} ms (note: {} → {})", f.region, f.pop, f.floor_ms, note.unwrap_or_default(), f.note.clone().unwrap_or_default()),
                    None => format!("{} → {}: new path, {} ms", f.region, f.pop, f.floor_ms),
                };
                let entry = AuditEntry::by_user(actor, AuditAction::LinkFloorSet, detail, at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(FloorChange::Done(entry))
            }

            async fn remove_link_floor(&self, org_id: &str, region: &str, pop: &str, actor: &str, at: i64, judge: FloorJudge<'_>) -> StoreResult<FloorChange> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                sqlx::query("UPDATE orgs SET name = name WHERE id = $1").bind(org_id).execute(&mut *tx).await?;
                let floors: Vec<LinkFloor> = Self::own_floors(&mut tx, org_id).await?.into_iter().map(floor).collect();
                match judge(&floors, region, pop) {
                    FloorRemoval::Allowed => {}
                    FloorRemoval::NotFound => return Ok(FloorChange::NotFound),
                    FloorRemoval::LastPath => return Ok(FloorChange::LastPath),
                }
                let ms = floors.iter().find(|f| f.region == region && f.pop == pop).map_or(0, |f| f.floor_ms);
                sqlx::query("DELETE FROM org_link_floors WHERE org_id = $1 AND region = $2 AND pop = $3").bind(org_id).bind(region).bind(pop).execute(&mut *tx).await?;
                let entry = AuditEntry::by_user(actor, AuditAction::LinkFloorRemoved, format!("{region} → {pop} ({ms} ms) removed"), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(FloorChange::Done(entry))
            }

            async fn org_rtt_ceilings(&self, org_id: &str) -> StoreResult<Vec<RttCeiling>> {
                let rows: Vec<CeilingRow> = sqlx::query_as(&format!("{CEILINGS} ORDER BY skill")).bind(org_id).fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(ceiling).collect())
            }

            async fn set_rtt_ceiling(&self, org_id: &str, c: &RttCeiling, actor: &str, at: i64) -> StoreResult<AuditEntry> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let before: Option<CeilingRow> = sqlx::query_as(&format!("{CEILINGS} AND skill = $2")).bind(org_id).bind(&c.skill).fetch_optional(&mut *tx).await?;
                sqlx::query(
                    "INSERT INTO org_rtt_ceilings (org_id, skill, ceiling_ms, step_ms, every_s, lifted_after_s) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (org_id, skill) DO UPDATE SET ceiling_ms = excluded.ceiling_ms, step_ms = excluded.step_ms, \
                     every_s = excluded.every_s, lifted_after_s = excluded.lifted_after_s",
                )
                .bind(org_id).bind(&c.skill).bind(i64::from(c.ceiling_ms)).bind(i64::from(c.step_ms)).bind(i64::from(c.every_s)).bind(i64::from(c.lifted_after_s))
                .execute(&mut *tx).await?;
                let detail = match before {
                    Some(row) => format!("{}: {} → {}", c.skill, ceiling_text(&ceiling(row)), ceiling_text(c)),
                    None => format!("{}: new ceiling, {}", c.skill, ceiling_text(c)),
                };
                let entry = AuditEntry::by_user(actor, AuditAction::RttCeilingSet, detail, at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(entry)
            }

            async fn remove_rtt_ceiling(&self, org_id: &str, skill: &str, actor: &str, at: i64) -> StoreResult<Option<AuditEntry>> {
                let mut tx = <Self as StoreDb>::begin_write(&self.pool).await?;
                let Some(row): Option<CeilingRow> = sqlx::query_as(&format!("{CEILINGS} AND skill = $2")).bind(org_id).bind(skill).fetch_optional(&mut *tx).await? else {
                    return Ok(None);
                };
                sqlx::query("DELETE FROM org_rtt_ceilings WHERE org_id = $1 AND skill = $2").bind(org_id).bind(skill).execute(&mut *tx).await?;
                let entry = AuditEntry::by_user(actor, AuditAction::RttCeilingRemoved, format!("{skill}: ceiling of {} removed", ceiling_text(&ceiling(row))), at);
                Self::write_audit(&mut tx, org_id, &entry).await?;
                tx.commit().await?;
                Ok(Some(entry))
            }
        }
    };
}

floor_store!(SqliteStore);
floor_store!(PgStore);
