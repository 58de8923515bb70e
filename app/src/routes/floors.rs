//! `/admin/floors`: the org's link-health floors (region → PoP, rules D02
//! and W16) and its RTT ceilings per skill (rules A15, A16). A change
//! applies to the next dispatch decision and is audited.

use crate::components::ErrorNotice;
use crate::dispatch::{RttCeiling, DEFAULT_EVERY_S, DEFAULT_LIFTED_AFTER_S, DEFAULT_STEP_MS, MAX_LIFTED_AFTER_S, MAX_RTT_MS};
use crate::functions::{load_people, RemoveLinkFloor, RemoveRttCeiling, SetLinkFloor, SetRttCeiling};
use crate::models::LinkFloor;
use crate::forms::dispatch_on_submit;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_meta::Title;

#[component]
pub fn FloorsPage() -> impl IntoView {
    let set = ServerAction::<SetLinkFloor>::new();
    let remove = ServerAction::<RemoveLinkFloor>::new();
    let set_ceiling = ServerAction::<SetRttCeiling>::new();
    let remove_ceiling = ServerAction::<RemoveRttCeiling>::new();
    // One load for the page (floors, ceilings, and the skills a ceiling may
    // be for: those of the org's robots' certifications and any skill that
    // has one), again after any of the four changes.
    let page = crate::page_data::load(
        move || (set.version().get(), remove.version().get(), set_ceiling.version().get(), remove_ceiling.version().get()),
        |_| async {
            load_people().await.map(|p| {
                let mut skills = crate::rules::skills_of(&p.cert_options);
                skills.extend(p.ceilings.iter().map(|c| c.skill.clone()));
                skills.sort();
                skills.dedup();
                (p.floors, p.ceilings, skills)
            })
        },
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
                    match page.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok((rows, _, _)) => view! { <FloorTable rows set remove/> }.into_any(),
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
        <Ceilings page set=set_ceiling remove=remove_ceiling/>
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

/// The page as loaded: the floors, the ceilings, and the skills a ceiling may be for.
type FloorsPageData = crate::page_data::Loaded<Result<(Vec<LinkFloor>, Vec<RttCeiling>, Vec<String>), crate::error::AppError>>;

/// The ceiling form's fields, so a row's "Change" can fill them in.
#[derive(Clone, Copy)]
struct CeilingFields {
    skill: NodeRef<leptos::html::Select>,
    ceiling_ms: NodeRef<leptos::html::Input>,
    step_ms: NodeRef<leptos::html::Input>,
    every_s: NodeRef<leptos::html::Input>,
    lifted_after_s: NodeRef<leptos::html::Input>,
    /// The skill chosen, kept when the list reloads after a save.
    chosen: RwSignal<String>,
}

impl CeilingFields {
    /// Fills the form with `c` and puts the focus on its ceiling.
    fn fill(self, c: &RttCeiling) {
        self.chosen.set(c.skill.clone());
        if let Some(select) = self.skill.get_untracked() {
            select.set_value(&c.skill);
        }
        for (field, value) in [(self.ceiling_ms, c.ceiling_ms), (self.step_ms, c.step_ms), (self.every_s, c.every_s), (self.lifted_after_s, c.lifted_after_s)] {
            if let Some(input) = field.get_untracked() {
                input.set_value(&value.to_string());
            }
        }
        if let Some(input) = self.ceiling_ms.get_untracked() {
            let _ = input.focus();
        }
    }
}

/// Rules A15, A16: the org's RTT ceilings per skill, and a form to set one.
#[component]
fn Ceilings(page: FloorsPageData, set: ServerAction<SetRttCeiling>, remove: ServerAction<RemoveRttCeiling>) -> impl IntoView {
    let chosen = RwSignal::new(String::new());
    let fields = CeilingFields { skill: NodeRef::new(), ceiling_ms: NodeRef::new(), step_ms: NodeRef::new(), every_s: NodeRef::new(), lifted_after_s: NodeRef::new(), chosen };
    let save = dispatch_on_submit(set, |form| SetRttCeiling {
        skill: form.text("skill"),
        ceiling_ms: form.text("ceiling_ms"),
        step_ms: form.text("step_ms"),
        every_s: form.text("every_s"),
        lifted_after_s: form.text("lifted_after_s"),
    });
    view! {
        <section class="panel" aria-labelledby="ceilings-h" data-testid="ceilings-section">
            <h2 id="ceilings-h">"RTT ceilings"</h2>
            <p class="muted">"Operators further than the ceiling from the robot's PoP are not offered the skill's calls; while a call waits, its ceiling rises by the step every interval, and is lifted after the set time. Certification never relaxes."</p>
            <Transition fallback=|| view! { <p class="loading">"Loading ceilings…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok((_, rows, _)) if rows.is_empty() => view! { <p class="empty" data-testid="ceilings-empty">"No ceilings: every certified operator may be offered every call."</p> }.into_any(),
                        Ok((_, rows, _)) => view! { <CeilingTable rows remove fields/> }.into_any(),
                    }
                })}
            </Transition>
            {move || set.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            {move || remove.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            <h3>"Set a ceiling"</h3>
            <p class="muted">"Setting a skill that has a ceiling changes it."</p>
            <form method="post" action=SetRttCeiling::url() class="booking-form" data-testid="ceiling-form" on:submit=save>
                <label for="c-skill">"Skill"</label>
                <Transition fallback=|| view! { <span class="loading">"Loading skills…"</span> }>
                    {move || Suspend::new(async move {
                        let skills = page.await.map(|(_, _, skills)| skills).unwrap_or_default();
                        if skills.is_empty() {
                            // No robot asks for a certification yet: any skill, by name.
                            return view! { <input id="c-skill" name="skill" required maxlength="64"/> }.into_any();
                        }
                        let picked = chosen.get_untracked();
                        view! {
                            <select id="c-skill" name="skill" required node_ref=fields.skill on:change=move |ev| chosen.set(event_target_value(&ev))>
                                {skills.into_iter().map(|skill| {
                                    let selected = skill == picked;
                                    view! { <option value=skill.clone() selected=selected>{skill.clone()}</option> }
                                }).collect_view()}
                            </select>
                        }.into_any()
                    })}
                </Transition>
                <label for="c-ms">"Ceiling (ms)"</label>
                <input id="c-ms" name="ceiling_ms" type="number" min="1" max=MAX_RTT_MS.to_string() required node_ref=fields.ceiling_ms/>
                <label for="c-step">"Step (ms)"</label>
                <input id="c-step" name="step_ms" type="number" min="0" max=MAX_RTT_MS.to_string() required value=DEFAULT_STEP_MS.to_string() node_ref=fields.step_ms/>
                <label for="c-every">"Step every (s)"</label>
                <input id="c-every" name="every_s" type="number" min="1" required value=DEFAULT_EVERY_S.to_string() node_ref=fields.every_s/>
                <label for="c-lifted">"Lifted after (s)"</label>
                <input id="c-lifted" name="lifted_after_s" type="number" min="1" max=MAX_LIFTED_AFTER_S.to_string() required value=DEFAULT_LIFTED_AFTER_S.to_string() node_ref=fields.lifted_after_s/>
                <button type="submit" class="button primary" disabled=move || set.pending().get()>
                    {move || if set.pending().get() { "Saving…" } else { "Save ceiling" }}
                </button>
            </form>
        </section>
    }
}

#[component]
fn CeilingTable(rows: Vec<RttCeiling>, remove: ServerAction<RemoveRttCeiling>, fields: CeilingFields) -> impl IntoView {
    view! {
        <table class="grid" data-testid="ceilings">
            <thead>
                <tr>
                    <th>"Skill"</th><th class="num">"Ceiling (ms)"</th><th class="num">"Step (ms)"</th><th class="num">"Step every (s)"</th><th class="num">"Lifted after (s)"</th><th></th>
                </tr>
            </thead>
            <tbody>
                {rows.into_iter().map(|c| {
                    let change_label = format!("Change the {} ceiling", c.skill);
                    let remove_label = format!("Remove the {} ceiling", c.skill);
                    let skill = c.skill.clone();
                    let row = StoredValue::new(c.clone());
                    view! {
                        <tr data-skill=c.skill.clone()>
                            <td>{c.skill.clone()}</td>
                            <td class="num">{c.ceiling_ms}</td>
                            <td class="num">{c.step_ms}</td>
                            <td class="num">{c.every_s}</td>
                            <td class="num">{c.lifted_after_s}</td>
                            <td class="row-actions">
                                <button type="button" class="button subtle" aria-label=change_label
                                    on:click=move |_| row.with_value(|c| fields.fill(c))>
                                    "Change"
                                </button>
                                " "
                                <button type="button" class="button subtle danger" aria-label=remove_label disabled=move || remove.pending().get()
                                    on:click=move |_| { remove.dispatch(RemoveRttCeiling { skill: skill.clone() }); }>
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
