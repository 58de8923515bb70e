//! The teleop relay's shared part (seed 000 "Session state versus the relay
//! data plane", rule W15): the messages of a session's channel, the camera
//! frame's binary layout, the per-session counts the relay publishes, and
//! whether a held session's frames flow or stalled.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An attached session with no robot frame for this long is stalled.
pub const STALL_AFTER_MS: i64 = 2_000;
/// The relay publishes its counts this often.
pub const STATS_EVERY_MS: i64 = 1_000;

/// A text message on a session's relay channel (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RelayMsg {
    /// Robot state, edge agent → cockpit: the joint vector and optional
    /// named values, stamped by the robot (Unix ms).
    State {
        t_ms: i64,
        joints: Vec<f32>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        fields: BTreeMap<String, f64>,
    },
    /// An operator action, cockpit → edge agent: the commanded vector.
    Action { t_ms: i64, values: Vec<f32> },
    /// The relay tells each side who else is on the channel: the edge
    /// agent, the operator's cockpits, and the admins watching (their names).
    Peers {
        robot: bool,
        cockpits: u32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        watching: Vec<String>,
    },
    /// The relay refused a message (the channel stays open).
    Refused { reason: String },
}

/// The binary form of a camera frame, edge agent → cockpit:
/// `CAM1`, the name's length (1 byte), the name (UTF-8), the robot's
/// timestamp (i64 little-endian Unix ms), then the JPEG bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CameraFrame {
    pub name: String,
    pub t_ms: i64,
    pub jpeg: Vec<u8>,
}

const CAMERA_MAGIC: &[u8; 4] = b"CAM1";
/// Longest camera name (it becomes `observation.images.<name>`).
pub const MAX_CAMERA_NAME: usize = 32;

impl CameraFrame {
    pub fn encode(&self) -> Vec<u8> {
        let name = &self.name.as_bytes()[..self.name.len().min(MAX_CAMERA_NAME)];
        let mut out = Vec::with_capacity(4 + 1 + name.len() + 8 + self.jpeg.len());
        out.extend_from_slice(CAMERA_MAGIC);
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.extend_from_slice(&self.t_ms.to_le_bytes());
        out.extend_from_slice(&self.jpeg);
        out
    }

    /// The frame in `bytes`, or `None` when they are not one.
    pub fn decode(bytes: &[u8]) -> Option<CameraFrame> {
        let rest = bytes.strip_prefix(CAMERA_MAGIC)?;
        let (&len, rest) = rest.split_first()?;
        let len = usize::from(len);
        if len == 0 || len > MAX_CAMERA_NAME || rest.len() < len + 8 {
            return None;
        }
        let name = std::str::from_utf8(&rest[..len]).ok()?;
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return None;
        }
        let t_ms = i64::from_le_bytes(rest[len..len + 8].try_into().ok()?);
        Some(CameraFrame { name: name.to_string(), t_ms, jpeg: rest[len + 8..].to_vec() })
    }
}

/// One direction of a channel, as counted by the relay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowStat {
    /// Frames per second over the last interval.
    pub fps: f32,
    pub bytes_per_s: u64,
    pub frames: u64,
    pub bytes: u64,
    /// Frames a slow reader was not sent (dropped, never queued without bound).
    pub dropped: u64,
    /// Frames refused for coming faster than the relay's rate caps (frames
    /// or bytes a second): neither forwarded nor recorded.
    #[serde(default)]
    pub over_rate: u64,
    /// Unix ms of the last frame in this direction.
    pub last_frame_ms: Option<i64>,
}

/// A session's relay channel, as the wallboard's relay panel shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayStat {
    pub session_id: String,
    pub robot_id: String,
    pub robot_connected: bool,
    pub cockpits: u32,
    /// Admins watching the session's live view (read-only joins).
    #[serde(default)]
    pub supervisors: u32,
    /// Robot → cockpit (state and camera frames).
    pub robot_frames: FlowStat,
    /// Cockpit → robot (actions).
    pub operator_frames: FlowStat,
    /// Since when the channel has existed (Unix ms).
    pub open_since_ms: i64,
    /// Samples not recorded because the recording reached its size cap.
    #[serde(default)]
    pub unrecorded: u64,
}

