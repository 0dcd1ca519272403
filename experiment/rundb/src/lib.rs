//! # rundb: the run database of the leak harness
//!
//! One home for the schema of `run.db`, written by `experiment` and `serve
//! --truth`, read by `analyze`.

pub mod schema;
