//! The one writer of run databases: opening (creating, completing,
//! refusing), adding a run with its pollers, inserting rows in batches with
//! prepared statements, ending a run and closing.
//!
//! Transactions are the caller's: the recorder inserts inside a transaction
//! it commits once a second of wall time, `serve --truth` one per batch, the
//! synthetic databases one per run. Statements are prepared once per
//! connection (`prepare_cached`), and the large tables are written several
//! rows per statement: far fewer statement executions than one row each.

use crate::Error;
use crate::rows::{FttRows, PollerRow, RequestRow, RunRow, StatusRow, SweepRunRow, TruthRow};
use crate::schema::{APPLICATION_ID, CREATE, SCHEMA_VERSION, TABLES};
use crate::tables::SideTable;
use rusqlite::{Connection, OptionalExtension, ToSql, params};
use std::path::Path;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// How long opening a database waits for another writer: a run that cannot
/// start fails before it creates its run row.
pub const OPEN_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

fn write_error(e: rusqlite::Error) -> Error {
    Error(format!("cannot write the run database: {e}"))
}

/// A database an earlier build began to create and was killed creating: only
/// our tables (some of them), every one empty, and no marker yet. Completing
/// it loses nothing.
fn half_created(conn: &Connection) -> rusqlite::Result<bool> {
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for name in &names {
        if !TABLES.contains(&name.as_str()) {
            return Ok(false);
        }
        let rows: i64 = conn.query_row(&format!("SELECT count(*) FROM \"{name}\""), [], |r| {
            r.get(0)
        })?;
        if rows > 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Opens (creating it and its directory if needed) a run database, with the
/// schema and pragmas set. Refuses a database of another program or of a
/// newer schema; `flag` is the command-line option that named the file
/// (`--db`, `--truth`), for the advice in the refusal.
///
/// The schema, `application_id` and `user_version` are written in one
/// transaction, so a kill while creating leaves the file absent, empty (and
/// re-creatable), or whole. A file left half-created by an earlier build (our
/// tables, empty, no marker) is completed. The journal is a WAL with
/// `synchronous = NORMAL`: a commit is one append, and a killed writer loses
/// only what it had not committed.
pub fn open(path: &Path, flag: &str) -> Result<Connection, Error> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error(format!("cannot create {}: {e}", dir.display())))?;
    }
    let name = path.display();
    let mut conn =
        Connection::open(path).map_err(|e| Error(format!("cannot open database {name}: {e}")))?;
    let sql_error = |e: rusqlite::Error| Error(format!("database {name}: {e}"));
    conn.busy_timeout(OPEN_BUSY_TIMEOUT).map_err(sql_error)?;
    let not_sqlite = |e: rusqlite::Error| Error(format!("{name} is not a SQLite database ({e})"));
    // The checks and the creation share one IMMEDIATE transaction: a second
    // run opening the same new file waits for the first one's schema instead
    // of reading its header half-way (no marker yet, then our tables) and
    // taking it for another program's. A foreign file is only read.
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(not_sqlite)?;
    let app_id: i64 = tx
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(not_sqlite)?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql_error)?;
    if app_id != APPLICATION_ID && !half_created(&tx).map_err(sql_error)? {
        return Err(Error(format!(
            "{name} is a SQLite database of another program; choose another {flag}"
        )));
    }
    if version > SCHEMA_VERSION {
        return Err(Error(format!(
            "{name} has schema version {version}, newer than this build's {SCHEMA_VERSION}; use a newer build or another {flag}"
        )));
    }
    // The header fields are pages of the database like any other: they commit
    // or roll back with the tables (https://www.sqlite.org/pragma.html#pragma_user_version).
    tx.execute_batch(CREATE).map_err(sql_error)?;
    tx.pragma_update(None, "application_id", APPLICATION_ID)
        .map_err(sql_error)?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(sql_error)?;
    tx.commit().map_err(sql_error)?;
    // Switching a new file to WAL needs an exclusive lock, and fails at once
    // with SQLITE_BUSY (no busy handler) while another run opening the same
    // file is inside its transaction above: wait as the busy handler would.
    let deadline = Instant::now() + OPEN_BUSY_TIMEOUT;
    while let Err(e) = conn.pragma_update(None, "journal_mode", "WAL") {
        if e.sqlite_error_code() != Some(rusqlite::ErrorCode::DatabaseBusy)
            || Instant::now() >= deadline
        {
            return Err(sql_error(e));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sql_error)?;
    // A batch of a busy second fits in memory, and checkpoints come less often.
    conn.pragma_update(None, "cache_size", -65_536)
        .map_err(sql_error)?;
    conn.pragma_update(None, "wal_autocheckpoint", 8192)
        .map_err(sql_error)?;
    Ok(conn)
}

