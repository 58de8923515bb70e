//! A recording resampled to a dataset's frame rate: frame `i` holds the
//! latest robot state, operator action and camera image at `i / fps` of
//! recorded (ACTIVE) time. LeRobot checks that timestamps are exactly
//! `frame_index / fps`; the recording's own times are irregular, so each
//! frame samples and holds. Paused stretches are not part of the episode.
//!
//! One rule, two ways in: a [`Plan`] is what a first pass over the samples
//! learns (the ACTIVE windows, the widths, the cameras, the frame count), and
//! a [`Stepper`] walks the frames in order from samples given one at a
//! time, holding only the latest of each. [`resample`] drives both over
//! samples in memory; `stream` drives them over a recording's file, so an
//! episode of any size is exported in constant memory (finding 8).

use crate::relay::recording::Sample;
use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::iter::Peekable;

/// An episode's frames, ready to be written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frames {
    pub fps: u32,
    pub states: Vec<Vec<f32>>,
    pub actions: Vec<Vec<f32>>,
    /// Per camera, per frame: an index into `images`.
    pub cameras: BTreeMap<String, Vec<usize>>,
    pub images: Vec<Vec<u8>>,
    /// Recorded (ACTIVE) time, ms.
    pub duration_ms: i64,
    /// Who was in control from which frame on (rule L08 in the record).
    pub switches: Vec<(usize, Option<String>)>,
}

impl Frames {
    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    pub fn state_dim(&self) -> usize {
        self.states.first().map_or(0, Vec::len)
    }

    pub fn action_dim(&self) -> usize {
        self.actions.first().map_or(0, Vec::len)
    }
}

/// One frame as the [`Stepper`] gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame<I> {
    pub state: Vec<f32>,
    pub action: Vec<f32>,
    /// Each camera's latest image, in the plan's camera order (by name).
    pub images: Vec<I>,
    /// Who took control since the frame before, if anyone did.
    pub switch: Option<Option<String>>,
}

fn fit(values: &[f32], dim: usize) -> Vec<f32> {
    let mut out: Vec<f32> = values.iter().copied().take(dim).collect();
    out.resize(dim, 0.0);
    out
}

pub(crate) fn time_of(sample: &Sample) -> i64 {
    match sample {
        Sample::State { t_ms, .. }
        | Sample::Action { t_ms, .. }
        | Sample::Camera { t_ms, .. }
        | Sample::Switch { t_ms, .. }
        | Sample::Pause { t_ms }
        | Sample::Resume { t_ms } => *t_ms,
    }
}

/// What a first pass over a recording learns, a sample at a time: enough
/// to describe the episode and to step through its frames, none of its data.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    fps: u32,
    /// The recorded (ACTIVE) windows: from a resume (or the first sample)
    /// to the next pause (or the last sample).
    windows: Vec<(i64, i64)>,
    /// Widths of the first state and the first action.
    state_dim: Option<usize>,
    action_dim: Option<usize>,
    /// Every camera that sent an image, by name.
    cameras: Vec<String>,
    frames: usize,
}

/// Builds a [`Plan`] from samples in arrival order.
pub(crate) struct Planner {
    fps: u32,
    windows: Vec<(i64, i64)>,
    open: Option<i64>,
    state_dim: Option<usize>,
    action_dim: Option<usize>,
    cameras: BTreeSet<String>,
    /// The latest time so far (a window open at the end closes there),
    /// and what it was when the first state came.
    latest: i64,
    first_state_at: Option<i64>,
}

impl Planner {
    pub(crate) fn new(fps: u32) -> Planner {
        Planner {
            fps: fps.max(1),
            windows: Vec::new(),
            open: None,
            state_dim: None,
            action_dim: None,
            cameras: BTreeSet::new(),
            latest: i64::MIN,
            first_state_at: None,
        }
    }

