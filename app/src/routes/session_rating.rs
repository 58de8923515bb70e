//! The session detail's rating (rule L10): the client's stars and feedback
//! once given; until then, after COMPLETED, the form to give them, for the
//! session's client or an admin of the org.

use crate::components::ErrorNotice;
use crate::functions::{load_session_rating, RateSession};
use crate::models::{LifecycleState, SessionRecord};
use crate::rating::SessionRating;
use crate::rules::utc_clock;
use crate::forms::dispatch_on_submit;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;

#[component]
pub fn RatingPanel(
    session_id: impl Fn() -> String + Send + Sync + Copy + 'static,
    record: crate::page_data::Loaded<Result<SessionRecord, crate::error::AppError>>,
) -> impl IntoView {
    let rate = ServerAction::<RateSession>::new();
    // The guard around the screen has resolved who is asking.
    let me = StoredValue::new(expect_context::<crate::components::Session>().signed_in().cloned());
    let may_rate = move |s: &SessionRecord| {
        me.with_value(|me| me.as_ref().is_some_and(|u| u.role().is_some_and(|role| crate::rating::may_rate(role, &u.user_id, s))))
    };
    let rating = crate::page_data::load(move || (session_id(), rate.version().get()), |(id, _)| crate::components::for_chosen_session(id, load_session_rating));
    view! {
        <section class="panel" aria-labelledby="rating-h">
            <h2 id="rating-h">"Rating"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading the rating…"</p> }>
                {move || Suspend::new(async move {
                    if session_id().is_empty() {
                        return ().into_any();
                    }
                    match (rating.await, record.await) {
                        (Err(e), _) | (_, Err(e)) => view! { <ErrorNotice error=e/> }.into_any(),
                        (Ok(Some(given)), _) => view! { <Given given/> }.into_any(),
                        (Ok(None), Ok(s)) if s.lifecycle == LifecycleState::Completed && may_rate(&s) => view! {
                            <form method="post" action=RateSession::url() class="rate-form" data-testid="rate-form" on:submit=dispatch_on_submit(rate, |form| RateSession { session_id: form.text("session_id"), stars: form.number("stars"), feedback: form.text("feedback") })>
                                <input type="hidden" name="session_id" value=s.id.clone()/>
                                <label for="rate-stars">"Stars for "{s.operator_name.clone().unwrap_or_else(|| "the operator".into())}</label>
                                <select id="rate-stars" name="stars" data-testid="rate-stars">
                                    {(1..=5).rev().map(|n| view! { <option value=n.to_string()>{"★".repeat(n)}" "{n}</option> }).collect_view()}
                                </select>
                                <label for="rate-feedback">"Feedback"</label>
                                <textarea id="rate-feedback" name="feedback" maxlength="1000" rows="2" data-testid="rate-feedback"></textarea>
                                <button type="submit" class="button" data-testid="rate-submit">"Rate"</button>
                            </form>
                        }.into_any(),
                        (Ok(None), Ok(s)) if s.lifecycle == LifecycleState::Cancelled => view! {
                            <p class="empty">"A cancelled session is not rated."</p>
                        }.into_any(),
                        (Ok(None), Ok(s)) if s.lifecycle == LifecycleState::Completed => view! {
                            <p class="empty">"Not rated yet: the session's client rates its operator."</p>
                        }.into_any(),
                        (Ok(None), Ok(_)) => view! { <p class="empty">"The operator is rated once the session completes."</p> }.into_any(),
                    }
                })}
            </Transition>
            {move || rate.value().get().and_then(Result::err).map(|e| view! { <ErrorNotice error=e/> })}
        </section>
    }
}

#[component]
fn Given(given: SessionRating) -> impl IntoView {
    let stars = usize::from(given.stars.min(5));
    view! {
        <p data-testid="rating">
            <span class="stars" aria-label=format!("{stars} of 5 stars")>{"★".repeat(stars)}{"☆".repeat(5 - stars)}</span>
            " "{given.stars}"/5 · by "{given.rated_by_name}" at "{utc_clock(given.at_ms)}
        </p>
        {(!given.feedback.is_empty()).then(|| view! { <blockquote class="feedback">{given.feedback}</blockquote> })}
    }
}
