//! Datasets (seed 001 "Session data becomes training data"; rules L11,
//! L12): a COMPLETED session's recording becomes an episode in the dataset
//! of its robot's environment (site); a CANCELLED one's was deleted by the
//! recorder. Episodes export in LeRobot v3.0 or v2.1 as a tar archive. The
//! client who booked a session owns its episodes; admins see all of the
//! org's; nobody else.

pub mod lerobot;
pub mod resample;

use crate::bus::SharedBus;
use crate::clock::now_ms;
use crate::relay::recording::{read_samples, FinishedRecording};
use crate::store::{EpisodeRow, NewEpisode, SharedStore};
use app::events::{AuditEntry, Event, OrgEvent, Topic};
use lerobot::{EpisodeFrames, Version};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Every dataset's frame rate.
pub const DATASET_FPS: u32 = 30;

pub struct DatasetService {
    store: SharedStore,
    bus: SharedBus,
    /// `<data dir>/datasets`: `<org>/episodes/<session>.jsonl` per episode.
    dir: PathBuf,
}

impl DatasetService {
    pub fn new(store: SharedStore, bus: SharedBus, dir: PathBuf) -> DatasetService {
        DatasetService { store, bus, dir }
    }

    fn episode_file(&self, org_id: &str, session_id: &str) -> PathBuf {
        self.dir.join(org_id).join("episodes").join(format!("{session_id}.jsonl"))
    }

    /// Turns finished recordings into episodes, one at a time, for as long as the server runs.
    pub async fn make_episodes(self: Arc<Self>, mut finished: mpsc::UnboundedReceiver<FinishedRecording>) {
        while let Some(recording) = finished.recv().await {
            if let Err(e) = self.make_episode(&recording).await {
                tracing::error!(session = %recording.session_id, error = %e, "could not make an episode of the recording");
            }
        }
    }

    async fn make_episode(&self, recording: &FinishedRecording) -> anyhow::Result<()> {
        let (org_id, session_id) = (&recording.org_id, &recording.session_id);
        let session = self.store.session(org_id, session_id).await?.ok_or_else(|| anyhow::anyhow!("session {session_id} not found"))?;
        let task = match &session.booking_id {
            Some(booking) => self.store.booking_task(org_id, booking).await?,
            None => None,
        }
        .unwrap_or_else(|| session.skill.clone());
        let target = self.episode_file(org_id, session_id);
        let source = recording.path.clone();
        let moved = target.clone();
        let frames = tokio::task::spawn_blocking(move || -> anyhow::Result<resample::Frames> {
            std::fs::create_dir_all(moved.parent().expect("a parent"))?;
            std::fs::rename(&source, &moved)?;
            Ok(resample::resample(&read_samples(&moved)?, DATASET_FPS))
        })
        .await??;
        if frames.is_empty() {
            // Nothing was recorded while ACTIVE: no episode.
            let _ = std::fs::remove_file(&target);
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
            frames: frames.len() as i64,
            duration_ms: frames.duration_ms,
            cameras: frames.cameras.keys().cloned().collect(),
            created_at: now_ms(),
        };
        let index = self.store.add_episode(&episode).await?;
        let entry = AuditEntry {
            at_ms: episode.created_at,
            actor_kind: "system".into(),
            actor_id: None,
            action: "episode_recorded".into(),
            session_id: Some(session_id.clone()),
            robot_id: Some(session.robot_id.clone()),
            detail: Some(format!("episode {index} of {}: {} frames at {} fps", session.site, episode.frames, DATASET_FPS)),
        };
        self.store.record_audit(org_id, &entry).await?;
        self.bus.publish(Topic::org(org_id), Event::Org(OrgEvent::Audit { entry }));
        Ok(())
    }

    /// The org's episodes (only `client_id`'s when given).
    pub async fn episodes(&self, org_id: &str, client_id: Option<&str>) -> anyhow::Result<Vec<EpisodeRow>> {
        Ok(self.store.episodes(org_id, client_id).await?)
    }

    /// The environment's episodes (only `client_id`'s when given) as a tar
    /// of a LeRobot dataset; `None` when there are none.
    pub async fn export(&self, org_id: &str, environment: &str, version: Version, client_id: Option<&str>) -> anyhow::Result<Option<Vec<u8>>> {
        let rows: Vec<EpisodeRow> = self.episodes(org_id, client_id).await?.into_iter().filter(|e| e.environment == environment).collect();
        if rows.is_empty() {
            return Ok(None);
        }
        let files: Vec<(PathBuf, String)> = rows.iter().map(|r| (self.episode_file(org_id, &r.session_id), r.task.clone())).collect();
        let robot_type = rows[0].robot_id.clone();
        let work = self.dir.join(".exports").join(uuid::Uuid::now_v7().simple().to_string());
        let name = format!("lerobot-{}-{}", slug(environment), version.as_str());
        tokio::task::spawn_blocking(move || -> anyhow::Result<Option<Vec<u8>>> {
            let episodes = files
                .into_iter()
                .map(|(path, task)| Ok(EpisodeFrames { task, frames: resample::resample(&read_samples(&path)?, DATASET_FPS) }))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let root = work.join(&name);
            let written = lerobot::write_dataset(&root, version, &robot_type, &episodes).and_then(|()| {
                let mut archive = tar::Builder::new(Vec::new());
                archive.append_dir_all(&name, &root)?;
                Ok(archive.into_inner()?)
            });
            let _ = std::fs::remove_dir_all(&work);
            written.map(Some)
        })
        .await?
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
