//! `/datasets`: the dataset browser (seed 001). Per environment (the
//! robot's site), its episodes — session, operator, duration, frames,
//! task — and the dataset's downloads in LeRobot v3.0 and v2.1. Admins see
//! all of the org's; a client the episodes of the sessions they booked.

use crate::components::{ErrorNotice, RequireMember};
use crate::datasets::{by_environment, download_href, Episode};
use crate::functions::load_datasets;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn DatasetsPage() -> impl IntoView {
    let episodes = crate::page_data::load(|| (), |_| load_datasets());
    view! {
        <Title text="Datasets"/>
        <RequireMember>
            <div class="toolbar">
                <h1>"Datasets"</h1>
                <button type="button" class="button subtle" on:click=move |_| episodes.refetch()>"Refresh"</button>
            </div>
            <p class="muted">"Every COMPLETED session that recorded frames is an episode in the dataset of its robot's environment, in LeRobot format (v3.0 for the current lerobot package, v2.1 for GR00T fine-tunes)."</p>
            <Transition fallback=|| view! { <p class="loading">"Loading datasets…"</p> }>
                {move || Suspend::new(async move {
                    match episodes.await {
                        Err(error) => view! { <ErrorNotice error/> }.into_any(),
                        Ok(list) if list.is_empty() => view! {
                            <p class="empty" data-testid="datasets-empty">"No episodes yet: a session recorded while ACTIVE becomes one when it is COMPLETED."</p>
                        }.into_any(),
                        Ok(list) => by_environment(list).into_iter().map(|(environment, episodes)| view! { <Environment environment episodes/> }).collect_view().into_any(),
                    }
                })}
            </Transition>
        </RequireMember>
    }
}

#[component]
fn Environment(environment: String, episodes: Vec<Episode>) -> impl IntoView {
    let frames: i64 = episodes.iter().map(|e| e.frames).sum();
    let count = episodes.len();
    view! {
        <section class="panel" data-testid="dataset">
            <div class="toolbar">
                <h2>{environment.clone()}</h2>
                <span class="muted">{format!("{count} episode(s) · {frames} frames")}</span>
                <a class="button" href=download_href(&environment, "v3.0") download rel="external" data-testid="download-v3">"LeRobot v3.0"</a>
                <a class="button subtle" href=download_href(&environment, "v2.1") download rel="external" data-testid="download-v21">"LeRobot v2.1"</a>
            </div>
            <table class="grid" data-testid="episodes">
                <thead><tr><th>"Episode"</th><th>"Session"</th><th>"Robot"</th><th>"Operator"</th><th>"Duration"</th><th>"Frames"</th><th>"Task"</th><th>"Cameras"</th><th>"Recorded"</th></tr></thead>
                <tbody>
                    {episodes.into_iter().map(|e| view! {
                        <tr>
                            <td>{e.episode_index}</td>
                            <td><a href=format!("/ops/sessions?s={}", e.session_id)>{e.session_id.clone()}</a></td>
                            <td>{e.robot_id}</td>
                            <td>{e.operator_name.unwrap_or_else(|| "—".into())}</td>
                            <td>{crate::rules::format_duration(e.duration_ms)}</td>
                            <td>{format!("{} @ {} fps", e.frames, e.fps)}</td>
                            <td>{e.task}</td>
                            <td>{if e.cameras.is_empty() { "—".to_string() } else { e.cameras.join(", ") }}</td>
                            <td>{crate::booking::utc_when(e.created_ms)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}
