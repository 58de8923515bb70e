//! Writes an environment's episodes as a LeRobot dataset: v3.0 (what the
//! current `lerobot` package reads) or v2.1 (what GR00T fine-tunes need).
//! Frame data is Parquet (`observation.state`, `action`, camera images as
//! `observation.images.<name>`, `timestamp`, `frame_index`, `episode_index`,
//! `index`, `task_index`); metadata is `meta/info.json` with the features,
//! tasks, per-episode metadata and statistics. An episode's frames are
//! pulled one at a time and written in bounded batches, so an export's
//! memory does not grow with an episode (finding 8).

use super::resample::{jpeg_size, Frame, Plan};
use arrow_array::builder::{BinaryBuilder, FixedSizeListBuilder, Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

/// A record batch (and so a Parquet row group) holds at most this many
/// frames, or a little over this many bytes of images, whichever comes
/// first: the writer holds one batch, never a whole episode (finding 8).
pub const FRAMES_PER_BATCH: usize = 256;
pub const IMAGE_BYTES_PER_BATCH: usize = 8 * 1024 * 1024;

/// Which layout to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V30,
    V21,
}

impl Version {
    pub fn parse(s: &str) -> Option<Version> {
        match s {
            "v3.0" => Some(Version::V30),
            "v2.1" => Some(Version::V21),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V30 => "v3.0",
            Version::V21 => "v2.1",
        }
    }
}

/// An episode's frames, pulled one at a time as they are written.
pub type FrameStream<'a> = Box<dyn Iterator<Item = anyhow::Result<Frame<Bytes>>> + 'a>;

/// One episode to write: first what it is (every episode's summary is
/// read before any row is written: the dataset has one schema), then its
/// frames, one episode at a time.
pub trait Episode {
    fn summary(&self) -> Summary;
    fn frames(&self) -> anyhow::Result<FrameStream<'_>>;
}

/// What the writer knows of an episode before its frames.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub task: String,
    pub len: usize,
    pub state_dim: usize,
    pub action_dim: usize,
    pub fps: u32,
    /// The cameras its frames carry, in the order of a frame's images.
    pub cameras: Vec<String>,
}

impl Summary {
    pub fn of(task: &str, plan: &Plan) -> Summary {
        let cameras = plan.cameras().to_vec();
        Summary { task: task.to_string(), len: plan.len(), state_dim: plan.state_dim(), action_dim: plan.action_dim(), fps: plan.fps(), cameras }
    }
}

/// Frames of every episode share these features (LeRobot needs one
/// schema): the widest state and action (narrower ones padded with 0) and
/// the cameras every episode has.
struct Shape {
    state_dim: usize,
    action_dim: usize,
    cameras: Vec<String>,
    fps: u32,
}

impl Shape {
    fn of(episodes: &[Summary]) -> Shape {
        let state_dim = episodes.iter().map(|e| e.state_dim).max().unwrap_or(0);
        let action_dim = episodes.iter().map(|e| e.action_dim).max().unwrap_or(0);
        let mut cameras: Vec<String> = episodes.first().map(|e| e.cameras.clone()).unwrap_or_default();
        cameras.retain(|c| episodes.iter().all(|e| e.cameras.contains(c)));
        let fps = episodes.first().map_or(30, |e| e.fps);
        Shape { state_dim, action_dim, cameras, fps }
    }
}

fn image_fields() -> Fields {
    Fields::from(vec![Field::new("bytes", DataType::Binary, true), Field::new("path", DataType::Utf8, true)])
}

fn vector_type(dim: usize) -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dim as i32)
}

fn data_schema(shape: &Shape) -> Arc<Schema> {
    let mut fields = vec![Field::new("observation.state", vector_type(shape.state_dim), false), Field::new("action", vector_type(shape.action_dim), false)];
    for camera in &shape.cameras {
        fields.push(Field::new(format!("observation.images.{camera}"), DataType::Struct(image_fields()), true));
    }
    for (name, kind) in [("timestamp", DataType::Float32), ("frame_index", DataType::Int64), ("episode_index", DataType::Int64), ("index", DataType::Int64), ("task_index", DataType::Int64)] {
        fields.push(Field::new(name, kind, false));
    }
    Arc::new(Schema::new(fields))
}

