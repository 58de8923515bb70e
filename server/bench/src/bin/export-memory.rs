//! Dataset export's memory (issue "Hardening II", finding 8: export must
//! stream, RSS growth ≤ 32 MiB for a 1 GB dataset whatever one episode's
//! size). Writes synthetic recordings as the recorder writes them (30 fps
//! state and action, two cameras of 40–60 KB JPEGs, a pause a minute and
//! control switches): one episode of `--big-mb` and the rest of
//! `--total-mb` in episodes of `--episode-mb`. Then, through the real
//! `DatasetService` on a scratch SQLite store: the recordings become
//! episodes (`make_episodes`), and the environment is exported as a LeRobot
//! tar that is read to the end. VmRSS is sampled every 5 ms throughout;
//! each phase prints its baseline, peak and growth.
//!
//! cargo build --release -p clutchcall-bench --bin export-memory
//! target/release/export-memory [--total-mb 1100] [--big-mb 600] [--episode-mb 125] [--version v3.0]

use clutchcall_bench::{number, parse_flags, ScratchDb};
use futures::StreamExt;
use server::datasets::lerobot::Version;
use server::datasets::DatasetService;
use server::relay::recording::{FinishedRecording, Sample};
use sqlx::Connection;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: export-memory [--total-mb N] [--big-mb N] [--episode-mb N] [--version v3.0|v2.1]";
const MB: u64 = 1_000_000;
const FPS: u64 = 30;
const ORG: &str = server::seed::LOAD_ORG_ID;
const ROBOT: &str = "lr-000";
const ENVIRONMENT: &str = "Load Site";

