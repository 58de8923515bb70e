//! The cockpit's view of the data plane: the robot's joints over the last
//! seconds, its camera, and whether the relay carries frames.

use crate::console::relay::CockpitRelay;
use crate::teleop::joint_paths;
use leptos::prelude::*;

const PLOT_W: f32 = 480.0;
const PLOT_H: f32 = 140.0;
/// One colour per joint, repeating.
const JOINT_COLOURS: [&str; 6] = ["#58a6ff", "#3fb950", "#d29922", "#f0883e", "#bc8cff", "#f85149"];

#[component]
pub fn TeleopPanel(now_ms: RwSignal<i64>) -> impl IntoView {
    let relay = expect_context::<CockpitRelay>();
    let paths = move || {
        let now = now_ms.get().max(relay.joints.with(|j| j.last().map_or(0, |(t, _)| *t)));
        relay.joints.with(|samples| joint_paths(samples, now, PLOT_W, PLOT_H))
    };
    let status = move || match (relay.connected.get(), relay.robot_connected.get()) {
        (false, _) => ("tag tone-muted", "relay: connecting"),
        (true, false) => ("tag tone-warn", "robot not on the relay"),
        (true, true) => ("tag tone-ok", "robot connected"),
    };
    view! {
        <section class="panel teleop" aria-labelledby="teleop-h">
            <div class="toolbar">
                <h2 id="teleop-h">"Robot"</h2>
                <span class=move || status().0 data-testid="relay-status">{move || status().1}</span>
            </div>
            <div class="teleop-views">
                <figure class="camera">
                    {move || match relay.camera.get() {
                        Some((url, name)) => view! {
                            <img src=url alt=format!("Camera {name}") data-testid="camera"/>
                            <figcaption>{name}</figcaption>
                        }.into_any(),
                        None => view! { <p class="empty">"No camera frames yet."</p> }.into_any(),
                    }}
                </figure>
                <figure class="joints">
                    <svg viewBox=format!("0 0 {PLOT_W} {PLOT_H}") role="img" aria-label="Joint values over the last 5 seconds" data-testid="joint-plot">
                        {move || paths().into_iter().enumerate().map(|(i, d)| view! {
                            <path d=d fill="none" stroke=JOINT_COLOURS[i % JOINT_COLOURS.len()] stroke-width="1.5"/>
                        }).collect_view()}
                    </svg>
                    <figcaption>{move || {
                        let latest = relay.joints.with(|j| j.last().map(|(_, v)| v.iter().map(|x| crate::rules::fixed(f64::from(*x), 2)).collect::<Vec<_>>().join(" · ")));
                        latest.map_or("No robot state yet.".to_string(), |v| format!("joints: {v}"))
                    }}</figcaption>
                </figure>
            </div>
            {move || {
                let watching = relay.watching.get();
                (!watching.is_empty()).then(|| {
                    let who = crate::rules::name_list(&watching);
                    let verb = if watching.len() == 1 { "is" } else { "are" };
                    view! { <p class="tag tone-muted" data-testid="watching">{format!("{who} {verb} watching")}</p> }
                })
            }}
            {move || relay.refused.get().map(|reason| view! { <p class="notice-line" role="status">{reason}</p> })}
        </section>
    }
}
