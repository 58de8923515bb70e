//! Writes an environment's episodes as a LeRobot dataset: v3.0 (what the
//! current `lerobot` package reads) or v2.1 (what GR00T fine-tunes need).
//! Frame data is Parquet (`observation.state`, `action`, camera images as
//! `observation.images.<name>`, `timestamp`, `frame_index`, `episode_index`,
//! `index`, `task_index`); metadata is `meta/info.json` with the features,
//! tasks, per-episode metadata and statistics.

use super::resample::{jpeg_size, Frames};
use arrow_array::builder::{BinaryBuilder, FixedSizeListBuilder, Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

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

/// One episode to write: its frames and its task.
pub struct EpisodeFrames {
    pub task: String,
    pub frames: Frames,
}

/// What the first pass learns of an episode (its frames are not kept).
struct Summary {
    task: String,
    len: usize,
    state_dim: usize,
    action_dim: usize,
    fps: u32,
    /// Each camera's image size, from its first frame.
    cameras: BTreeMap<String, Option<(u32, u32)>>,
}

impl Summary {
    fn of(episode: &EpisodeFrames) -> Summary {
        let f = &episode.frames;
        let cameras = f.cameras.iter().map(|(name, frames)| (name.clone(), frames.first().and_then(|&i| jpeg_size(&f.images[i])))).collect();
        Summary { task: episode.task.clone(), len: f.len(), state_dim: f.state_dim(), action_dim: f.action_dim(), fps: f.fps, cameras }
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
        let mut cameras: Vec<String> = episodes.first().map(|e| e.cameras.keys().cloned().collect()).unwrap_or_default();
        cameras.retain(|c| episodes.iter().all(|e| e.cameras.contains_key(c)));
        let fps = episodes.first().map_or(30, |e| e.fps);
        Shape { state_dim, action_dim, cameras, fps }
    }
}

fn image_type() -> DataType {
    DataType::Struct(Fields::from(vec![Field::new("bytes", DataType::Binary, true), Field::new("path", DataType::Utf8, true)]))
}

fn vector_type(dim: usize) -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dim as i32)
}

fn data_schema(shape: &Shape) -> Arc<Schema> {
    let mut fields = vec![Field::new("observation.state", vector_type(shape.state_dim), false), Field::new("action", vector_type(shape.action_dim), false)];
    for camera in &shape.cameras {
        fields.push(Field::new(format!("observation.images.{camera}"), image_type(), true));
    }
    for (name, kind) in [("timestamp", DataType::Float32), ("frame_index", DataType::Int64), ("episode_index", DataType::Int64), ("index", DataType::Int64), ("task_index", DataType::Int64)] {
        fields.push(Field::new(name, kind, false));
    }
    Arc::new(Schema::new(fields))
}

fn vectors(rows: &[&Vec<f32>], dim: usize) -> ArrayRef {
    let mut builder = FixedSizeListBuilder::new(Float32Builder::new(), dim as i32);
    for row in rows {
        for i in 0..dim {
            builder.values().append_value(row.get(i).copied().unwrap_or(0.0));
        }
        builder.append(true);
    }
    Arc::new(builder.finish())
}

