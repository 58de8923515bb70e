//! `/account`: the signed-in person's own password. The current password
//! is required; changing it ends every other sign-in of theirs (their
//! other browsers' sockets close at once).

use crate::components::{ErrorNotice, RequireMember};
use crate::forms::dispatch_on_submit;
use crate::functions::ChangePassword;
use leptos::server_fn::ServerFn;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn AccountPage() -> impl IntoView {
    view! {
        <Title text="Account"/>
        <RequireMember>
            <PasswordForm/>
        </RequireMember>
    }
}

#[component]
fn PasswordForm() -> impl IntoView {
    let change = ServerAction::<ChangePassword>::new();
    view! {
        <section class="panel" aria-labelledby="password-h">
            <h1 id="password-h">"Your password"</h1>
            <form method="post" action=ChangePassword::url() class="booking-form" data-testid="password-form" on:submit=dispatch_on_submit(change, |form| ChangePassword { current: form.text("current"), new: form.text("new"), confirm: form.text("confirm") })>
                <label for="pw-current">"Current password"</label>
                <input id="pw-current" type="password" name="current" required autocomplete="current-password"/>
                <label for="pw-new">"New password"</label>
                <input id="pw-new" type="password" name="new" required minlength="12" autocomplete="new-password"/>
                <label for="pw-confirm">"New password again"</label>
                <input id="pw-confirm" type="password" name="confirm" required minlength="12" autocomplete="new-password"/>
                <button type="submit" class="button primary" data-testid="password-submit">"Change password"</button>
            </form>
            {move || match change.value().get() {
                Some(Ok(())) => Some(view! {
                    <p class="notice-line" role="status" data-testid="password-changed">"Password changed: your other sign-ins have ended."</p>
                }.into_any()),
                Some(Err(error)) => Some(view! { <ErrorNotice error/> }.into_any()),
                None => None,
            }}
        </section>
    }
}
