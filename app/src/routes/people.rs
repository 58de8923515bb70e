//! `/admin/people`: the org's members and invitations. Invite one person
//! (the link is shown once), import many from CSV (previewed line by line,
//! all or nothing; the links download once), export, change roles, edit a
//! profile (`?member=<id>`), remove a member.

use super::people_parts::{CertificationChoices, PeopleList};
use crate::components::ErrorNotice;
use crate::deferred::{Deferred, PanelBuilt};
use crate::functions::{load_people, ImportPeople, InvitePerson, PreviewPeopleImport, RemoveMember, SetMemberRole};
use crate::models::Role;
use crate::people::{Member, PeopleAdmin, CSV_HEADER};
use crate::rules::matches_query;
use crate::forms::dispatch_on_submit;
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use leptos::server_fn::ServerFn;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The list's own actions: the list refetches after each. (The invite,
/// import and profile forms are deferred panels with actions of their own,
/// whose code is not loaded with the page; they refetch it too.)
#[derive(Clone, Copy)]
pub(super) struct PeopleActions {
    pub role: ServerAction<SetMemberRole>,
    pub remove: ServerAction<RemoveMember>,
}


#[component]
pub fn PeoplePage() -> impl IntoView {
    let actions = PeopleActions { role: ServerAction::new(), remove: ServerAction::new() };
    let people = crate::page_data::load(move || (actions.role.version().get(), actions.remove.version().get()), |_| load_people());
    let filter = RwSignal::new(String::new());
    let query = use_query_map();
    let selected = move || query.read().get("member").filter(|id| !id.is_empty());
    view! {
        <Title text="People"/>
        <div class="toolbar">
            <h1>"People"</h1>
            <label class="visually-hidden" for="people-filter">"Filter"</label>
            <input id="people-filter" type="search" placeholder="Filter by name, email, region, certification, role"
                prop:value=filter on:input=move |ev| filter.set(event_target_value(&ev))/>
            <a class="button subtle" href="/admin/directory/people.csv" download="people.csv" rel="external" data-testid="export-people">"Export CSV"</a>
            <a class="button subtle" href="/admin/floors">"Link floors"</a>
            <button type="button" class="button subtle" on:click=move |_| people.refetch()>"Refresh"</button>
        </div>
        // The profile of `?member=<id>`, a deferred panel (crate::deferred).
        {move || selected().map(|id| view! {
            <Deferred placeholder="Loading the profile…" view=move || super::member_edit::member_editor(id.clone(), people)/>
        })}
        <Transition fallback=|| view! { <p class="loading">"Loading people…"</p> }>
            {move || Suspend::new(async move {
                match people.await {
                    Err(e) => view! {
                        <ErrorNotice error=e/>
                        <button type="button" class="button" on:click=move |_| people.refetch()>"Try again"</button>
                    }.into_any(),
                    Ok(admin) => view! { <MembersPanel admin=StoredValue::new(admin) filter actions/> }.into_any(),
                }
            })}
        </Transition>
        // The invite and import forms load their code once the page is
        // interactive (crate::deferred).
        <Deferred placeholder="Loading the invite and import forms…" view=move || people_forms(people)/>
    }
}

/// Invite one person, import many: below the members, built in the browser.
#[wasm_split(people_forms, wasm_split_path = ::leptos::wasm_split, fallible)]
fn people_forms(people: PeopleList) -> PanelBuilt {
    let invite = ServerAction::<InvitePerson>::new();
    let import = ServerAction::<ImportPeople>::new();
    crate::page_data::reload_after(move || invite.version().get() + import.version().get(), people);
    Ok(view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                people.await.ok().map(|admin| view! { <InvitePanel admin=StoredValue::new(admin) invite/> })
            })}
        </Transition>
        <ImportPanel import/>
    }
    .into_any())
}

