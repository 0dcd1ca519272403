//! `log_truth`: the truth of `experiment judge` read from the database's
//! log (docs/log-truth.md, docs/rundb.md).

use super::SideTable;
use rusqlite::{Row, Statement, params};

/// A row of `log_truth`: one change a committed transaction made to the
/// judged table, as the log gave it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogTruthRow {
    /// Its place in the log (commit order; a transaction's rows in its order).
    pub seq: i64,
    /// The key column's value, as the log printed it (quotes removed).
    pub key: String,
    pub xid: i64,
    /// The LSN of its transaction's COMMIT, as PostgreSQL writes it (`0/16B3748`).
    pub commit_lsn: String,
    /// Its transaction's commit time, ms since the epoch.
    pub commit_ms: i64,
    /// `insert` or `delete`.
    pub op: String,
    /// When the harness read its commit from the log, ms since the epoch:
    /// set where the log's commit time is in whole seconds (MariaDB's
    /// binlog), `None` for PostgreSQL's.
    pub read_ms: Option<i64>,
}

/// One row per change to the judged table that a committed transaction
/// made, in the order the log gave them (`seq`, commit order): the row's key
/// as text, its transaction, the LSN and time of its COMMIT, and `op`. A
/// rolled-back transaction is never in the log. Created by the first such
/// run; a row already there (the same `seq`) is replaced. `read_ms` was
/// added after the table (by `judge --log mariadb`): a file made before
/// gains it at its next such run.
impl SideTable for LogTruthRow {
    const NAME: &'static str = "log_truth";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS log_truth (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    seq             INTEGER NOT NULL,
    key             TEXT NOT NULL,
    xid             INTEGER NOT NULL,
    commit_lsn      TEXT NOT NULL,
    commit_ms       INTEGER NOT NULL,
    op              TEXT NOT NULL,
    read_ms         INTEGER,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;";
    const ADDED: &'static [(&'static str, &'static str)] = &[("read_ms", "INTEGER")];
    const INSERT: &'static str = "INSERT OR REPLACE INTO log_truth (run_id, seq, key, xid, \
         commit_lsn, commit_ms, op, read_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
    const COLUMNS: &'static str = "seq, key, xid, commit_lsn, commit_ms, op, read_ms";
    const FILTER: &'static str = "WHERE run_id = ?1 ORDER BY seq";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            run_id,
            self.seq,
            self.key,
            self.xid,
            self.commit_lsn,
            self.commit_ms,
            self.op,
            self.read_ms
        ])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(LogTruthRow {
            seq: r.get(0)?,
            key: r.get(1)?,
            xid: r.get(2)?,
            commit_lsn: r.get(3)?,
            commit_ms: r.get(4)?,
            op: r.get(5)?,
            read_ms: r.get(6)?,
        })
    }
}
