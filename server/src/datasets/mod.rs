//! Datasets (seed 001 "Session data becomes training data"; rules L11,
//! L12): a COMPLETED session's recording becomes an episode in the dataset
//! of its robot's environment (site); a CANCELLED one's was deleted by the
//! recorder. Episodes export in LeRobot v3.0 or v2.1 as a tar archive. The
//! client who booked a session owns its episodes; admins see all of the
//! org's; nobody else.

pub mod lerobot;
pub mod placing;
pub mod resample;
pub mod stream;

use crate::bus::SharedBus;
use crate::clock::now_ms;
use crate::relay::recording::FinishedRecording;
use crate::services::places::{CapReached, Place, SharedPlaces};
use crate::store::{EpisodeRow, NewEpisode, SharedStore};
use domain::events::{AuditEntry, Event, OrgEvent, Topic};
use lerobot::{Episode, FrameStream, Summary, Version};
use placing::Placement;
use std::path::PathBuf;
use std::sync::Arc;
use stream::RecordingFile;
use tokio::sync::mpsc;

/// Every dataset's frame rate.
pub const DATASET_FPS: u32 = 30;
/// Exports one org may run at once (finding 8): each reads every episode
/// of an environment and writes a dataset, so a client clicking "export"
/// in a loop must not take the disk and the cores from dispatch.
pub const EXPORTS_PER_ORG: usize = 2;
/// The tar is sent in pieces of this size, at most `TAR_PIECES_AHEAD`
/// ahead of its reader, so the archive is never held in memory, and a
/// reader that goes away stops the export (the download's reader gives up
/// a client that stalls: `http::export`). The dataset itself is written
/// to disk first, a batch of frames in memory at a time
/// (`lerobot::write_dataset`), each recording read a line at a time
/// (`stream`).
const TAR_PIECE_BYTES: usize = 64 * 1024;
const TAR_PIECES_AHEAD: usize = 4;
/// An episode's file found in place is read once nothing was written to it
/// for this long (the instance that placed it may still be writing it), and
/// a joining file is swept at start after as long.
const EPISODE_QUIET: std::time::Duration = std::time::Duration::from_secs(10);

pub struct DatasetService {
    store: SharedStore,
    bus: SharedBus,
    /// `<data dir>/datasets`: `<org>/episodes/<session>.jsonl` per episode.
    dir: PathBuf,
    exports: ExportPlaces,
}

/// An export this org may not start now: `EXPORTS_PER_ORG` are running.
#[derive(Debug, PartialEq, Eq)]
pub struct ExportsBusy;

/// Exports running, by org: `EXPORTS_PER_ORG` places each, on this
/// instance and (cluster mode) across the instances.
#[derive(Default)]
struct ExportPlaces {
    here: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
    shared: std::sync::OnceLock<Arc<SharedPlaces>>,
}

/// One running export's place; freed when dropped.
pub struct ExportPlace {
    _here: tokio::sync::OwnedSemaphorePermit,
    _shared: Option<Place>,
}

impl ExportPlaces {
    async fn take(&self, org_id: &str) -> Result<ExportPlace, ExportsBusy> {
        let org = self.here.lock().expect("exports lock").entry(org_id.to_string()).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(EXPORTS_PER_ORG))).clone();
        let here = org.try_acquire_owned().map_err(|_| ExportsBusy)?;
        let shared = match self.shared.get() {
            Some(places) => places.take(&format!("export:{org_id}"), EXPORTS_PER_ORG).await.map_err(|CapReached| ExportsBusy)?,
            None => None,
        };
        Ok(ExportPlace { _here: here, _shared: shared })
    }
}

/// A dataset's tar as it is written: pieces of bytes, or the error that
/// stopped it (the client then sees the download fail, not a short file).
pub type TarStream = futures::stream::BoxStream<'static, std::io::Result<bytes::Bytes>>;

impl DatasetService {
    pub fn new(store: SharedStore, bus: SharedBus, dir: PathBuf) -> DatasetService {
        DatasetService { store, bus, dir, exports: Default::default() }
    }

    /// Cluster mode: an org's exports count on every instance.
    pub fn share_places(&self, places: Arc<SharedPlaces>) {
        let _ = self.exports.shared.set(places);
    }

    /// A place for one more export of `org_id`, held until the export ends.
    pub async fn export_place(&self, org_id: &str) -> Result<ExportPlace, ExportsBusy> {
        self.exports.take(org_id).await
    }

    fn episode_file(&self, org_id: &str, session_id: &str) -> PathBuf {
        self.dir.join(org_id).join("episodes").join(format!("{session_id}.jsonl"))
    }

    /// Turns finished recordings into episodes, one at a time, for as long
    /// as the server runs; first, sweeps the joining files a crash left.
    pub async fn make_episodes(self: Arc<Self>, mut finished: mpsc::UnboundedReceiver<FinishedRecording>) {
        let dir = self.dir.clone();
        if let Ok(swept @ 1..) = tokio::task::spawn_blocking(move || placing::sweep_joining(&dir, EPISODE_QUIET)).await {
            tracing::info!(swept, "joining files left by an instance that stopped mid-join were deleted");
        }
        while let Some(recording) = finished.recv().await {
            if let Err(e) = self.make_episode(&recording).await {
                tracing::error!(session = %recording.session_id, error = %e, "could not make an episode of the recording: its parts are kept, and it is tried again once they are quiet");
            }
        }
    }

