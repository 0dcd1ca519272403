//! `watch_state`: where `experiment watch` had got, written again every few
//! seconds and at its end (docs/log-truth.md, "Settled rows"; docs/rundb.md).

use super::SideTable;
use rusqlite::{Row, Statement, params};

/// The row of `watch_state`: the run's incremental checker (the verdicts'
/// counts, its open rows and staircases) and each delivered file's read
/// position, as JSON, and when it was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchStateRow {
    /// When it was written, ms since the epoch.
    pub at_ms: i64,
    /// JSON: `{"checker": ..., "files": [{"name", "offset", "lines"}],
    /// "log": ...}` (`log`: where in the log the rows the checker took end,
    /// as the source writes it; docs/rundb.md).
    pub state: String,
}

/// One row per watch run, replaced at each write: the run's verdicts come
/// from it (`analysis::settle`), not from its `log_truth` rows alone,
/// which hold only the rows not settled (and the lost ones).
impl SideTable for WatchStateRow {
    const NAME: &'static str = "watch_state";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS watch_state (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id),
    at_ms  INTEGER NOT NULL,
    state  TEXT NOT NULL)";
    const CREATED_EMPTY: bool = false;
    const INSERT: &'static str = "INSERT OR REPLACE INTO watch_state VALUES (?1, ?2, ?3)";
    const COLUMNS: &'static str = "at_ms, state";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![run_id, self.at_ms, self.state])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(WatchStateRow {
            at_ms: r.get(0)?,
            state: r.get(1)?,
        })
    }
}