/// Adds a run and its pollers, all or nothing (a savepoint, so that it nests
/// in the caller's transaction); never touches earlier runs. `run.id` and the
/// pollers' `id` are ignored: returns the ids SQLite gave them.
pub fn add_run(
    conn: &Connection,
    run: &RunRow,
    pollers: &[PollerRow],
) -> Result<(i64, Vec<i64>), Error> {
    conn.execute_batch("SAVEPOINT add_run")
        .map_err(write_error)?;
    let added = insert_run(conn, run, pollers);
    let end = if added.is_ok() {
        "RELEASE add_run"
    } else {
        "ROLLBACK TO add_run; RELEASE add_run"
    };
    conn.execute_batch(end).map_err(write_error)?;
    added
}

fn insert_run(
    conn: &Connection,
    run: &RunRow,
    pollers: &[PollerRow],
) -> Result<(i64, Vec<i64>), Error> {
    conn.prepare_cached(
        "INSERT INTO runs (started_at_ms, ended_at_ms, complete, end_reason, target, profile, seed,
                           clock, layout, interval_ms, page_limit, config, version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )
    .and_then(|mut st| {
        st.execute(params![
            run.started_at_ms,
            run.ended_at_ms,
            run.complete,
            run.end_reason,
            run.target,
            run.profile,
            run.seed,
            run.clock,
            run.layout,
            run.interval_ms,
            run.page_limit,
            run.config,
            run.version,
        ])
    })
    .map_err(write_error)?;
    let run_id = conn.last_insert_rowid();
    let mut insert = conn
        .prepare_cached("INSERT INTO pollers (run_id, name, policy, k_ms) VALUES (?1, ?2, ?3, ?4)")
        .map_err(write_error)?;
    let mut ids = Vec::with_capacity(pollers.len());
    for p in pollers {
        insert
            .execute(params![run_id, p.name, p.policy, p.k_ms])
            .map_err(write_error)?;
        ids.push(conn.last_insert_rowid());
    }
    Ok((run_id, ids))
}

/// Marks run `run_id` ended, complete or not, with the reason.
pub fn end_run(
    conn: &Connection,
    run_id: i64,
    ended_at_ms: i64,
    complete: bool,
    reason: &str,
) -> Result<(), Error> {
    conn.execute(
        "UPDATE runs SET ended_at_ms = ?1, complete = ?2, end_reason = ?3 WHERE id = ?4",
        params![ended_at_ms, complete, reason, run_id],
    )
    .map(|_| ())
    .map_err(write_error)
}

/// Inserts one request of run `run_id` (`r.id` is ignored); returns its id.
pub fn insert_request<S: AsRef<str>>(
    conn: &Connection,
    run_id: i64,
    r: &RequestRow<S>,
) -> Result<i64, Error> {
    conn.prepare_cached(
        "INSERT INTO requests (run_id, poller_id, cycle, page, sent_at_ms, received_at_ms,
            since_id, since_key, before_id, before_key, page_limit, retrieved_at_ms,
            http_status, error, items, new_items, bytes, reordered, overflow, wait_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
    )
    .and_then(|mut st| {
        st.execute(params![
            run_id,
            r.poller_id,
            r.cycle,
            r.page,
            r.sent_at_ms,
            r.received_at_ms,
            opt(&r.since_id),
            opt(&r.since_key),
            opt(&r.before_id),
            opt(&r.before_key),
            r.page_limit,
            r.retrieved_at_ms,
            r.http_status,
            opt(&r.error),
            r.items,
            r.new_items,
            r.bytes,
            r.reordered,
            r.overflow,
            r.wait_ms,
        ])
    })
    .map_err(write_error)?;
    Ok(conn.last_insert_rowid())
}

