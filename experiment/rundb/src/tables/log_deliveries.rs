//! `log_deliveries`: what each consumer of `experiment judge` delivered
//! (`--delivered NAME=FILE`; docs/log-truth.md, docs/rundb.md).

use super::SideTable;
use rusqlite::{Row, Statement, params};

/// A row of `log_deliveries`: one line of a consumer's delivered file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryRow {
    /// The consumer's name (`--delivered NAME=FILE`).
    pub consumer: String,
    /// The line's number in the file, from 1.
    pub line: i64,
    /// The key the line names; `None` for a line that names none.
    pub key: Option<String>,
    /// A line that names no key, as written (cut at 200 bytes).
    pub raw: Option<String>,
    /// When the harness read the line.
    pub read_at_ms: i64,
}

/// In the file's order, when the harness read each line (the delivery
/// happened at most one read period before). Created by the first such run;
/// a line already there is replaced. Read each consumer's lines in file
/// order, consumers by name.
impl SideTable for DeliveryRow {
    const NAME: &'static str = "log_deliveries";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS log_deliveries (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    consumer        TEXT NOT NULL,
    line            INTEGER NOT NULL,
    key             TEXT,
    raw             TEXT,
    read_at_ms      INTEGER NOT NULL,
    PRIMARY KEY (run_id, consumer, line)
) WITHOUT ROWID;";
    const INSERT: &'static str = "INSERT OR REPLACE INTO log_deliveries (run_id, consumer, line, \
         key, raw, read_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
    const COLUMNS: &'static str = "consumer, line, key, raw, read_at_ms";
    const FILTER: &'static str = "WHERE run_id = ?1 ORDER BY consumer, line";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            run_id,
            self.consumer,
            self.line,
            self.key,
            self.raw,
            self.read_at_ms
        ])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(DeliveryRow {
            consumer: r.get(0)?,
            line: r.get(1)?,
            key: r.get(2)?,
            raw: r.get(3)?,
            read_at_ms: r.get(4)?,
        })
    }
}