    async fn make_episode(&self, recording: &FinishedRecording) -> anyhow::Result<()> {
        let (org_id, session_id) = (&recording.org_id, &recording.session_id);
        if self.store.has_episode(session_id).await? {
            // Made already: these are parts written after it (a batch that
            // raced a hand-off) or left by a stop after its row. They go,
            // and the episode in place is never read, or made again, for them.
            placing::remove_parts(&recording.parts);
            return Ok(());
        }
        let session = self.store.session(org_id, session_id).await?.ok_or_else(|| anyhow::anyhow!("session {session_id} not found"))?;
        let task = match &session.booking_id {
            Some(booking) => self.store.booking_task(org_id, booking).await?,
            None => None,
        }
        .unwrap_or_else(|| session.skill.clone());
        let target = self.episode_file(org_id, session_id);
        let (parts, moved) = (recording.parts.clone(), target.clone());
        let plan = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<resample::Plan>> {
            std::fs::create_dir_all(moved.parent().expect("a parent"))?;
            let mut placed = placing::place_recording(&parts, &moved)?;
            if placed == Placement::Found && placing::quiet_for(&moved, EPISODE_QUIET) && placing::cut_short(&moved, &parts) {
                // A copy cut short (its instance died mid-copy): made again.
                tracing::warn!(episode = %moved.display(), "an episode's file cut short is made again from its parts");
                std::fs::remove_file(&moved)?;
                placed = placing::place_recording(&parts, &moved)?;
            }
            match placed {
                Placement::Placed => {}
                // Placed before (by another instance, or by a try here that
                // got no further): its row may be missing. Read once the
                // instance that placed it can no longer be writing it.
                Placement::Found if placing::quiet_for(&moved, EPISODE_QUIET) => {}
                Placement::Found | Placement::Taken => return Ok(None),
            }
            // Read a line at a time for the counts: the recording may be 1 GiB.
            Ok(Some(RecordingFile::open(&moved, DATASET_FPS)?.plan().clone()))
        })
        .await??;
        let Some(plan) = plan else {
            tracing::info!(session = %session_id, "another instance is making this session's episode, or made it: nothing changed here");
            return Ok(());
        };
        if plan.is_empty() {
            // Nothing was recorded while ACTIVE: no episode.
            let _ = std::fs::remove_file(&target);
            placing::remove_parts(&recording.parts);
            return Ok(());
        }
        let episode = NewEpisode {
            session_id: session_id.clone(),
            org_id: org_id.clone(),
            environment: session.site.clone(),
            robot_id: session.robot_id.clone(),
            operator_id: session.operator_id.clone(),
            client_id: session.client_id.clone(),
            task,
            fps: i64::from(DATASET_FPS),
            frames: plan.len() as i64,
            duration_ms: plan.duration_ms(),
            cameras: plan.cameras().to_vec(),
            created_at: now_ms(),
        };
        let entry = |index: i64| AuditEntry {
            at_ms: episode.created_at,
            actor_kind: domain::events::ActorKind::System,
            actor_id: None,
            action: domain::events::AuditAction::EpisodeRecorded,
            session_id: Some(session_id.clone()),
            robot_id: Some(session.robot_id.clone()),
            detail: Some(format!("episode {index} of {}: {} frames at {} fps", session.site, episode.frames, DATASET_FPS)),
        };
        // The parts go only once the row and its audit entry are there
        // (one transaction): a recording whose row could not be written
        // keeps them, and is tried again.
        let Some(entry) = self.store.add_episode(&episode, &entry).await? else {
            placing::remove_parts(&recording.parts);
            return Ok(());
        };
        self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Audit { entry }));
        placing::remove_parts(&recording.parts);
        Ok(())
    }

    /// The org's episodes (only `client_id`'s when given).
    pub async fn episodes(&self, org_id: &str, client_id: Option<&str>) -> anyhow::Result<Vec<EpisodeRow>> {
        Ok(self.store.episodes(org_id, client_id).await?)
    }

    /// The environment's episodes (only `client_id`'s when given) as a tar
    /// of a LeRobot dataset, streamed; `None` when there are none. `place`
    /// (from [`export_place`](Self::export_place)) is held until the last
    /// piece is sent or the client goes away, which stops the export.
    pub async fn export(
        &self,
        org_id: &str,
        environment: &str,
        version: Version,
        client_id: Option<&str>,
        place: ExportPlace,
    ) -> anyhow::Result<Option<TarStream>> {
        let rows: Vec<EpisodeRow> = self.episodes(org_id, client_id).await?.into_iter().filter(|e| e.environment == environment).collect();
        if rows.is_empty() {
            return Ok(None);
        }
        let files: Vec<(PathBuf, String)> = rows.iter().map(|r| (self.episode_file(org_id, &r.session_id), r.task.clone())).collect();
        let robot_type = rows[0].robot_id.clone();
        let work = self.dir.join(".exports").join(uuid::Uuid::now_v7().simple().to_string());
        let name = format!("lerobot-{}-{}", slug(environment), version.as_str());
        let (pieces, received) = mpsc::channel::<std::io::Result<bytes::Bytes>>(TAR_PIECES_AHEAD);
        let writer = tokio::task::spawn_blocking(move || {
            let _place = place;
            let written = (|| -> anyhow::Result<()> {
                // Every recording is read once here for its plan, and once
                // more for its frames as they are written; a client that
                // left stops either.
                let gone = || pieces.is_closed();
                let mut episodes = Vec::with_capacity(files.len());
                for (path, task) in &files {
                    anyhow::ensure!(!gone(), "the client went away");
                    episodes.push(Recorded { task: task.clone(), file: RecordingFile::open(path, DATASET_FPS)?, gone: &gone });
                }
                let root = work.join(&name);
                lerobot::write_dataset(&root, version, &robot_type, &episodes)?;
                let mut archive = tar::Builder::new(std::io::BufWriter::with_capacity(TAR_PIECE_BYTES, Pieces(pieces.clone())));
                archive.append_dir_all(&name, &root)?;
                archive.into_inner()?.into_inner().map_err(|e| e.into_error())?;
                Ok(())
            })();
            if let Err(e) = written {
                tracing::info!(error = %e, "dataset export stopped");
                let _ = pieces.blocking_send(Err(std::io::Error::other(e.to_string())));
            }
            let _ = std::fs::remove_dir_all(&work);
        });
        Ok(Some(pieces_then_end(received, writer)))
    }
}

