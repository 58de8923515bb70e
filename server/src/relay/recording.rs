//! Recordings of ACTIVE sessions (seed 001 "Session data becomes training
//! data", rule L12): robot state, operator actions, camera frames and
//! control switches, with timestamps. Samples wait in memory and one
//! writer thread appends them to the session's part file in
//! `<data dir>/recordings/` in batches, in order; never a database row per
//! frame. Each stint of recording on an instance (cluster mode: the edge
//! agent may move between instances, and back) has a part of its own,
//! named for when it began, so parts written at once on a shared data
//! directory never interleave. When the session ends the writer finishes
//! the recording: a COMPLETED session's parts, in the order they began, are
//! handed on to become one episode (`datasets::placing::place_recording` joins
//! them); a CANCELLED one's are deleted (L11). A recording whose end no
//! instance finished (the one recording it died mid-session) is found by
//! `tidy` once nothing has written to it for a while, and finished then.

use crate::recent::Recent;
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

/// A COMPLETED session's finished recording, to become an episode: its
/// parts in the order they began (`datasets::placing::place_recording` makes them one).
#[derive(Clone, Debug)]
pub struct FinishedRecording {
    pub org_id: String,
    pub session_id: String,
    pub parts: Vec<PathBuf>,
}

enum Job {
    Append { session_id: String, part: PathBuf, samples: Vec<Sample> },
    /// The stint of `part` ended here (finished or handed off): no batch
    /// goes to it any more.
    Ended { part: PathBuf },
    Finish { org_id: String, session_id: String, keep: bool },
}

/// One session's recording while it runs here.
struct Recording {
    /// This stint's part file.
    part: PathBuf,
    /// Samples waiting for the next batch write, and their size.
    waiting: Vec<Sample>,
    waiting_bytes: usize,
    /// Everything taken so far (roughly the file's size), and what the cap refused.
    taken_bytes: u64,
    unrecorded: u64,
}

/// Samples waiting for the next batch write, by session.
pub struct Recorder {
    dir: PathBuf,
    recordings: Mutex<HashMap<String, Recording>>,
    /// Sessions whose recording went on at another instance (cluster mode).
    handed_off: Mutex<std::collections::HashSet<String>>,
    /// Sessions finished here lately (`FINISHED_KEPT`): a sample that raced
    /// the end begins no stint nobody would ever finish. Taken inside
    /// `recordings`' lock, never the other way round.
    finished: Recent<String>,
    /// A session's recording takes no more than this (finding 9: frames
    /// from a public demo token must not fill the disk).
    max_bytes: u64,
    writer: Mutex<std_mpsc::Sender<Job>>,
}

/// How long a session finished here is remembered as finished: far longer
/// than a sample racing its end takes to arrive.
const FINISHED_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

/// Bytes of samples a session may have waiting before the oldest are
/// dropped (a stalled disk costs samples, not memory): several seconds of
/// 30 Hz state, actions and cameras.
const MAX_WAITING_BYTES: usize = 32 * 1024 * 1024;

impl Sample {
    /// Roughly what the sample takes as a line of the recording (numbers
    /// as JSON text, a camera frame as base64), which bounds its memory too.
    fn size(&self) -> usize {
        match self {
            Sample::State { joints, fields, .. } => 64 + joints.len() * 12 + fields.len() * 48,
            Sample::Action { values, .. } => 64 + values.len() * 12,
            Sample::Camera { jpeg, name, .. } => 64 + jpeg.len().div_ceil(3) * 4 + name.len(),
            Sample::Switch { .. } | Sample::Pause { .. } | Sample::Resume { .. } => 64,
        }
    }
}

impl Recorder {
    /// A recorder writing under `dir`; finished COMPLETED recordings go to `finished`.
    pub fn start(dir: PathBuf, finished: mpsc::UnboundedSender<FinishedRecording>, max_bytes: u64) -> std::io::Result<Recorder> {
        std::fs::create_dir_all(&dir)?;
        let (tx, rx) = std_mpsc::channel::<Job>();
        let writer_dir = dir.clone();
        std::thread::Builder::new().name("recording-writer".into()).spawn(move || write_jobs(&writer_dir, rx, finished))?;
        Ok(Recorder { dir, recordings: Mutex::default(), handed_off: Mutex::default(), finished: Recent::new(FINISHED_KEPT), max_bytes, writer: Mutex::new(tx) })
    }

