//! The client screen (`/client`, seed 001): the client's bookings (book,
//! cancel), its live sessions with their activity and chat, past sessions
//! with billable time and rating, and billable time per month. Admins see
//! it for sessions without a client and may book for any client.
//! `?s=<id>` picks the session watched below the lists.
//!
//! Live on `/ws?watch=mine`: pushes about the sessions this person is a
//! party to (for an admin: the org's), with a slow poll as a fallback.

use crate::booking::{utc_when, Booking, ClientSessions};
use crate::components::{for_chosen_session, loaded, ActivityLog, ErrorNotice, RequireRole};
use crate::deferred::{Deferred, PanelBuilt};
use crate::forms::dispatch_on_submit;
use crate::functions::{load_booking_options, load_bookings, load_client_sessions, load_session, load_session_activity, BookRobot, CancelBooking};
use crate::models::Role;
use crate::routes::chat_panel::ChatPanel;
use crate::routes::session_rating::RatingPanel;
use crate::rules::format_duration;
use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use leptos::server_fn::ServerFn;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The fallback poll when no push comes.
const POLL_MS: u32 = 15_000;

#[component]
pub fn ClientPage() -> impl IntoView {
    view! {
        <Title text="Client"/>
        <RequireRole role=Role::Client>
            <ClientHome/>
        </RequireRole>
    }
}

