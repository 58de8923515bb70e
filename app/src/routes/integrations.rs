//! `/admin/integrations`: the org's API keys for the event stream
//! (`GET /v1/events`) and its webhook endpoints, each with its delivery
//! log and a resend. A key and an endpoint's signing secret are shown once,
//! when made; the lists show hints only.

use crate::components::{ErrorNotice, ShownOnce};
use crate::forms::dispatch_on_submit;
use crate::functions::{load_integrations, AddWebhook, CreateApiKey, EnableWebhook, RemoveWebhook, ResendWebhook, RevokeApiKey};
use crate::integrations::{ApiKeyView, DeliveryView, Integrations, WebhookState, WebhookView};
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_meta::Title;

type PageData = crate::page_data::Loaded<Result<Integrations, crate::error::AppError>>;

#[component]
pub fn IntegrationsPage() -> impl IntoView {
    let create = ServerAction::<CreateApiKey>::new();
    let revoke = ServerAction::<RevokeApiKey>::new();
    let add = ServerAction::<AddWebhook>::new();
    let remove = ServerAction::<RemoveWebhook>::new();
    let enable = ServerAction::<EnableWebhook>::new();
    let resend = ServerAction::<ResendWebhook>::new();
    // One load, again after any change (a resend adds to the log).
    let page = crate::page_data::load(
        move || (create.version().get(), revoke.version().get(), add.version().get(), remove.version().get(), enable.version().get(), resend.version().get()),
        |_| load_integrations(),
    );
    view! {
        <Title text="Integrations"/>
        <div class="toolbar">
            <h1>"Integrations"</h1>
            <a class="button subtle" href="/v1/openapi.json" rel="external">"API reference (OpenAPI)"</a>
        </div>
        <Keys page create revoke/>
        <Webhooks page add remove enable resend/>
    }
}

#[component]
fn Keys(page: PageData, create: ServerAction<CreateApiKey>, revoke: ServerAction<RevokeApiKey>) -> impl IntoView {
    view! {
        <section class="panel" aria-labelledby="keys-h" data-testid="keys-section">
            <h2 id="keys-h">"API keys"</h2>
            <p class="muted">
                "A key reads this organisation's event log: "<code>"GET /v1/events"</code>" with "<code>"Authorization: Bearer cck_…"</code>
                ", as JSON pages ("<code>"?since="</code>") or as a Server-Sent Events stream ("<code>"Accept: text/event-stream"</code>
                ") that resumes after "<code>"Last-Event-ID"</code>". It can do nothing else."
            </p>
            <Transition fallback=|| view! { <p class="loading">"Loading keys…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(p) if p.keys.is_empty() => view! { <p class="empty" data-testid="keys-empty">"No keys yet."</p> }.into_any(),
                        Ok(p) => view! { <KeyTable keys=p.keys revoke/> }.into_any(),
                    }
                })}
            </Transition>
            {move || revoke.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            <h3>"Create a key"</h3>
            <form method="post" action=CreateApiKey::url() class="booking-form" data-testid="key-form"
                on:submit=dispatch_on_submit(create, |form| CreateApiKey { name: form.text("name") })>
                <label for="k-name">"What it is for"</label>
                <input id="k-name" name="name" required maxlength="64" placeholder="e.g. WMS re-planner"/>
                <button type="submit" class="button primary" disabled=move || create.pending().get()>
                    {move || if create.pending().get() { "Creating…" } else { "Create key" }}
                </button>
            </form>
            {move || match create.value().get() {
                Some(Ok(made)) => Some(view! {
                    <ShownOnce intro="The key, shown once (copy it now; only a hint of it is kept): ".into() value=made.key testid="new-key"/>
                }.into_any()),
                Some(Err(error)) => Some(view! { <ErrorNotice error/> }.into_any()),
                None => None,
            }}
        </section>
    }
}