    /// The file of a stint of the session's recording that began at
    /// `began_ms` here: `<session>.<began_ms>-<random>.part`, the time
    /// zero-padded so parts sort by it, the random part so two instances
    /// never share one.
    fn new_part(dir: &Path, session_id: &str, began_ms: i64) -> PathBuf {
        dir.join(format!("{session_id}.{:013}-{:016x}.part", began_ms.max(0), rand::random::<u64>()))
    }

    /// The parts of the session's recording in `dir`, in the order they
    /// began (a whole recording from the build before, `<session>.jsonl`,
    /// first).
    pub fn parts_of(dir: &Path, session_id: &str) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let mut parts: Vec<(bool, String)> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter_map(|name| {
                let rest = name.strip_prefix(session_id)?.strip_prefix('.')?;
                let part = rest.strip_suffix(".part").is_some_and(|began| !began.contains('.'));
                (part || rest == "jsonl").then_some((part, name))
            })
            .collect();
        parts.sort();
        parts.into_iter().map(|(_, name)| dir.join(name)).collect()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn push(&self, session_id: &str, sample: Sample) {
        let mut recordings = self.recordings.lock().expect("recorder lock");
        if !recordings.contains_key(session_id) {
            // A stint's first sample: its part is named, and the parts
            // already written (another instance's, on a shared data
            // directory, or this one's before a restart) count against the
            // cap, so a robot that moves between instances gets no fresh
            // cap. Read without the lock: other sessions' samples do not
            // wait for the directory.
            drop(recordings);
            let stint = Recording {
                part: Recorder::new_part(&self.dir, session_id, crate::clock::now_ms()),
                taken_bytes: Recorder::parts_of(&self.dir, session_id).iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum(),
                waiting: Vec::new(),
                waiting_bytes: 0,
                unrecorded: 0,
            };
            recordings = self.recordings.lock().expect("recorder lock");
            if self.finished.contains(session_id) {
                // The session ended meanwhile (or just before): not recorded.
                return;
            }
            recordings.entry(session_id.to_string()).or_insert(stint);
        }
        let recording = recordings.get_mut(session_id).expect("begun above");
        let size = sample.size();
        if recording.taken_bytes + size as u64 > self.max_bytes {
            recording.unrecorded += 1;
            return;
        }
        recording.taken_bytes += size as u64;
        recording.waiting_bytes += size;
        let (samples, bytes) = (&mut recording.waiting, &mut recording.waiting_bytes);
        samples.push(sample);
        // Oldest first out, in one move rather than one shift per sample.
        let mut excess = 0;
        while *bytes > MAX_WAITING_BYTES && excess < samples.len() {
            *bytes -= samples[excess].size();
            excess += 1;
        }
        if excess > 0 {
            samples.drain(..excess);
        }
    }

    /// Whether this instance records the session (it has taken a sample
    /// of it and not finished or handed it off).
    pub fn holds(&self, session_id: &str) -> bool {
        self.recordings.lock().expect("recorder lock").contains_key(session_id)
    }

    /// The session's edge agent went on at another instance (cluster
    /// mode): what waits here is written to this stint's part, and the
    /// recording is that instance's to go on with and to finish (on a
    /// shared data directory, with this part before its own).
    pub fn hand_off(&self, session_id: &str) {
        let Some(recording) = self.recordings.lock().expect("recorder lock").remove(session_id) else { return };
        self.handed_off.lock().expect("recorder lock").insert(session_id.to_string());
        let writer = self.writer.lock().expect("recorder lock");
        for job in recording.end(session_id) {
            let _ = writer.send(job);
        }
    }

