//! One Rust type per row of each table of [`crate::schema`], used by every
//! writer (the recorder, `serve --truth`, the synthetic test databases) and
//! by the reader (`analyze`), so that a column is declared once.
//!
//! **One type per column.** Every `INTEGER` column is an `i64`, as SQLite
//! stores it ("a signed integer, stored in 0, 1, 2, 3, 4, 6, or 8 bytes",
//! <https://www.sqlite.org/datatype3.html>), and every 0/1 flag column
//! (`complete`, `reordered`, `overflow`) is a `bool`; writers convert their
//! own `u64`/`usize` counts where they fill a row, so that no reader ever
//! meets a second type for the same column. The seed is the one column whose
//! domain is wider than `i64` (the simulator's seed is a `u64`): it is stored
//! as its two's-complement bit pattern (`seed as i64`) and read back with
//! `as u64`, so every seed round-trips exactly and the usual seeds (below
//! 2^63) read the same in `sqlite3` as on the command line.
//!
//! **Text columns are generic.** The rows of the large tables (requests,
//! statuses, observations, truth) take their text type as a parameter `S`:
//! `String` (the default) where a writer owns its rows, `&str` where the
//! reader lends a row borrowed from SQLite's own buffer for the length of a
//! callback, so that reading ten million observations allocates nothing per
//! row. `runs` and `pollers` are read once per run and are always owned.
//!
//! `run_id` is not a field of the per-run tables' rows: the writer is given
//! it beside the rows, the reader selects by it.
//!
//! The side tables' rows are declared with their tables ([`crate::tables`])
//! and named here too.

pub use crate::tables::{
    ClientRequestRow, CursorFlagRow, DeliveryRow, FttDeleteRow, FttPushRow, FttRows, FttTrimRow,
    LogTruthRow, PartitionDropRow, SweepRunRow, TruthAuthorRow, WatchStateRow, WriterBracketRow,
};

/// A row of `runs`: one run of the experiment (or one `serve --truth`
/// session, or one synthetic run).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRow {
    /// Assigned by SQLite on insert (ignored by [`crate::write::add_run`]).
    pub id: i64,
    pub started_at_ms: i64,
    /// `None` until the run ends (a killed run never gets one).
    pub ended_at_ms: Option<i64>,
    /// The run ended as planned (duration reached, interrupted with a final
    /// cycle); `false` while running and after a kill.
    pub complete: bool,
    pub end_reason: Option<String>,
    /// `simulator`, `KIND:SPEC`, `postgres...` or `sim-serve`.
    pub target: String,
    pub profile: Option<String>,
    /// The seed's bit pattern: see the module's documentation.
    pub seed: Option<i64>,
    /// `real`, `virtual`, or `wall` (a `serve --truth` session).
    pub clock: String,
    pub layout: String,
    pub interval_ms: i64,
    pub page_limit: i64,
    /// Every parameter of the run as JSON (tokens redacted): the writer's
    /// own shape, stored as text and read back as text.
    pub config: String,
    /// The version of the program that wrote the run.
    pub version: String,
}

/// A row of `pollers`: one cursor of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PollerRow {
    /// Assigned by SQLite on insert (ignored by [`crate::write::add_run`]).
    pub id: i64,
    /// Unique within the run.
    pub name: String,
    /// The policy's spec, as `--poller` takes it.
    pub policy: String,
    /// The policy's compensation window, if it has one.
    pub k_ms: Option<i64>,
}

/// A row of `requests`: one request of a poller, with the counts of what it
/// returned (the items themselves are [`ObservationRow`]s).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestRow<S = String> {
    /// Assigned by SQLite on insert (ignored by [`crate::write::insert_request`]).
    pub id: i64,
    /// A [`PollerRow::id`] of the same run.
    pub poller_id: i64,
    pub cycle: i64,
    /// 0 for a cycle's first request, then its back-pages.
    pub page: i64,
    pub sent_at_ms: i64,
    pub received_at_ms: i64,
    /// The cursor as the API takes it, with its sort key (32 hex digits).
    pub since_id: Option<S>,
    pub since_key: Option<S>,
    /// A back-page's upper bound, with its sort key.
    pub before_id: Option<S>,
    pub before_key: Option<S>,
    pub page_limit: i64,
    /// When the cursor's previous cycle was retrieved.
    pub retrieved_at_ms: Option<i64>,
    pub http_status: Option<i64>,
    pub error: Option<S>,
    /// How many items the response held.
    pub items: i64,
    pub new_items: i64,
    pub bytes: Option<i64>,
    /// The response was not in descending ID order (it is stored sorted).
    pub reordered: bool,
    /// The cycle hit `--max-back-pages` here: its window was cut.
    pub overflow: bool,
    pub wait_ms: i64,
}

/// A row of `statuses`: a status as first returned in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusRow<S = String> {
    /// The ID exactly as the API gave it.
    pub id: S,
    /// 32 hex digits that sort like the ID.
    pub id_key: S,
    /// The time decoded from the ID.
    pub id_time_ms: i64,
    pub created_at: Option<S>,
    pub author: Option<S>,
}

/// A row of `observations`: one item of one response, in response order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObservationRow<S = String> {
    pub request_id: i64,
    pub position: i64,
    /// A [`StatusRow::id`] of the run.
    pub status_id: S,
}

/// A row of `truth`: one status of a simulated (or PostgreSQL) timeline,
/// with when it became visible.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruthRow<S = String> {
    pub id: S,
    pub id_key: S,
    pub id_time_ms: i64,
    pub posted_at_ms: i64,
    pub visible_at_ms: i64,
    pub deleted_at_ms: Option<i64>,
    /// Which generator or mechanism produced it (`local`, `remote`, `commit-ts`...).
    pub origin: S,
}
