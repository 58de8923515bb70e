//! The cockpit's teleop rules (issue: relay): which keys and gamepad
//! axes make which action, and the plot of the robot's joints over the
//! last seconds. Pure, so the browser and the tests share them.

/// Seconds of joint history the cockpit plots.
pub const PLOT_WINDOW_MS: i64 = 5_000;
/// Dimensions of an operator action: x, y, z, roll, pitch, yaw velocities.
pub const ACTION_DIM: usize = 6;

/// The action a key gives (unit velocity on one axis), if it is a drive key:
/// arrows or W/A/S/D move in the plane, PageUp/PageDown up and down,
/// `[`/`]` roll, `,`/`.` yaw. (P, C, E, H and X are the session's controls.)
pub fn key_action(key: &str) -> Option<[f32; ACTION_DIM]> {
    let mut action = [0.0; ACTION_DIM];
    let (axis, sign) = match key {
        "ArrowUp" | "w" | "W" => (0, 1.0),
        "ArrowDown" | "s" | "S" => (0, -1.0),
        "ArrowLeft" | "a" | "A" => (1, 1.0),
        "ArrowRight" | "d" | "D" => (1, -1.0),
        "PageUp" => (2, 1.0),
        "PageDown" => (2, -1.0),
        "[" => (3, -1.0),
        "]" => (3, 1.0),
        "," => (5, -1.0),
        "." => (5, 1.0),
        _ => return None,
    };
    action[axis] = sign;
    Some(action)
}

/// A stick moved less than this (of its full travel) is at rest.
pub const GAMEPAD_DEAD_ZONE: f64 = 0.2;

/// The action a gamepad's sticks give: left stick x/y, right stick z/yaw,
/// inside the dead zone nothing.
pub fn gamepad_action(axes: &[f64]) -> [f32; ACTION_DIM] {
    let axis = |i: usize| {
        let v = axes.get(i).copied().unwrap_or(0.0);
        if v.abs() > GAMEPAD_DEAD_ZONE { v as f32 } else { 0.0 }
    };
    // Screen y grows downwards: pushing a stick up is forward / up.
    [-axis(1), -axis(0), -axis(3), 0.0, 0.0, axis(2)]
}

/// One SVG path per joint over the samples `(t_ms, joints)` of the last
/// `PLOT_WINDOW_MS` before `now_ms`, scaled into `width` × `height` (all
/// joints share the vertical scale, so their values compare).
pub fn joint_paths(samples: &[(i64, Vec<f32>)], now_ms: i64, width: f32, height: f32) -> Vec<String> {
    let from = now_ms - PLOT_WINDOW_MS;
    let shown: Vec<&(i64, Vec<f32>)> = samples.iter().filter(|(t, _)| *t >= from && *t <= now_ms).collect();
    let joints = shown.iter().map(|(_, j)| j.len()).max().unwrap_or(0);
    let values = || shown.iter().flat_map(|(_, j)| j.iter().copied());
    let (low, high) = (values().fold(f32::INFINITY, f32::min), values().fold(f32::NEG_INFINITY, f32::max));
    if shown.is_empty() || !low.is_finite() {
        return Vec::new();
    }
    let span = if high - low > f32::EPSILON { high - low } else { 1.0 };
    (0..joints)
        .map(|joint| {
            let mut path = String::new();
            for (t, values) in &shown {
                let Some(v) = values.get(joint) else { continue };
                let x = (t - from) as f32 / PLOT_WINDOW_MS as f32 * width;
                let y = height - (v - low) / span * height;
                let (x, y) = (crate::rules::fixed(f64::from(x), 1), crate::rules::fixed(f64::from(y), 1));
                path.push_str(&format!("{}{x} {y}", if path.is_empty() { "M" } else { " L" }));
            }
            path
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drive_keys_give_unit_actions_and_control_keys_none() {
        assert_eq!(key_action("ArrowUp"), Some([1.0, 0.0, 0.0, 0.0, 0.0, 0.0]));
        assert_eq!(key_action("d"), Some([0.0, -1.0, 0.0, 0.0, 0.0, 0.0]));
        for control in ["p", "c", "e", "h", "x", "Enter"] {
            assert_eq!(key_action(control), None, "{control} is not a drive key");
        }
        assert_eq!(gamepad_action(&[0.05, -0.9, 0.0, 0.0]), [0.9, -0.0, -0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn the_plot_keeps_the_last_seconds_and_shares_one_scale() {
        let samples = vec![(0, vec![0.0, 5.0]), (4_000, vec![1.0, 10.0]), (9_000, vec![2.0, 0.0])];
        let paths = joint_paths(&samples, 9_000, 100.0, 50.0);
        assert_eq!(paths.len(), 2);
        // The sample at t=0 is older than 5 s: two points per joint.
        assert_eq!(paths[0], "M0.0 45.0 L100.0 40.0");
        assert_eq!(paths[1], "M0.0 0.0 L100.0 50.0");
        assert!(joint_paths(&[], 0, 100.0, 50.0).is_empty());
    }
}