    /// Samples the session's recording cap refused so far.
    pub fn unrecorded(&self, session_id: &str) -> u64 {
        self.recordings.lock().expect("recorder lock").get(session_id).map_or(0, |r| r.unrecorded)
    }

    /// Hands every waiting sample to the writer (called every second).
    pub fn flush(&self) {
        let batches: Vec<Job> = self
            .recordings
            .lock()
            .expect("recorder lock")
            .iter_mut()
            .filter(|(_, r)| !r.waiting.is_empty())
            .map(|(id, r)| {
                r.waiting_bytes = 0;
                Job::Append { session_id: id.clone(), part: r.part.clone(), samples: std::mem::take(&mut r.waiting) }
            })
            .collect();
        let writer = self.writer.lock().expect("recorder lock");
        for job in batches {
            let _ = writer.send(job);
        }
    }

    /// The session ended: its last samples, then its parts handed on for
    /// an episode (`keep`, COMPLETED) or deleted (CANCELLED). Only where it
    /// was recorded: in cluster mode the data directory may be shared, and
    /// an instance that only carried the cockpit must not touch the parts.
    /// A part handed off to another instance is deleted with a CANCELLED
    /// session; a COMPLETED one's parts are the other instance's to finish.
    pub fn finish(&self, org_id: &str, session_id: &str, keep: bool) {
        let handed_off = self.handed_off.lock().expect("recorder lock").remove(session_id);
        let recording = {
            let mut recordings = self.recordings.lock().expect("recorder lock");
            self.finished.note(session_id.to_string(), ());
            recordings.remove(session_id)
        };
        let Some(recording) = recording else {
            if handed_off && !keep {
                let _ = self.writer.lock().expect("recorder lock").send(Job::Finish { org_id: org_id.to_string(), session_id: session_id.to_string(), keep });
            }
            return;
        };
        let writer = self.writer.lock().expect("recorder lock");
        for job in recording.end(session_id) {
            let _ = writer.send(job);
        }
        let _ = writer.send(Job::Finish { org_id: org_id.to_string(), session_id: session_id.to_string(), keep });
    }
}

impl Recorder {
    /// The sessions with parts here that no stint on this instance is
    /// writing and that nothing was written to for `idle`: recordings whose
    /// finish may never have come (their instance died, the session ended
    /// elsewhere), or whose episode could not be made (its parts are kept
    /// until its row is written).
    pub fn unattended(&self, idle: std::time::Duration) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut newest: HashMap<String, std::time::SystemTime> = HashMap::new();
        for entry in entries.filter_map(Result::ok) {
            let Ok(name) = entry.file_name().into_string() else { continue };
            let session = match name.strip_suffix(".part") {
                Some(stem) => stem.rsplit_once('.').map(|(session, _began)| session),
                None => name.strip_suffix(".jsonl"),
            };
            let (Some(session), Ok(modified)) = (session, entry.metadata().and_then(|m| m.modified())) else { continue };
            let at = newest.entry(session.to_string()).or_insert(modified);
            *at = (*at).max(modified);
        }
        let held = self.recordings.lock().expect("recorder lock");
        newest.into_iter().filter(|(session, at)| !held.contains_key(session) && at.elapsed().is_ok_and(|age| age >= idle)).map(|(session, _)| session).collect()
    }

    /// Finishes a recording no stint here holds (`unattended`) whose session
    /// ended: as `finish` does, through the writer.
    fn finish_unattended(&self, org_id: &str, session_id: &str, keep: bool) {
        let _ = self.writer.lock().expect("recorder lock").send(Job::Finish { org_id: org_id.to_string(), session_id: session_id.to_string(), keep });
    }
}

