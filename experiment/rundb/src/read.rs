//! The one reader of run databases: opening read-only with the checks that
//! make every refusal a one-line message, the `runs` and `pollers` rows, and
//! the large tables streamed row by row.
//!
//! The streaming readers lend each row, borrowed from SQLite's own buffer,
//! to a callback: nothing is allocated per row, so that a run of ten million
//! observations reads in seconds. The callback returns the caller's error
//! type (anything an [`Error`] converts into), so that it can stop the read
//! with its own one-line message.

use crate::Error;
use crate::rows::{
    ObservationRow, PollerRow, RequestRow, RunRow, StatusRow, SweepRunRow, TruthAuthorRow, TruthRow,
};
use crate::schema::{APPLICATION_ID, SCHEMA_VERSION};
use crate::tables::SideTable;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row};
use std::ops::RangeInclusive;
use std::path::Path;

pub(crate) fn read_error(e: rusqlite::Error) -> Error {
    Error(format!("cannot read the database: {e}"))
}

/// Opens `path` read-only. A database in WAL mode with no `-wal` file beside
/// it has no live writer (SQLite keeps the file while a connection writes,
/// and removes it when the last one closes cleanly): it is opened
/// `immutable` (SQLite's URI parameter), so that reading it creates no
/// `-wal` and `-shm` files that a read-only connection could not remove. A
/// database with a `-wal` file (a run in progress, or one killed) is read
/// through the WAL as usual.
fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if Path::new(&wal).exists() {
        return Connection::open_with_flags(path, flags);
    }
    // A URI path: percent-encode what a URI would read otherwise.
    let mut uri = String::from("file:");
    for b in path.to_string_lossy().bytes() {
        match b {
            b'%' | b'?' | b'#' | 0x80.. => uri.push_str(&format!("%{b:02X}")),
            _ => uri.push(b as char),
        }
    }
    uri.push_str("?immutable=1");
    Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
}

/// Opens `path` read-only (a history is never changed by reading it) and
/// checks that it is a run database this build can read: a regular file,
/// SQLite, ours (`PRAGMA application_id`), with a `runs` table and a schema
/// version this build knows.
pub fn open(path: &Path) -> Result<Connection, Error> {
    let shown = path.display();
    let refuse = |msg: String| Err(Error(msg));
    match std::fs::metadata(path) {
        Err(e) => return refuse(format!("{shown}: cannot open: {e}")),
        Ok(m) if m.is_dir() => {
            return refuse(format!("{shown}: is a directory, not a run database"));
        }
        // A FIFO, a socket or a device would block SQLite's first read forever.
        Ok(m) if !m.is_file() => {
            return refuse(format!(
                "{shown}: not a regular file (a FIFO, socket or device), not a run database"
            ));
        }
        Ok(_) => {}
    }
    let conn =
        open_read_only(path).map_err(|e| Error(format!("{shown}: cannot open as SQLite: {e}")))?;
    // The first real read tells whether the file is SQLite at all.
    let first_read = |e: rusqlite::Error| {
        Error(match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => {
                format!("{shown}: not a SQLite database ({e})")
            }
            Some(rusqlite::ErrorCode::CannotOpen) => format!(
                "{shown}: cannot open ({e}); a database with a -wal file beside it needs a \
                 writable directory (or an existing -shm file) even to be read"
            ),
            _ => format!("{shown}: cannot read as SQLite ({e})"),
        })
    };
    let app_id: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(first_read)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(first_read)?;
    let has_runs: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(|e| Error(format!("{shown}: not a SQLite database ({e})")))?;
    if app_id != APPLICATION_ID {
        let what = if has_runs { "" } else { ", no runs table" };
        return refuse(format!(
            "{shown}: not a snowleak run database (application_id {app_id:#x}, expected {APPLICATION_ID:#x}{what})"
        ));
    }
    if !has_runs {
        return refuse(format!(
            "{shown}: not a snowleak run database (no runs table)"
        ));
    }
    if version > SCHEMA_VERSION {
        return refuse(format!(
            "{shown}: schema version {version} is newer than this build of analyze knows ({SCHEMA_VERSION}); update analyze"
        ));
    }
    if version < 1 {
        return refuse(format!(
            "{shown}: schema version {version} is not one analyze knows (expected {SCHEMA_VERSION})"
        ));
    }
    Ok(conn)
}

