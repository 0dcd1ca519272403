//! Readers for a checker that streams (analysis's `stream`, issue 52): a
//! run read a chunk at a time, each chunk one range of a primary key, so
//! that memory holds a chunk, not the run.

use super::{REQUEST_COLUMNS, for_each_row, read_error, request};
use crate::Error;
use crate::rows::{ObservationRow, RequestRow};
use rusqlite::Connection;

/// Lends up to `limit` requests of run `run_id` with an id above `after` to
/// `f`, in id order (the order the writer committed them): one range of the
/// primary key per call. [`super::for_each_observation`] reads their items.
pub fn for_each_request_in_chunk<E: From<Error>>(
    conn: &Connection,
    run_id: i64,
    after: i64,
    limit: usize,
    mut f: impl FnMut(RequestRow<&str>) -> Result<(), E>,
) -> Result<(), E> {
    for_each_row(
        conn,
        &format!(
            "SELECT {REQUEST_COLUMNS} FROM requests WHERE run_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
        ),
        rusqlite::params![run_id, after, limit as i64],
        |r| f(request(r).map_err(read_error)?),
    )
}

/// Lends the observations with a rowid above `after` to `f`, in rowid
/// order, until `f` answers `false` (that row is left for the next call);
/// returns the rowid of the last row `f` took (`after` if none).
///
/// One range of the primary key: `observations` has no index on its
/// request (a writer's cost), so a chunk of requests read with
/// [`super::for_each_observation`] would scan the whole table each time.
/// The recorder writes a request's observations right after it, so rowid
/// order is request order; a reader that relies on it checks each
/// request's count of items.
///
/// The status ID is lent as the text's bytes, not checked as UTF-8: the
/// reader parses them anyway (tens of millions of rows in a large run).
pub fn for_each_observation_after<E: From<Error>>(
    conn: &Connection,
    after: i64,
    mut f: impl FnMut(ObservationRow<&[u8]>) -> Result<bool, E>,
) -> Result<i64, E> {
    let mut st = conn
        .prepare_cached(
            "SELECT rowid, request_id, position, status_id FROM observations
             WHERE rowid > ?1 ORDER BY rowid",
        )
        .map_err(read_error)?;
    let mut rows = st.query([after]).map_err(read_error)?;
    let mut last = after;
    while let Some(r) = rows.next().map_err(read_error)? {
        let rowid: i64 = r.get(0).map_err(read_error)?;
        if !f(observation_bytes(r).map_err(read_error)?)? {
            break;
        }
        last = rowid;
    }
    Ok(last)
}

/// An observation read from `rowid, request_id, position, status_id`, its
/// ID as bytes.
fn observation_bytes<'r>(r: &'r rusqlite::Row) -> rusqlite::Result<ObservationRow<&'r [u8]>> {
    Ok(ObservationRow {
        request_id: r.get(1)?,
        position: r.get(2)?,
        status_id: r.get_ref(3)?.as_bytes()?,
    })
}

/// What a checker that streams reads of a truth row ([`crate::TruthRow`] without
/// `posted_at_ms` and `origin`), its sort key as the text's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TruthKeyRow<'r> {
    pub id: &'r str,
    pub id_key: &'r [u8],
    pub id_time_ms: i64,
    pub visible_at_ms: i64,
    pub deleted_at_ms: Option<i64>,
}

/// Lends up to `limit` truth rows of run `run_id` whose ID text sorts after
/// `after` (from the first with `None`) to `f`, in the table's order (by ID
/// text): one range of the primary key per call. Only the columns a
/// checker reads: a large run has tens of millions of rows.
pub fn for_each_truth_key_after<E: From<Error>>(
    conn: &Connection,
    run_id: i64,
    after: Option<&str>,
    limit: usize,
    mut f: impl FnMut(TruthKeyRow<'_>) -> Result<(), E>,
) -> Result<(), E> {
    for_each_row(
        conn,
        "SELECT id, id_key, id_time_ms, visible_at_ms, deleted_at_ms
         FROM truth WHERE run_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
        rusqlite::params![run_id, after.unwrap_or(""), limit as i64],
        |r| f(truth_key(r).map_err(read_error)?),
    )
}

fn truth_key<'r>(r: &'r rusqlite::Row) -> rusqlite::Result<TruthKeyRow<'r>> {
    Ok(TruthKeyRow {
        id: r.get_ref(0)?.as_str()?,
        id_key: r.get_ref(1)?.as_bytes()?,
        id_time_ms: r.get(2)?,
        visible_at_ms: r.get(3)?,
        deleted_at_ms: r.get(4)?,
    })
}

/// The rows of `observations` run `run_id`'s requests returned (their item
/// counts, summed): what a streaming reader will read, known without
/// counting `statuses` or `truth` (a scan of each, [`super::table_sizes`]).
pub fn items_of_run(conn: &Connection, run_id: i64) -> Result<i64, Error> {
    conn.query_row(
        "SELECT coalesce(sum(items), 0) FROM requests WHERE run_id = ?1",
        [run_id],
        |r| r.get(0),
    )
    .map_err(read_error)
}

/// Whether run `run_id` has a row in side table `table` (a table absent
/// has none): the side tables a streaming check does not read.
pub fn has_rows_of_run(conn: &Connection, table: &str, run_id: i64) -> Result<bool, Error> {
    if !super::has_table(conn, table)? {
        return Ok(false);
    }
    let sql = match table {
        "client_requests" => {
            "SELECT EXISTS (SELECT 1 FROM client_requests c JOIN requests r ON r.id = c.request_id
                            WHERE r.run_id = ?1)"
        }
        "partition_drops" => "SELECT EXISTS (SELECT 1 FROM partition_drops WHERE run_id = ?1)",
        "ftt_pushes" => "SELECT EXISTS (SELECT 1 FROM ftt_pushes WHERE run_id = ?1)",
        _ => return Err(Error(format!("no side table {table} to look for rows in"))),
    };
    conn.query_row(sql, [run_id], |r| r.get(0))
        .map_err(read_error)
}