impl FlowStat {
    /// Two instances' counts of one direction (cluster mode): each counts
    /// the frames that entered through its own sockets and the ones its
    /// own slow readers missed, so the channel's counts are their sums.
    fn add(&mut self, other: &FlowStat) {
        self.fps += other.fps;
        self.bytes_per_s += other.bytes_per_s;
        self.frames += other.frames;
        self.bytes += other.bytes;
        self.dropped += other.dropped;
        self.over_rate += other.over_rate;
        self.last_frame_ms = self.last_frame_ms.max(other.last_frame_ms);
    }
}

/// The channels as the relay panel shows them, from the parts each
/// instance carries (cluster mode: a session's robot may be on one
/// instance and its cockpit on another): one row per session, in session
/// order, with the parts' counts added up.
pub fn merge_stats(parts: impl IntoIterator<Item = RelayStat>) -> Vec<RelayStat> {
    let mut sessions: BTreeMap<String, RelayStat> = BTreeMap::new();
    for part in parts {
        match sessions.get_mut(&part.session_id) {
            None => {
                sessions.insert(part.session_id.clone(), part);
            }
            Some(whole) => {
                whole.robot_connected |= part.robot_connected;
                whole.cockpits += part.cockpits;
                whole.supervisors += part.supervisors;
                whole.robot_frames.add(&part.robot_frames);
                whole.operator_frames.add(&part.operator_frames);
                whole.open_since_ms = whole.open_since_ms.min(part.open_since_ms);
                whole.unrecorded += part.unrecorded;
            }
        }
    }
    sessions.into_values().collect()
}

/// What the relay's limits held back on a channel, for the relay panel:
/// `None` when nothing was.
pub fn overflow_note(stat: &RelayStat) -> Option<String> {
    let over = stat.robot_frames.over_rate + stat.operator_frames.over_rate;
    let parts: Vec<String> = [(over, "over the rate cap"), (stat.unrecorded, "past the recording cap")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// Whether a held session's frames are moving.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelayHealth {
    /// A robot frame arrived within `STALL_AFTER_MS`.
    Flowing,
    /// Attached, but no robot frame for `STALL_AFTER_MS` (or none yet, that long after attaching).
    Stalled,
    /// Attached moments ago; the first frames are not due yet.
    Starting,
}

impl RelayHealth {
    pub fn label(self) -> &'static str {
        match self {
            RelayHealth::Flowing => "flowing",
            RelayHealth::Stalled => "stalled",
            RelayHealth::Starting => "starting",
        }
    }
}

/// Rule W15: a session attached since `attached_since_ms` whose relay
/// channel is `stat` (none: no channel) — flowing or stalled at `now_ms`.
pub fn relay_health(stat: Option<&RelayStat>, attached_since_ms: i64, now_ms: i64) -> RelayHealth {
    let last = stat.and_then(|s| s.robot_frames.last_frame_ms);
    match last {
        Some(at) if now_ms - at <= STALL_AFTER_MS => RelayHealth::Flowing,
        Some(_) => RelayHealth::Stalled,
        None if now_ms - attached_since_ms > STALL_AFTER_MS => RelayHealth::Stalled,
        None => RelayHealth::Starting,
    }
}

/// What a cockpit does once its relay socket has closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRelayClose {
    /// The relay let this cockpit go (the session ended or control moved):
    /// it stays closed for as long as the cockpit is open, even if a
    /// session record loaded before the end still says ACTIVE.
    Released,
    /// Anything else (a restart, a refused handshake, a dropped network):
    /// try again after this many seconds.
    RetryIn(u32),
}

/// The longest wait between a cockpit's tries to reach the relay.
pub const RELAY_MAX_WAIT_S: u32 = 15;

/// The relay closes with 1000 only when it lets a cockpit go; other
/// closes retry after `wait_s`, which doubles from one try to the next up
/// to [`RELAY_MAX_WAIT_S`] (`rules::doubled_wait_s`).
pub fn after_relay_close(close_code: u16, wait_s: u32) -> AfterRelayClose {
    match close_code {
        1000 => AfterRelayClose::Released,
        _ => AfterRelayClose::RetryIn(wait_s),
    }
}

/// The relay's counts as a live screen heard them pushed (rule W15): shown
/// over the loaded board's (pushed each second, they are newer) until the
/// screen may have missed one: its socket closed or was told to resync, or
/// no push came for two of the relay's seconds. The missed push may be the
/// last, empty one, when the last channel closed; so the next board to
/// load, read after the gap, replaces them, unless a push comes first.
/// (The server's clocks do not decide: the push's and the board's may be
/// two instances'. `heard_at_ms` is the screen's own.)
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeardCounts {
    pushed: Option<Vec<RelayStat>>,
    heard_at_ms: i64,
    doubted: bool,
}

