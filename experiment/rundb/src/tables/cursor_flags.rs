//! `cursor_flags`: the requests of an ID poller whose cursor lay below the
//! oldest ID the retention job kept (MariaDB targets; docs/rundb.md).

use super::SideTable;
use rusqlite::{Row, Statement, params};

/// A row of `cursor_flags`: a request whose cursor lay below the oldest ID
/// kept, named by its poller and its place (`cycle`, `page`, `sent_at_ms`)
/// in `requests`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CursorFlagRow {
    /// The poller's name in the run.
    pub poller: String,
    pub cycle: i64,
    pub page: i64,
    pub sent_at_ms: i64,
    /// The request's exclusive lower bound (`id > cursor`).
    pub cursor: i64,
    /// The lowest ID kept when it was sent.
    pub oldest_kept: i64,
}

/// The IDs between the cursor and the oldest ID kept were dropped before
/// that poller read them, and its `id > cursor` query answered with the next
/// partition's rows as if nothing were missing. The oldest ID kept is the
/// upper bound of the last range whose `DROP PARTITION` was sent before the
/// request (`partition_drops`). Created by the first run that flags one, so
/// that other runs' files keep the tables of [`crate::schema::CREATE`].
impl SideTable for CursorFlagRow {
    const NAME: &'static str = "cursor_flags";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS cursor_flags (
    request_id         INTEGER PRIMARY KEY REFERENCES requests(id),
    run_id             INTEGER NOT NULL REFERENCES runs(id),
    poller_id          INTEGER NOT NULL REFERENCES pollers(id),
    sent_at_ms         INTEGER NOT NULL,
    cursor             INTEGER NOT NULL,
    oldest_kept        INTEGER NOT NULL
);";
    /// Each flag is found in `requests` by its poller's name and its place.
    const INSERT: &'static str = "INSERT OR REPLACE INTO cursor_flags (request_id, run_id, \
         poller_id, sent_at_ms, cursor, oldest_kept) SELECT r.id, r.run_id, r.poller_id, \
         r.sent_at_ms, ?6, ?7 FROM requests r JOIN pollers p ON p.id = r.poller_id \
         WHERE r.run_id = ?1 AND p.name = ?2 AND r.cycle = ?3 AND r.page = ?4 \
         AND r.sent_at_ms = ?5 LIMIT 1";
    const COLUMNS: &'static str = "p.name, r.cycle, r.page, f.sent_at_ms, f.cursor, f.oldest_kept";
    const FILTER: &'static str = "AS f JOIN requests r ON r.id = f.request_id \
         JOIN pollers p ON p.id = f.poller_id WHERE f.run_id = ?1 ORDER BY f.request_id";

    fn insert(&self, st: &mut Statement<'_>, run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            run_id,
            self.poller,
            self.cycle,
            self.page,
            self.sent_at_ms,
            self.cursor,
            self.oldest_kept
        ])
    }

    /// A flag whose request is not there: the recorder lost it.
    fn unmatched(&self) -> Option<String> {
        Some(format!(
            "cannot write cursor_flags: no request of {} at cycle {} page {} sent at {}",
            self.poller, self.cycle, self.page, self.sent_at_ms
        ))
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(CursorFlagRow {
            poller: r.get(0)?,
            cycle: r.get(1)?,
            page: r.get(2)?,
            sent_at_ms: r.get(3)?,
            cursor: r.get(4)?,
            oldest_kept: r.get(5)?,
        })
    }
}
