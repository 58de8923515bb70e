//! A recording resampled straight from its file, never loaded whole
//! (finding 8: a recording may be 1 GiB, an export must stay within a few
//! MiB). [`RecordingFile::open`] reads it once for its [`Plan`];
//! [`RecordingFile::frames`] reads it again, a line at a time, giving one
//! frame at a time: one reader for the samples in order, and one per
//! camera for its images, so each camera's next image is at hand without
//! holding what lies between.

use super::resample::{Plan, Planner, Stepper};
use crate::relay::recording::Sample;
use bytes::Bytes;
use serde::Deserialize;
use std::borrow::Cow;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

/// Read buffer per reader: several lines at a time, small beside a frame.
const READ_BUFFER: usize = 64 * 1024;

/// A recording on disk and its plan.
pub struct RecordingFile {
    path: PathBuf,
    plan: Plan,
}

/// A recording's frames, read from its file as they are taken.
pub type FileFrames = Stepper<Samples, Images, Bytes>;

impl RecordingFile {
    /// Reads the recording once for its plan (windows, widths, cameras, frame count).
    pub fn open(path: &Path, fps: u32) -> io::Result<RecordingFile> {
        let mut planner = Planner::new(fps);
        for sample in Samples::open(path)? {
            planner.add(&sample?);
        }
        Ok(RecordingFile { path: path.to_path_buf(), plan: planner.finish() })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The frames, read from the file one at a time (the same as
    /// [`resample`](super::resample::resample) of the whole recording).
    pub fn frames(&self) -> io::Result<FileFrames> {
        Stepper::new(&self.plan, Samples::open(&self.path)?, |name| Images::open(&self.path, name))
    }
}

/// A recording file's lines, one at a time, in a buffer reused for each.
struct Lines {
    reader: io::BufReader<std::fs::File>,
    line: Vec<u8>,
}

impl Lines {
    fn open(path: &Path) -> io::Result<Lines> {
        Ok(Lines { reader: io::BufReader::with_capacity(READ_BUFFER, std::fs::File::open(path)?), line: Vec::new() })
    }

    /// The next line (text, as `read_samples` reads it), or `None` at the end.
    fn next_line(&mut self) -> io::Result<Option<&str>> {
        self.line.clear();
        if self.reader.read_until(b'\n', &mut self.line)? == 0 {
            return Ok(None);
        }
        std::str::from_utf8(&self.line).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// A recording's samples in file order. A line that is not a sample is
/// skipped, as `read_samples` skips it.
pub struct Samples(Lines);

impl Samples {
    fn open(path: &Path) -> io::Result<Samples> {
        Lines::open(path).map(Samples)
    }
}

impl Iterator for Samples {
    type Item = io::Result<Sample>;

    fn next(&mut self) -> Option<io::Result<Sample>> {
        loop {
            match self.0.next_line() {
                Ok(Some(line)) => {
                    if let Ok(sample) = serde_json::from_str::<Sample>(line) {
                        return Some(Ok(sample));
                    }
                }
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Just enough of a line to tell whose image it is: the image's text is
/// skipped over, not decoded, unless it is this camera's.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow)]
    k: Cow<'a, str>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// One camera's images in file order, as (time, JPEG).
pub struct Images {
    lines: Lines,
    name: String,
}

impl Images {
    fn open(path: &Path, name: &str) -> io::Result<Images> {
        Ok(Images { lines: Lines::open(path)?, name: name.to_string() })
    }
}

impl Iterator for Images {
    type Item = io::Result<(i64, Bytes)>;

    fn next(&mut self) -> Option<io::Result<(i64, Bytes)>> {
        loop {
            let line = match self.lines.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            let ours = serde_json::from_str::<Peek>(line).is_ok_and(|p| p.k == "camera" && p.name.as_deref() == Some(self.name.as_str()));
            if !ours {
                continue;
            }
            // Only a whole sample counts: a line `Samples` skips is skipped here too.
            if let Ok(Sample::Camera { t_ms, jpeg, .. }) = serde_json::from_str::<Sample>(line) {
                return Some(Ok((t_ms, Bytes::from(jpeg))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::resample::resample;
    use crate::relay::recording::read_samples;
    use std::io::Write;

    fn state(t_ms: i64, v: f32) -> Sample {
        Sample::State { t_ms, joints: vec![v, v + 0.5], fields: Default::default() }
    }

    fn camera(t_ms: i64, name: &str, tag: u8) -> Sample {
        Sample::Camera { t_ms, name: name.into(), jpeg: vec![0xFF, 0xD8, tag] }
    }

    /// Writes `samples` as the recorder does, with `junk` lines after the
    /// first few (lines that are not samples are skipped).
    fn record(dir: &Path, name: &str, samples: &[Sample], junk: &[&str]) -> PathBuf {
        let path = dir.join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        for (i, sample) in samples.iter().enumerate() {
            writeln!(file, "{}", serde_json::to_string(sample).unwrap()).unwrap();
            if i == 3 {
                junk.iter().for_each(|line| writeln!(file, "{line}").unwrap());
            }
        }
        path
    }

    #[test]
    fn l12_streamed_frames_equal_the_resampled_recording() {
        let dir = tempfile::tempdir().unwrap();
        let junk = ["{\"k\":\"camera\",\"t_ms\":5,\"name\":\"front\",\"jpeg\":\"!not base64\"}", "{\"k\":\"mystery\",\"t_ms\":5}", "{\"k\":\"state\",\"t_ms\":", ""];
        let recordings = [
            vec![
                Sample::Switch { t_ms: 0, operator_id: Some("u-asha".into()) },
                Sample::Resume { t_ms: 0 },
                camera(0, "wrist", 1),
                state(10, 1.0),
                // front's first image comes after the first frame: held back to it.
                camera(40, "front", 2),
                Sample::Action { t_ms: 45, values: vec![9.0] },
                state(50, 2.0),
                camera(49, "wrist", 3),
                Sample::Switch { t_ms: 60, operator_id: None },
                Sample::Switch { t_ms: 61, operator_id: Some("u-dana".into()) },
                state(100, 3.0),
                Sample::Pause { t_ms: 110 },
                camera(200, "front", 4),
                Sample::Resume { t_ms: 300 },
                Sample::Switch { t_ms: 310, operator_id: Some("u-tom".into()) },
                state(300, 4.0),
                camera(320, "side", 5),
                Sample::Action { t_ms: 330, values: vec![7.0, 8.0, 9.0] },
                state(390, 5.0),
            ],
            // Arrival order rules: the first state is taken in only once the
            // frames reach the camera's later time before it.
            vec![Sample::Resume { t_ms: 0 }, camera(500, "front", 1), state(10, 1.0), state(560, 2.0), Sample::Pause { t_ms: 600 }],
            // No state: no frames.
            vec![Sample::Resume { t_ms: 0 }, camera(0, "front", 1), Sample::Pause { t_ms: 90 }],
        ];
        for (n, samples) in recordings.iter().enumerate() {
            let path = record(dir.path(), &format!("{n}.jsonl"), samples, &junk);
            let expected = resample(&read_samples(&path).unwrap(), 20);
            let file = RecordingFile::open(&path, 20).unwrap();
            let plan = file.plan();
            assert_eq!((plan.len(), plan.duration_ms(), plan.state_dim(), plan.action_dim()), (expected.len(), expected.duration_ms, expected.state_dim(), expected.action_dim()), "recording {n}");
            assert_eq!(plan.cameras(), expected.cameras.keys().cloned().collect::<Vec<_>>(), "recording {n}");
            let frames: Vec<_> = file.frames().unwrap().collect::<io::Result<_>>().unwrap();
            assert_eq!(frames.len(), expected.len(), "recording {n}");
            let switches: Vec<(usize, Option<String>)> = frames.iter().enumerate().filter_map(|(i, f)| f.switch.clone().map(|s| (i, s))).collect();
            assert_eq!(switches, expected.switches, "recording {n}");
            for (i, frame) in frames.iter().enumerate() {
                assert_eq!((&frame.state, &frame.action), (&expected.states[i], &expected.actions[i]), "recording {n}, frame {i}");
                for (name, image) in plan.cameras().iter().zip(&frame.images) {
                    assert_eq!(&image[..], &expected.images[expected.cameras[name][i]][..], "recording {n}, frame {i}, camera {name}");
                }
            }
        }
        assert_eq!(RecordingFile::open(&dir.path().join("1.jsonl"), 20).unwrap().plan().len(), 3, "frames at 500, 550 and 600 only");
    }
}
