//! The embedded leaky timeline: a seeded model of a server whose IDs are
//! k-sorted ([`model`], parameters in [`profile`]), served over HTTP in the
//! dialects of Twitter v1.1, Mastodon, Misskey, X v2 and Discord, one file
//! each ([`server`]), and the `experiment serve` command ([`serve_cmd`]).
//! [`calibration`] runs the "part 2" poll loops directly against the model.

pub mod calibration;
pub mod faults;
pub mod model;
pub mod profile;
pub mod serve_cmd;
pub mod server;

pub use model::{Query, SimStatus, Simulator};
pub use profile::SimConfig;
