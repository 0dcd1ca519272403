//! The `experiment` binary's commands, one module each (mini-redis style):
//! [`serve`] (the leaky server alone),
//! [`sweep`] (many seeds judged in memory), [`judge`] (a client under
//! test), [`watch`] (your own PostgreSQL's or MariaDB's log while your system runs) and
//! [`id`] (ID math). Commands sit
//! on top: they import the targets and the shared modules, and nothing
//! imports them.

pub mod id;
pub mod judge;
pub mod serve;
pub mod sweep;
pub mod watch;