/// Every `every`, the recordings that nothing was written to for that long
/// and whose session ended at least that long ago are finished (COMPLETED:
/// an episode; CANCELLED: deleted), by whichever instance looks first: a
/// recording whose instance died mid-session, or whose episode's row could
/// not be written, is not left behind. A live session's parts wait for it;
/// an ended one's wait `every` for the instance that held it to finish it
/// as usual. One that cannot be finished is tried again less and less
/// often (`Retries`).
pub async fn tidy(recorder: std::sync::Weak<Recorder>, every: std::time::Duration, state_of: impl AsyncFn(&str) -> anyhow::Result<Option<crate::store::SessionState>>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut retries = Retries::default();
    loop {
        tick.tick().await;
        let Some(here) = recorder.upgrade() else { return };
        // (The directory may be a network mount: not on the runtime's threads.)
        let Ok(unattended) = tokio::task::spawn_blocking(move || here.unattended(every)).await else { continue };
        retries.keep_only(&unattended);
        for session_id in unattended {
            if !retries.due(&session_id) {
                continue;
            }
            // (An end with no time to it counts as long past.)
            let ended_a_look_ago = |ended_at: Option<i64>| ended_at.is_none_or(|at| crate::clock::now_ms().saturating_sub(at) >= every.as_millis() as i64);
            match state_of(&session_id).await {
                Ok(Some(state)) if state.lifecycle.is_terminal() && ended_a_look_ago(state.ended_at) => {
                    let Some(recorder) = recorder.upgrade() else { return };
                    let tries = retries.tried(&session_id);
                    if tries == 1 {
                        tracing::info!(session = %session_id, lifecycle = ?state.lifecycle, "a recording nobody finished is finished now");
                    } else {
                        tracing::warn!(session = %session_id, tries, "a recording that could not be finished is tried again (its episode's error is logged above)");
                    }
                    recorder.finish_unattended(&state.org_id, &session_id, state.lifecycle == domain::models::LifecycleState::Completed);
                }
                Ok(Some(_)) => {}
                Ok(None) => tracing::debug!(session = %session_id, "recording parts of a session the store does not know are left alone"),
                Err(e) => tracing::warn!(session = %session_id, error = %e, "could not read a session whose recording may be unfinished"),
            }
        }
    }
}

/// The recordings `tidy` finished that are still there: each is tried
/// again after 2, 4, 8, … looks (at most 64), not at every look (making
/// an episode of a big recording may take longer than one).
#[derive(Default)]
struct Retries(HashMap<String, (u32, u32)>);

impl Retries {
    /// Forgets the recordings no longer unattended (finished, or gone).
    fn keep_only(&mut self, unattended: &[String]) {
        self.0.retain(|session, _| unattended.contains(session));
    }

    /// Whether the session's recording is to be tried at this look.
    fn due(&mut self, session_id: &str) -> bool {
        match self.0.get_mut(session_id) {
            Some((_, wait)) if *wait > 0 => {
                *wait -= 1;
                false
            }
            _ => true,
        }
    }

    /// It is tried now: how many times so far.
    fn tried(&mut self, session_id: &str) -> u32 {
        let (tries, wait) = self.0.entry(session_id.to_string()).or_default();
        *tries += 1;
        *wait = (1u32 << (*tries).min(6)) - 1;
        *tries
    }
}

impl Recording {
    /// The stint's end: what waits, as its last batch, then the end.
    fn end(self, session_id: &str) -> Vec<Job> {
        let last = (!self.waiting.is_empty()).then(|| Job::Append { session_id: session_id.to_string(), part: self.part.clone(), samples: self.waiting });
        last.into_iter().chain([Job::Ended { part: self.part }]).collect()
    }
}