/// Marks request (`poller_id`, `cycle`, `page`) of run `run_id`, already
/// written, as the last of a cycle whose back-paging was cut (`overflow`):
/// it asked for a next page, and the driver abandoned the cycle before that
/// page went (the run's end or a stop came while it waited for the rate
/// limit).
pub fn mark_cut(
    conn: &Connection,
    run_id: i64,
    poller_id: i64,
    cycle: i64,
    page: i64,
) -> Result<(), Error> {
    let n = conn
        .prepare_cached(
            "UPDATE requests SET overflow = 1
             WHERE run_id = ?1 AND poller_id = ?2 AND cycle = ?3 AND page = ?4",
        )
        .and_then(|mut st| st.execute(params![run_id, poller_id, cycle, page]))
        .map_err(write_error)?;
    if n != 1 {
        return Err(Error(format!(
            "cannot mark a cut cycle: no request of poller {poller_id} at cycle {cycle} page {page}"
        )));
    }
    Ok(())
}

/// An optional text column, borrowed.
fn opt<S: AsRef<str>>(s: &Option<S>) -> Option<&str> {
    s.as_ref().map(AsRef::as_ref)
}

/// Observations inserted by one statement.
const OBSERVATION_ROWS: usize = 50;

/// Statuses inserted by one statement.
const STATUS_ROWS: usize = 25;

/// Truth rows inserted by one statement.
const TRUTH_ROWS: usize = 25;

/// `INSERT {verb} INTO {table} ({columns}) VALUES (?, ...), ...` with `rows`
/// rows: built once per statement kind, since the statement cache is keyed by
/// the SQL text and looked up per batch.
fn multi_row(verb: &str, table: &str, columns: &str, rows: usize) -> String {
    let width = columns.split(',').count();
    let row = format!("({})", vec!["?"; width].join(", "));
    let rows = vec![row; rows].join(", ");
    format!("INSERT {verb} INTO {table} ({columns}) VALUES {rows}")
}

const OBSERVATION_COLUMNS: &str = "request_id, position, status_id";
const STATUS_COLUMNS: &str = "run_id, id, id_key, id_time_ms, created_at, author";
const TRUTH_COLUMNS: &str =
    "run_id, id, id_key, id_time_ms, posted_at_ms, visible_at_ms, deleted_at_ms, origin";

static OBSERVATIONS: LazyLock<[String; 2]> = LazyLock::new(|| {
    [1, OBSERVATION_ROWS].map(|n| multi_row("", "observations", OBSERVATION_COLUMNS, n))
});
static STATUSES: LazyLock<[String; 2]> = LazyLock::new(|| {
    [1, STATUS_ROWS].map(|n| multi_row("OR IGNORE", "statuses", STATUS_COLUMNS, n))
});
static TRUTH: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
    ["OR IGNORE", "OR REPLACE"]
        .map(|verb| [1, TRUTH_ROWS].map(|n| multi_row(verb, "truth", TRUTH_COLUMNS, n)))
});

/// Runs the one-row statement `sql[0]` or the `full`-row statement `sql[1]`
/// over `rows`, `full` rows at a time; `bind` lays out one row's values.
fn insert_batched<'r, T>(
    conn: &Connection,
    sql: &[String; 2],
    full: usize,
    rows: &'r [T],
    bind: impl Fn(&'r T, &mut Vec<&'r dyn ToSql>),
) -> Result<(), Error> {
    let mut values: Vec<&dyn ToSql> = Vec::new();
    let mut chunks = rows.chunks_exact(full);
    if chunks.len() > 0 {
        let mut st = conn.prepare_cached(&sql[1]).map_err(write_error)?;
        for chunk in &mut chunks {
            values.clear();
            for row in chunk {
                bind(row, &mut values);
            }
            st.execute(values.as_slice()).map_err(write_error)?;
        }
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut st = conn.prepare_cached(&sql[0]).map_err(write_error)?;
        for row in rest {
            values.clear();
            bind(row, &mut values);
            st.execute(values.as_slice()).map_err(write_error)?;
        }
    }
    Ok(())
}

