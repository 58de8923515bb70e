//! Recordings of ACTIVE sessions (seed 001 "Session data becomes training
//! data", rule L12): robot state, operator actions, camera frames and
//! control switches, with timestamps. Samples wait in memory and one
//! writer thread appends them to `<data dir>/recordings/<session>.jsonl` in
//! batches, in order; never a database row per frame. When the session
//! ends the writer finishes the file: a COMPLETED session's recording is
//! handed on to become an episode, a CANCELLED one's is deleted (L11).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::sync::Mutex;
use tokio::sync::mpsc;

/// One recorded sample; a line of the recording file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Sample {
    State {
        t_ms: i64,
        joints: Vec<f32>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        fields: BTreeMap<String, f64>,
    },
    Action { t_ms: i64, values: Vec<f32> },
    Camera {
        t_ms: i64,
        name: String,
        #[serde(with = "base64_bytes")]
        jpeg: Vec<u8>,
    },
    /// Control moved to another operator (or to nobody).
    Switch { t_ms: i64, operator_id: Option<String> },
    /// Recording stopped (PAUSED) and started again (ACTIVE).
    Pause { t_ms: i64 },
    Resume { t_ms: i64 },
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// A COMPLETED session's finished recording, to become an episode.
#[derive(Clone, Debug)]
pub struct FinishedRecording {
    pub org_id: String,
    pub session_id: String,
    pub path: PathBuf,
}

enum Job {
    Append { session_id: String, samples: Vec<Sample> },
    Finish { org_id: String, session_id: String, keep: bool },
}

/// Samples waiting for the next batch write, by session.
pub struct Recorder {
    dir: PathBuf,
    waiting: Mutex<HashMap<String, Vec<Sample>>>,
    writer: Mutex<std_mpsc::Sender<Job>>,
}

/// Samples a session may have waiting before the oldest are dropped (a
/// stalled disk costs samples, not memory): ten seconds of 30 Hz state,
/// actions and two cameras, with room to spare.
const MAX_WAITING: usize = 8_192;

impl Recorder {
    /// A recorder writing under `dir`; finished COMPLETED recordings go to `finished`.
    pub fn start(dir: PathBuf, finished: mpsc::UnboundedSender<FinishedRecording>) -> std::io::Result<Recorder> {
        std::fs::create_dir_all(&dir)?;
        let (tx, rx) = std_mpsc::channel::<Job>();
        let writer_dir = dir.clone();
        std::thread::Builder::new().name("recording-writer".into()).spawn(move || write_jobs(&writer_dir, rx, finished))?;
        Ok(Recorder { dir, waiting: Mutex::default(), writer: Mutex::new(tx) })
    }

    pub fn path_of(dir: &Path, session_id: &str) -> PathBuf {
        dir.join(format!("{session_id}.jsonl"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn push(&self, session_id: &str, sample: Sample) {
        let mut waiting = self.waiting.lock().expect("recorder lock");
        let samples = waiting.entry(session_id.to_string()).or_default();
        if samples.len() >= MAX_WAITING {
            samples.remove(0);
        }
        samples.push(sample);
    }

    /// Hands every waiting sample to the writer (called every second).
    pub fn flush(&self) {
        let batches: Vec<(String, Vec<Sample>)> = self.waiting.lock().expect("recorder lock").drain().filter(|(_, s)| !s.is_empty()).collect();
        let writer = self.writer.lock().expect("recorder lock");
        for (session_id, samples) in batches {
            let _ = writer.send(Job::Append { session_id, samples });
        }
    }

    /// The session ended: its last samples, then its file kept for an
    /// episode (`keep`, COMPLETED) or deleted (CANCELLED).
    pub fn finish(&self, org_id: &str, session_id: &str, keep: bool) {
        let rest = self.waiting.lock().expect("recorder lock").remove(session_id).unwrap_or_default();
        let writer = self.writer.lock().expect("recorder lock");
        if !rest.is_empty() {
            let _ = writer.send(Job::Append { session_id: session_id.to_string(), samples: rest });
        }
        let _ = writer.send(Job::Finish { org_id: org_id.to_string(), session_id: session_id.to_string(), keep });
    }
}

/// The writer thread: batches appended in the order they were handed over.
fn write_jobs(dir: &Path, jobs: std_mpsc::Receiver<Job>, finished: mpsc::UnboundedSender<FinishedRecording>) {
    for job in jobs {
        match job {
            Job::Append { session_id, samples } => {
                let path = Recorder::path_of(dir, &session_id);
                let mut text = Vec::with_capacity(samples.len() * 96);
                for sample in &samples {
                    if serde_json::to_writer(&mut text, sample).is_ok() {
                        text.push(b'\n');
                    }
                }
                let written = std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| f.write_all(&text));
                if let Err(e) = written {
                    tracing::error!(session = %session_id, error = %e, "could not write a recording batch");
                }
            }
            Job::Finish { org_id, session_id, keep } => {
                let path = Recorder::path_of(dir, &session_id);
                if keep && path.exists() {
                    let _ = finished.send(FinishedRecording { org_id, session_id, path });
                } else {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }
}

/// Reads a recording file back (the episode builder, tests).
pub fn read_samples(path: &Path) -> std::io::Result<Vec<Sample>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
}