/// The writer thread: batches appended in the order they were handed over.
fn write_jobs(dir: &Path, jobs: std_mpsc::Receiver<Job>, finished: mpsc::UnboundedSender<FinishedRecording>) {
    // The parts of stints still going on here that this thread made. One
    // of them gone was taken by another instance that finished the
    // recording (a hand-off heard after the end): its batch is dropped,
    // not written to a part nobody would join. A part not made yet (its
    // first batch failed) is made by the next.
    let mut made = std::collections::HashSet::new();
    for job in jobs {
        match job {
            Job::Ended { part } => {
                made.remove(&part);
            }
            Job::Append { session_id, part, samples } => {
                let mut text = Vec::with_capacity(samples.len() * 96);
                for sample in &samples {
                    if serde_json::to_writer(&mut text, sample).is_ok() {
                        text.push(b'\n');
                    }
                }
                let first = !made.contains(&part);
                match std::fs::OpenOptions::new().create(first).append(true).open(&part).and_then(|mut f| f.write_all(&text)) {
                    Ok(()) => {
                        made.insert(part);
                    }
                    Err(e) if !first && e.kind() == std::io::ErrorKind::NotFound => {
                        tracing::warn!(session = %session_id, samples = samples.len(), "samples handed off after another instance finished the recording are not in it");
                    }
                    Err(e) => tracing::error!(session = %session_id, error = %e, "could not write a recording batch"),
                }
            }
            Job::Finish { org_id, session_id, keep } => {
                let parts = Recorder::parts_of(dir, &session_id);
                if !keep {
                    for part in &parts {
                        let _ = std::fs::remove_file(part);
                    }
                } else if !parts.is_empty() {
                    let _ = finished.send(FinishedRecording { org_id, session_id, parts });
                }
            }
        }
    }
}

/// Writes a recording's parts, in order, as one new file `into` (which
/// must not exist); the parts stay. A part whose last line was cut short
/// (its instance died mid-write) ends with a line break all the same, so
/// the next part's first sample is kept.
pub fn join_parts(parts: &[PathBuf], into: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let whole = std::fs::OpenOptions::new().write(true).create_new(true).open(into)?;
    let made = whole.metadata().map(|m| (m.dev(), m.ino()))?;
    // Made here: gone again if the join fails half-way; only this file (if
    // it was removed as cut short meanwhile, another may be in its place).
    copy_parts(parts, whole).inspect_err(|_| {
        if std::fs::metadata(into).is_ok_and(|m| (m.dev(), m.ino()) == made) {
            let _ = std::fs::remove_file(into);
        }
    })
}

fn copy_parts(parts: &[PathBuf], whole: std::fs::File) -> std::io::Result<()> {
    use std::io::Read;
    let mut whole = std::io::BufWriter::new(whole);
    let mut buffer = vec![0; 64 * 1024];
    for part in parts {
        let mut part = std::fs::File::open(part)?;
        let mut last = b'\n';
        loop {
            let n = part.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            whole.write_all(&buffer[..n])?;
            last = buffer[n - 1];
        }
        if last != b'\n' {
            whole.write_all(b"\n")?;
        }
    }
    whole.into_inner().map_err(std::io::IntoInnerError::into_error)?.sync_all()
}

