//! `partition_drops`: the partitions a retention job dropped during a run
//! (MariaDB targets, PostgreSQL's partitioned schemas; docs/rundb.md).

use super::SideTable;
use rusqlite::{Connection, Row, Statement, params};

/// A row of `partition_drops`: one partition a retention job dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionDropRow {
    pub partition: String,
    /// The dropped IDs: `lo_id <= id < hi_id`.
    pub lo_id: i64,
    pub hi_id: i64,
    pub sent_at_ms: i64,
    pub returned_at_ms: i64,
    pub rows: i64,
}

/// The `*_key` of an integer ID (crate::schema's conventions: 32 hex
/// digits that sort like the ID, as `since_id::id::Id::sort_key` writes
/// them); a negative bound is no ID and keys as 0.
fn key(id: i64) -> String {
    format!("{:032x}", id.max(0))
}

/// Created by the first run that drops one, so that other runs' files keep
/// the tables of [`crate::schema::CREATE`].
impl SideTable for PartitionDropRow {
    const NAME: &'static str = "partition_drops";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS partition_drops (
    run_id             INTEGER NOT NULL REFERENCES runs(id),
    partition          TEXT NOT NULL,
    lo_id              INTEGER NOT NULL,
    hi_id              INTEGER NOT NULL,
    sent_at_ms         INTEGER NOT NULL,
    returned_at_ms     INTEGER NOT NULL,
    rows               INTEGER NOT NULL,
    PRIMARY KEY (run_id, partition)
) WITHOUT ROWID;";
    const INSERT: &'static str = "INSERT OR REPLACE INTO partition_drops (run_id, partition, \
         lo_id, hi_id, sent_at_ms, returned_at_ms, rows) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    const COLUMNS: &'static str = "partition, lo_id, hi_id, sent_at_ms, returned_at_ms, rows";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            run_id,
            self.partition,
            self.lo_id,
            self.hi_id,
            self.sent_at_ms,
            self.returned_at_ms,
            self.rows
        ])
    }

    /// Marks the truth rows of the dropped range deleted when the `DROP
    /// PARTITION` was sent (the earliest moment they can have gone), except
    /// rows posted after it returned: their insert came after the drop and
    /// went to the partition that took over the range (a writer whose clock
    /// or counter was behind).
    fn mark(&self, conn: &Connection, run_id: i64) -> rusqlite::Result<()> {
        conn.prepare_cached(
            "UPDATE truth SET deleted_at_ms = ?4 WHERE run_id = ?1 AND id_key >= ?2 \
             AND id_key < ?3 AND deleted_at_ms IS NULL AND posted_at_ms <= ?5",
        )?
        .execute(params![
            run_id,
            key(self.lo_id),
            key(self.hi_id),
            self.sent_at_ms,
            self.returned_at_ms
        ])?;
        Ok(())
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(PartitionDropRow {
            partition: r.get(0)?,
            lo_id: r.get(1)?,
            hi_id: r.get(2)?,
            sent_at_ms: r.get(3)?,
            returned_at_ms: r.get(4)?,
            rows: r.get(5)?,
        })
    }
}
