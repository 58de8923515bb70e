use crate::forms::dispatch_on_submit;
use crate::functions::SignIn;
use leptos::server_fn::ServerFn;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn SignIn() -> impl IntoView {
    // Also holds a failed plain post's error (the server sends the form back
    // with it in the URL) until the script takes over.
    let sign_in = ServerAction::<SignIn>::new();
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_default();
    let show_password = RwSignal::new(false);
    let failure = move || match sign_in.value().get() {
        Some(Err(e)) => Some(e.to_string()),
        _ => None,
    };
    // Signed in: the next screen is loaded whole, with the signed-in user
    // in it (see `Session`). Still "signing in" until it arrives.
    Effect::new(move || {
        if let Some(Ok(target)) = sign_in.value().get() {
            let _ = window().location().set_href(&target);
        }
    });
    let pending = Signal::derive(move || sign_in.pending().get() || matches!(sign_in.value().get(), Some(Ok(_))));

    view! {
        <Title text="Sign in"/>
        <section class="signin">
            <h1>"Sign in to ClutchCall"</h1>
            {move || query.read().get("welcome").map(|_| view! {
                <p class="notice-line" role="status" data-testid="welcome">"Your password is set. Sign in with it."</p>
            })}
            <form method="post" action=SignIn::url() class="stack" on:submit=dispatch_on_submit(sign_in, |form| SignIn { email: form.text("email"), password: form.text("password"), next: form.optional("next") })>
                <input type="hidden" name="next" prop:value=next/>
                <label for="email">"Email"</label>
                <input id="email" name="email" type="email" autocomplete="username" required autofocus/>
                <label for="password">"Password"</label>
                <div class="password-row">
                    <input
                        id="password"
                        name="password"
                        autocomplete="current-password"
                        required
                        type=move || if show_password.get() { "text" } else { "password" }
                    />
                    <button
                        type="button"
                        class="button subtle"
                        aria-pressed=move || show_password.get().to_string()
                        on:click=move |_| show_password.update(|shown| *shown = !*shown)
                    >
                        {move || if show_password.get() { "Hide" } else { "Show" }}
                    </button>
                </div>
                <button type="submit" class="button primary" disabled=pending>
                    {move || if pending.get() { "Signing in…" } else { "Sign in" }}
                </button>
                {move || failure().map(|message| view! { <p class="error" role="alert">{message}</p> })}
            </form>
        </section>
    }
}