/// Where an episode's rows go: its index, the dataset index of its first
/// frame, its task's index, and where each of the dataset's cameras is
/// among its frames' images.
struct Place {
    ep: usize,
    first: usize,
    task: i64,
    picks: Vec<usize>,
}

/// The rows of the next record batch, gathered a frame at a time.
struct Batch {
    states: FixedSizeListBuilder<Float32Builder>,
    actions: FixedSizeListBuilder<Float32Builder>,
    /// Per dataset camera: the JPEGs and their file names.
    images: Vec<(BinaryBuilder, StringBuilder)>,
    timestamp: Vec<f32>,
    frame_index: Vec<i64>,
    episode_index: Vec<i64>,
    index: Vec<i64>,
    task: Vec<i64>,
    image_bytes: usize,
}

impl Batch {
    fn new(shape: &Shape) -> Batch {
        let vectors = |dim: usize| FixedSizeListBuilder::new(Float32Builder::new(), dim as i32);
        Batch {
            states: vectors(shape.state_dim),
            actions: vectors(shape.action_dim),
            images: shape.cameras.iter().map(|_| (BinaryBuilder::new(), StringBuilder::new())).collect(),
            timestamp: Vec::new(),
            frame_index: Vec::new(),
            episode_index: Vec::new(),
            index: Vec::new(),
            task: Vec::new(),
            image_bytes: 0,
        }
    }

    fn len(&self) -> usize {
        self.timestamp.len()
    }

    fn is_full(&self) -> bool {
        self.len() >= FRAMES_PER_BATCH || self.image_bytes >= IMAGE_BYTES_PER_BATCH
    }

    /// Frame `i` of the episode at `place`.
    fn push(&mut self, shape: &Shape, place: &Place, i: usize, frame: &Frame<Bytes>) {
        for (builder, row, dim) in [(&mut self.states, &frame.state, shape.state_dim), (&mut self.actions, &frame.action, shape.action_dim)] {
            for v in 0..dim {
                builder.values().append_value(row.get(v).copied().unwrap_or(0.0));
            }
            builder.append(true);
        }
        self.timestamp.push(i as f32 / shape.fps as f32);
        self.frame_index.push(i as i64);
        self.episode_index.push(place.ep as i64);
        self.index.push((place.first + i) as i64);
        self.task.push(place.task);
        for ((bytes, path), &pick) in self.images.iter_mut().zip(&place.picks) {
            bytes.append_value(&frame.images[pick]);
            path.append_value(format!("frame_{i:06}.jpg"));
            self.image_bytes += frame.images[pick].len();
        }
    }

    /// The gathered rows as a record batch; the batch starts empty again.
    fn take(&mut self, shape: &Shape) -> anyhow::Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = vec![Arc::new(self.states.finish()), Arc::new(self.actions.finish())];
        for (bytes, path) in &mut self.images {
            columns.push(Arc::new(StructArray::new(image_fields(), vec![Arc::new(bytes.finish()) as ArrayRef, Arc::new(path.finish()) as ArrayRef], None)));
        }
        columns.push(Arc::new(Float32Array::from(std::mem::take(&mut self.timestamp))));
        for ints in [&mut self.frame_index, &mut self.episode_index, &mut self.index, &mut self.task] {
            columns.push(Arc::new(Int64Array::from(std::mem::take(ints))));
        }
        self.image_bytes = 0;
        Ok(RecordBatch::try_new(data_schema(shape), columns)?)
    }
}

/// A data file's writer: Snappy, and a row group per batch at most, so
/// the writer holds one batch's encoded rows, never an episode's.
fn data_writer(path: &Path, shape: &Shape) -> anyhow::Result<ArrowWriter<std::fs::File>> {
    std::fs::create_dir_all(path.parent().expect("a parent"))?;
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).set_max_row_group_row_count(Some(FRAMES_PER_BATCH)).build();
    Ok(ArrowWriter::try_new(std::fs::File::create(path)?, data_schema(shape), Some(props))?)
}

