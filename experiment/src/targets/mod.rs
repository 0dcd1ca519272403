//! The targets, peers side by side: each is one module that takes the
//! [`Common`](crate::session::Common) options and its own resolved options
//! (`cmd::run` builds both, and refuses every flag that does not apply), runs
//! the pollers against what it is, and returns a
//! [`RunSummary`](crate::session::RunSummary). A target imports the shared
//! lower modules (session, drive, record, api, sim, servers), never another
//! target nor a command (`tests/architecture.rs` checks it).

pub mod api;
pub mod mariadb;
pub mod misskey_ftt;
pub mod postgres;
pub mod simulator;
