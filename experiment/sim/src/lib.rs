//! # leaky-timeline: a timeline server known to leak
//!
//! A seeded model of a server whose IDs are k-sorted ([`model`], parameters
//! in [`profile`]), served over HTTP in the dialects of Twitter v1.1,
//! Mastodon, Misskey, X v2 and Discord, one file each ([`server`]), with
//! injected [`faults`]. It knows nothing of the clients, the harness or
//! PostgreSQL (the `experiment` binary wires it as its default target and as
//! `experiment serve`), so that anyone can embed the leaky server in their
//! own tests with this one dependency:
//!
//! ```no_run
//! use leaky_timeline::{SimConfig, Simulator};
//! use leaky_timeline::server::{RateLimits, RunningServer, router};
//! use std::sync::{Arc, Mutex};
//!
//! # async fn demo() {
//! let config = SimConfig::profile("mastodon").unwrap();
//! let sim = Simulator::new(config, 1, 1_767_225_600_000);
//! let app = router(Arc::new(Mutex::new(sim)), RateLimits::default());
//! let server = RunningServer::start(app).await.unwrap();
//! let timeline = server.url("/api/v1/timelines/public");
//! // ... point your client at `timeline`; the model's truth says what it owes.
//! # }
//! ```
//!
//! [`calibration`] runs the "part 2" poll loops directly against the model.

pub mod calibration;
mod clock;
pub mod faults;
pub mod model;
pub mod profile;
pub mod server;
pub mod sync;

pub use model::{Query, SimStatus, Simulator};
pub use profile::SimConfig;

/// The truth row (the run database's `truth` table) of a simulated status.
pub fn truth_row(layout: &since_id::id::Layout, s: &model::SimStatus) -> rundb::TruthRow {
    rundb::TruthRow {
        id: layout.format(s.id),
        id_key: s.id.sort_key(),
        id_time_ms: s.id_time_ms,
        posted_at_ms: s.posted_at_ms,
        visible_at_ms: s.visible_at_ms,
        deleted_at_ms: s.deleted_at_ms,
        origin: s.origin.to_string(),
    }
}
