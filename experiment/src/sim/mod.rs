//! The embedded leaky timeline: a seeded model of a server whose IDs are
//! k-sorted ([`model`], parameters in [`profile`]), served over HTTP in the
//! dialects of Twitter v1.1, Mastodon and Misskey ([`server`]), X v2
//! (`server_x`) and Discord (`server_discord`), and the
//! `experiment serve` command ([`serve_cmd`]). [`calibration`] runs the
//! "part 2" poll loops directly against the model.

pub mod calibration;
pub mod faults;
#[cfg(test)]
mod http_tests;
pub mod model;
pub mod profile;
pub mod serve_cmd;
pub mod server;
mod server_discord;
mod server_x;

pub use model::{Query, SimStatus, Simulator};
pub use profile::SimConfig;