/// As the server's `main` does (see there): two malloc arenas and a fixed
/// 1 MiB mmap threshold, so the figures are the server's, not a default
/// glibc's. Declared here rather than through the libc crate.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn cap_malloc_arenas() {
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_MMAP_THRESHOLD: i32 = -3;
    const M_ARENA_MAX: i32 = -8;
    // SAFETY: mallopt only sets allocator tunables; called before any thread starts.
    unsafe {
        mallopt(M_ARENA_MAX, 2);
        mallopt(M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn cap_malloc_arenas() {}

/// The process's resident set, KiB.
fn rss_kib(status: &mut String) -> u64 {
    status.clear();
    if let Ok(mut file) = std::fs::File::open("/proc/self/status") {
        let _ = std::io::Read::read_to_string(&mut file, status);
    }
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).unwrap_or(0)
}

/// The highest RSS seen by a thread sampling every 5 ms while a phase runs.
struct Peak {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
    baseline: u64,
    started: Instant,
}

impl Peak {
    fn start() -> Peak {
        let baseline = rss_kib(&mut String::new());
        let (peak, stop) = (Arc::new(AtomicU64::new(baseline)), Arc::new(AtomicBool::new(false)));
        let (p, s) = (peak.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut status = String::with_capacity(4096);
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss_kib(&mut status), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Peak { peak, stop, thread, baseline, started: Instant::now() }
    }

    fn finish(self, phase: &str, detail: &str) {
        let seconds = self.started.elapsed().as_secs_f64();
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the sampler");
        let peak = self.peak.load(Ordering::Relaxed);
        let mib = |kib: u64| kib as f64 / 1024.0;
        println!(
            "{phase}: baseline {:.1} MiB, peak {:.1} MiB, growth {:.1} MiB, {detail}{seconds:.1} s",
            mib(self.baseline),
            mib(peak),
            mib(peak.saturating_sub(self.baseline)),
        );
    }
}

/// A pseudo-JPEG of `len` bytes: a header `jpeg_size` reads (SOI, APP0,
/// SOF0 with the size), then noise, so it neither compresses nor repeats.
fn jpeg(width: u16, height: u16, len: usize, seed: &mut u64) -> Vec<u8> {
    let mut out = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08];
    out.extend_from_slice(&height.to_be_bytes());
    out.extend_from_slice(&width.to_be_bytes());
    out.push(3);
    while out.len() < len {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A recording file being written, a JSON line per sample as the recorder writes it.
struct Recording {
    out: std::io::BufWriter<std::fs::File>,
    line: Vec<u8>,
    written: u64,
}

impl Recording {
    fn put(&mut self, sample: &Sample) -> std::io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, sample)?;
        self.line.push(b'\n');
        self.written += self.line.len() as u64;
        self.out.write_all(&self.line)
    }
}

/// Writes a recording of about `bytes`; its size.
fn write_recording(path: &Path, bytes: u64, seed: u64) -> std::io::Result<u64> {
    let mut rng = seed | 1;
    // A pool of images per camera, each frame's made distinct by its number.
    let pool: Vec<[Vec<u8>; 2]> = (0..61).map(|i| [jpeg(640, 480, 40_000 + i * 331, &mut rng), jpeg(320, 240, 40_000 + (60 - i) * 331, &mut rng)]).collect();
    let out = std::io::BufWriter::with_capacity(256 * 1024, std::fs::File::create(path)?);
    let mut rec = Recording { out, line: Vec::with_capacity(128 * 1024), written: 0 };
    let mut t = 1_000_000i64;
    rec.put(&Sample::Resume { t_ms: t })?;
    let mut frame = 0u64;
    while rec.written < bytes {
        if frame % (60 * FPS) == 55 * FPS {
            // A 5 s pause a minute.
            rec.put(&Sample::Pause { t_ms: t })?;
            t += 5_000;
            rec.put(&Sample::Resume { t_ms: t })?;
        }
        if frame % (20 * FPS) == 0 {
            rec.put(&Sample::Switch { t_ms: t, operator_id: (frame % (40 * FPS) == 0).then(|| "u-load-000".to_string()) })?;
        }
        let v = frame as f32 / 100.0;
        rec.put(&Sample::State { t_ms: t, joints: (0..6).map(|j| v.sin() + j as f32).collect(), fields: Default::default() })?;
        rec.put(&Sample::Action { t_ms: t + 3, values: (0..6).map(|j| v.cos() - j as f32).collect() })?;
        for (c, name) in ["front", "wrist"].into_iter().enumerate() {
            let mut image = pool[(frame as usize * 7 + c) % pool.len()][c].clone();
            image[20..28].copy_from_slice(&frame.to_le_bytes());
            rec.put(&Sample::Camera { t_ms: t + 8 + c as i64 * 3, name: name.into(), jpeg: image })?;
        }
        frame += 1;
        // 30 fps: 33 or 34 ms apart.
        t += (1000 / FPS) as i64 + i64::from(frame % 3 == 0);
    }
    rec.out.flush()?;
    Ok(rec.written)
}

fn main() -> anyhow::Result<()> {
    cap_malloc_arenas();
    let flags = parse_flags(&[("total-mb", "1100"), ("big-mb", "600"), ("episode-mb", "125"), ("version", "v3.0")]).map_err(|e| anyhow::anyhow!("{e}\n{USAGE}"))?;
    let (total, big, each) = (number(&flags, "total-mb").map_err(anyhow::Error::msg)? as u64, number(&flags, "big-mb").map_err(anyhow::Error::msg)? as u64, number(&flags, "episode-mb").map_err(anyhow::Error::msg)? as u64);
    let version = Version::parse(&flags["version"]).ok_or_else(|| anyhow::anyhow!("--version is v3.0 or v2.1\n{USAGE}"))?;
    let mut sizes = vec![big.min(total)];
    while sizes.iter().sum::<u64>() < total {
        sizes.push(each.max(1).min(total - sizes.iter().sum::<u64>()));
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(sizes, version))
}

async fn run(sizes: Vec<u64>, version: Version) -> anyhow::Result<()> {
    let db = ScratchDb::create("sqlite").await?;
    let store = server::store::connect(&db.config.database_url()).await?;
    store.seed(&server::seed::load_org(1, 1)).await?;
    // Sessions as the engine leaves them once COMPLETED (the bench runs no calls).
    let mut conn = sqlx::SqliteConnection::connect(&db.config.database_url()).await?;
    let sessions: Vec<String> = (0..sizes.len()).map(|i| format!("export-bench-{i:03}")).collect();
    for id in &sessions {
        sqlx::query("INSERT INTO sessions (id, org_id, robot_id, skill, pop, lifecycle, raised_at, started_at, ended_at, end_reason) VALUES ($1, $2, $3, 'pick-place', 'us-east', 'COMPLETED', 0, 0, 1, 'done')")
            .bind(id).bind(ORG).bind(ROBOT).execute(&mut conn).await?;
    }
    conn.close().await?;

    let data = &db.config.data_dir;
    let recordings = data.join("recordings");
    std::fs::create_dir_all(&recordings)?;
    let started = Instant::now();
    let mut recorded = 0;
    for (i, (id, mb)) in sessions.iter().zip(&sizes).enumerate() {
        recorded += write_recording(&recordings.join(format!("{id}.jsonl")), mb * MB, i as u64 + 7)?;
    }
    println!(
        "export-memory: {} episodes, {:.0} MB of recordings (largest {:.0} MB), LeRobot {}; written in {:.1} s",
        sizes.len(),
        recorded as f64 / MB as f64,
        sizes[0] as f64,
        version.as_str(),
        started.elapsed().as_secs_f64()
    );

    let bus: server::bus::SharedBus = server::bus::InProcessBus::new();
    let service = Arc::new(DatasetService::new(store.clone(), bus, data.join("datasets")));
    let (finished, recordings_done) = tokio::sync::mpsc::unbounded_channel();

    // Phase 1: the recordings become episodes (each read for its counts).
    let peak = Peak::start();
    let maker = tokio::spawn(service.clone().make_episodes(recordings_done));
    for id in &sessions {
        finished.send(FinishedRecording { org_id: ORG.into(), session_id: id.clone(), parts: vec![recordings.join(format!("{id}.jsonl"))] })?;
    }
    drop(finished);
    maker.await?;
    let episodes = service.episodes(ORG, None).await?;
    anyhow::ensure!(episodes.len() == sessions.len(), "{} of {} episodes made", episodes.len(), sessions.len());
    let frames: i64 = episodes.iter().map(|e| e.frames).sum();
    peak.finish("make episodes", &format!("{frames} frames, "));

    // Phase 2: the export, read to its end as a client would.
    let peak = Peak::start();
    let place = service.export_place(ORG).await.map_err(|_| anyhow::anyhow!("no export place"))?;
    let mut tar = service.export(ORG, ENVIRONMENT, version, None, place).await?.ok_or_else(|| anyhow::anyhow!("no episodes to export"))?;
    let mut exported = 0u64;
    while let Some(piece) = tar.next().await {
        exported += piece?.len() as u64;
    }
    peak.finish("export", &format!("{:.0} MB exported (tar), ", exported as f64 / MB as f64));
    db.finish().await
}