/// Inserts the items of request `request_id`, in response order (positions
/// 0, 1, ...): the status IDs as the API gave them.
pub fn insert_observations<S: AsRef<str>>(
    conn: &Connection,
    request_id: i64,
    status_ids: &[S],
) -> Result<(), Error> {
    let rows: Vec<(i64, i64, &str)> = status_ids
        .iter()
        .enumerate()
        .map(|(i, s)| (request_id, i as i64, s.as_ref()))
        .collect();
    insert_batched(conn, &OBSERVATIONS, OBSERVATION_ROWS, &rows, |r, v| {
        v.extend([&r.0 as &dyn ToSql, &r.1, &r.2]);
    })
}

/// Inserts statuses of run `run_id`; one already there is left as it is (a
/// status is stored once per run, as first returned).
pub fn insert_statuses<S: AsRef<str>>(
    conn: &Connection,
    run_id: i64,
    rows: &[&StatusRow<S>],
) -> Result<(), Error> {
    type Row<'a> = (i64, &'a str, &'a str, i64, Option<&'a str>, Option<&'a str>);
    let rows: Vec<Row> = rows
        .iter()
        .map(|s| {
            (
                run_id,
                s.id.as_ref(),
                s.id_key.as_ref(),
                s.id_time_ms,
                s.created_at.as_ref().map(AsRef::as_ref),
                s.author.as_ref().map(AsRef::as_ref),
            )
        })
        .collect();
    insert_batched(conn, &STATUSES, STATUS_ROWS, &rows, |r, v| {
        v.extend([&r.0 as &dyn ToSql, &r.1, &r.2, &r.3, &r.4, &r.5]);
    })
}

/// What inserting a truth row does when the run already has that status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnConflict {
    /// Keep the row there (the recorder: a status is taken once).
    Ignore,
    /// Replace it (`serve --truth`: the latest batch is the latest word).
    Replace,
}

/// Inserts truth rows of run `run_id`.
pub fn insert_truth<S: AsRef<str>>(
    conn: &Connection,
    run_id: i64,
    rows: &[TruthRow<S>],
    on_conflict: OnConflict,
) -> Result<(), Error> {
    type Row<'a> = (i64, &'a str, &'a str, i64, i64, i64, Option<i64>, &'a str);
    let rows: Vec<Row> = rows
        .iter()
        .map(|t| {
            (
                run_id,
                t.id.as_ref(),
                t.id_key.as_ref(),
                t.id_time_ms,
                t.posted_at_ms,
                t.visible_at_ms,
                t.deleted_at_ms,
                t.origin.as_ref(),
            )
        })
        .collect();
    let sql = &TRUTH[on_conflict as usize];
    insert_batched(conn, sql, TRUTH_ROWS, &rows, |r, v| {
        v.extend([&r.0 as &dyn ToSql, &r.1, &r.2, &r.3, &r.4, &r.5, &r.6, &r.7]);
    })
}