/// The rows of `episodes` (given as (episode index, first global index, episode)).
fn data_batch(shape: &Shape, episodes: &[(usize, usize, &EpisodeFrames)], task_index: &HashMap<String, i64>) -> anyhow::Result<RecordBatch> {
    let (mut states, mut actions) = (Vec::new(), Vec::new());
    let (mut timestamp, mut frame_index, mut episode_index, mut index, mut task) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut images: Vec<(BinaryBuilder, StringBuilder)> = shape.cameras.iter().map(|_| (BinaryBuilder::new(), StringBuilder::new())).collect();
    for &(ep, first, episode) in episodes {
        let f = &episode.frames;
        for i in 0..f.len() {
            states.push(&f.states[i]);
            actions.push(&f.actions[i]);
            timestamp.push(i as f32 / shape.fps as f32);
            frame_index.push(i as i64);
            episode_index.push(ep as i64);
            index.push((first + i) as i64);
            task.push(task_index[&episode.task]);
            for (camera, (bytes, path)) in shape.cameras.iter().zip(images.iter_mut()) {
                bytes.append_value(&f.images[f.cameras[camera][i]]);
                path.append_value(format!("frame_{i:06}.jpg"));
            }
        }
    }
    let mut columns: Vec<ArrayRef> = vec![vectors(&states, shape.state_dim), vectors(&actions, shape.action_dim)];
    for (mut bytes, mut path) in images {
        let fields = match image_type() {
            DataType::Struct(fields) => fields,
            _ => unreachable!("a struct"),
        };
        columns.push(Arc::new(StructArray::new(fields, vec![Arc::new(bytes.finish()) as ArrayRef, Arc::new(path.finish()) as ArrayRef], None)));
    }
    columns.push(Arc::new(Float32Array::from(timestamp)));
    for ints in [frame_index, episode_index, index, task] {
        columns.push(Arc::new(Int64Array::from(ints)));
    }
    Ok(RecordBatch::try_new(data_schema(shape), columns)?)
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

fn episode_stats(shape: &Shape, ep: usize, first: usize, episode: &EpisodeFrames, task: i64) -> Value {
    let f = &episode.frames;
    let n = f.len();
    json!({
        "observation.state": stats(f.states.iter().map(|s| widen(s, shape.state_dim))),
        "action": stats(f.actions.iter().map(|a| widen(a, shape.action_dim))),
        "timestamp": stats((0..n).map(|i| vec![i as f64 / f64::from(shape.fps)])),
        "frame_index": stats((0..n).map(|i| vec![i as f64])),
        "episode_index": stats((0..n).map(|_| vec![ep as f64])),
        "index": stats((0..n).map(|i| vec![(first + i) as f64])),
        "task_index": stats((0..n).map(|_| vec![task as f64])),
    })
}

/// Writes `count` episodes (in episode-index order) under `root` in
/// `version`'s layout. `load(i)` reads episode `i`; it is called twice per
/// episode (a first pass learns the dataset's shape, the second writes the
/// rows), and only one episode's frames are in memory at a time, so the
/// dataset's size is not the memory's.
pub fn write_dataset<E: std::borrow::Borrow<EpisodeFrames>>(
    root: &Path,
    version: Version,
    robot_type: &str,
    count: usize,
    load: impl Fn(usize) -> anyhow::Result<E>,
) -> anyhow::Result<()> {
    let summaries = (0..count).map(|ep| load(ep).map(|e| Summary::of(e.borrow()))).collect::<anyhow::Result<Vec<_>>>()?;
    let shape = Shape::of(&summaries);
    let mut tasks: Vec<String> = Vec::new();
    for e in &summaries {
        if !tasks.contains(&e.task) {
            tasks.push(e.task.clone());
        }
    }
    let task_index: HashMap<String, i64> = tasks.iter().enumerate().map(|(i, t)| (t.clone(), i as i64)).collect();
    let images: Vec<(u32, u32)> = shape.cameras.iter().map(|c| summaries.first().and_then(|e| e.cameras[c]).unwrap_or((0, 0))).collect();
    let firsts: Vec<usize> = summaries.iter().scan(0, |next, e| Some(std::mem::replace(next, *next + e.len))).collect();
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
        "features": features(&shape, &images, version),
    });
    match version {
        Version::V30 => {
            info["data_files_size_in_mb"] = json!(100);
            info["video_files_size_in_mb"] = json!(200);
            info["data_path"] = json!("data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet");
            // One file, one row group per episode, each flushed as it is written.
            let path = root.join("data/chunk-000/file-000.parquet");
            std::fs::create_dir_all(path.parent().expect("a parent"))?;
            let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
            let mut writer = ArrowWriter::try_new(std::fs::File::create(&path)?, data_schema(&shape), Some(props))?;
            let (mut states, mut actions) = (Stats::default(), Stats::default());
            for (ep, &first) in firsts.iter().enumerate() {
                let loaded = load(ep)?;
                let episode = loaded.borrow();
                for (state, action) in episode.frames.states.iter().zip(&episode.frames.actions) {
                    states.add(&widen(state, shape.state_dim));
                    actions.add(&widen(action, shape.action_dim));
                }
                writer.write(&data_batch(&shape, &[(ep, first, episode)], &task_index)?)?;
                writer.flush()?;
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
            for (ep, &first) in firsts.iter().enumerate() {
                let loaded = load(ep)?;
                let episode = loaded.borrow();
                let path = root.join(format!("data/chunk-000/episode_{ep:06}.parquet"));
                write_parquet(&path, &data_batch(&shape, &[(ep, first, episode)], &task_index)?, None)?;
                episodes_jsonl.push_str(&json!({ "episode_index": ep, "tasks": [episode.task], "length": episode.frames.len() }).to_string());
                episodes_jsonl.push('\n');
                let stats = episode_stats(&shape, ep, first, episode, task_index[&episode.task]);
                stats_jsonl.push_str(&json!({ "episode_index": ep, "stats": stats }).to_string());
                stats_jsonl.push('\n');
            }
            let tasks_jsonl: String = tasks.iter().enumerate().map(|(i, t)| format!("{}\n", json!({ "task_index": i, "task": t }))).collect();
            std::fs::write(meta.join("episodes.jsonl"), episodes_jsonl)?;
            std::fs::write(meta.join("episodes_stats.jsonl"), stats_jsonl)?;
            std::fs::write(meta.join("tasks.jsonl"), tasks_jsonl)?;
        }
    }
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

    /// An episode that counts how many are alive at once.
    struct Held<'a> {
        episode: EpisodeFrames,
        alive: &'a std::sync::atomic::AtomicUsize,
    }

    impl std::borrow::Borrow<EpisodeFrames> for Held<'_> {
        fn borrow(&self) -> &EpisodeFrames {
            &self.episode
        }
    }

    impl Drop for Held<'_> {
        fn drop(&mut self) {
            self.alive.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn s08_the_writer_holds_one_episode_at_a_time() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        for version in [Version::V30, Version::V21] {
            let dir = tempfile::tempdir().unwrap();
            let (alive, loads) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let load = |ep: usize| -> anyhow::Result<Held<'_>> {
                loads.fetch_add(1, SeqCst);
                assert_eq!(alive.fetch_add(1, SeqCst), 0, "episode {ep} was loaded while another was still held");
                let frames = Frames { fps: 30, states: vec![vec![ep as f32; 3]; 5], actions: vec![vec![0.5; 2]; 5], ..Frames::default() };
                Ok(Held { episode: EpisodeFrames { task: format!("task {}", ep % 2), frames }, alive: &alive })
            };
            write_dataset(dir.path(), version, "test", 4, load).unwrap();
            assert_eq!(loads.load(SeqCst), 8, "twice each: the shape, then the rows");
            let info: Value = serde_json::from_slice(&std::fs::read(dir.path().join("meta/info.json")).unwrap()).unwrap();
            assert_eq!((info["total_episodes"].as_u64(), info["total_frames"].as_u64(), info["total_tasks"].as_u64()), (Some(4), Some(20), Some(2)));
            if version == Version::V30 {
                let stats: Value = serde_json::from_slice(&std::fs::read(dir.path().join("meta/stats.json")).unwrap()).unwrap();
                assert_eq!(stats["observation.state"]["max"], json!([3.0, 3.0, 3.0]));
                assert_eq!(stats["observation.state"]["count"], json!([20]));
            }
        }
    }
}