/// Writes an episode's frames to `writer` a batch at a time, each batch
/// flushed as its own row group, and adds its states and actions to the
/// stats. `sizes` takes the dataset's image sizes from the first frame
/// written.
fn write_rows(
    writer: &mut ArrowWriter<std::fs::File>,
    shape: &Shape,
    place: &Place,
    episode: &dyn Episode,
    summary: &Summary,
    (states, actions): (&mut Stats, &mut Stats),
    sizes: &mut Option<Vec<(u32, u32)>>,
) -> anyhow::Result<()> {
    let mut batch = Batch::new(shape);
    let mut count = 0;
    for frame in episode.frames()? {
        let frame = frame?;
        anyhow::ensure!(count < summary.len && frame.images.len() == summary.cameras.len(), "episode {} does not match its summary", place.ep);
        states.add(&widen(&frame.state, shape.state_dim));
        actions.add(&widen(&frame.action, shape.action_dim));
        sizes.get_or_insert_with(|| place.picks.iter().map(|&pick| jpeg_size(&frame.images[pick]).unwrap_or((0, 0))).collect());
        batch.push(shape, place, count, &frame);
        count += 1;
        if batch.is_full() {
            writer.write(&batch.take(shape)?)?;
            writer.flush()?;
        }
    }
    anyhow::ensure!(count == summary.len, "episode {} has {count} frames, not {}", place.ep, summary.len);
    if batch.len() > 0 {
        writer.write(&batch.take(shape)?)?;
        writer.flush()?;
    }
    Ok(())
}

fn write_parquet(path: &Path, batch: &RecordBatch, metadata: Option<(&str, String)>) -> anyhow::Result<()> {
    std::fs::create_dir_all(path.parent().expect("a parent"))?;
    let file = std::fs::File::create(path)?;
    let mut schema = batch.schema().as_ref().clone();
    if let Some((key, value)) = metadata {
        schema = schema.with_metadata(std::iter::once((key.to_string(), value)).collect::<HashMap<String, String>>());
    }
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut writer = ArrowWriter::try_new(file, Arc::new(schema.clone()), Some(props))?;
    writer.write(&batch.clone().with_schema(Arc::new(schema))?)?;
    writer.close()?;
    Ok(())
}

fn features(shape: &Shape, images: &[(u32, u32)], version: Version) -> Value {
    let names = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}_{i}")).collect::<Vec<_>>();
    let mut features = serde_json::Map::new();
    features.insert("observation.state".into(), json!({ "dtype": "float32", "shape": [shape.state_dim], "names": names("joint", shape.state_dim) }));
    features.insert("action".into(), json!({ "dtype": "float32", "shape": [shape.action_dim], "names": names("command", shape.action_dim) }));
    for (camera, (w, h)) in shape.cameras.iter().zip(images) {
        features.insert(format!("observation.images.{camera}"), json!({ "dtype": "image", "shape": [h, w, 3], "names": ["height", "width", "channels"] }));
    }
    features.insert("timestamp".into(), json!({ "dtype": "float32", "shape": [1], "names": null }));
    for name in ["frame_index", "episode_index", "index", "task_index"] {
        features.insert(name.into(), json!({ "dtype": "int64", "shape": [1], "names": null }));
    }
    if version == Version::V30 {
        for feature in features.values_mut() {
            feature["fps"] = json!(shape.fps);
        }
    }
    Value::Object(features)
}

/// min / max / mean / std / count per dimension, gathered a row at a time
/// (Welford's method), so a dataset's stats never need all of its rows.
#[derive(Default)]
struct Stats {
    count: usize,
    min: Vec<f64>,
    max: Vec<f64>,
    mean: Vec<f64>,
    /// Sums of squared distances from the mean.
    m2: Vec<f64>,
}