    pub(crate) fn add(&mut self, sample: &Sample) {
        let t = time_of(sample);
        self.latest = self.latest.max(t);
        match sample {
            Sample::Resume { .. } => self.open = self.open.or(Some(t)),
            Sample::Pause { .. } => {
                if let Some(start) = self.open.take() {
                    self.windows.push((start, t));
                }
            }
            Sample::State { joints, .. } => {
                self.open = self.open.or(Some(t));
                self.state_dim = self.state_dim.or(Some(joints.len()));
                self.first_state_at = self.first_state_at.or(Some(self.latest));
            }
            Sample::Action { values, .. } => {
                self.open = self.open.or(Some(t));
                self.action_dim = self.action_dim.or(Some(values.len()));
            }
            Sample::Camera { name, .. } => {
                self.open = self.open.or(Some(t));
                if !self.cameras.contains(name) {
                    self.cameras.insert(name.clone());
                }
            }
            Sample::Switch { .. } => {}
        }
    }

    pub(crate) fn finish(mut self) -> Plan {
        if let Some(start) = self.open {
            self.windows.push((start, self.latest));
        }
        let mut plan = Plan {
            fps: self.fps,
            windows: self.windows,
            state_dim: self.state_dim,
            action_dim: self.action_dim,
            cameras: self.cameras.into_iter().collect(),
            frames: 0,
        };
        plan.frames = plan.count(self.first_state_at);
        plan
    }
}

impl Plan {
    /// The plan of samples in memory.
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a Sample>, fps: u32) -> Plan {
        let mut planner = Planner::new(fps);
        samples.into_iter().for_each(|s| planner.add(s));
        planner.finish()
    }

    /// How many frames a [`Stepper`] gives, counted without the samples. It
    /// takes samples in arrival order while their time is at or before the
    /// frame's, so it has the first state once the frame times have reached
    /// `first_state_at` (the latest time of any sample up to and including
    /// that state), and from then on gives every frame.
    fn count(&self, first_state_at: Option<i64>) -> usize {
        let Some(ready) = first_state_at else { return 0 };
        let mut reached = f64::NEG_INFINITY;
        self.clock()
            .filter(|&t| {
                reached = reached.max(t);
                ready as f64 <= reached
            })
            .count()
    }

    fn clock(&self) -> Clock {
        Clock { windows: self.windows.clone(), step: 1000.0 / f64::from(self.fps), window: 0, k: 0 }
    }

    pub fn fps(&self) -> u32 {
        self.fps
    }

    /// Frames in the episode.
    pub fn len(&self) -> usize {
        self.frames
    }

    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// Recorded (ACTIVE) time, ms (none without a state: no episode).
    pub fn duration_ms(&self) -> i64 {
        match self.state_dim {
            Some(_) => self.windows.iter().map(|(start, end)| end - start).sum(),
            None => 0,
        }
    }

    /// Width of a frame's state (0 without frames).
    pub fn state_dim(&self) -> usize {
        if self.is_empty() { 0 } else { self.state_dim.unwrap_or(0) }
    }

    /// Width of a frame's action: the first action's, or before any the
    /// state's (the robot is held where it is); 0 without frames.
    pub fn action_dim(&self) -> usize {
        if self.is_empty() { 0 } else { self.action_dim.or(self.state_dim).unwrap_or(0) }
    }

    /// The cameras the frames carry, by name (none without frames).
    pub fn cameras(&self) -> &[String] {
        if self.is_empty() { &[] } else { &self.cameras }
    }
}

/// The frames' times: every `1000 / fps` ms of each window, its end included.
struct Clock {
    windows: Vec<(i64, i64)>,
    step: f64,
    window: usize,
    k: u64,
}

impl Iterator for Clock {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        loop {
            let &(start, end) = self.windows.get(self.window)?;
            let t = start as f64 + self.k as f64 * self.step;
            if t > end as f64 {
                (self.window, self.k) = (self.window + 1, 0);
                continue;
            }
            self.k += 1;
            return Some(t);
        }
    }
}

/// Takes `source`'s next item if it happened at or before `t` (or fails with its error).
fn next_by<T>(source: &mut Peekable<impl Iterator<Item = io::Result<T>>>, t: f64, time: impl Fn(&T) -> i64) -> io::Result<Option<T>> {
    match source.peek() {
        Some(Ok(item)) if time(item) as f64 > t => Ok(None),
        _ => source.next().transpose(),
    }
}

