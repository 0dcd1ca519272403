//! Misskey's Fanout Timeline (`--target misskey-ftt`; docs/rundb.md,
//! docs/misskey-ftt.md): `ftt_pushes`, `ftt_trims` and `ftt_deletes`, each
//! created by the first such run, so that the other runs' files keep the
//! tables of [`crate::schema::CREATE`]; a row already there is replaced.

use super::SideTable;
use rusqlite::{Connection, Row, Statement, params};

/// A row of `ftt_pushes`: for a note and a Redis list the polled endpoint
/// reads, when the note was committed and when its LPUSH returned (`None`:
/// the 3-minute rule refused it), and by which path (`pipeline` or
/// `lindex`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FttPushRow {
    pub id: String,
    pub list: String,
    pub committed_at_ms: i64,
    pub pushed_at_ms: Option<i64>,
    pub path: String,
}

impl SideTable for FttPushRow {
    const NAME: &'static str = "ftt_pushes";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS ftt_pushes (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    id              TEXT NOT NULL,
    list            TEXT NOT NULL,
    committed_at_ms INTEGER NOT NULL,
    pushed_at_ms    INTEGER,
    path            TEXT NOT NULL,
    PRIMARY KEY (run_id, id, list)
) WITHOUT ROWID;";
    const INSERT: &'static str = "INSERT OR REPLACE INTO ftt_pushes (run_id, id, list, \
         committed_at_ms, pushed_at_ms, path) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
    const COLUMNS: &'static str = "id, list, committed_at_ms, pushed_at_ms, path";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            run_id,
            self.id,
            self.list,
            self.committed_at_ms,
            self.pushed_at_ms,
            self.path
        ])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(FttPushRow {
            id: r.get(0)?,
            list: r.get(1)?,
            committed_at_ms: r.get(2)?,
            pushed_at_ms: r.get(3)?,
            path: r.get(4)?,
        })
    }
}

/// A row of `ftt_trims`: an entry an LTRIM cut from a list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FttTrimRow {
    pub id: String,
    pub list: String,
    pub trimmed_at_ms: i64,
}

impl SideTable for FttTrimRow {
    const NAME: &'static str = "ftt_trims";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS ftt_trims (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    id              TEXT NOT NULL,
    list            TEXT NOT NULL,
    trimmed_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (run_id, id, list)
) WITHOUT ROWID;";
    const INSERT: &'static str = "INSERT OR REPLACE INTO ftt_trims (run_id, id, list, \
         trimmed_at_ms) VALUES (?1, ?2, ?3, ?4)";
    const COLUMNS: &'static str = "id, list, trimmed_at_ms";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![run_id, self.id, self.list, self.trimmed_at_ms])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(FttTrimRow {
            id: r.get(0)?,
            list: r.get(1)?,
            trimmed_at_ms: r.get(2)?,
        })
    }
}

/// A row of `ftt_deletes`: a note the creators deleted (`--delete-share`),
/// when the `DELETE` was sent and when it returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FttDeleteRow {
    pub id: String,
    pub sent_at_ms: i64,
    pub returned_at_ms: i64,
}

impl SideTable for FttDeleteRow {
    const NAME: &'static str = "ftt_deletes";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS ftt_deletes (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    id              TEXT NOT NULL,
    sent_at_ms      INTEGER NOT NULL,
    returned_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;";
    const INSERT: &'static str = "INSERT OR REPLACE INTO ftt_deletes (run_id, id, sent_at_ms, \
         returned_at_ms) VALUES (?1, ?2, ?3, ?4)";
    const COLUMNS: &'static str = "id, sent_at_ms, returned_at_ms";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            run_id,
            self.id,
            self.sent_at_ms,
            self.returned_at_ms
        ])
    }

    /// Marks the note's truth row deleted when its `DELETE` was sent: the
    /// earliest moment it can have gone, so that no request that overlaps
    /// the `DELETE` is owed it.
    fn mark(&self, conn: &Connection, run_id: i64) -> rusqlite::Result<()> {
        conn.prepare_cached("UPDATE truth SET deleted_at_ms = ?1 WHERE run_id = ?2 AND id = ?3")?
            .execute(params![self.sent_at_ms, run_id, self.id])?;
        Ok(())
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(FttDeleteRow {
            id: r.get(0)?,
            sent_at_ms: r.get(1)?,
            returned_at_ms: r.get(2)?,
        })
    }
}

/// The FTT truth of one run, written when it ends ([`crate::write::insert_ftt`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FttRows {
    pub pushes: Vec<FttPushRow>,
    pub trims: Vec<FttTrimRow>,
    pub deletes: Vec<FttDeleteRow>,
}