impl HeardCounts {
    /// A push, heard at `now_ms` (the screen's clock).
    pub fn pushed(&mut self, stats: Vec<RelayStat>, now_ms: i64) {
        self.pushed = Some(stats);
        self.heard_at_ms = now_ms;
        self.doubted = false;
    }

    /// The socket closed, or was told to resync: pushes may have been missed.
    pub fn doubt(&mut self) {
        self.doubted = self.pushed.is_some();
    }

    /// A board landed at `now_ms` (the screen's clock); whether that
    /// changed what is shown.
    pub fn board_loaded(&mut self, now_ms: i64) -> bool {
        let silent = now_ms - self.heard_at_ms > 2 * STATS_EVERY_MS;
        if self.pushed.is_none() || !(self.doubted || silent) {
            return false;
        }
        self.pushed = None;
        self.doubted = false;
        true
    }

    pub fn shown<'a>(&'a self, board: &'a [RelayStat]) -> &'a [RelayStat] {
        self.pushed.as_deref().unwrap_or(board)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(last: Option<i64>) -> RelayStat {
        RelayStat {
            session_id: "s".into(),
            robot_id: "r".into(),
            robot_connected: true,
            cockpits: 1,
            supervisors: 0,
            robot_frames: FlowStat { last_frame_ms: last, ..FlowStat::default() },
            operator_frames: FlowStat::default(),
            open_since_ms: 0,
            unrecorded: 0,
        }
    }

    #[test]
    fn a_channel_carried_by_two_instances_is_one_row_with_their_counts_added() {
        let flow = |frames, dropped, last| FlowStat { fps: frames as f32, bytes_per_s: frames * 10, frames, bytes: frames * 10, dropped, over_rate: 1, last_frame_ms: last };
        let robot_side = RelayStat { robot_frames: flow(90, 0, Some(5_000)), operator_frames: flow(0, 2, None), cockpits: 0, open_since_ms: 100, unrecorded: 3, ..stat(None) };
        let cockpit_side = RelayStat {
            robot_connected: false,
            robot_frames: flow(0, 7, None),
            operator_frames: flow(30, 0, Some(4_000)),
            cockpits: 2,
            open_since_ms: 50,
            ..stat(None)
        };
        let other = RelayStat { session_id: "a".into(), ..stat(Some(1)) };
        let merged = merge_stats([robot_side, other.clone(), cockpit_side]);
        assert_eq!(merged.len(), 2, "one row per session");
        assert_eq!(merged[0], other, "in session order; a session on one instance is as it was");
        let whole = &merged[1];
        assert!(whole.robot_connected);
        assert_eq!(whole.cockpits, 2);
        assert_eq!((whole.robot_frames.frames, whole.robot_frames.dropped, whole.robot_frames.last_frame_ms), (90, 7, Some(5_000)));
        assert_eq!((whole.operator_frames.frames, whole.operator_frames.dropped, whole.operator_frames.last_frame_ms), (30, 2, Some(4_000)));
        assert_eq!((whole.robot_frames.over_rate, whole.robot_frames.fps, whole.robot_frames.bytes_per_s), (2, 90.0, 900));
        assert_eq!((whole.open_since_ms, whole.unrecorded), (50, 3));
    }

    #[test]
    fn w15_pushed_counts_stand_over_the_boards_until_a_gap_and_the_board_after_it() {
        let (board, newer) = (vec![stat(Some(1))], vec![stat(Some(2))]);
        let mut heard = HeardCounts::default();
        assert_eq!(heard.shown(&board), &board[..], "nothing pushed yet");
        heard.doubt();
        assert!(!heard.board_loaded(10_000), "nothing pushed, nothing to take back");
        heard.pushed(newer.clone(), 10_000);
        assert!(!heard.board_loaded(10_500), "a board reloaded for another change");
        assert_eq!(heard.shown(&board), &newer[..], "pushes stand over a reload's board");
        // The socket was away, and the last channel closed meanwhile (its
        // empty push missed): the board loaded after the gap says so.
        heard.doubt();
        assert_eq!(heard.shown(&board), &newer[..], "until the board after the gap lands");
        assert!(heard.board_loaded(10_600));
        assert_eq!(heard.shown(&[]), &[] as &[RelayStat]);
        // A push that comes before the board does is not doubted.
        heard.pushed(newer.clone(), 11_000);
        heard.doubt();
        heard.pushed(board.clone(), 11_100);
        assert!(!heard.board_loaded(11_200));
        assert_eq!(heard.shown(&newer), &board[..]);
        // The last push lost on the way with the socket up (nothing says
        // so): pushes stopped, and a board two seconds on replaces them.
        assert!(!heard.board_loaded(13_100), "two seconds exactly: still pushed");
        assert!(heard.board_loaded(13_101));
        assert_eq!(heard.shown(&newer), &newer[..]);
    }

    #[test]
    fn s09_the_panel_names_what_the_relay_limits_held_back() {
        let mut held = stat(Some(0));
        assert_eq!(overflow_note(&held), None, "nothing held back: nothing said");
        held.robot_frames.over_rate = 3;
        held.operator_frames.over_rate = 2;
        assert_eq!(overflow_note(&held).as_deref(), Some("5 over the rate cap"));
        held.unrecorded = 40;
        assert_eq!(overflow_note(&held).as_deref(), Some("5 over the rate cap · 40 past the recording cap"));
    }

    #[test]
    fn w15_a_held_session_without_robot_frames_for_two_seconds_is_stalled() {
        assert_eq!(relay_health(Some(&stat(Some(10_000))), 0, 11_000), RelayHealth::Flowing);
        assert_eq!(relay_health(Some(&stat(Some(10_000))), 0, 12_000), RelayHealth::Flowing, "2 s exactly still flows");
        assert_eq!(relay_health(Some(&stat(Some(10_000))), 0, 12_001), RelayHealth::Stalled);
        assert_eq!(relay_health(None, 10_000, 11_000), RelayHealth::Starting);
        assert_eq!(relay_health(None, 10_000, 12_001), RelayHealth::Stalled, "no channel at all");
        assert_eq!(relay_health(Some(&stat(None)), 10_000, 13_000), RelayHealth::Stalled, "a channel but no frame");
    }

    #[test]
    fn camera_frames_round_trip_and_garbage_is_refused() {
        let frame = CameraFrame { name: "wrist".into(), t_ms: 1_764_000_000_123, jpeg: vec![0xFF, 0xD8, 1, 2, 3] };
        assert_eq!(CameraFrame::decode(&frame.encode()), Some(frame));
        assert_eq!(CameraFrame::decode(b"CAM1"), None);
        assert_eq!(CameraFrame::decode(b"JPEG...."), None);
        let mut bad_name = CameraFrame { name: "a b".into(), t_ms: 0, jpeg: vec![] }.encode();
        assert_eq!(CameraFrame::decode(&bad_name), None);
        bad_name[4] = 200;
        assert_eq!(CameraFrame::decode(&bad_name), None);
    }

    #[test]
    fn relay_messages_are_tagged_json() {
        let state: RelayMsg = serde_json::from_str(r#"{"type":"state","t_ms":5,"joints":[0.1,0.2]}"#).unwrap();
        assert_eq!(state, RelayMsg::State { t_ms: 5, joints: vec![0.1, 0.2], fields: BTreeMap::new() });
        let action = serde_json::to_string(&RelayMsg::Action { t_ms: 7, values: vec![1.0] }).unwrap();
        assert_eq!(action, r#"{"type":"action","t_ms":7,"values":[1.0]}"#);
    }

    #[test]
    fn a_normal_close_releases_the_cockpit_and_any_other_close_retries_with_a_growing_wait() {
        assert_eq!(after_relay_close(1000, 1), AfterRelayClose::Released);
        assert_eq!(after_relay_close(1000, 8), AfterRelayClose::Released);
        // 1006: the handshake was refused (409 for an ended session) or the server went away.
        assert_eq!(after_relay_close(1006, 1), AfterRelayClose::RetryIn(1));
        assert_eq!(after_relay_close(1011, 4), AfterRelayClose::RetryIn(4));
        let waits: Vec<u32> = std::iter::successors(Some(1), |w| Some(crate::rules::doubled_wait_s(*w, RELAY_MAX_WAIT_S))).take(6).collect();
        assert_eq!(waits, [1, 2, 4, 8, 15, 15]);
    }
}