/// Walks a recording's frames in order from its samples (`M`, in arrival
/// order) and each camera's images (`C`, in arrival order, as (time,
/// image), where `I` is how an image is referred to), holding only the
/// latest state, action and operator, and per camera the image shown and
/// the next one.
pub struct Stepper<M: Iterator, C: Iterator, I> {
    clock: Clock,
    state_dim: usize,
    action_dim: usize,
    samples: Peekable<M>,
    /// Per camera (the plan's, by name): the image shown now and the rest.
    cameras: Vec<(I, Peekable<C>)>,
    state: Option<Vec<f32>>,
    action: Option<Vec<f32>>,
    operator: Option<Option<String>>,
}

impl<S, M, C, I> Stepper<M, C, I>
where
    S: Borrow<Sample>,
    M: Iterator<Item = io::Result<S>>,
    C: Iterator<Item = io::Result<(i64, I)>>,
    I: Clone,
{
    /// `camera(name)` gives the images of each of the plan's cameras.
    pub fn new(plan: &Plan, samples: M, mut camera: impl FnMut(&str) -> io::Result<C>) -> io::Result<Self> {
        let mut cameras = Vec::with_capacity(plan.cameras.len());
        for name in &plan.cameras {
            let mut images = camera(name)?.peekable();
            // Until a camera's first image time, frames show its first image.
            let Some((_, first)) = images.next().transpose()? else {
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("camera {name} has no image (the recording changed?)")));
            };
            cameras.push((first, images));
        }
        let state_dim = plan.state_dim.unwrap_or(0);
        Ok(Stepper {
            clock: plan.clock(),
            state_dim,
            action_dim: plan.action_dim.unwrap_or(state_dim),
            samples: samples.peekable(),
            cameras,
            state: None,
            action: None,
            operator: None,
        })
    }

    fn step(&mut self) -> io::Result<Option<Frame<I>>> {
        for t in self.clock.by_ref() {
            // Everything that happened at or before `t`.
            while let Some(sample) = next_by(&mut self.samples, t, |s| time_of(s.borrow()))? {
                match sample.borrow() {
                    Sample::State { joints, .. } => self.state = Some(joints.clone()),
                    Sample::Action { values, .. } => self.action = Some(values.clone()),
                    Sample::Switch { operator_id, .. } => self.operator = Some(operator_id.clone()),
                    _ => {}
                }
            }
            // No frame before the robot's first state.
            let Some(state) = &self.state else { continue };
            let mut images = Vec::with_capacity(self.cameras.len());
            for (now, rest) in &mut self.cameras {
                while let Some((_, image)) = next_by(rest, t, |(time, _)| *time)? {
                    *now = image;
                }
                images.push(now.clone());
            }
            // Before the first action the robot is held where it is.
            let action = fit(self.action.as_deref().unwrap_or(state), self.action_dim);
            return Ok(Some(Frame { state: fit(state, self.state_dim), action, images, switch: self.operator.take() }));
        }
        Ok(None)
    }
}

impl<S, M, C, I> Iterator for Stepper<M, C, I>
where
    S: Borrow<Sample>,
    M: Iterator<Item = io::Result<S>>,
    C: Iterator<Item = io::Result<(i64, I)>>,
    I: Clone,
{
    type Item = io::Result<Frame<I>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}

