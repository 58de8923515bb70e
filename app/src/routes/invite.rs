//! `/invite/:token`: a one-time link an admin made. A person without a
//! password sets one here (then signs in); a person who already has an
//! account opens it signed in and joins the org with one press.

use crate::components::ErrorNotice;
use crate::forms::dispatch_on_submit;
use crate::functions::{load_invitation, AcceptInvitation};
use leptos::server_fn::ServerFn;
use crate::people::{InvitationState, InvitationView};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn InvitePage() -> impl IntoView {
    let params = use_params_map();
    let token = move || params.read().get("token").unwrap_or_default();
    let invitation = crate::page_data::load(token, load_invitation);
    view! {
        <Title text="Invitation"/>
        <section class="signin" aria-labelledby="invite-h">
            <h1 id="invite-h">"Invitation"</h1>
            <Suspense fallback=|| view! { <p class="loading">"Opening the invitation…"</p> }>
                {move || Suspend::new(async move {
                    match invitation.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(view) => view! { <Invitation view token=token()/> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Invitation(view: InvitationView, token: String) -> impl IntoView {
    let accept = ServerAction::<AcceptInvitation>::new();
    let InvitationView { org_name, email, role, state } = view;
    let heading = format!("{org_name} invites {email} as {}.", role.as_str());
    let submit = dispatch_on_submit(accept, |form| AcceptInvitation { token: form.text("token"), password: form.optional("password"), confirm: form.optional("confirm") });
    let body = match state {
        InvitationState::SetPassword => view! {
            <p>"Choose a password (at least 12 characters) to finish setting up your account."</p>
            <form method="post" action=AcceptInvitation::url() class="stack" data-testid="set-password-form" on:submit=submit>
                <input type="hidden" name="token" value=token/>
                <label for="invite-pw">"Password"</label>
                <input id="invite-pw" type="password" name="password" required minlength="12" autocomplete="new-password" autofocus/>
                <label for="invite-confirm">"Password again"</label>
                <input id="invite-confirm" type="password" name="confirm" required minlength="12" autocomplete="new-password"/>
                <button type="submit" class="button primary" data-testid="set-password" disabled=move || accept.pending().get()>"Set password"</button>
            </form>
        }
        .into_any(),
        InvitationState::Join => view! {
            <form method="post" action=AcceptInvitation::url() class="stack" on:submit=submit>
                <input type="hidden" name="token" value=token/>
                <button type="submit" class="button primary" data-testid="join-org">{format!("Join {org_name}")}</button>
            </form>
        }
        .into_any(),
        InvitationState::SignInFirst => {
            let next = format!("/signin?next=/invite/{token}");
            view! {
                <p>"This email already has a ClutchCall account. Sign in as it, and you will come back here to join."</p>
                <a class="button primary" href=next>"Sign in"</a>
            }
            .into_any()
        }
        InvitationState::OtherAccount => view! {
            <p class="error" role="alert">"You are signed in as someone else. Sign out, then open the link again."</p>
        }
        .into_any(),
        InvitationState::Gone => view! {
            <p class="error" role="alert">"This link has been used or has expired (links last 24 hours). Ask an admin of the organisation for a new one."</p>
        }
        .into_any(),
    };
    view! {
        <p data-testid="invitation">{heading}</p>
        {body}
        {move || accept.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
    }
}
