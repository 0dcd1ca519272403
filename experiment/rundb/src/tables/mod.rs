//! The side tables of run.db, each declared once: its name, its DDL, its
//! row type, how a row is inserted and how it reads back, in one file per
//! table (the FTT's three tables, written together, share one).
//!
//! A side table is created by the first write to a file that needs it, so
//! that the runs that never write one keep exactly the tables of
//! [`crate::schema::CREATE`]. Every side table is written by one generic
//! writer, [`crate::write::side_rows`], and read by one generic reader,
//! [`crate::read::side_rows`], for any `T:` [`SideTable`]; the recorder
//! stores any of them through one generic path (`RecordSender::side` in the
//! experiment). Adding a table is a file here, its line in [`SIDE_TABLES`]
//! and its paragraph in docs/rundb.md (checked by this crate's tests).

mod client_requests;
mod cursor_flags;
mod ftt;
mod log_deliveries;
mod log_truth;
mod partition_drops;
mod sweep_run;
mod truth_authors;
mod watch_state;
mod writer_brackets;

pub use client_requests::ClientRequestRow;
pub use cursor_flags::CursorFlagRow;
pub use ftt::{FttDeleteRow, FttPushRow, FttRows, FttTrimRow};
pub use log_deliveries::DeliveryRow;
pub use log_truth::LogTruthRow;
pub use partition_drops::PartitionDropRow;
pub use sweep_run::SweepRunRow;
pub use truth_authors::TruthAuthorRow;
pub use watch_state::WatchStateRow;
pub use writer_brackets::WriterBracketRow;

use rusqlite::{Connection, Row, Statement};

/// A table beside the schema's own ([`crate::schema::CREATE`]), created on
/// first use: everything the writer and the reader need to know of it.
///
/// The row type carries no `run_id` field: the writer is given it beside
/// the rows ([`SideTable::insert`] binds it), the reader selects by it
/// ([`SideTable::FILTER`]).
pub trait SideTable: Sized + Send + 'static {
    /// The table's name.
    const NAME: &'static str;
    /// Names the table had before, read as well as [`SideTable::NAME`] (a
    /// run is in one of them); none for most.
    const OLD_NAMES: &'static [&'static str] = &[];
    /// `CREATE TABLE IF NOT EXISTS ...`: the table as a new file gets it.
    const CREATE: &'static str;
    /// Columns added after the table was first released, with their types:
    /// the writer adds them to a file that lacks them, the reader reads NULL
    /// for them from such a file.
    const ADDED: &'static [(&'static str, &'static str)] = &[];
    /// Whether a batch of no rows creates the table: `true` where a run
    /// with the table and no rows was checked and had none; `false` where
    /// the table comes with its first row.
    const CREATED_EMPTY: bool = true;
    /// The statement that inserts one row, run by [`SideTable::insert`].
    const INSERT: &'static str;
    /// The columns read, in the order [`SideTable::read`] takes them,
    /// separated by `", "` (one of [`SideTable::ADDED`] may be among them).
    const COLUMNS: &'static str;
    /// What follows `FROM <table>` in the read: the rows of run `?1`, in the
    /// order they are read (a table of one row per file names no run).
    const FILTER: &'static str = "WHERE run_id = ?1";

    /// Binds this row of run `run_id` into [`SideTable::INSERT`] and runs
    /// it; the number of rows it changed.
    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize>;

    /// The one-line error when this row's insert changed nothing and that
    /// means a row was lost; `None` (the default) where it cannot happen or
    /// is harmless.
    fn unmatched(&self) -> Option<String> {
        None
    }

    /// What the row changes beyond its table, run right after its insert
    /// (a deletion marks the truth rows it deleted); nothing by default.
    fn mark(&self, _conn: &Connection, _run_id: i64) -> rusqlite::Result<()> {
        Ok(())
    }

    /// A row as [`SideTable::COLUMNS`] selects it.
    fn read(r: &Row) -> rusqlite::Result<Self>;
}

/// Every side table's name, in the order they were added (docs/rundb.md
/// has a paragraph for each).
pub const SIDE_TABLES: [&str; 12] = [
    WriterBracketRow::NAME,
    FttPushRow::NAME,
    FttTrimRow::NAME,
    FttDeleteRow::NAME,
    PartitionDropRow::NAME,
    CursorFlagRow::NAME,
    ClientRequestRow::NAME,
    LogTruthRow::NAME,
    DeliveryRow::NAME,
    TruthAuthorRow::NAME,
    SweepRunRow::NAME,
    WatchStateRow::NAME,
];