/// Resamples a recording (samples in arrival order) to `fps`, in memory.
pub fn resample(samples: &[Sample], fps: u32) -> Frames {
    let plan = Plan::of(samples, fps);
    let mut frames = Frames { fps: plan.fps, ..Frames::default() };
    if plan.state_dim.is_none() {
        return frames;
    }
    frames.duration_ms = plan.duration_ms();
    // Camera images, each stored once; per name, (time, image index) in order.
    let mut shots: BTreeMap<&str, Vec<(i64, usize)>> = BTreeMap::new();
    for sample in samples {
        if let Sample::Camera { t_ms, name, jpeg } = sample {
            frames.images.push(jpeg.clone());
            shots.entry(name).or_default().push((*t_ms, frames.images.len() - 1));
        }
    }
    let camera = |name: &str| Ok(shots[name].clone().into_iter().map(Ok));
    let stepper = Stepper::new(&plan, samples.iter().map(Ok), camera).expect("every planned camera has an image");
    for frame in stepper {
        let frame = frame.expect("samples in memory are read without error");
        if let Some(operator_id) = frame.switch {
            frames.switches.push((frames.len(), operator_id));
        }
        frames.states.push(frame.state);
        frames.actions.push(frame.action);
        for (name, image) in plan.cameras.iter().zip(frame.images) {
            frames.cameras.entry(name.clone()).or_default().push(image);
        }
    }
    frames
}

/// Width and height of a baseline or progressive JPEG, from its SOF marker.
pub fn jpeg_size(jpeg: &[u8]) -> Option<(u32, u32)> {
    if jpeg.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut at = 2;
    while at + 4 <= jpeg.len() {
        if jpeg[at] != 0xFF {
            return None;
        }
        let marker = jpeg[at + 1];
        let length = usize::from(u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]));
        let is_sof = (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof && at + 9 <= jpeg.len() {
            let height = u16::from_be_bytes([jpeg[at + 5], jpeg[at + 6]]);
            let width = u16::from_be_bytes([jpeg[at + 7], jpeg[at + 8]]);
            return Some((u32::from(width), u32::from(height)));
        }
        at += 2 + length;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(t: i64, v: f32) -> Sample {
        Sample::State { t_ms: t, joints: vec![v, v], fields: Default::default() }
    }

    #[test]
    fn l12_frames_sample_and_hold_at_the_dataset_rate_and_skip_paused_time() {
        let samples = vec![
            Sample::Resume { t_ms: 1_000 },
            state(1_000, 1.0),
            Sample::Action { t_ms: 1_040, values: vec![9.0] },
            state(1_090, 2.0),
            Sample::Pause { t_ms: 1_100 },
            // Nothing is recorded while paused; the gap is not in the episode.
            Sample::Resume { t_ms: 5_000 },
            state(5_000, 3.0),
            state(5_050, 4.0),
        ];
        let frames = resample(&samples, 20); // a frame every 50 ms
        // 1000, 1050, 1100 | 5000, 5050
        assert_eq!(frames.len(), 5);
        let firsts: Vec<f32> = frames.states.iter().map(|s| s[0]).collect();
        assert_eq!(firsts, vec![1.0, 1.0, 2.0, 3.0, 4.0]);
        // Before the first action: the state (held), fitted to the action's width.
        assert_eq!(frames.actions[0], vec![1.0]);
        assert_eq!(frames.actions[1], vec![9.0]);
        assert_eq!(frames.duration_ms, 100 + 50);
    }

    #[test]
    fn cameras_hold_their_latest_image_and_switches_are_kept() {
        let samples = vec![
            state(0, 0.0),
            Sample::Camera { t_ms: 0, name: "front".into(), jpeg: vec![1] },
            Sample::Switch { t_ms: 60, operator_id: Some("u-tom".into()) },
            Sample::Camera { t_ms: 90, name: "front".into(), jpeg: vec![2] },
            state(100, 1.0),
        ];
        let frames = resample(&samples, 20);
        assert_eq!(frames.len(), 3);
        let images: Vec<u8> = frames.cameras["front"].iter().map(|&i| frames.images[i][0]).collect();
        assert_eq!(images, vec![1, 1, 2]);
        assert_eq!(frames.switches, vec![(2, Some("u-tom".to_string()))]);
        assert!(resample(&[Sample::Resume { t_ms: 0 }], 30).is_empty(), "no state, no frames");
    }

    #[test]
    fn jpeg_dimensions_come_from_the_frame_header() {
        // SOI, APP0 (length 4), SOF0 with height 48, width 64.
        let jpeg = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x30, 0x00, 0x40, 0x03];
        assert_eq!(jpeg_size(&jpeg), Some((64, 48)));
        assert_eq!(jpeg_size(b"not a jpeg"), None);
    }
}
