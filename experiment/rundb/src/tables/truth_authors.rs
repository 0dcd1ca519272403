//! `truth_authors`: the author of each status of a recording's truth
//! (`experiment serve --record`; docs/rundb.md).

use super::SideTable;
use rusqlite::{Row, Statement, params};

/// A row of `truth_authors`: the author of a status of the truth, for the
/// scopes that serve some authors only (one author's timeline, a home
/// timeline).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruthAuthorRow {
    pub id: String,
    pub author: i64,
}

/// Created with the first rows; a status already there is left as it is.
impl SideTable for TruthAuthorRow {
    const NAME: &'static str = "truth_authors";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS truth_authors (
    run_id             INTEGER NOT NULL REFERENCES runs(id),
    id                 TEXT NOT NULL,
    author             INTEGER NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;";
    const CREATED_EMPTY: bool = false;
    const INSERT: &'static str =
        "INSERT OR IGNORE INTO truth_authors (run_id, id, author) VALUES (?1, ?2, ?3)";
    const COLUMNS: &'static str = "id, author";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![run_id, self.id, self.author])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(TruthAuthorRow {
            id: r.get(0)?,
            author: r.get(1)?,
        })
    }
}
