use crate::components::{ErrorNotice, RequireRole};
use crate::deferred::{Deferred, PanelBuilt};
use crate::functions::{load_directory, load_robot, EditRobot, RegisterRobot, RetireRobot, RotateRobotToken};
use crate::models::{Directory, Operator, RegistryStatus, Robot, Role};
use crate::rules::{matches_query, utc_clock};
use crate::forms::dispatch_on_submit;
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use leptos::server_fn::ServerFn;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The admin screens (`/admin…`, `/ops/…`) are for admins of the selected org.
#[component]
pub fn AdminArea(children: ChildrenFn) -> impl IntoView {
    view! { <RequireRole role=Role::Admin>{children()}</RequireRole> }
}

/// The org's fleet registry and operator directory.
#[component]
pub fn DirectoryPage() -> impl IntoView {
    let register = ServerAction::<RegisterRobot>::new();
    let directory = crate::page_data::load(move || register.version().get(), |_| load_directory());
    let filter = RwSignal::new(String::new());
    let query = use_query_map();
    let selected_robot = move || query.read().get("robot").filter(|id| !id.is_empty());

    view! {
        <Title text="Directory"/>
        <div class="toolbar">
            <h1>"Directory"</h1>
            <label class="visually-hidden" for="directory-filter">"Filter"</label>
            <input
                id="directory-filter"
                type="search"
                placeholder="Filter robots and operators"
                prop:value=filter
                on:input=move |ev| filter.set(event_target_value(&ev))
            />
            <button type="button" class="button subtle" on:click=move |_| directory.refetch()>"Refresh"</button>
        </div>
        // The robot detail and the registration form load their code once
        // the page is interactive (crate::deferred): the list comes first.
        {move || selected_robot().map(|robot_id| view! {
            <Deferred placeholder="Loading the robot…" view=move || robot_detail(robot_id.clone())/>
        })}
        <Deferred placeholder="Loading the robot registration…" view=move || robot_registration(register)/>
        <Transition fallback=|| view! { <p class="loading">"Loading directory…"</p> }>
            {move || Suspend::new(async move {
                match directory.await {
                    Err(e) => view! {
                        <ErrorNotice error=e/>
                        <button type="button" class="button" on:click=move |_| directory.refetch()>"Try again"</button>
                    }.into_any(),
                    Ok(dir) => view! { <DirectoryTables dir filter/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn DirectoryTables(dir: Directory, filter: RwSignal<String>) -> impl IntoView {
    let Directory { org_name, robots, operators, as_of_ms } = dir;
    let choices = |pick: fn(&Robot) -> String| {
        let mut values: Vec<String> = robots.iter().map(pick).collect();
        values.sort();
        values.dedup();
        values
    };
    let (skills, pops) = (choices(|r| r.skill.clone()), choices(|r| r.pop.clone()));
    let robots = StoredValue::new(robots);
    let operators = StoredValue::new(operators);
    let (status, skill, pop) = (RwSignal::new(String::new()), RwSignal::new(String::new()), RwSignal::new(String::new()));
    let shown_robots = move || {
        let q = filter.get();
        let (status, skill, pop) = (status.get(), skill.get(), pop.get());
        robots.with_value(|all| {
            all.iter()
                .filter(|r| matches_query(&q, &[&r.id, &r.model, &r.site, &r.pop, &r.req_cert]))
                .filter(|r| status.is_empty() || r.status.as_str() == status)
                .filter(|r| skill.is_empty() || r.skill == skill)
                .filter(|r| pop.is_empty() || r.pop == pop)
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    let select = |id: &'static str, label: &'static str, all: &'static str, values: Vec<String>, signal: RwSignal<String>| view! {
        <label class="visually-hidden" for=id>{label}</label>
        <select id=id on:change=move |ev| signal.set(event_target_value(&ev))>
            <option value="">{all}</option>
            {values.into_iter().map(|v| view! { <option value=v.clone()>{v.clone()}</option> }).collect_view()}
        </select>
    };
    let shown_operators = move || {
        let q = filter.get();
        operators.with_value(|all| {
            all.iter()
                .filter(|o| {
                    let certs = o.certifications.join(" ");
                    matches_query(&q, &[&o.display_name, &o.email, &o.region, &certs])
                })
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    let online = robots.with_value(|all| all.iter().filter(|r| r.status == RegistryStatus::Online).count());
    let total = robots.with_value(Vec::len);

    view! {
        <p class="as-of">{org_name}" · "{online}" of "{total}" robots online · as of "{utc_clock(as_of_ms)}</p>
        <section class="panel">
            <div class="toolbar">
                <h2>"Robots"</h2>
                {select("robot-status", "Registry status", "Any status", vec!["online".into(), "offline".into()], status)}
                {select("robot-skill", "Skill", "Any skill", skills, skill)}
                {select("robot-pop", "PoP", "Any PoP", pops, pop)}
            </div>
            {move || {
                let rows = shown_robots();
                if total == 0 {
                    view! { <p class="empty">"No robots are registered in this organisation yet."</p> }.into_any()
                } else if rows.is_empty() {
                    view! { <p class="empty">"No robot matches the filter."</p> }.into_any()
                } else {
                    view! { <RobotTable rows as_of_ms/> }.into_any()
                }
            }}
        </section>
        <section class="panel">
            <h2>"Operators"</h2>
            {move || {
                let rows = shown_operators();
                if operators.with_value(Vec::is_empty) {
                    view! { <p class="empty">"No operators in this organisation yet."</p> }.into_any()
                } else if rows.is_empty() {
                    view! { <p class="empty">"No operator matches the filter."</p> }.into_any()
                } else {
                    view! { <OperatorTable rows/> }.into_any()
                }
            }}
        </section>
    }
}

#[component]
fn RobotTable(rows: Vec<Robot>, as_of_ms: i64) -> impl IntoView {
    view! {
        <table class="grid" data-testid="robots">
            <thead><tr><th>"Robot"</th><th>"Model"</th><th>"Site"</th><th>"PoP"</th><th>"Required cert"</th><th>"Skill"</th><th>"Registry"</th><th>"Last heartbeat"</th><th>"Live session"</th></tr></thead>
            <tbody>
                {rows.into_iter().map(|r| view! {
                    <tr>
                        <td><a href=format!("?robot={}", r.id)>{r.id.clone()}</a></td>
                        <td>{r.model}</td>
                        <td>{r.site}</td>
                        <td>{r.pop}</td>
                        <td>{r.req_cert}</td>
                        <td>{r.skill}</td>
                        <td><RegistryTag status=r.status/></td>
                        <td>{r.last_heartbeat_ms.map(|at| format!("{} ago", crate::rules::format_age(Some(at), as_of_ms))).unwrap_or_else(|| "never".into())}</td>
                        <td>{r.live_session.map(|id| view! { <a href=format!("/ops/sessions?s={id}")>{id.clone()}</a> })}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn OperatorTable(rows: Vec<Operator>) -> impl IntoView {
    view! {
        <table class="grid" data-testid="operators">
            <thead><tr><th>"Operator"</th><th>"Email"</th><th>"Role"</th><th>"Region"</th><th>"Certifications"</th><th>"Rating"</th></tr></thead>
            <tbody>
                {rows.into_iter().map(|o| view! {
                    <tr>
                        <td>{o.display_name}</td>
                        <td>{o.email}</td>
                        <td>{o.role.as_str()}</td>
                        <td>{o.region}</td>
                        <td>{o.certifications.join(", ")}</td>
                        <td>{crate::rating::OperatorScore::label(o.score)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn RegistryTag(status: RegistryStatus) -> impl IntoView {
    let tone = match status {
        RegistryStatus::Online => "tag tone-ok",
        RegistryStatus::Offline => "tag tone-muted",
    };
    view! { <span class=tone>{status.as_str()}</span> }
}

/// Detail of the robot named in `?robot=`; another org's id reads "not found".
/// One robot's facts and its admin (`?robot=<id>`), built in the browser.
#[wasm_split(robot_detail, wasm_split_path = ::leptos::wasm_split, fallible)]
fn robot_detail(robot_id: String) -> PanelBuilt {
    Ok(view! { <RobotDetail robot_id/> }.into_any())
}

/// "Register a robot", built in the browser.
#[wasm_split(robot_registration, wasm_split_path = ::leptos::wasm_split, fallible)]
fn robot_registration(register: ServerAction<RegisterRobot>) -> PanelBuilt {
    Ok(view! { <super::robot_register::RegisterRobotPanel register/> }.into_any())
}

#[component]
fn RobotDetail(robot_id: String) -> impl IntoView {
    let id = robot_id.clone();
    let edit = ServerAction::<EditRobot>::new();
    let rotate = ServerAction::<RotateRobotToken>::new();
    let retire = ServerAction::<RetireRobot>::new();
    let robot = crate::page_data::load(
        move || (id.clone(), edit.version().get(), rotate.version().get()),
        |(id, ..)| load_robot(id),
    );
    // Retired: back to the list, which no longer holds it.
    let navigate = leptos_router::hooks::use_navigate();
    Effect::new(move |_| {
        if matches!(retire.value().get(), Some(Ok(()))) {
            navigate("/admin/directory", Default::default());
        }
    });
    view! {
        <section class="panel detail" aria-live="polite">
            <div class="toolbar">
                <h2>"Robot "{robot_id}</h2>
                <a class="button subtle" href="/admin/directory">"Close"</a>
            </div>
            <Suspense fallback=|| view! { <p class="loading">"Loading robot…"</p> }>
                {move || Suspend::new(async move {
                    match robot.await {
                        Err(e) => view! { <ErrorNotice error=e/> }.into_any(),
                        Ok(r) => { let r2 = r.clone(); view! {
                            <dl class="facts">
                                <dt>"Model"</dt><dd>{r.model}</dd>
                                <dt>"Site"</dt><dd>{r.site}</dd>
                                <dt>"PoP"</dt><dd>{r.pop}</dd>
                                <dt>"Required cert"</dt><dd>{r.req_cert}</dd>
                                <dt>"Skill"</dt><dd>{r.skill}</dd>
                                <dt>"Registry"</dt><dd><RegistryTag status=r.status/></dd>
                                <dt>"Last heartbeat"</dt>
                                <dd>{r.last_heartbeat_ms.map(utc_clock).unwrap_or_else(|| "never".to_string())}</dd>
                                <dt>"Token rotated"</dt>
                                <dd data-testid="token-rotated">{r.token_rotated_ms.map(crate::booking::utc_when).unwrap_or_else(|| "never".to_string())}</dd>
                            </dl>
                            <RobotAdmin r=r2 edit rotate retire/>
                        }.into_any() }
                    }
                })}
            </Suspense>
        </section>
    }
}

/// The admin's changes to one robot: edit (the derived skill shows as the
/// reqCert is typed), rotate the token (shown once, with a copy button),
/// retire (asks once more; refused while the robot is in a session).
#[component]
fn RobotAdmin(r: Robot, edit: ServerAction<EditRobot>, rotate: ServerAction<RotateRobotToken>, retire: ServerAction<RetireRobot>) -> impl IntoView {
    let req_cert = RwSignal::new(r.req_cert.clone());
    let skill = move || match crate::directory::derived_skill(&req_cert.get()) {
        Ok(skill) => format!("skill: {skill}"),
        Err(why) => why,
    };
    let confirming = RwSignal::new(false);
    let id = StoredValue::new(r.id.clone());
    view! {
        <form method="post" action=EditRobot::url() class="booking-form" data-testid="robot-edit" on:submit=dispatch_on_submit(edit, |form| EditRobot { robot_id: form.text("robot_id"), model: form.text("model"), site: form.text("site"), pop: form.text("pop"), req_cert: form.text("req_cert") })>
            <input type="hidden" name="robot_id" value=r.id.clone()/>
            <label for="robot-model">"Model"</label>
            <input id="robot-model" name="model" required value=r.model.clone()/>
            <label for="robot-site">"Site"</label>
            <input id="robot-site" name="site" required value=r.site.clone()/>
            <label for="robot-pop">"PoP"</label>
            <input id="robot-pop" name="pop" required value=r.pop.clone()/>
            <label for="robot-req-cert">"Required cert"</label>
            <input id="robot-req-cert" name="req_cert" required value=r.req_cert.clone() data-testid="robot-req-cert"
                on:input=move |ev| req_cert.set(event_target_value(&ev))/>
            <span></span><span class="muted" data-testid="robot-skill" aria-live="polite">{skill}</span>
            <button type="submit" class="button primary" data-testid="robot-save">"Save"</button>
        </form>
        {move || edit.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
        <div class="actions">
            <button type="button" class="button" data-testid="rotate-token" disabled=move || rotate.pending().get()
                on:click=move |_| { rotate.dispatch(RotateRobotToken { robot_id: id.get_value() }); }>
                "Rotate token"
            </button>
            <button type="button" class="button danger" data-testid="retire-robot" disabled=move || retire.pending().get()
                on:click=move |_| {
                    if confirming.get_untracked() {
                        confirming.set(false);
                        retire.dispatch(RetireRobot { robot_id: id.get_value() });
                    } else {
                        confirming.set(true);
                    }
                }>
                {move || if confirming.get() { "Confirm: retire for good" } else { "Retire" }}
            </button>
        </div>
        {move || match rotate.value().get() {
            Some(Ok(token)) => Some(view! {
                <p class="notice-line" role="status">
                    "New token, shown once (the old one no longer works): "
                    <code data-testid="new-token">{token.clone()}</code>" "
                    <button type="button" class="button subtle" on:click=move |_| crate::components::copy_to_clipboard(&token)>"Copy"</button>
                </p>
            }.into_any()),
            Some(Err(e)) => Some(view! { <ErrorNotice error=e/> }.into_any()),
            None => None,
        }}
        {move || retire.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
    }
}
