//! `/admin/floors`: the org's link-health floors (region → PoP, rules D02
//! and W16). A change applies to the next dispatch decision and is audited.

use crate::components::ErrorNotice;
use crate::functions::{load_people, RemoveLinkFloor, SetLinkFloor};
use crate::models::LinkFloor;
use crate::forms::dispatch_on_submit;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_meta::Title;

#[component]
pub fn FloorsPage() -> impl IntoView {
    let set = ServerAction::<SetLinkFloor>::new();
    let remove = ServerAction::<RemoveLinkFloor>::new();
    let floors = crate::page_data::load(
        move || (set.version().get(), remove.version().get()),
        |_| async { load_people().await.map(|p| p.floors) },
    );
    view! {
        <Title text="Link floors"/>
        <div class="toolbar">
            <h1>"Link floors"</h1>
            <a class="button subtle" href="/admin/people">"People"</a>
        </div>
        <section class="panel" aria-labelledby="floors-h">
            <h2 id="floors-h">"Region → PoP propagation floors"</h2>
            <p class="muted">"The ACD ranks by max(measured RTT, floor): a floor is the least a path can take. Changes apply to the next decision."</p>
            <Transition fallback=|| view! { <p class="loading">"Loading floors…"</p> }>
                {move || Suspend::new(async move {
                    match floors.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(rows) => view! { <FloorTable rows set remove/> }.into_any(),
                    }
                })}
            </Transition>
            {move || set.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            {move || remove.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            <h3>"Add a path"</h3>
            <form method="post" action=SetLinkFloor::url() class="booking-form" data-testid="floor-add" on:submit=save_floor(set)>
                <label for="f-region">"Operator region"</label>
                <input id="f-region" name="region" required maxlength="32"/>
                <label for="f-pop">"Robot PoP"</label>
                <input id="f-pop" name="pop" required maxlength="32"/>
                <label for="f-ms">"Floor (ms)"</label>
                <input id="f-ms" name="floor_ms" type="number" min="0" max="10000" required/>
                <label for="f-note">"Note"</label>
                <input id="f-note" name="note" maxlength="120"/>
                <button type="submit" class="button primary">"Add"</button>
            </form>
        </section>
    }
}

/// Adding a path and saving one post the same fields.
fn save_floor(set: ServerAction<SetLinkFloor>) -> impl Fn(leptos::ev::SubmitEvent) + Copy + 'static {
    dispatch_on_submit(set, |form| SetLinkFloor { region: form.text("region"), pop: form.text("pop"), floor_ms: form.text("floor_ms"), note: form.optional("note") })
}

#[component]
fn FloorTable(rows: Vec<LinkFloor>, set: ServerAction<SetLinkFloor>, remove: ServerAction<RemoveLinkFloor>) -> impl IntoView {
    view! {
        <table class="grid" data-testid="floors">
            <thead><tr><th>"Path"</th><th>"Floor (ms) and note"</th><th></th></tr></thead>
            <tbody>
                {rows.into_iter().map(|f| {
                    let form_id = format!("floor-{}-{}", f.region, f.pop);
                    let (ms_id, note_id) = (format!("{form_id}-ms"), format!("{form_id}-note"));
                    let note = f.note.clone().unwrap_or_default();
                    let (region, pop) = (StoredValue::new(f.region.clone()), StoredValue::new(f.pop.clone()));
                    view! {
                        <tr>
                            <td>{f.region.clone()}" → "{f.pop.clone()}</td>
                            <td>
                                <form method="post" action=SetLinkFloor::url() id=form_id class="inline-form" on:submit=save_floor(set)>
                                    <input type="hidden" name="region" value=f.region.clone()/>
                                    <input type="hidden" name="pop" value=f.pop.clone()/>
                                    <label class="visually-hidden" for=ms_id.clone()>"Floor (ms)"</label>
                                    <input id=ms_id name="floor_ms" type="number" min="0" max="10000" required value=f.floor_ms.to_string()/>
                                    <label class="visually-hidden" for=note_id.clone()>"Note"</label>
                                    <input id=note_id name="note" maxlength="120" value=note/>
                                    <button type="submit" class="button subtle">"Save"</button>
                                </form>
                            </td>
                            <td>
                                <button type="button" class="button subtle danger" disabled=move || remove.pending().get()
                                    on:click=move |_| { remove.dispatch(RemoveLinkFloor { region: region.get_value(), pop: pop.get_value() }); }>
                                    "Remove"
                                </button>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}