impl Stats {
    fn add(&mut self, row: &[f64]) {
        if self.count == 0 {
            let dim = row.len();
            (self.min, self.max, self.mean, self.m2) = (vec![f64::INFINITY; dim], vec![f64::NEG_INFINITY; dim], vec![0.0; dim], vec![0.0; dim]);
        }
        self.count += 1;
        let n = self.count as f64;
        for (i, &v) in row.iter().enumerate().take(self.mean.len()) {
            self.min[i] = self.min[i].min(v);
            self.max[i] = self.max[i].max(v);
            let delta = v - self.mean[i];
            self.mean[i] += delta / n;
            self.m2[i] += delta * (v - self.mean[i]);
        }
    }

    fn json(&self) -> Value {
        let n = self.count.max(1) as f64;
        let std: Vec<f64> = self.m2.iter().map(|m2| (m2 / n).sqrt()).collect();
        json!({ "min": self.min, "max": self.max, "mean": self.mean, "std": std, "count": [self.count] })
    }
}

fn stats(rows: impl Iterator<Item = Vec<f64>>) -> Value {
    let mut stats = Stats::default();
    for row in rows {
        stats.add(&row);
    }
    stats.json()
}

/// `v` as `dim` numbers (padded with 0).
fn widen(v: &[f32], dim: usize) -> Vec<f64> {
    (0..dim).map(|i| f64::from(v.get(i).copied().unwrap_or(0.0))).collect()
}

/// An episode's stats (v2.1): its states' and actions' as written, and its
/// time and index columns.
fn episode_stats(shape: &Shape, place: &Place, n: usize, states: &Stats, actions: &Stats) -> Value {
    json!({
        "observation.state": states.json(),
        "action": actions.json(),
        "timestamp": stats((0..n).map(|i| vec![i as f64 / f64::from(shape.fps)])),
        "frame_index": stats((0..n).map(|i| vec![i as f64])),
        "episode_index": stats((0..n).map(|_| vec![place.ep as f64])),
        "index": stats((0..n).map(|i| vec![(place.first + i) as f64])),
        "task_index": stats((0..n).map(|_| vec![place.task as f64])),
    })
}

