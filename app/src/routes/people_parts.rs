//! What the people screen (`people.rs`) and its member editor
//! (`member_edit.rs`, a panel of its own) share.

use crate::people::PeopleAdmin;
use leptos::prelude::*;

/// The people list, as loaded.
pub(super) type PeopleList = crate::page_data::Loaded<Result<PeopleAdmin, crate::error::AppError>>;

/// Certification checkboxes, named for the server function's list.
#[component]
pub(super) fn CertificationChoices(options: Vec<String>, held: Vec<String>, prefix: &'static str) -> impl IntoView {
    let mut all = options;
    for cert in &held {
        if !all.contains(cert) {
            all.push(cert.clone());
        }
    }
    all.sort();
    view! {
        <fieldset class="cert-choices">
            <legend>"Certifications"</legend>
            {all.into_iter().enumerate().map(|(i, cert)| {
                let id = format!("{prefix}-cert-{i}");
                let label_for = id.clone();
                let checked = held.contains(&cert);
                let skill = crate::directory::derived_skill(&cert).unwrap_or_default();
                view! {
                    <label for=label_for class="check">
                        <input type="checkbox" id=id name=format!("certifications[{i}]") value=cert.clone() checked=checked/>
                        {cert.clone()}" "<span class="muted">"(skill: "{skill}")"</span>
                    </label>
                }
            }).collect_view()}
        </fieldset>
    }
}