/// Adds one poller to run `run_id` while it runs (a client first seen by
/// `experiment serve --record`); returns the id SQLite gave it.
pub fn add_poller(conn: &Connection, run_id: i64, poller: &PollerRow) -> Result<i64, Error> {
    conn.prepare_cached("INSERT INTO pollers (run_id, name, policy, k_ms) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut st| st.execute(params![run_id, poller.name, poller.policy, poller.k_ms]))
        .map_err(write_error)?;
    Ok(conn.last_insert_rowid())
}

/// Inserts rows of side table `T` of run `run_id` ([`crate::tables`]),
/// creating the table (and adding the columns [`SideTable::ADDED`] to a
/// file written before them) if this is the file's first write of it, even
/// with no rows; each row's [`SideTable::mark`] follows its insert. A row
/// whose insert changed nothing is an error where [`SideTable::unmatched`]
/// says so.
pub fn side_rows<T: SideTable>(conn: &Connection, run_id: i64, rows: &[T]) -> Result<(), Error> {
    // Prepared once a batch, not twice: a recorded client writes one row a
    // request, thousands a second; the DDL runs only when the insert cannot
    // be prepared (no table, or a column missing).
    let mut st = match conn.prepare_cached(T::INSERT) {
        Ok(st) => st,
        Err(_) => {
            conn.execute_batch(T::CREATE).map_err(write_error)?;
            for (column, kind) in T::ADDED {
                if !crate::read::has_column(conn, T::NAME, column)? {
                    conn.execute_batch(&format!(
                        "ALTER TABLE {} ADD COLUMN {column} {kind}",
                        T::NAME
                    ))
                    .map_err(write_error)?;
                }
            }
            conn.prepare_cached(T::INSERT).map_err(write_error)?
        }
    };
    for row in rows {
        if row.insert(&mut st, run_id).map_err(write_error)? == 0
            && let Some(error) = row.unmatched()
        {
            return Err(Error(error));
        }
        row.mark(conn, run_id).map_err(write_error)?;
    }
    Ok(())
}

/// Replaces run `run_id`'s rows of a side table with `rows` (`experiment
/// watch`'s open rows and state, written again every few seconds).
pub fn replace_side_rows<T: SideTable>(
    conn: &Connection,
    run_id: i64,
    rows: &[T],
) -> Result<(), Error> {
    if crate::read::has_table(conn, T::NAME)? {
        conn.execute(
            &format!("DELETE FROM {} WHERE run_id = ?1", T::NAME),
            [run_id],
        )
        .map_err(write_error)?;
    }
    side_rows(conn, run_id, rows)
}

/// Writes the FTT truth of run `run_id` ([`FttRows`]: its three tables, each
/// created, rows or none), the deletions last, after the pushes.
pub fn insert_ftt(conn: &Connection, run_id: i64, rows: &FttRows) -> Result<(), Error> {
    side_rows(conn, run_id, &rows.pushes)?;
    side_rows(conn, run_id, &rows.trims)?;
    side_rows(conn, run_id, &rows.deletes)
}

/// Replaces run `run_id`'s stored configuration (`runs.config`) with one
/// that knows the run's end.
pub fn set_config(conn: &Connection, run_id: i64, config: &str) -> Result<(), Error> {
    conn.execute(
        "UPDATE runs SET config = ?1 WHERE id = ?2",
        params![config, run_id],
    )
    .map(|_| ())
    .map_err(|e| Error(format!("cannot write the run's config: {e}")))
}

/// Sets key `key` of run `run_id`'s stored configuration to the JSON
/// value `json` (`runs.config`'s `machine_load`, known at the run's end).
pub fn set_config_key(conn: &Connection, run_id: i64, key: &str, json: &str) -> Result<(), Error> {
    conn.execute(
        &format!("UPDATE runs SET config = json_set(config, '$.{key}', json(?1)) WHERE id = ?2"),
        params![json, run_id],
    )
    .map(|_| ())
    .map_err(|e| Error(format!("cannot write the run's {key}: {e}")))
}

/// Marks the file at `path` a finished planned run: its one `sweep_run` row
/// ([`SweepRunRow`]) in one transaction, replacing any row there, and the
/// journal folded back so that the file alone is the run. The file is any
/// SQLite file (a campaign's run database, a virtual sweep's own), opened as
/// it is: nothing else of it changes.
pub fn sweep_run(path: &Path, row: &SweepRunRow) -> Result<(), Error> {
    let e = |e: rusqlite::Error| Error(format!("{}: {e}", path.display()));
    let mut conn = Connection::open(path).map_err(e)?;
    conn.busy_timeout(Duration::from_secs(30)).map_err(e)?;
    // One file: a WAL folded back and gone (a run database is in WAL mode).
    let _: String = conn
        .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
        .map_err(e)?;
    let tx = conn.transaction().map_err(e)?;
    tx.execute_batch(SweepRunRow::CREATE).map_err(e)?;
    tx.execute("DELETE FROM sweep_run", []).map_err(e)?;
    side_rows(&tx, 0, std::slice::from_ref(row))
        .map_err(|err| Error(format!("{}: {err}", path.display())))?;
    tx.commit().map_err(e)
}

/// Folds the WAL back into the main file, so that the database is one file at
/// rest (not waiting for it when other runs are writing to the same file), and
/// closes the connection.
pub fn close(conn: Connection) -> Result<(), Error> {
    let _ = conn.busy_timeout(Duration::ZERO);
    let _ = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .optional();
    conn.close()
        .map_err(|(_, e)| Error(format!("cannot close the run database: {e}")))
}
