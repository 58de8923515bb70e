//! ClutchCall's domain: the types and the rules, as pure functions, that
//! the server, the browser and the simulator share. No Leptos, no features,
//! no I/O: the compiler, not discipline, keeps it so. `app` re-exports every
//! module under its old path (`app::models`, `app::dispatch`, …).

pub mod board;
pub mod booking;
pub mod chat;
pub mod datasets;
pub mod directory;
pub mod dispatch;
pub mod event_log;
pub mod events;
pub mod handover;
pub mod integrations;
pub mod inactivity;
pub mod lifecycle;
pub mod models;
pub mod people;
pub mod presence;
pub mod rating;
pub mod relay;
pub mod ring;
pub mod roster;
pub mod rules;
pub mod teleop;
pub mod timeline;