/// Reads a recording file back (the episode builder, tests).
/// A line at a time: the file's text is never held whole beside its samples.
pub fn read_samples(path: &Path) -> std::io::Result<Vec<Sample>> {
    use std::io::BufRead;
    let mut samples = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(path)?).lines() {
        if let Ok(sample) = serde_json::from_str(&line?) {
            samples.push(sample);
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorder in a directory of its own taking at most `cap` bytes a
    /// recording, and where it says which recordings it finished.
    fn new_recorder(cap: u64) -> (tempfile::TempDir, Recorder, mpsc::UnboundedReceiver<FinishedRecording>) {
        let dir = tempfile::tempdir().unwrap();
        let (finished, made) = mpsc::unbounded_channel();
        let recorder = Recorder::start(dir.path().to_path_buf(), finished, cap).unwrap();
        (dir, recorder, made)
    }

    #[test]
    fn a_stalled_writer_costs_the_oldest_samples_not_memory() {
        let (_dir, recorder, _) = new_recorder(u64::MAX);
        for t_ms in 0..40 {
            recorder.push("s", Sample::Camera { t_ms, name: "front".into(), jpeg: vec![0; 1 << 20] });
        }
        let recordings = recorder.recordings.lock().unwrap();
        let (samples, bytes) = (&recordings["s"].waiting, recordings["s"].waiting_bytes);
        assert!(bytes <= MAX_WAITING_BYTES, "{bytes} bytes waiting");
        let times: Vec<i64> = samples.iter().map(|s| match s { Sample::Camera { t_ms, .. } => *t_ms, _ => -1 }).collect();
        assert_eq!(times.last(), Some(&39), "the newest kept");
        assert!(times[0] > 0, "the oldest dropped");
    }

    #[test]
    fn a_recording_handed_off_is_written_and_never_finished_here() {
        let (dir, recorder, mut made) = new_recorder(u64::MAX);
        recorder.push("s", Sample::Resume { t_ms: 1 });
        assert!(recorder.holds("s"));
        recorder.hand_off("s");
        assert!(!recorder.holds("s"), "the other instance goes on with it");
        recorder.finish("org", "s", true);
        // A session recorded here all along, finished after it: the writer
        // keeps order, so when its episode is handed on, "s" would have been too.
        recorder.push("t", Sample::Resume { t_ms: 2 });
        recorder.finish("org", "t", true);
        let next = made.blocking_recv().expect("t is finished");
        assert_eq!(next.session_id, "t", "s was not finished here");
        let parts = Recorder::parts_of(dir.path(), "s");
        assert_eq!(parts.len(), 1, "{parts:?}");
        assert_eq!(read_samples(&parts[0]).unwrap(), vec![Sample::Resume { t_ms: 1 }], "what waited was written");

        // A recording that goes on from a part already written counts it
        // against the cap (a robot moving between instances gets no fresh one).
        let capped = Recorder::start(dir.path().to_path_buf(), mpsc::unbounded_channel().0, 100).unwrap();
        std::fs::write(dir.path().join("u.0000000000001-0000000000000000.part"), vec![b' '; 90]).unwrap();
        capped.push("u", Sample::Resume { t_ms: 3 });
        assert_eq!(capped.unrecorded("u"), 1, "90 bytes written elsewhere and 64 more are past 100");

        // A handed-off part of a CANCELLED session is deleted all the same.
        recorder.push("v", Sample::Resume { t_ms: 4 });
        recorder.hand_off("v");
        recorder.finish("org", "v", false);
        recorder.push("w", Sample::Resume { t_ms: 5 });
        recorder.finish("org", "w", true);
        assert_eq!(made.blocking_recv().expect("w is finished").session_id, "w");
        assert_eq!(Recorder::parts_of(dir.path(), "v"), Vec::<PathBuf>::new(), "the cancelled part is gone");
    }

    /// Waits until `recorder`'s writer has done everything handed to it
    /// so far (it works in order: a session finished now comes after).
    fn written(recorder: &Recorder, made: &mut mpsc::UnboundedReceiver<FinishedRecording>, marker: &str) {
        recorder.push(marker, Sample::Resume { t_ms: 0 });
        recorder.finish("org", marker, true);
        assert_eq!(made.blocking_recv().expect("the marker is finished").session_id, marker);
    }

    /// A robot that moved between two instances on a shared data directory
    /// (cluster mode): each recorded a stint in a part of its own, the
    /// second's first batch written before the first's last (the first
    /// hands off only when a report tells it). The recording handed on is
    /// the two stints' parts in the order they began, and joined they read
    /// in that order.
    #[test]
    fn stints_recorded_on_two_instances_become_one_recording_in_the_order_they_began() {
        let dir = tempfile::tempdir().unwrap();
        let (finished_a, mut made_a) = mpsc::unbounded_channel();
        let (finished_b, mut made_b) = mpsc::unbounded_channel();
        let a = Recorder::start(dir.path().to_path_buf(), finished_a, u64::MAX).unwrap();
        let b = Recorder::start(dir.path().to_path_buf(), finished_b, u64::MAX).unwrap();
        let state = |t_ms| Sample::State { t_ms, joints: vec![0.5], fields: BTreeMap::new() };
        a.push("s", state(1));
        a.push("s", Sample::Action { t_ms: 2, values: vec![0.25] });
        // The second stint begins in a later millisecond (a reconnect takes many).
        let began = crate::clock::now_ms();
        while crate::clock::now_ms() == began {
            std::thread::yield_now();
        }
        b.push("s", state(3));
        b.flush();
        written(&b, &mut made_b, "marker-b");
        a.hand_off("s");
        written(&a, &mut made_a, "marker-a");
        assert_eq!(Recorder::parts_of(dir.path(), "s").len(), 2, "a part each");

        b.push("s", state(4));
        b.finish("org", "s", true);
        let recording = made_b.blocking_recv().expect("the second instance finishes it");
        assert_eq!(recording.session_id, "s");
        assert_eq!(recording.parts, Recorder::parts_of(dir.path(), "s"), "every part, in order");
        let joined = dir.path().join("s.joined");
        join_parts(&recording.parts, &joined).unwrap();
        let times: Vec<i64> = read_samples(&joined)
            .unwrap()
            .iter()
            .map(|s| match s {
                Sample::State { t_ms, .. } | Sample::Action { t_ms, .. } => *t_ms,
                _ => -1,
            })
            .collect();
        assert_eq!(times, vec![1, 2, 3, 4], "the first stint, then the second");
        assert!(join_parts(&recording.parts, &joined).is_err(), "never into a file that is there");

        // A recording from the build before (one file) comes first; a part
        // cut short mid-line does not swallow the next part's first sample.
        std::fs::write(dir.path().join("r.jsonl"), format!("{}\n{{\"k\":\"sta", serde_json::to_string(&state(1)).unwrap())).unwrap();
        b.push("r", state(2));
        b.finish("org", "r", true);
        let recording = made_b.blocking_recv().expect("r is finished");
        assert_eq!(recording.parts.len(), 2);
        join_parts(&recording.parts, &dir.path().join("r.joined")).unwrap();
        assert_eq!(read_samples(&dir.path().join("r.joined")).unwrap(), vec![state(1), state(2)]);
    }

    /// A stint's batch after its part was taken (another instance that
    /// finished the recording joined and deleted it, before this one heard
    /// of the hand-off) is dropped, not written to a new part nobody would
    /// ever join.
    #[test]
    fn a_batch_for_a_part_taken_elsewhere_is_dropped_not_left_behind() {
        let (dir, recorder, mut made) = new_recorder(u64::MAX);
        recorder.push("p", Sample::Resume { t_ms: 1 });
        recorder.flush();
        written(&recorder, &mut made, "marker-1");
        let parts = Recorder::parts_of(dir.path(), "p");
        assert_eq!(parts.len(), 1);
        std::fs::remove_file(&parts[0]).unwrap();
        recorder.push("p", Sample::Pause { t_ms: 2 });
        recorder.hand_off("p");
        written(&recorder, &mut made, "marker-2");
        assert_eq!(Recorder::parts_of(dir.path(), "p"), Vec::<PathBuf>::new(), "no stray part");
    }

    async fn within<T>(what: &str, heard: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(std::time::Duration::from_secs(10), heard).await.unwrap_or_else(|_| panic!("{what}: not within 10 s"))
    }

    /// Parts nobody finished (their instance died mid-session, say) are
    /// found once quiet: a COMPLETED session's become an episode, a
    /// CANCELLED one's are deleted, a live one's wait, as do those of a
    /// session that ended only just (its instance finishes them as usual).
    /// A recording a stint here is writing, or one written to lately, is
    /// not touched.
    #[tokio::test]
    async fn a_recording_whose_instance_died_is_finished_once_its_session_ended() {
        use crate::store::SessionState;
        use domain::models::LifecycleState::{Active, Cancelled, Completed};
        let dir = tempfile::tempdir().unwrap();
        let left = |session: &str| std::fs::write(Recorder::new_part(dir.path(), session, 1), "{}\n").unwrap();
        for session in ["done", "dropped", "live", "unknown", "just"] {
            left(session);
        }
        std::fs::write(dir.path().join("old.jsonl"), "{}\n").unwrap();
        let (finished, mut made) = mpsc::unbounded_channel();
        let recorder = std::sync::Arc::new(Recorder::start(dir.path().to_path_buf(), finished, u64::MAX).unwrap());
        recorder.push("here", Sample::Resume { t_ms: 1 });
        recorder.flush();
        within("the stint's part is written", async {
            while Recorder::parts_of(dir.path(), "here").is_empty() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await;
        let mut unattended = recorder.unattended(std::time::Duration::ZERO);
        unattended.sort();
        assert_eq!(unattended, ["done", "dropped", "just", "live", "old", "unknown"], "not the one a stint here writes");
        assert_eq!(recorder.unattended(std::time::Duration::from_secs(3600)), Vec::<String>::new(), "written to lately");

        let long_ago = Some(0);
        let state_of = async move |session: &str| -> anyhow::Result<Option<SessionState>> {
            let state = |lifecycle, ended_at| Some(SessionState { org_id: "org".into(), lifecycle, ended_at });
            Ok(match session {
                "done" | "old" => state(Completed, long_ago),
                "dropped" | "here" => state(Cancelled, long_ago),
                "just" => state(Completed, Some(crate::clock::now_ms() + 60_000)),
                "live" => state(Active, None),
                _ => None,
            })
        };
        let tidying = tokio::spawn(tidy(std::sync::Arc::downgrade(&recorder), std::time::Duration::from_millis(1), state_of));
        let mut episodes = Vec::new();
        for _ in 0..2 {
            episodes.push(within("finished", made.recv()).await.unwrap().session_id);
        }
        episodes.sort();
        assert_eq!(episodes, ["done", "old"]);
        within("the cancelled recording is deleted", async {
            while !Recorder::parts_of(dir.path(), "dropped").is_empty() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await;
        tidying.abort();
        for session in ["live", "unknown", "here", "just"] {
            assert_eq!(Recorder::parts_of(dir.path(), session).len(), 1, "{session} is left alone");
        }
    }

    /// A recording tidy could not finish is tried again after 2, 4, 8, …
    /// looks, never more than every 64; one finished is forgotten.
    #[test]
    fn a_recording_that_cannot_be_finished_is_tried_less_and_less_often() {
        let mut retries = Retries::default();
        let unattended = vec!["s".to_string()];
        let mut tried_at = Vec::new();
        for look in 0..200 {
            retries.keep_only(&unattended);
            if retries.due("s") {
                retries.tried("s");
                tried_at.push(look);
            }
        }
        let gaps: Vec<u32> = tried_at.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps[..6], [2, 4, 8, 16, 32, 64]);
        assert!(gaps[6..].iter().all(|g| *g == 64), "{gaps:?}");
        retries.keep_only(&[]);
        assert!(retries.due("s"), "finished, then unattended again: tried at once");
    }

    /// A sample that comes after the session was finished here (it raced
    /// the end) begins no new stint: nothing would ever finish it.
    #[test]
    fn a_sample_after_the_end_begins_no_stint() {
        let (dir, recorder, mut made) = new_recorder(u64::MAX);
        recorder.push("s", Sample::Resume { t_ms: 1 });
        recorder.finish("org", "s", true);
        assert_eq!(made.blocking_recv().expect("s is finished").session_id, "s");
        recorder.push("s", Sample::Pause { t_ms: 2 });
        assert!(!recorder.holds("s"), "no stint after the end");
        recorder.push("t", Sample::Resume { t_ms: 3 });
        assert!(recorder.holds("t"), "another session is recorded as ever");
        recorder.flush();
        written(&recorder, &mut made, "marker");
        assert_eq!(Recorder::parts_of(dir.path(), "s").len(), 1, "no part after the end's");
    }

    #[test]
    fn s09_a_recording_stops_taking_samples_at_its_cap_and_counts_the_rest() {
        let (_dir, recorder, _) = new_recorder(10 * 1024);
        for t_ms in 0..20 {
            recorder.push("s", Sample::Camera { t_ms, name: "front".into(), jpeg: vec![0; 1024] });
            recorder.flush();
        }
        // Each sample is ~1.4 KiB as base64: seven fit under 10 KiB, the rest are counted.
        assert_eq!(recorder.unrecorded("s"), 13);
        assert_eq!(recorder.unrecorded("other"), 0);
    }
}