/// The ids of the runs recorded, in order.
pub fn run_ids(conn: &Connection) -> Result<Vec<i64>, Error> {
    conn.prepare("SELECT id FROM runs ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(read_error)
}

/// The row of run `id`, if there is one.
pub fn run(conn: &Connection, id: i64) -> Result<Option<RunRow>, Error> {
    conn.query_row(
        "SELECT id, started_at_ms, ended_at_ms, complete, end_reason, target, profile, seed,
                clock, layout, interval_ms, page_limit, config, version
         FROM runs WHERE id = ?1",
        [id],
        |r| {
            Ok(RunRow {
                id: r.get(0)?,
                started_at_ms: r.get(1)?,
                ended_at_ms: r.get(2)?,
                complete: r.get(3)?,
                end_reason: r.get(4)?,
                target: r.get(5)?,
                profile: r.get(6)?,
                seed: r.get(7)?,
                clock: r.get(8)?,
                layout: r.get(9)?,
                interval_ms: r.get(10)?,
                page_limit: r.get(11)?,
                config: r.get(12)?,
                version: r.get(13)?,
            })
        },
    )
    .optional()
    .map_err(read_error)
}

/// The pollers of run `run_id`, in the order they were added.
pub fn pollers(conn: &Connection, run_id: i64) -> Result<Vec<PollerRow>, Error> {
    conn.prepare("SELECT id, name, policy, k_ms FROM pollers WHERE run_id = ?1 ORDER BY id")
        .and_then(|mut st| {
            st.query_map([run_id], |r| {
                Ok(PollerRow {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    policy: r.get(2)?,
                    k_ms: r.get(3)?,
                })
            })?
            .collect()
        })
        .map_err(read_error)
}

/// Text borrowed from the row (no copy).
fn text<'r>(r: &'r Row, i: usize) -> rusqlite::Result<&'r str> {
    Ok(r.get_ref(i)?.as_str()?)
}

fn opt_text<'r>(r: &'r Row, i: usize) -> rusqlite::Result<Option<&'r str>> {
    Ok(r.get_ref(i)?.as_str_or_null()?)
}

/// An integer column that is 0/1.
fn flag(r: &Row, i: usize) -> rusqlite::Result<bool> {
    Ok(!matches!(r.get_ref(i)?, ValueRef::Integer(0)))
}

/// Runs `sql` with `params` and hands each row to `f`.
pub(crate) fn for_each_row<P, E>(
    conn: &Connection,
    sql: &str,
    params: P,
    mut f: impl FnMut(&Row) -> Result<(), E>,
) -> Result<(), E>
where
    P: rusqlite::Params,
    E: From<Error>,
{
    let mut st = conn.prepare(sql).map_err(read_error)?;
    let mut rows = st.query(params).map_err(read_error)?;
    while let Some(r) = rows.next().map_err(read_error)? {
        f(r)?;
    }
    Ok(())
}

fn status<'r>(r: &'r Row) -> rusqlite::Result<StatusRow<&'r str>> {
    Ok(StatusRow {
        id: text(r, 0)?,
        id_key: text(r, 1)?,
        id_time_ms: r.get(2)?,
        created_at: opt_text(r, 3)?,
        author: opt_text(r, 4)?,
    })
}

pub(crate) fn truth<'r>(r: &'r Row) -> rusqlite::Result<TruthRow<&'r str>> {
    Ok(TruthRow {
        id: text(r, 0)?,
        id_key: text(r, 1)?,
        id_time_ms: r.get(2)?,
        posted_at_ms: r.get(3)?,
        visible_at_ms: r.get(4)?,
        deleted_at_ms: r.get(5)?,
        origin: text(r, 6)?,
    })
}

pub(crate) fn request<'r>(r: &'r Row) -> rusqlite::Result<RequestRow<&'r str>> {
    Ok(RequestRow {
        id: r.get(0)?,
        poller_id: r.get(1)?,
        cycle: r.get(2)?,
        page: r.get(3)?,
        sent_at_ms: r.get(4)?,
        received_at_ms: r.get(5)?,
        since_id: opt_text(r, 6)?,
        since_key: opt_text(r, 7)?,
        before_id: opt_text(r, 8)?,
        before_key: opt_text(r, 9)?,
        page_limit: r.get(10)?,
        retrieved_at_ms: r.get(11)?,
        http_status: r.get(12)?,
        error: opt_text(r, 13)?,
        items: r.get(14)?,
        new_items: r.get(15)?,
        bytes: r.get(16)?,
        reordered: flag(r, 17)?,
        overflow: flag(r, 18)?,
        wait_ms: r.get(19)?,
    })
}

fn observation<'r>(r: &'r Row) -> rusqlite::Result<ObservationRow<&'r str>> {
    observation_at(r, 0)
}