/// The writer's pieces, then its end: a writer that panicked sent no
/// error, and its tar must not read as whole.
fn pieces_then_end(received: mpsc::Receiver<std::io::Result<bytes::Bytes>>, writer: tokio::task::JoinHandle<()>) -> TarStream {
    Box::pin(futures::stream::unfold(Some((received, writer)), |held| async move {
        let (mut received, writer) = held?;
        match received.recv().await {
            Some(piece) => Some((piece, Some((received, writer)))),
            None => match writer.await {
                Ok(()) => None,
                Err(e) => Some((Err(std::io::Error::other(format!("the export failed: {e}"))), None)),
            },
        }
    }))
}

/// An episode as an export reads it: its recording, a line at a time.
struct Recorded<'a> {
    task: String,
    file: RecordingFile,
    /// Whether the client has gone (the export then stops at the next frame).
    gone: &'a dyn Fn() -> bool,
}

impl Episode for Recorded<'_> {
    fn summary(&self) -> Summary {
        Summary::of(&self.task, self.file.plan())
    }

    fn frames(&self) -> anyhow::Result<FrameStream<'_>> {
        Ok(Box::new(self.file.frames()?.map(|frame| {
            anyhow::ensure!(!(self.gone)(), "the client went away");
            Ok(frame?)
        })))
    }
}

/// The tar's bytes, handed to its reader a piece at a time; a write fails
/// once the reader is gone (the client went away, or stalled and was given
/// up), which ends the export and frees the org's export place.
struct Pieces(mpsc::Sender<std::io::Result<bytes::Bytes>>);

impl std::io::Write for Pieces {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let piece = Ok(bytes::Bytes::copy_from_slice(buf));
        match self.0.blocking_send(piece) {
            Ok(()) => Ok(buf.len()),
            Err(_) => Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the download's reader is gone")),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A file-name-safe form of an environment's name.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    /// A tar whose writer panicked part way fails; one whose writer
    /// finished ends.
    #[tokio::test]
    async fn a_tar_whose_writer_panicked_fails_rather_than_ending_short() {
        for panics in [true, false] {
            let (pieces, received) = tokio::sync::mpsc::channel(4);
            let writer = tokio::task::spawn_blocking(move || {
                pieces.blocking_send(Ok(bytes::Bytes::from_static(b"part"))).unwrap();
                assert!(!panics, "the writer's bug");
            });
            let mut tar = super::pieces_then_end(received, writer);
            assert_eq!(&tar.next().await.unwrap().unwrap()[..], b"part");
            match tar.next().await {
                Some(Err(_)) => assert!(panics, "a finished writer's tar ends"),
                None => assert!(!panics, "a panicked writer's tar fails"),
                Some(Ok(_)) => panic!("one piece was sent"),
            }
        }
    }

    #[tokio::test]
    async fn s08_an_org_runs_two_exports_at_once_and_a_finished_one_frees_its_place() {
        let places = super::ExportPlaces::default();
        let (a, _b) = (places.take("o1").await.unwrap(), places.take("o1").await.unwrap());
        assert_eq!(places.take("o1").await.err(), Some(super::ExportsBusy), "a third waits (429)");
        assert!(places.take("o2").await.is_ok(), "another org is not held back");
        drop(a);
        assert!(places.take("o1").await.is_ok());
    }
}
