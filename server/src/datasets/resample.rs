//! A recording resampled to a dataset's frame rate: frame `i` holds the
//! latest robot state, operator action and camera image at `i / fps` of
//! recorded (ACTIVE) time. LeRobot checks that timestamps are exactly
//! `frame_index / fps`; the recording's own times are irregular, so each
//! frame samples and holds. Paused stretches are not part of the episode.

use crate::relay::recording::Sample;
use std::collections::BTreeMap;

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

fn fit(values: &[f32], dim: usize) -> Vec<f32> {
    let mut out: Vec<f32> = values.iter().copied().take(dim).collect();
    out.resize(dim, 0.0);
    out
}

fn time_of(sample: &Sample) -> i64 {
    match sample {
        Sample::State { t_ms, .. }
        | Sample::Action { t_ms, .. }
        | Sample::Camera { t_ms, .. }
        | Sample::Switch { t_ms, .. }
        | Sample::Pause { t_ms }
        | Sample::Resume { t_ms } => *t_ms,
    }
}

/// The recorded (ACTIVE) windows: from a resume (or the first sample) to
/// the next pause (or the last sample).
fn windows(samples: &[Sample]) -> Vec<(i64, i64)> {
    let mut windows = Vec::new();
    let mut open: Option<i64> = None;
    let mut last = i64::MIN;
    for sample in samples {
        let t = time_of(sample);
        last = last.max(t);
        match sample {
            Sample::Resume { .. } => open = open.or(Some(t)),
            Sample::Pause { .. } => {
                if let Some(start) = open.take() {
                    windows.push((start, t));
                }
            }
            Sample::State { .. } | Sample::Action { .. } | Sample::Camera { .. } => open = open.or(Some(t)),
            Sample::Switch { .. } => {}
        }
    }
    if let Some(start) = open {
        windows.push((start, last));
    }
    windows
}

/// Resamples a recording (samples in arrival order) to `fps`.
pub fn resample(samples: &[Sample], fps: u32) -> Frames {
    let fps = fps.max(1);
    let mut frames = Frames { fps, ..Frames::default() };
    let Some(state_dim) = samples.iter().find_map(|s| match s {
        Sample::State { joints, .. } => Some(joints.len()),
        _ => None,
    }) else {
        return frames;
    };
    let action_dim = samples.iter().find_map(|s| match s {
        Sample::Action { values, .. } => Some(values.len()),
        _ => None,
    });
    // Camera images, each stored once; per name, (time, image index) in order.
    let mut shots: BTreeMap<String, Vec<(i64, usize)>> = BTreeMap::new();
    for sample in samples {
        if let Sample::Camera { t_ms, name, jpeg } = sample {
            frames.images.push(jpeg.clone());
            shots.entry(name.clone()).or_default().push((*t_ms, frames.images.len() - 1));
        }
    }
    let step = 1000.0 / f64::from(fps);
    let (mut state, mut action, mut operator): (Option<&Vec<f32>>, Option<&Vec<f32>>, Option<Option<String>>) = (None, None, None);
    let mut cursor = 0;
    let mut shot_cursor: BTreeMap<&str, usize> = BTreeMap::new();
    for (start, end) in windows(samples) {
        let mut k = 0u64;
        loop {
            let t = start as f64 + k as f64 * step;
            if t > end as f64 {
                break;
            }
            // Everything that happened at or before `t`.
            while cursor < samples.len() && (time_of(&samples[cursor]) as f64) <= t {
                match &samples[cursor] {
                    Sample::State { joints, .. } => state = Some(joints),
                    Sample::Action { values, .. } => action = Some(values),
                    Sample::Switch { operator_id, .. } => operator = Some(operator_id.clone()),
                    _ => {}
                }
                cursor += 1;
            }
            k += 1;
            // No frame before the robot's first state.
            let Some(now_state) = state else { continue };
            if let Some(operator_id) = operator.take() {
                frames.switches.push((frames.states.len(), operator_id));
            }
            frames.states.push(fit(now_state, state_dim));
            // Before the first action the robot is held where it is.
            let dim = action_dim.unwrap_or(state_dim);
            frames.actions.push(fit(action.unwrap_or(now_state), dim));
            for (name, list) in &shots {
                let at = shot_cursor.entry(name).or_insert(0);
                while *at + 1 < list.len() && (list[*at + 1].0 as f64) <= t {
                    *at += 1;
                }
                frames.cameras.entry(name.clone()).or_default().push(list[*at].1);
            }
        }
        frames.duration_ms += end - start;
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