#[component]
fn KeyTable(keys: Vec<ApiKeyView>, revoke: ServerAction<RevokeApiKey>) -> impl IntoView {
    view! {
        <table class="grid" data-testid="keys">
            <thead><tr><th>"Name"</th><th>"Key"</th><th>"Scope"</th><th>"Created"</th><th>"State"</th><th></th></tr></thead>
            <tbody>
                {keys.into_iter().map(|k| {
                    let id = k.id.clone();
                    let label = format!("Revoke the key {}", k.name);
                    let live = k.revoked_at.is_none();
                    view! {
                        <tr data-key=k.id.clone()>
                            <td>{k.name.clone()}</td>
                            <td><code>{k.hint.clone()}</code></td>
                            <td>{k.scopes.join(" ")}</td>
                            <td>{k.created_at.clone()}</td>
                            <td>{match &k.revoked_at {
                                None => view! { <span class="tag tone-ok">"live"</span> }.into_any(),
                                Some(at) => view! { <span class="tag tone-muted">{format!("revoked {at}")}</span> }.into_any(),
                            }}</td>
                            <td class="row-actions">
                                {live.then(|| view! {
                                    <button type="button" class="button subtle danger" aria-label=label disabled=move || revoke.pending().get()
                                        on:click=move |_| { revoke.dispatch(RevokeApiKey { key_id: id.clone() }); }>
                                        "Revoke"
                                    </button>
                                })}
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn Webhooks(
    page: PageData,
    add: ServerAction<AddWebhook>,
    remove: ServerAction<RemoveWebhook>,
    enable: ServerAction<EnableWebhook>,
    resend: ServerAction<ResendWebhook>,
) -> impl IntoView {
    view! {
        <section class="panel" aria-labelledby="hooks-h" data-testid="webhooks-section">
            <h2 id="hooks-h">"Webhooks"</h2>
            <p class="muted">
                "Each endpoint gets the events it asked for, in order, as a JSON POST signed in "<code>"ClutchCall-Signature: t=…,v1=…"</code>
                " (HMAC-SHA256 of "<code>"t.body"</code>" under its secret; refuse one older than 5 minutes). A failed delivery is retried with backoff for 24 h, then the endpoint is disabled. Deduplicate on the event's id."
            </p>
            <Transition fallback=|| view! { <p class="loading">"Loading webhooks…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(p) if p.webhooks.is_empty() => view! { <p class="empty" data-testid="webhooks-empty">"No endpoints yet."</p> }.into_any(),
                        Ok(p) => p.webhooks.into_iter().map(|hook| view! { <Endpoint hook remove enable resend/> }).collect_view().into_any(),
                    }
                })}
            </Transition>
            {move || remove.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            {move || enable.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            {move || resend.value().get().and_then(Result::err).map(|error| view! { <ErrorNotice error/> })}
            <h3>"Add an endpoint"</h3>
            <form method="post" action=AddWebhook::url() class="booking-form" data-testid="webhook-form"
                on:submit=dispatch_on_submit(add, |form| AddWebhook { url: form.text("url"), types: form.list("types") })>
                <label for="w-url">"URL"</label>
                <input id="w-url" name="url" type="url" required maxlength="2048" placeholder="https://hooks.example.com/clutchcall"/>
                <fieldset class="cert-choices">
                    <legend>"Events (none ticked: every type)"</legend>
                    <Transition fallback=|| view! { <span class="loading">"Loading types…"</span> }>
                        {move || Suspend::new(async move {
                            let types = page.await.map(|p| p.event_types).unwrap_or_default();
                            types.into_iter().enumerate().map(|(i, t)| {
                                let id = format!("w-type-{i}");
                                let label_for = id.clone();
                                view! {
                                    <label for=label_for class="check"><input type="checkbox" id=id name=format!("types[{i}]") value=t.clone()/>" "{t.clone()}</label>
                                }
                            }).collect_view()
                        })}
                    </Transition>
                </fieldset>
                <button type="submit" class="button primary" disabled=move || add.pending().get()>
                    {move || if add.pending().get() { "Adding…" } else { "Add endpoint" }}
                </button>
            </form>
            {move || match add.value().get() {
                Some(Ok(made)) => Some(view! {
                    <ShownOnce intro="Its signing secret, shown once: ".into() value=made.secret testid="new-secret"/>
                }.into_any()),
                Some(Err(error)) => Some(view! { <ErrorNotice error/> }.into_any()),
                None => None,
            }}
        </section>
    }
}

#[component]
fn Endpoint(hook: WebhookView, remove: ServerAction<RemoveWebhook>, enable: ServerAction<EnableWebhook>, resend: ServerAction<ResendWebhook>) -> impl IntoView {
    let id = StoredValue::new(hook.id.clone());
    let (state, tone) = match hook.state {
        WebhookState::Healthy => ("healthy", "tag tone-ok"),
        WebhookState::Failing => ("failing: retrying", "tag tone-warn"),
        WebhookState::Disabled => ("disabled", "tag tone-alarm"),
    };
    let types = if hook.types.is_empty() { "every type".to_string() } else { hook.types.join(", ") };
    let disabled = hook.state == WebhookState::Disabled;
    view! {
        <article class="endpoint" data-testid="webhook" data-url=hook.url.clone()>
            <h3><code>{hook.url.clone()}</code>" "<span class=tone data-testid="webhook-state">{state}</span></h3>
            <p class="muted">
                {format!("{types} · delivered up to event {} · added {}", hook.delivered_id, hook.created_at)}
                {hook.failing_since.clone().map(|since| format!(" · failing since {since}"))}
            </p>
            {hook.disabled_reason.clone().map(|why| view! { <p class="notice-line" role="alert">{format!("Disabled: {why}")}</p> })}
            <p class="row-actions">
                {disabled.then(|| view! {
                    <button type="button" class="button subtle" disabled=move || enable.pending().get()
                        on:click=move |_| { enable.dispatch(EnableWebhook { webhook_id: id.get_value() }); }>
                        "Enable again"
                    </button>
                })}
                " "
                <button type="button" class="button subtle danger" disabled=move || remove.pending().get()
                    on:click=move |_| { remove.dispatch(RemoveWebhook { webhook_id: id.get_value() }); }>
                    "Remove endpoint"
                </button>
            </p>
            {if hook.deliveries.is_empty() {
                view! { <p class="empty">"No deliveries yet: it gets the events that happen from now on."</p> }.into_any()
            } else {
                view! { <Deliveries rows=hook.deliveries id resend/> }.into_any()
            }}
        </article>
    }
}

#[component]
fn Deliveries(rows: Vec<DeliveryView>, id: StoredValue<String>, resend: ServerAction<ResendWebhook>) -> impl IntoView {
    view! {
        <table class="grid" data-testid="deliveries">
            <caption class="visually-hidden">"Latest delivery attempts, newest first"</caption>
            <thead><tr><th class="num">"Event"</th><th>"Type"</th><th class="num">"Attempt"</th><th>"At"</th><th>"Answer"</th><th class="num">"Latency (ms)"</th><th></th></tr></thead>
            <tbody>
                {rows.into_iter().map(|d| {
                    let event_id = d.event_id;
                    let ok = d.status.is_some_and(|s| (200..300).contains(&s));
                    let answer = match (d.status, &d.error) {
                        (Some(status), _) if ok => status.to_string(),
                        (_, Some(error)) => error.clone(),
                        (Some(status), None) => status.to_string(),
                        (None, None) => "no answer".into(),
                    };
                    let label = format!("Resend event {event_id}");
                    view! {
                        <tr>
                            <td class="num">{event_id}</td>
                            <td>{d.kind.clone()}</td>
                            <td class="num">{if d.resend { format!("{} (resend)", d.attempt) } else { d.attempt.to_string() }}</td>
                            <td>{d.at.clone()}</td>
                            <td><span class=if ok { "tag tone-ok" } else { "tag tone-warn" }>{answer}</span></td>
                            <td class="num">{d.latency_ms}</td>
                            <td>
                                <button type="button" class="button subtle" aria-label=label disabled=move || resend.pending().get()
                                    on:click=move |_| { resend.dispatch(ResendWebhook { webhook_id: id.get_value(), event_id }); }>
                                    "Resend"
                                </button>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}
