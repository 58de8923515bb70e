//! One member's profile, edited by an admin (`/admin/people?member=<id>`):
//! display name, external agent id, region (one of the org's), the
//! certifications (each with the skill it gives, rule A08) and whether the
//! operator is active. The next dispatch decision uses the change.

use super::people_parts::{CertificationChoices, PeopleList};
use crate::components::ErrorNotice;
use crate::deferred::PanelBuilt;
use crate::functions::EditMember;
use crate::models::Role;
use crate::people::{Member, PeopleAdmin};
use crate::forms::dispatch_on_submit;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos::wasm_split::wasm_split;

/// The profile of the member `member_id`, above the people list: a
/// deferred panel (crate::deferred). Saving reloads the list.
#[wasm_split(member_editor, wasm_split_path = ::leptos::wasm_split, fallible)]
pub(super) fn member_editor(member_id: String, people: PeopleList) -> PanelBuilt {
    let edit = ServerAction::<EditMember>::new();
    crate::page_data::reload_after(move || edit.version().get(), people);
    let member_id = StoredValue::new(member_id);
    Ok(view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let admin = people.await.ok()?;
                let member = member_id.with_value(|id| admin.members.iter().find(|m| m.user_id == *id).cloned());
                Some(match member {
                    Some(member) => view! { <MemberEdit member admin edit/> }.into_any(),
                    None => view! { <p class="error" role="alert">"That member is not in this organisation."</p> }.into_any(),
                })
            })}
        </Transition>
    }
    .into_any())
}

#[component]
fn MemberEdit(member: Member, admin: PeopleAdmin, edit: ServerAction<EditMember>) -> impl IntoView {
    let p = member.person;
    let operates = p.role != Role::Client;
    let region = p.region.clone().unwrap_or_default();
    view! {
        <section class="panel detail" aria-labelledby="member-h">
            <div class="toolbar">
                <h2 id="member-h">{p.display_name.clone()}" · "{p.email.clone()}</h2>
                <a class="button subtle" href="/admin/people">"Close"</a>
            </div>
            <form method="post" action=EditMember::url() class="booking-form" data-testid="member-edit" on:submit=dispatch_on_submit(edit, |form| EditMember { user_id: form.text("user_id"), display_name: form.text("display_name"), external_id: form.optional("external_id"), region: form.optional("region"), certifications: form.list("certifications"), active: form.optional("active") })>
                <input type="hidden" name="user_id" value=member.user_id.clone()/>
                <label for="m-name">"Display name"</label>
                <input id="m-name" name="display_name" required maxlength="80" value=p.display_name.clone()/>
                <label for="m-ext">"External agent id"</label>
                <input id="m-ext" name="external_id" maxlength="64" value=p.external_id.clone().unwrap_or_default()/>
                {operates.then(|| view! {
                    <label for="m-region">"Region"</label>
                    <select id="m-region" name="region">
                        {admin.regions.iter().map(|r| view! { <option value=r.clone() selected=*r == region>{r.clone()}</option> }).collect_view()}
                    </select>
                    <span></span>
                    <CertificationChoices options=admin.cert_options.clone() held=p.certifications.clone() prefix="m"/>
                    <span></span>
                    <label for="m-active" class="check">
                        <input type="checkbox" id="m-active" name="active" value="on" checked=member.active/>
                        "Active (offered calls)"
                    </label>
                })}
                {(!operates).then(|| view! { <input type="hidden" name="active" value="on"/> })}
                <button type="submit" class="button primary" data-testid="member-save" disabled=move || edit.pending().get()>"Save"</button>
            </form>
            {move || match edit.value().get() {
                Some(Ok(())) => Some(view! { <p class="notice-line" role="status">"Saved: the next dispatch decision uses it."</p> }.into_any()),
                Some(Err(error)) => Some(view! { <ErrorNotice error/> }.into_any()),
                None => None,
            }}
        </section>
    }
}