#[component]
fn MembersPanel(admin: StoredValue<PeopleAdmin>, filter: RwSignal<String>, actions: PeopleActions) -> impl IntoView {
    let shown = move || {
        let q = filter.get();
        admin.with_value(|a| {
            a.members
                .iter()
                .filter(|m| {
                    let p = &m.person;
                    let certs = p.certifications.join(" ");
                    matches_query(&q, &[&p.display_name, &p.email, p.region.as_deref().unwrap_or_default(), &certs, p.role.as_str()])
                })
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    let invitations = admin.with_value(|a| a.invitations.clone());
    view! {
        <section class="panel" aria-labelledby="members-h">
            <h2 id="members-h">"Members"</h2>
            {move || {
                let rows = shown();
                if rows.is_empty() {
                    view! { <p class="empty">"No member matches the filter."</p> }.into_any()
                } else {
                    view! { <MemberTable rows actions/> }.into_any()
                }
            }}
            {move || actions.role.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            {move || actions.remove.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            {(!invitations.is_empty()).then(|| view! {
                <h3>"Invitations not taken up"</h3>
                <ul class="plain" data-testid="pending-invitations">
                    {invitations.into_iter().map(|i| view! {
                        <li>{i.email}" · "{i.role.as_str()}" · link valid until "{crate::booking::utc_when(i.expires_ms)}</li>
                    }).collect_view()}
                </ul>
            })}
        </section>
    }
}

#[component]
fn MemberTable(rows: Vec<Member>, actions: PeopleActions) -> impl IntoView {
    view! {
        <table class="grid" data-testid="members">
            <thead><tr><th>"Name"</th><th>"Email"</th><th>"Role"</th><th>"Region"</th><th>"Certifications"</th><th>"Status"</th><th></th></tr></thead>
            <tbody>
                {rows.into_iter().map(|m| view! { <MemberRow m actions/> }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn MemberRow(m: Member, actions: PeopleActions) -> impl IntoView {
    let confirming = RwSignal::new(false);
    let id = StoredValue::new(m.user_id.clone());
    let status = match (m.has_password, m.active) {
        (false, _) => ("tag tone-warn", "invited"),
        (true, true) => ("tag tone-ok", "active"),
        (true, false) => ("tag tone-muted", "inactive"),
    };
    let p = m.person;
    let role = p.role;
    view! {
        <tr>
            <td><a href=format!("?member={}", m.user_id)>{p.display_name.clone()}</a></td>
            <td>{p.email.clone()}</td>
            <td>
                <form method="post" action=SetMemberRole::url() class="inline-form" on:submit=dispatch_on_submit(actions.role, |form| SetMemberRole { user_id: form.text("user_id"), role: form.text("role") })>
                    <input type="hidden" name="user_id" value=m.user_id.clone()/>
                    <label class="visually-hidden" for=format!("role-{}", m.user_id)>"Role"</label>
                    <select id=format!("role-{}", m.user_id) name="role">
                        {[Role::Admin, Role::Operator, Role::Client].into_iter().map(|r| view! {
                            <option value=r.as_str() selected=r == role>{r.as_str()}</option>
                        }).collect_view()}
                    </select>
                    <button type="submit" class="button subtle">"Set"</button>
                </form>
            </td>
            <td>{p.region.clone().unwrap_or_default()}</td>
            <td>{p.certifications.join(", ")}</td>
            <td><span class=status.0>{status.1}</span></td>
            <td>
                <button type="button" class="button subtle danger" disabled=move || actions.remove.pending().get()
                    on:click=move |_| {
                        if confirming.get_untracked() {
                            confirming.set(false);
                            actions.remove.dispatch(RemoveMember { user_id: id.get_value() });
                        } else {
                            confirming.set(true);
                        }
                    }>
                    {move || if confirming.get() { "Confirm removal" } else { "Remove" }}
                </button>
            </td>
        </tr>
    }
}

#[component]
fn InvitePanel(admin: StoredValue<PeopleAdmin>, invite: ServerAction<InvitePerson>) -> impl IntoView {
    let (regions, options) = admin.with_value(|a| (a.regions.clone(), a.cert_options.clone()));
    view! {
        <section class="panel" aria-labelledby="invite-h">
            <h2 id="invite-h">"Invite"</h2>
            <form method="post" action=InvitePerson::url() class="booking-form" data-testid="invite-form" on:submit=dispatch_on_submit(invite, |form| InvitePerson { email: form.text("email"), display_name: form.text("display_name"), external_id: form.optional("external_id"), region: form.optional("region"), certifications: form.list("certifications"), role: form.text("role") })>
                <label for="inv-email">"Email"</label>
                <input id="inv-email" name="email" type="email" required/>
                <label for="inv-name">"Display name"</label>
                <input id="inv-name" name="display_name" required maxlength="80"/>
                <label for="inv-ext">"External agent id"</label>
                <input id="inv-ext" name="external_id" maxlength="64"/>
                <label for="inv-role">"Role"</label>
                <select id="inv-role" name="role">
                    <option value="operator" selected>"operator"</option>
                    <option value="admin">"admin"</option>
                    <option value="client">"client"</option>
                </select>
                <label for="inv-region">"Region"</label>
                <select id="inv-region" name="region">
                    {regions.into_iter().map(|r| view! { <option value=r.clone()>{r.clone()}</option> }).collect_view()}
                </select>
                <span></span>
                <CertificationChoices options held=Vec::new() prefix="inv"/>
                <button type="submit" class="button primary" data-testid="invite-submit" disabled=move || invite.pending().get()>"Invite"</button>
            </form>
            {move || match invite.value().get() {
                Some(Ok(link)) => Some(view! {
                    <crate::components::ShownOnce intro=format!("Set-password link for {}, shown once, valid until {}: ", link.email, crate::booking::utc_when(link.expires_ms))
                        value=link.url testid="invite-link"/>
                }.into_any()),
                Some(Err(error)) => Some(view! { <ErrorNotice error/> }.into_any()),
                None => None,
            }}
        </section>
    }
}

#[component]
fn ImportPanel(import: ServerAction<ImportPeople>) -> impl IntoView {
    let preview = ServerAction::<PreviewPeopleImport>::new();
    let csv = RwSignal::new(String::new());
    // A new text needs a new preview before it can be imported.
    let previewed = RwSignal::new(String::new());
    let ready = move || {
        matches!(preview.value().get(), Some(Ok(p)) if p.problems.is_empty() && !p.people.is_empty()) && previewed.get() == csv.get()
    };
    let load_file = move |ev: leptos::ev::Event| {
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            let input: Option<leptos::web_sys::HtmlInputElement> = ev.target().and_then(|t| t.dyn_into().ok());
            if let Some(file) = input.and_then(|i| i.files()).and_then(|f| f.get(0)) {
                leptos::task::spawn_local(async move {
                    if let Ok(text) = wasm_bindgen_futures::JsFuture::from(file.text()).await {
                        csv.set(text.as_string().unwrap_or_default());
                    }
                });
            }
        }
        #[cfg(not(feature = "hydrate"))]
        drop(ev);
    };
    view! {
        <section class="panel" aria-labelledby="import-h">
            <h2 id="import-h">"Import from CSV"</h2>
            <p class="muted">"Columns: "<code>{CSV_HEADER.join(",")}</code>". Certifications separated by ';'. Nothing is imported unless every line is right."</p>
            <label for="import-file">"CSV file"</label>
            <input id="import-file" type="file" accept=".csv,text/csv" on:change=load_file/>
            <label for="import-csv">"or paste it"</label>
            <textarea id="import-csv" name="csv" rows="6" data-testid="import-csv" prop:value=csv on:input=move |ev| csv.set(event_target_value(&ev))></textarea>
            <div class="actions">
                <button type="button" class="button" data-testid="import-preview" disabled=move || preview.pending().get() || csv.with(String::is_empty)
                    on:click=move |_| { previewed.set(csv.get_untracked()); preview.dispatch(PreviewPeopleImport { csv: csv.get_untracked() }); }>
                    "Preview"
                </button>
                <button type="button" class="button primary" data-testid="import-run" disabled=move || !ready() || import.pending().get()
                    on:click=move |_| { import.dispatch(ImportPeople { csv: csv.get_untracked() }); }>
                    "Import"
                </button>
            </div>
            {move || match preview.value().get() {
                Some(Ok(p)) if p.problems.is_empty() => Some(view! {
                    <p class="notice-line" role="status" data-testid="import-ok">{format!("{} people ready to import.", p.people.len())}</p>
                }.into_any()),
                Some(Ok(p)) => Some(view! {
                    <p class="error" role="alert">{format!("{} line(s) to fix; nothing will be imported until they are:", p.problems.len())}</p>
                    <table class="grid" data-testid="import-problems">
                        <thead><tr><th>"Line"</th><th>"Problem"</th></tr></thead>
                        <tbody>{p.problems.into_iter().map(|l| view! { <tr><td>{l.line}</td><td>{l.problem}</td></tr> }).collect_view()}</tbody>
                    </table>
                }.into_any()),
                Some(Err(error)) => Some(view! { <ErrorNotice error/> }.into_any()),
                None => None,
            }}
            {move || match import.value().get() {
                Some(Ok(done)) => {
                    let href = crate::people::csv_data_url(&done.links_csv);
                    Some(view! {
                        <p class="notice-line" role="status" data-testid="import-done">
                            {format!("Imported {} people. Their set-password links are offered once: ", done.imported)}
                            <a class="button" href=href download="set-password-links.csv">"Download links (CSV)"</a>
                        </p>
                    }.into_any())
                }
                Some(Err(error)) => Some(view! { <ErrorNotice error/> }.into_any()),
                None => None,
            }}
        </section>
    }
}
