//! `writer_brackets`: the writers' transaction brackets of the database
//! targets (PostgreSQL's and MariaDB's; docs/rundb.md).

use super::SideTable;
use rusqlite::{Row, Statement, params};

/// A row of `writer_brackets`: the bracket of one written row's visibility,
/// from its writer's transaction start to its COMMIT's return.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriterBracketRow {
    pub id: String,
    /// The writing transaction's ID (PostgreSQL), or `writer N` (MariaDB).
    pub xid: String,
    pub xact_start_ms: i64,
    /// `pg_xact_commit_timestamp`, when `track_commit_timestamp` is on.
    pub commit_ts_ms: Option<i64>,
    /// When the writer's COMMIT returned.
    pub commit_returned_ms: i64,
    pub injected_sleep_ms: i64,
}

/// Created by the first database run that writes to a file; a row already
/// there is replaced. Files written before the rename hold the same columns
/// in `pg_truth`, which is read too.
impl SideTable for WriterBracketRow {
    const NAME: &'static str = "writer_brackets";
    const OLD_NAMES: &'static [&'static str] = &["pg_truth"];
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS writer_brackets (
    run_id             INTEGER NOT NULL REFERENCES runs(id),
    id                 TEXT NOT NULL,
    xid                TEXT NOT NULL,
    xact_start_ms      INTEGER NOT NULL,
    commit_ts_ms       INTEGER,
    commit_returned_ms INTEGER NOT NULL,
    injected_sleep_ms  INTEGER NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;";
    const INSERT: &'static str = "INSERT OR REPLACE INTO writer_brackets (run_id, id, xid, \
         xact_start_ms, commit_ts_ms, commit_returned_ms, injected_sleep_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    const COLUMNS: &'static str =
        "id, xid, xact_start_ms, commit_ts_ms, commit_returned_ms, injected_sleep_ms";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            run_id,
            self.id,
            self.xid,
            self.xact_start_ms,
            self.commit_ts_ms,
            self.commit_returned_ms,
            self.injected_sleep_ms
        ])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(WriterBracketRow {
            id: r.get(0)?,
            xid: r.get(1)?,
            xact_start_ms: r.get(2)?,
            commit_ts_ms: r.get(3)?,
            commit_returned_ms: r.get(4)?,
            injected_sleep_ms: r.get(5)?,
        })
    }
}