/// Writes `episodes` (in episode-index order) under `root` in `version`'s
/// layout. Every episode's summary is read first (the dataset's shape and
/// metadata), then each episode's frames are pulled and written a batch at
/// a time, one episode after the other, so neither the dataset's size nor
/// an episode's is the memory's.
pub fn write_dataset<E: Episode>(root: &Path, version: Version, robot_type: &str, episodes: &[E]) -> anyhow::Result<()> {
    let count = episodes.len();
    let summaries: Vec<Summary> = episodes.iter().map(Episode::summary).collect();
    let shape = Shape::of(&summaries);
    let mut tasks: Vec<String> = Vec::new();
    for e in &summaries {
        if !tasks.contains(&e.task) {
            tasks.push(e.task.clone());
        }
    }
    let task_index: HashMap<String, i64> = tasks.iter().enumerate().map(|(i, t)| (t.clone(), i as i64)).collect();
    let firsts: Vec<usize> = summaries.iter().scan(0, |next, e| Some(std::mem::replace(next, *next + e.len))).collect();
    let places = summaries.iter().enumerate().map(|(ep, e)| {
        let picks = shape.cameras.iter().map(|c| e.cameras.iter().position(|name| name == c)).collect::<Option<Vec<usize>>>();
        Place { ep, first: firsts[ep], task: task_index[&e.task], picks: picks.expect("every episode has the dataset's cameras") }
    });
    let total_frames: usize = summaries.iter().map(|e| e.len).sum();
    let meta = root.join("meta");
    std::fs::create_dir_all(&meta)?;
    let mut info = json!({
        "codebase_version": version.as_str(),
        "robot_type": robot_type,
        "total_episodes": count,
        "total_frames": total_frames,
        "total_tasks": tasks.len(),
        "chunks_size": 1000,
        "fps": shape.fps,
        "splits": { "train": format!("0:{count}") },
        "video_path": null,
        // Image sizes come from the first frame written (below).
        "features": null,
    });
    let mut sizes = None;
    match version {
        Version::V30 => {
            info["data_files_size_in_mb"] = json!(100);
            info["video_files_size_in_mb"] = json!(200);
            info["data_path"] = json!("data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet");
            // One file for every episode.
            let mut writer = data_writer(&root.join("data/chunk-000/file-000.parquet"), &shape)?;
            let (mut states, mut actions) = (Stats::default(), Stats::default());
            for ((place, episode), summary) in places.zip(episodes).zip(&summaries) {
                write_rows(&mut writer, &shape, &place, episode, summary, (&mut states, &mut actions), &mut sizes)?;
            }
            writer.close()?;
            write_v30_episodes(&meta, &summaries, &firsts)?;
            write_v30_tasks(&meta, &tasks)?;
            let mut stats = json!({
                "observation.state": states.json(),
                "action": actions.json(),
                // The dataset-wide time and frame columns run over every frame at once.
                "timestamp": stats((0..total_frames).map(|i| vec![i as f64 / f64::from(shape.fps)])),
                "frame_index": stats_of_range(total_frames),
            });
            fix_index_stats(&mut stats, count, total_frames, tasks.len());
            std::fs::write(meta.join("stats.json"), serde_json::to_vec_pretty(&stats)?)?;
        }
        Version::V21 => {
            info["total_chunks"] = json!(1);
            info["total_videos"] = json!(0);
            info["data_path"] = json!("data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet");
            let (mut episodes_jsonl, mut stats_jsonl) = (String::new(), String::new());
            // One file per episode.
            for ((place, episode), summary) in places.zip(episodes).zip(&summaries) {
                let ep = place.ep;
                let mut writer = data_writer(&root.join(format!("data/chunk-000/episode_{ep:06}.parquet")), &shape)?;
                let (mut states, mut actions) = (Stats::default(), Stats::default());
                write_rows(&mut writer, &shape, &place, episode, summary, (&mut states, &mut actions), &mut sizes)?;
                writer.close()?;
                episodes_jsonl.push_str(&json!({ "episode_index": ep, "tasks": [summary.task], "length": summary.len }).to_string());
                episodes_jsonl.push('\n');
                let stats = episode_stats(&shape, &place, summary.len, &states, &actions);
                stats_jsonl.push_str(&json!({ "episode_index": ep, "stats": stats }).to_string());
                stats_jsonl.push('\n');
            }
            let tasks_jsonl: String = tasks.iter().enumerate().map(|(i, t)| format!("{}\n", json!({ "task_index": i, "task": t }))).collect();
            std::fs::write(meta.join("episodes.jsonl"), episodes_jsonl)?;
            std::fs::write(meta.join("episodes_stats.jsonl"), stats_jsonl)?;
            std::fs::write(meta.join("tasks.jsonl"), tasks_jsonl)?;
        }
    }
    info["features"] = features(&shape, &sizes.unwrap_or_default(), version);
    std::fs::write(meta.join("info.json"), serde_json::to_vec_pretty(&info)?)?;
    Ok(())
}

/// The dataset-wide stats of the index columns span all episodes.
fn fix_index_stats(stats: &mut Value, episodes: usize, frames: usize, tasks: usize) {
    let range = |max: usize| stats_of_range(max);
    stats["episode_index"] = range(episodes);
    stats["index"] = range(frames);
    stats["task_index"] = range(tasks);
}

fn stats_of_range(n: usize) -> Value {
    stats((0..n.max(1)).map(|i| vec![i as f64]))
}

fn write_v30_episodes(meta: &Path, summaries: &[Summary], firsts: &[usize]) -> anyhow::Result<()> {
    let mut tasks = ListBuilder::new(StringBuilder::new());
    let mut ints: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (ep, (episode, &first)) in summaries.iter().zip(firsts).enumerate() {
        tasks.values().append_value(&episode.task);
        tasks.append(true);
        let len = episode.len as i64;
        for (name, value) in [
            ("episode_index", ep as i64),
            ("length", len),
            ("data/chunk_index", 0),
            ("data/file_index", 0),
            ("dataset_from_index", first as i64),
            ("dataset_to_index", first as i64 + len),
            ("meta/episodes/chunk_index", 0),
            ("meta/episodes/file_index", 0),
        ] {
            ints.entry(name).or_default().push(value);
        }
    }
    let order = ["episode_index", "length", "data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index", "meta/episodes/chunk_index", "meta/episodes/file_index"];
    let mut fields = vec![Field::new("episode_index", DataType::Int64, false), Field::new("tasks", DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ints["episode_index"].clone())), Arc::new(tasks.finish())];
    for name in &order[1..] {
        fields.push(Field::new(*name, DataType::Int64, false));
        columns.push(Arc::new(Int64Array::from(ints[name].clone())));
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
    write_parquet(&meta.join("episodes/chunk-000/file-000.parquet"), &batch, None)
}

