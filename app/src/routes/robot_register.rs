//! Registering a robot from the directory page: the same registry path as
//! `POST /v1/robots`; the derived skill shows as the reqCert is typed and
//! the bearer token is shown once, with a copy button.

use crate::components::ErrorNotice;
use crate::functions::RegisterRobot;
use crate::forms::dispatch_on_submit;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;

#[component]
pub(super) fn RegisterRobotPanel(register: ServerAction<RegisterRobot>) -> impl IntoView {
    let open = RwSignal::new(false);
    let req_cert = RwSignal::new(String::new());
    let skill = move || match crate::directory::derived_skill(&req_cert.get()) {
        Ok(skill) => format!("skill: {skill}"),
        Err(_) if req_cert.with(String::is_empty) => String::new(),
        Err(why) => why,
    };
    view! {
        <section class="panel" aria-labelledby="register-h">
            <div class="toolbar">
                <h2 id="register-h">"Register a robot"</h2>
                <button type="button" class="button subtle" aria-expanded=move || open.get().to_string() data-testid="register-toggle"
                    on:click=move |_| open.update(|o| *o = !*o)>
                    {move || if open.get() { "Hide" } else { "Register…" }}
                </button>
            </div>
            <Show when=move || open.get()>
                <form method="post" action=RegisterRobot::url() class="booking-form" data-testid="robot-register" on:submit=dispatch_on_submit(register, |form| RegisterRobot { robot_id: form.text("robot_id"), model: form.text("model"), site: form.text("site"), pop: form.text("pop"), req_cert: form.text("req_cert") })>
                    <label for="reg-id">"Robot id"</label>
                    <input id="reg-id" name="robot_id" required maxlength="64" pattern="[a-z0-9-]+" placeholder="e.g. ue-weld-02"/>
                    <label for="reg-model">"Model"</label>
                    <input id="reg-model" name="model" required maxlength="64"/>
                    <label for="reg-site">"Site"</label>
                    <input id="reg-site" name="site" required maxlength="96"/>
                    <label for="reg-pop">"PoP"</label>
                    <input id="reg-pop" name="pop" required maxlength="32" placeholder="a PoP of the link floors, e.g. us-east"/>
                    <label for="reg-cert">"Required cert"</label>
                    <input id="reg-cert" name="req_cert" required maxlength="96" placeholder="e.g. welding · tier-2"
                        on:input=move |ev| req_cert.set(event_target_value(&ev))/>
                    <span></span><span class="muted" aria-live="polite" data-testid="register-skill">{skill}</span>
                    <button type="submit" class="button primary" data-testid="register-submit" disabled=move || register.pending().get()>"Register"</button>
                </form>
            </Show>
            {move || match register.value().get() {
                Some(Ok(robot)) => Some(view! {
                    <crate::components::ShownOnce intro=format!("Registered {} (skill {}). Its bearer token, shown once: ", robot.id, robot.skill)
                        value=robot.token testid="registered-token"/>
                }.into_any()),
                Some(Err(error)) => Some(view! { <ErrorNotice error/> }.into_any()),
                None => None,
            }}
        </section>
    }
}
