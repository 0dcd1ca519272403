//! # rundb: the run database of the leak harness
//!
//! One home for `run.db`: its schema ([`schema`]), one Rust type per row of
//! each table ([`rows`]), each side table declared once ([`tables`]: its
//! name, DDL, row type, insert and read), one writer ([`write`](mod@write): the recorder, `serve
//! --truth` and the synthetic test databases) and one reader ([`read`]:
//! `analyze`). A change to the schema is an edit here, and the compiler
//! finds every user it breaks.
//!
//! Every function takes the `rusqlite::Connection` it works on, so that a
//! caller keeps its own transactions (the recorder commits once a second of
//! wall time, the synthetic databases once per run). `analyze` reads run.db
//! through [`read`] only; a side table (created on first use) is written by
//! one generic writer, [`write::side_rows`], and read by one generic reader,
//! [`read::side_rows`]. Errors are [`Error`]: one line for
//! the user.

pub mod pages;
pub mod read;
pub mod rows;
pub mod schema;
pub mod scope;
pub mod tables;
pub mod write;

pub use rows::{
    ClientRequestRow, CursorFlagRow, DeliveryRow, FttDeleteRow, FttPushRow, FttRows, FttTrimRow,
    LogTruthRow, ObservationRow, PartitionDropRow, PollerRow, RequestRow, RunRow, StatusRow,
    SweepRunRow, TruthAuthorRow, TruthRow, WatchStateRow, WriterBracketRow,
};

pub use tables::SideTable;

use std::fmt;

/// What went wrong with a run database; `Display` is the one-line message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<Error> for String {
    fn from(e: Error) -> String {
        e.0
    }
}

/// The version written to `runs.version`: this workspace's, which the
/// experiment, `serve` and this crate share (`version.workspace` in
/// Cargo.toml).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