#[component]
fn ClientHome() -> impl IntoView {
    let tick = crate::live::use_push(crate::live::Watch::Mine, POLL_MS).version;
    let book = ServerAction::<BookRobot>::new();
    let cancel = ServerAction::<CancelBooking>::new();
    let version = move || (tick.get(), book.version().get(), cancel.version().get());
    let bookings = crate::page_data::load(version, |_| load_bookings());
    let options = crate::page_data::load(|| (), |_| load_booking_options());
    let sessions = crate::page_data::load(version, |_| load_client_sessions());
    let query = use_query_map();
    let watched = move || query.read().get("s").unwrap_or_default();
    view! {
        <section class="panel" aria-labelledby="sessions-h">
            <h1 id="sessions-h">"Your sessions"</h1>
            <Transition fallback=|| view! { <p class="loading">"Loading your sessions…"</p> }>
                {loaded(|| true, sessions, |s| view! { <Sessions s/> })}
            </Transition>
        </section>
        <section class="panel" aria-labelledby="bookings-h">
            <h2 id="bookings-h">"Bookings"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading the bookings…"</p> }>
                {loaded(|| true, bookings, move |list| view! { <Bookings list cancel/> })}
                {loaded(|| true, options, move |o| view! { <BookingForm o book/> })}
            </Transition>
            {move || book.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
            {move || cancel.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
        </section>
        // The chosen session's panels load their code once the page is
        // interactive (crate::deferred).
        <Deferred placeholder="Loading the session's activity and chat…"
            view=move || watched_session(Signal::derive(watched), tick.into())/>
    }
}

#[component]
fn Sessions(s: ClientSessions) -> impl IntoView {
    let ClientSessions { live, past, months } = s;
    view! {
        <h2>"Live"</h2>
        {if live.is_empty() {
            view! { <p class="empty" data-testid="client-live-empty">"No session is running for you now."</p> }.into_any()
        } else {
            view! {
                <ul class="client-live" data-testid="client-live">
                    {live.into_iter().map(|s| view! {
                        <li>
                            <a href=format!("/client?s={}", s.id)>{s.id.clone()}</a>
                            " · "{s.robot.clone()}" · "{s.lifecycle.as_str()}" · "{s.state.as_str()}
                            " · "{s.operator_name.clone().unwrap_or_else(|| "waiting for an operator".into())}
                            " · ends "{s.planned_end_at.map(utc_when).unwrap_or_else(|| "—".into())}
                        </li>
                    }).collect_view()}
                </ul>
            }.into_any()
        }}
        <h2>"Billable time by month"</h2>
        {if months.is_empty() {
            view! { <p class="empty">"Nothing billed yet."</p> }.into_any()
        } else {
            view! {
                <table class="grid" data-testid="client-months">
                    <thead><tr><th scope="col">"Month (UTC)"</th><th scope="col">"Sessions"</th><th scope="col">"Billable"</th></tr></thead>
                    <tbody>
                        {months.into_iter().map(|m| view! {
                            <tr><td>{m.month}</td><td>{m.sessions}</td><td>{format_duration(m.billable_ms)}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any()
        }}
        <h2>"Past sessions"</h2>
        {if past.is_empty() {
            view! { <p class="empty">"No finished sessions yet."</p> }.into_any()
        } else {
            view! {
                <table class="grid" data-testid="client-past">
                    <thead><tr>
                        <th scope="col">"Session"</th><th scope="col">"Robot"</th><th scope="col">"Operator"</th>
                        <th scope="col">"Outcome"</th><th scope="col">"Billable"</th><th scope="col">"Rating"</th>
                    </tr></thead>
                    <tbody>
                        {past.into_iter().map(|p| view! {
                            <tr>
                                <td><a href=format!("/client?s={}", p.session.id)>{p.session.id.clone()}</a></td>
                                <td>{p.session.robot.clone()}</td>
                                <td>{p.session.operator_name.clone().unwrap_or_else(|| "—".into())}</td>
                                <td>{p.session.lifecycle.as_str()}</td>
                                <td>{format_duration(p.billable_ms)}</td>
                                <td>{p.rating.map_or_else(|| "not rated".to_string(), |r| format!("{}/5", r.stars))}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any()
        }}
    }
}

#[component]
fn Bookings(list: Vec<Booking>, cancel: ServerAction<CancelBooking>) -> impl IntoView {
    if list.is_empty() {
        return view! { <p class="empty" data-testid="bookings-empty">"No bookings ahead."</p> }.into_any();
    }
    view! {
        <table class="grid" data-testid="bookings">
            <thead><tr>
                <th scope="col">"Robot"</th><th scope="col">"Client"</th><th scope="col">"From"</th><th scope="col">"To"</th><th scope="col"></th>
            </tr></thead>
            <tbody>
                {list.into_iter().map(|b| view! {
                    <tr>
                        <td>{b.robot_id.clone()}</td><td>{b.client_name.clone()}</td>
                        <td>{utc_when(b.starts_at_ms)}</td><td>{utc_when(b.ends_at_ms)}</td>
                        <td>
                            <form method="post" action=CancelBooking::url() on:submit=dispatch_on_submit(cancel, |form| CancelBooking { booking_id: form.text("booking_id") })>
                                <input type="hidden" name="booking_id" value=b.id.clone()/>
                                <button type="submit" class="button subtle">"Cancel"</button>
                            </form>
                        </td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn BookingForm(o: crate::booking::BookingOptions, book: ServerAction<BookRobot>) -> impl IntoView {
    let for_others = o.clients.len() > 1;
    view! {
        <form method="post" action=BookRobot::url() class="booking-form" data-testid="booking-form" on:submit=dispatch_on_submit(book, |form| BookRobot {
                robot_id: form.text("robot_id"),
                starts_at: form.text("starts_at"),
                minutes: form.number("minutes"),
                client_id: form.optional("client_id"),
                task: form.optional("task"),
            })>
            <label for="book-robot">"Robot"</label>
            <select id="book-robot" name="robot_id" required data-testid="book-robot">
                {o.robots.into_iter().map(|(id, label)| view! { <option value=id.clone()>{id.clone()}" · "{label}</option> }).collect_view()}
            </select>
            <label for="book-start">"From (UTC)"</label>
            <input id="book-start" type="datetime-local" name="starts_at" required data-testid="book-start"/>
            <label for="book-minutes">"Minutes"</label>
            <input id="book-minutes" type="number" name="minutes" min="1" max="720" value="60" required data-testid="book-minutes"/>
            <label for="book-task">"Task"</label>
            <input id="book-task" name="task" maxlength="200" placeholder="What the robot should do (the dataset's task)"/>
            {match for_others {
                true => view! {
                    <label for="book-client">"For client"</label>
                    <select id="book-client" name="client_id" required>
                        {o.clients.into_iter().map(|(id, name)| view! { <option value=id>{name}</option> }).collect_view()}
                    </select>
                }.into_any(),
                false => o.clients.into_iter().next().map(|(id, _)| view! { <input type="hidden" name="client_id" value=id/> }).into_any(),
            }}
            <button type="submit" class="button primary" data-testid="book-submit">"Book"</button>
        </form>
    }
}

/// The session chosen with `?s=`: its activity, chat and rating, live with
/// the client's pushes.
#[wasm_split(watched_session, wasm_split_path = ::leptos::wasm_split, fallible)]
fn watched_session(watched: Signal<String>, tick: Signal<u64>) -> PanelBuilt {
    let chosen = move || !watched.get().is_empty();
    let record = crate::page_data::load(move || (watched.get(), tick.get()), |(id, _)| for_chosen_session(id, load_session));
    let activity = crate::page_data::load(move || (watched.get(), tick.get()), |(id, _)| for_chosen_session(id, load_session_activity));
    let session_id = move || watched.get();
    Ok(view! {
        <section class="panel" aria-labelledby="watch-h" hidden=move || !chosen()>
            <h2 id="watch-h">"Session "<span data-testid="watched">{session_id}</span></h2>
            <a class="button subtle" href=move || format!("/ops/sessions?s={}", watched.get())>"Open the session detail"</a>
            <Transition fallback=|| view! { <p class="loading">"Loading the activity…"</p> }>
                {loaded(chosen, activity, |log| view! { <ActivityLog log/> })}
            </Transition>
        </section>
        <ChatPanel session_id refresh=move || tick.get()
            read_only=Signal::derive(move || record.get().and_then(Result::ok).is_some_and(|s| s.lifecycle.is_terminal()))/>
        <RatingPanel session_id record/>
    }
    .into_any())
}
