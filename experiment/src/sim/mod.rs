//! The embedded leaky timeline: a seeded model of a server whose IDs are
//! k-sorted ([`model`], parameters in [`profile`]), served over HTTP in the
//! dialects of Twitter v1.1, Mastodon, Misskey, X v2 and Discord, one file
//! each ([`server`]). It knows nothing of the clients, the harness or
//! PostgreSQL: the `experiment serve` command and the targets wire it.
//! [`calibration`] runs the "part 2" poll loops directly against the model.

pub mod calibration;
pub mod faults;
pub mod model;
pub mod profile;
pub mod server;

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
        origin: s.origin.clone(),
    }
}