/// An observation whose columns start at column `at`.
fn observation_at<'r>(r: &'r Row, at: usize) -> rusqlite::Result<ObservationRow<&'r str>> {
    Ok(ObservationRow {
        request_id: r.get(at)?,
        position: r.get(at + 1)?,
        status_id: text(r, at + 2)?,
    })
}

/// Lends each status of run `run_id` to `f`, in the table's order (by ID text).
pub fn for_each_status<E: From<Error>>(
    conn: &Connection,
    run_id: i64,
    mut f: impl FnMut(StatusRow<&str>) -> Result<(), E>,
) -> Result<(), E> {
    for_each_row(
        conn,
        "SELECT id, id_key, id_time_ms, created_at, author FROM statuses WHERE run_id = ?1",
        [run_id],
        |r| f(status(r).map_err(read_error)?),
    )
}

/// Lends each truth row of run `run_id` to `f`, in the table's order (by ID text).
pub fn for_each_truth<E: From<Error>>(
    conn: &Connection,
    run_id: i64,
    mut f: impl FnMut(TruthRow<&str>) -> Result<(), E>,
) -> Result<(), E> {
    for_each_row(
        conn,
        "SELECT id, id_key, id_time_ms, posted_at_ms, visible_at_ms, deleted_at_ms, origin
         FROM truth WHERE run_id = ?1",
        [run_id],
        |r| f(truth(r).map_err(read_error)?),
    )
}

/// The columns [`request`] reads a request row from, in its order.
pub(crate) const REQUEST_COLUMNS: &str = "id, poller_id, cycle, page, sent_at_ms, received_at_ms, \
     since_id, since_key, before_id, before_key, page_limit, retrieved_at_ms, http_status, error, \
     items, new_items, bytes, reordered, overflow, wait_ms";

/// Lends each request of run `run_id` to `f`, in the order they were recorded.
pub fn for_each_request<E: From<Error>>(
    conn: &Connection,
    run_id: i64,
    mut f: impl FnMut(RequestRow<&str>) -> Result<(), E>,
) -> Result<(), E> {
    for_each_row(
        conn,
        &format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE run_id = ?1 ORDER BY id"),
        [run_id],
        |r| f(request(r).map_err(read_error)?),
    )
}

/// Lends each request of run `run_id` with an id above `after` to `f`, in id
/// order: the rows recorded since a reader last read up to request `after`
/// (the writer numbers requests in the order it commits them), so that a
/// reader following a run as it is written (`analyze --follow`) reads each
/// row once.
pub fn for_each_request_after<E: From<Error>>(
    conn: &Connection,
    run_id: i64,
    after: i64,
    f: impl FnMut(RequestRow<&str>) -> Result<(), E>,
) -> Result<(), E> {
    // Every one: a limit SQLite never reaches.
    for_each_request_in_chunk(conn, run_id, after, i64::MAX as usize, f)
}

/// Lends each observation of the requests with ids in `requests` to `f`, in
/// (request, position) order.
///
/// The writer appends each request's observations in position order in the
/// transaction that adds the request, so rowid order is (request, position)
/// order and no sort, index or join with `requests` is needed (a join is a
/// third of the load time at ten million rows). The rows of another run whose
/// requests interleave with the range are lent too: the caller skips them.
pub fn for_each_observation<E: From<Error>>(
    conn: &Connection,
    requests: RangeInclusive<i64>,
    mut f: impl FnMut(ObservationRow<&str>) -> Result<(), E>,
) -> Result<(), E> {
    for_each_row(
        conn,
        "SELECT request_id, position, status_id FROM observations
         WHERE request_id BETWEEN ?1 AND ?2 ORDER BY rowid",
        [*requests.start(), *requests.end()],
        |r| f(observation(r).map_err(read_error)?),
    )
}

/// Whether the file has table `table` (the optional ones are created on first use).
pub fn has_table(conn: &Connection, table: &str) -> Result<bool, Error> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .map_err(read_error)
}

