//! `--target misskey-ftt`: Misskey's Fanout Timeline (FTT) on a real Redis
//! beside a real PostgreSQL, as Misskey's code runs it (docs/misskey-ftt.md):
//! notes IDed at `create()`'s start (`aidx`), inserted in PostgreSQL, then
//! pushed to Redis lists (`push`); timelines read from those lists with
//! Misskey's rules and its PostgreSQL fallback (`read`, pure).

pub mod aidx;
pub mod creators;
pub mod driver;
pub mod federation;
pub mod http;
pub mod options;
pub mod push;
pub mod read;
pub mod redis;
pub mod serve;
pub mod store;
pub mod timeline;
mod truth;

pub use driver::{FttOpts, Timeline, run};

#[cfg(test)]
mod real_tests;