/// `meta/tasks.parquet`: the task strings as the (pandas) index named
/// `task`, and `task_index` — as `pandas.DataFrame.to_parquet` writes it.
fn write_v30_tasks(meta: &Path, tasks: &[String]) -> anyhow::Result<()> {
    let schema = Schema::new(vec![Field::new("task_index", DataType::Int64, false), Field::new("task", DataType::Utf8, false)]);
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        vec![Arc::new(Int64Array::from((0..tasks.len() as i64).collect::<Vec<_>>())), Arc::new(StringArray::from(tasks.to_vec()))],
    )?;
    let pandas = json!({
        "index_columns": ["task"],
        "column_indexes": [{ "name": null, "field_name": null, "pandas_type": "unicode", "numpy_type": "object", "metadata": { "encoding": "UTF-8" } }],
        "columns": [
            { "name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": null },
            { "name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": null }
        ],
        "creator": { "library": "clutchcall", "version": env!("CARGO_PKG_VERSION") },
        "pandas_version": "2.2.0"
    });
    write_parquet(&meta.join("tasks.parquet"), &batch, Some(("pandas", pandas.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::resample::Frames;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    #[test]
    fn stats_gathered_a_row_at_a_time_match_the_two_pass_figures() {
        let rows = [vec![1.0, -2.0], vec![4.0, 0.5], vec![-3.5, 8.0], vec![2.0, 2.0]];
        let got = stats(rows.iter().cloned());
        for dim in 0..2 {
            let column: Vec<f64> = rows.iter().map(|r| r[dim]).collect();
            let mean = column.iter().sum::<f64>() / 4.0;
            let std = (column.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
            assert!((got["mean"][dim].as_f64().unwrap() - mean).abs() < 1e-12);
            assert!((got["std"][dim].as_f64().unwrap() - std).abs() < 1e-12);
            assert_eq!(got["min"][dim].as_f64().unwrap(), column.iter().cloned().fold(f64::INFINITY, f64::min));
            assert_eq!(got["max"][dim].as_f64().unwrap(), column.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
        }
        assert_eq!(got["count"], json!([4]));
    }

    /// An episode in memory that counts whose frames are being pulled.
    struct Counted<'a> {
        task: String,
        frames: Frames,
        pulling: &'a AtomicUsize,
        opened: &'a AtomicUsize,
    }

    /// Marks an episode's frames as no longer pulled when its stream is dropped.
    struct Pulling<'a>(&'a AtomicUsize);

    impl Drop for Pulling<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, SeqCst);
        }
    }

    impl Episode for Counted<'_> {
        fn summary(&self) -> Summary {
            let f = &self.frames;
            Summary { task: self.task.clone(), len: f.len(), state_dim: f.state_dim(), action_dim: f.action_dim(), fps: f.fps, cameras: f.cameras.keys().cloned().collect() }
        }

        fn frames(&self) -> anyhow::Result<FrameStream<'_>> {
            self.opened.fetch_add(1, SeqCst);
            assert_eq!(self.pulling.fetch_add(1, SeqCst), 0, "an episode's frames were pulled while another's were still held");
            let (f, pulling) = (&self.frames, Pulling(self.pulling));
            Ok(Box::new((0..f.len()).map(move |i| {
                let _held = &pulling;
                let images = f.cameras.values().map(|c| Bytes::copy_from_slice(&f.images[c[i]])).collect();
                Ok(Frame { state: f.states[i].clone(), action: f.actions[i].clone(), images, switch: None })
            })))
        }
    }

    #[test]
    fn s08_the_writer_holds_one_episode_at_a_time() {
        for version in [Version::V30, Version::V21] {
            let dir = tempfile::tempdir().unwrap();
            let (pulling, opened) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let episodes: Vec<Counted> = (0..4)
                .map(|ep| {
                    let frames = Frames { fps: 30, states: vec![vec![ep as f32; 3]; 5], actions: vec![vec![0.5; 2]; 5], ..Frames::default() };
                    Counted { task: format!("task {}", ep % 2), frames, pulling: &pulling, opened: &opened }
                })
                .collect();
            write_dataset(dir.path(), version, "test", &episodes).unwrap();
            assert_eq!(opened.load(SeqCst), 4, "each episode's frames are read once");
            let info: Value = serde_json::from_slice(&std::fs::read(dir.path().join("meta/info.json")).unwrap()).unwrap();
            assert_eq!((info["total_episodes"].as_u64(), info["total_frames"].as_u64(), info["total_tasks"].as_u64()), (Some(4), Some(20), Some(2)));
            if version == Version::V30 {
                let stats: Value = serde_json::from_slice(&std::fs::read(dir.path().join("meta/stats.json")).unwrap()).unwrap();
                assert_eq!(stats["observation.state"]["max"], json!([3.0, 3.0, 3.0]));
                assert_eq!(stats["observation.state"]["count"], json!([20]));
            }
        }
    }

    /// An episode made up as it is pulled: `len` frames of one camera with
    /// distinct, incompressible images of `image_len` bytes. Before handing
    /// out frame `i` it checks that the frames before it, but for one
    /// batch's worth, are already on disk in `file`.
    struct Made {
        len: usize,
        image_len: usize,
        file: std::path::PathBuf,
    }

    impl Episode for Made {
        fn summary(&self) -> Summary {
            Summary { task: "make".into(), len: self.len, state_dim: 2, action_dim: 2, fps: 30, cameras: vec!["front".into()] }
        }

        fn frames(&self) -> anyhow::Result<FrameStream<'_>> {
            let mut seed = self.image_len as u64 | 1;
            Ok(Box::new((0..self.len).map(move |i| {
                let on_disk = std::fs::metadata(&self.file).map_or(0, |m| m.len() as usize);
                let held = (i * self.image_len).saturating_sub(on_disk);
                // One batch of images, plus the writer's 8 KiB buffer.
                assert!(held <= IMAGE_BYTES_PER_BATCH + 16 * 1024, "frame {i}: {held} bytes of images pulled but not written");
                let mut image = Vec::with_capacity(self.image_len);
                while image.len() < self.image_len {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    image.extend_from_slice(&seed.to_le_bytes());
                }
                Ok(Frame { state: vec![i as f32; 2], action: vec![0.0; 2], images: vec![Bytes::from(image)], switch: None })
            })))
        }
    }

    fn row_groups(path: &Path) -> Vec<i64> {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect()
    }

    #[test]
    fn s08_frames_are_pulled_as_they_are_written_in_bounded_row_groups() {
        // 64 KiB images fill a batch's bytes at 128 frames; 1 KiB ones, its 256 frames.
        let (big, small) = (64 * 1024, 1024);
        for version in [Version::V30, Version::V21] {
            let dir = tempfile::tempdir().unwrap();
            let files = match version {
                Version::V30 => vec![dir.path().join("data/chunk-000/file-000.parquet"); 2],
                Version::V21 => (0..2).map(|ep| dir.path().join(format!("data/chunk-000/episode_{ep:06}.parquet"))).collect(),
            };
            let episodes = [Made { len: 300, image_len: big, file: files[0].clone() }, Made { len: 600, image_len: small, file: files[1].clone() }];
            write_dataset(dir.path(), version, "test", &episodes).unwrap();
            let (first, second) = (vec![128, 128, 44], vec![256, 256, 88]);
            match version {
                Version::V30 => assert_eq!(row_groups(&files[0]), [first, second].concat()),
                Version::V21 => assert_eq!((row_groups(&files[0]), row_groups(&files[1])), (first, second)),
            }
        }
    }
}