/// The IDs request `request_id` returned, in response order: its rows of
/// `observations`, or the page stored as one value (`client_requests.served`,
/// [`crate::pages`]) for a recorded client's request.
pub fn observed(conn: &Connection, request_id: i64) -> Result<Vec<String>, Error> {
    if has_column(conn, "client_requests", "served")? {
        let served: Option<Vec<u8>> = conn
            .query_row(
                "SELECT served FROM client_requests WHERE request_id = ?1",
                [request_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(read_error)?
            .flatten();
        if let Some(bytes) = served {
            return crate::pages::decode(&bytes)
                .map_err(|e| Error(format!("request {request_id}: {e}")));
        }
    }
    conn.prepare_cached(
        "SELECT status_id FROM observations WHERE request_id = ?1 ORDER BY position",
    )
    .and_then(|mut st| {
        st.query_map([request_id], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()
    })
    .map_err(read_error)
}

/// Whether table `table` exists and has column `column` (a file written
/// before the column was added has not).
pub fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool, Error> {
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .map_err(read_error)
}

/// How many rows run `run_id` holds in its large tables, counted without
/// scanning `observations` (the requests carry their item counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableSizes {
    pub statuses: i64,
    pub truth: i64,
    pub requests: i64,
    /// The requests' item counts, summed: the rows of `observations` (or
    /// the IDs of served pages) the run's requests returned.
    pub items: i64,
}

/// The sizes of run `run_id`'s tables: O(statuses + truth rows + requests).
pub fn table_sizes(conn: &Connection, run_id: i64) -> Result<TableSizes, Error> {
    conn.query_row(
        "SELECT (SELECT count(*) FROM statuses WHERE run_id = ?1),
                (SELECT count(*) FROM truth WHERE run_id = ?1),
                (SELECT count(*) FROM requests WHERE run_id = ?1),
                (SELECT coalesce(sum(items), 0) FROM requests WHERE run_id = ?1)",
        [run_id],
        |r| {
            Ok(TableSizes {
                statuses: r.get(0)?,
                truth: r.get(1)?,
                requests: r.get(2)?,
                items: r.get(3)?,
            })
        },
    )
    .map_err(read_error)
}

/// Lends each page stored as one value (`client_requests.served`,
/// [`crate::pages`]) of the requests with ids in `requests` to `f`, with its
/// request's id, in request order; none in a file without the column. Pages
/// of another run's requests inside the range are lent too: the caller
/// skips them.
pub fn for_each_served<E: From<Error>>(
    conn: &Connection,
    requests: RangeInclusive<i64>,
    mut f: impl FnMut(i64, &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    if !has_column(conn, "client_requests", "served")? {
        return Ok(());
    }
    for_each_row(
        conn,
        "SELECT request_id, served FROM client_requests
         WHERE request_id BETWEEN ?1 AND ?2 AND served IS NOT NULL ORDER BY request_id",
        [*requests.start(), *requests.end()],
        |r| {
            let id: i64 = r.get(0).map_err(read_error)?;
            let bytes = r
                .get_ref(1)
                .and_then(|v| Ok(v.as_blob()?))
                .map_err(read_error)?;
            f(id, bytes)
        },
    )
}

/// Per poller of run `run_id` (its `pollers.id`), the distinct values of
/// `client_requests.{column}` its recorded requests hold, in SQLite's order.
fn per_poller(conn: &Connection, run_id: i64, column: &str) -> Result<Vec<(i64, String)>, Error> {
    if !has_column(conn, "client_requests", column)? {
        return Ok(Vec::new());
    }
    conn.prepare(&format!(
        "SELECT DISTINCT r.poller_id, c.{column} FROM client_requests c
         JOIN requests r ON r.id = c.request_id WHERE r.run_id = ?1"
    ))
    .and_then(|mut st| {
        st.query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect()
    })
    .map_err(read_error)
}

/// The clients (`client_requests.client`) each poller of run `run_id` was
/// recorded for, as (poller id, client); none without recorded clients.
pub fn poller_clients(conn: &Connection, run_id: i64) -> Result<Vec<(i64, String)>, Error> {
    per_poller(conn, run_id, "client")
}

/// The scopes (`client_requests.scope`, [`crate::scope::Scope`]'s text) of
/// each poller's recorded requests in run `run_id`, as (poller id, scope);
/// none without recorded clients.
pub fn poller_scopes(conn: &Connection, run_id: i64) -> Result<Vec<(i64, String)>, Error> {
    per_poller(conn, run_id, "scope")
}

/// Lends to `f` the ID of each truth row of run `run_id` that a retention
/// job dropped: whose deletion is the drop of a partition that held it
/// (the experiment marks a dropped range's rows deleted at the drop's send:
/// [`crate::PartitionDropRow`]'s `mark`); none without `partition_drops`.
pub fn for_each_expired<E: From<Error>>(
    conn: &Connection,
    run_id: i64,
    mut f: impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    if !has_table(conn, "partition_drops")? {
        return Ok(());
    }
    for_each_row(
        conn,
        "SELECT t.id FROM partition_drops d JOIN truth t
            ON t.run_id = d.run_id AND t.deleted_at_ms = d.sent_at_ms
          WHERE d.run_id = ?1
            AND CAST(t.id AS INTEGER) >= d.lo_id AND CAST(t.id AS INTEGER) < d.hi_id",
        [run_id],
        |r| f(text(r, 0).map_err(read_error)?),
    )
}

/// Lends each (status ID, author) of run `run_id`'s `truth_authors` to `f`;
/// none without the table.
pub fn for_each_truth_author<E: From<Error>>(
    conn: &Connection,
    run_id: i64,
    mut f: impl FnMut(&str, i64) -> Result<(), E>,
) -> Result<(), E> {
    if !has_table(conn, TruthAuthorRow::NAME)? {
        return Ok(());
    }
    for_each_row(
        conn,
        &select::<TruthAuthorRow>(conn, TruthAuthorRow::NAME)?,
        [run_id],
        |r| {
            f(
                text(r, 0).map_err(read_error)?,
                r.get(1).map_err(read_error)?,
            )
        },
    )
}

/// The delays of poller `poller` of run `run_id`, ms, ascending: per row of
/// `writer_brackets` with a commit timestamp that the poller returned, its
/// first response's receipt minus that timestamp.
pub fn delays_after_commit(
    conn: &Connection,
    run_id: i64,
    poller: &str,
) -> Result<Vec<i64>, Error> {
    conn.prepare(
        "SELECT MIN(r.received_at_ms) - g.commit_ts_ms AS delay
         FROM writer_brackets g
         JOIN observations o ON o.status_id = g.id
         JOIN requests r ON r.id = o.request_id AND r.run_id = g.run_id
         JOIN pollers p ON p.id = r.poller_id AND p.name = ?2
         WHERE g.run_id = ?1 AND g.commit_ts_ms IS NOT NULL
         GROUP BY g.id ORDER BY delay",
    )
    .and_then(|mut st| {
        st.query_map(rusqlite::params![run_id, poller], |r| r.get(0))?
            .collect()
    })
    .map_err(read_error)
}

/// The `SELECT` of run `?1`'s rows of side table `T` from `table` (its
/// name or an old one): NULL for each column [`SideTable::ADDED`] that the
/// file's table lacks.
fn select<T: SideTable>(conn: &Connection, table: &str) -> Result<String, Error> {
    let mut columns = Vec::new();
    for column in T::COLUMNS.split(", ") {
        let added = T::ADDED.iter().any(|(name, _)| *name == column);
        columns.push(if added && !has_column(conn, table, column)? {
            "NULL"
        } else {
            column
        });
    }
    Ok(format!(
        "SELECT {} FROM {table} {}",
        columns.join(", "),
        T::FILTER
    ))
}

/// The rows of side table `T` ([`crate::tables`]) of run `run_id`, in the
/// order [`SideTable::FILTER`] gives (the table's own where it gives none),
/// from its table and then from each of its old names; none in a file
/// without them. A table of one row per file ([`crate::SweepRunRow`])
/// ignores `run_id`.
pub fn side_rows<T: SideTable>(conn: &Connection, run_id: i64) -> Result<Vec<T>, Error> {
    let mut out = Vec::new();
    for table in std::iter::once(T::NAME).chain(T::OLD_NAMES.iter().copied()) {
        if !has_table(conn, table)? {
            continue;
        }
        let sql = select::<T>(conn, table)?;
        let mut st = conn.prepare(&sql).map_err(read_error)?;
        let params: &[&dyn rusqlite::ToSql] = if st.parameter_count() == 0 {
            &[]
        } else {
            &[&run_id]
        };
        for row in st.query_map(params, T::read).map_err(read_error)? {
            out.push(row.map_err(read_error)?);
        }
    }
    Ok(out)
}

/// The `sweep_run` row of the file at `path` ([`SweepRunRow`], written by
/// [`crate::write::sweep_run`]), read-only; `None` for a file that is not a
/// finished run (no such row). The file is any SQLite file, not
/// necessarily a run database.
pub fn sweep_run(path: &Path) -> Result<Option<SweepRunRow>, Error> {
    let e = |e: rusqlite::Error| Error(format!("{}: {e}", path.display()));
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(e)?;
    let rows = side_rows::<SweepRunRow>(&conn, 0)
        .map_err(|err| Error(format!("{}: {err}", path.display())))?;
    Ok(rows.into_iter().next())
}

mod stream;
pub use stream::{
    TruthKeyRow, for_each_observation_after, for_each_request_in_chunk, for_each_truth_key_after,
    has_rows_of_run, items_of_run,
};
