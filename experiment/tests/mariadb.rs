//! The MariaDB target against a real server started from the system's
//! binaries (Debian: mariadb-server). A test that cannot start it fails,
//! naming the package; none skips. The retention job's own test is in
//! `src/targets/mariadb/driver.rs` (it drives the job's round directly).

use mysql_async::prelude::Queryable;
use rusqlite::Connection;
use snowleak::targets::mariadb::server::{LockMode, Server, settings, sweep_stale};
use std::path::{Path, PathBuf};

mod common;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn start(mode: &str) -> Server {
    Server::start(mode.parse().unwrap()).unwrap_or_else(|e| {
        panic!("MariaDB must start for this test (Debian: mariadb-server): {e}")
    })
}

#[test]
fn the_server_reports_the_lock_mode_it_was_given_and_is_removed() {
    let rt = runtime();
    for mode in ["0", "2"] {
        let server = start(mode);
        let dir = server.dir().to_path_buf();
        let (version, reported, flush, networking, tmpdir) = rt.block_on(async {
            let mut conn = mysql_async::Conn::new(server.opts(None)).await.unwrap();
            let (version, lock) = settings(&mut conn).await.unwrap();
            let (flush, skip, tmpdir): (u8, u8, String) = conn
                .query_first("SELECT @@innodb_flush_log_at_trx_commit, @@skip_networking, @@tmpdir")
                .await
                .unwrap()
                .unwrap();
            conn.disconnect().await.unwrap();
            (version, lock, flush, skip, tmpdir)
        });
        assert!(version.contains("MariaDB"), "{version}");
        assert_eq!(reported, mode.parse::<LockMode>().unwrap().value());
        assert_eq!(flush, 1, "durable commits");
        assert_eq!(networking, 1, "a Unix socket only");
        // Servers started at once must not share /tmp (see Server::start).
        assert!(
            Path::new(&tmpdir).starts_with(&dir),
            "a temporary directory of its own, not {tmpdir}"
        );
        drop(server);
        assert!(!dir.exists(), "the server directory is removed");
    }
}

#[test]
fn a_server_left_by_a_dead_process_is_swept() {
    let server = start("1");
    let name = server
        .dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // Pretend its owner died: a pid that cannot exist (above pid_max).
    let rest = name.strip_prefix("snowleak-mariadbd-").unwrap();
    let dir = std::env::temp_dir().join(format!("snowleak-mariadbd-4294967295-{rest}"));
    // The pid is read before the rename: once renamed, another test's
    // server start may sweep the directory at any moment.
    let pid: i32 = std::fs::read_to_string(server.dir().join("mariadbd.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::rename(server.dir(), &dir).unwrap();
    // The handle's child is reaped by nobody now; the sweep must kill it.
    std::mem::forget(server);
    sweep_stale();
    assert!(!dir.exists(), "the stale server's directory is removed");
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = state.rsplit(')').next().unwrap_or("").trim_start();
    assert!(
        state.is_empty() || state.starts_with('Z'),
        "the stale server is killed: {state}"
    );
}

/// A run of `--target mariadb` with `flags` into a fresh directory's
/// run.db: the database and what the run printed.
fn mariadb_run(name: &str, flags: &str) -> (PathBuf, String) {
    let db = common::temp_dir(name).join("run.db");
    let mut args = vec!["--target", "mariadb"];
    args.extend(flags.split_whitespace());
    args.extend(["--db", db.to_str().unwrap()]);
    let out = common::experiment_ok(&args);
    (db, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn count(db: &Path, sql: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// The run's stored configuration (`runs.config`).
fn run_config(conn: &Connection) -> serde_json::Value {
    let text: String = conn
        .query_row("SELECT config FROM runs WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// No poller returned a row that no writer committed.
fn assert_only_committed_rows_returned(db: &Path) {
    assert_eq!(
        count(
            db,
            "SELECT COUNT(*) FROM observations o WHERE NOT EXISTS \
             (SELECT 1 FROM truth t WHERE t.run_id = 1 AND t.id = o.status_id)"
        ),
        0,
        "nothing returned that no writer committed"
    );
}

/// Rows `poller` never returned though they were visible before its last
/// request was sent: `(id, visible_at_ms)`, from the truth, by our own SQL.
fn never_returned(conn: &Connection, poller: &str) -> Vec<(i64, i64)> {
    let mut st = conn
        .prepare(
            "WITH mine AS (SELECT r.* FROM requests r JOIN pollers p ON p.id = r.poller_id \
                           WHERE r.run_id = 1 AND p.name = ?1) \
             SELECT CAST(t.id AS INTEGER), t.visible_at_ms FROM truth t WHERE t.run_id = 1 \
             AND NOT EXISTS (SELECT 1 FROM observations o JOIN mine ON mine.id = o.request_id \
                             WHERE o.status_id = t.id) \
             AND t.visible_at_ms <= (SELECT MAX(sent_at_ms) FROM mine)",
        )
        .unwrap();
    st.query_map([poller], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Every row `poller` lost was passed over: a request of its own sent before
/// the row was visible returned a higher ID, and no request it sent after
/// the row was visible had it in its window (above the cursor, below a
/// back page's upper bound).
fn assert_lost_only_behind_its_cursor(conn: &Connection, poller: &str) -> usize {
    let lost = never_returned(conn, poller);
    for (id, visible_at) in &lost {
        let passed: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM requests r JOIN pollers p ON p.id = r.poller_id \
                 JOIN observations o ON o.request_id = r.id \
                 WHERE r.run_id = 1 AND p.name = ?3 AND r.sent_at_ms < ?1 \
                 AND CAST(o.status_id AS INTEGER) > ?2",
                rusqlite::params![visible_at, id, poller],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            passed > 0,
            "{poller}: row {id} lost without its cursor passing it"
        );
        let asked_below: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM requests r JOIN pollers p ON p.id = r.poller_id \
                 WHERE r.run_id = 1 AND p.name = ?3 AND r.sent_at_ms >= ?1 AND r.error IS NULL \
                 AND (r.since_id IS NULL OR CAST(r.since_id AS INTEGER) < ?2) \
                 AND (r.before_id IS NULL OR CAST(r.before_id AS INTEGER) > ?2)",
                rusqlite::params![visible_at, id, poller],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            asked_below, 0,
            "{poller}: row {id} was in a window yet never returned"
        );
    }
    lost.len()
}

/// Pollers at 20 Hz read the autoinc table (interleaved lock mode) while 8
/// writers write, and the rows they never returned are checked one by one
/// against the truth with our own SQL: the naive since_id poller and
/// Kafka Connect's incrementing query lose only rows their cursor passed
/// before the rows were visible; gap tracking (a timeout longer than the
/// run) loses nothing. Nothing returned is unknown to the writers, and the
/// run records the lock mode the server reports.
#[test]
fn on_autoinc_naive_pollers_lose_only_rows_passed_and_gap_tracking_loses_nothing() {
    let (db, stdout) = mariadb_run(
        "mariadb-naive",
        concat!(
            "--duration 12s --interval 50ms --poller naive --id-poller incrementing ",
            "--id-poller gaps:timeout=1m --id-poller behind:n=20 --writers 8 ",
            "--write-rate 400 --autoinc-lock-mode 2",
        ),
    );
    assert!(stdout.contains("innodb_autoinc_lock_mode 2"), "{stdout}");
    let conn = Connection::open(&db).unwrap();
    let config = run_config(&conn);
    assert_eq!(config["autoinc_lock_mode"], 2, "the lock mode read back");
    assert!(
        config["server_version"]
            .as_str()
            .unwrap()
            .contains("MariaDB")
    );
    let written = count(&db, "SELECT COUNT(*) FROM truth WHERE run_id = 1");
    // Enough rows for the checks to bite; a loaded machine writes fewer than
    // asked (at a load average of 8 on 2 cores, 595 of 4,800).
    assert!(written > 200, "the writers wrote ({written} rows)");
    assert_eq!(
        written,
        count(&db, "SELECT COUNT(*) FROM writer_brackets WHERE run_id = 1"),
        "every row has its bracket"
    );
    assert_only_committed_rows_returned(&db);
    let naive = assert_lost_only_behind_its_cursor(&conn, "naive");
    let incrementing = assert_lost_only_behind_its_cursor(&conn, "incrementing");
    let gaps = never_returned(&conn, "gaps:timeout=1m,max=10000");
    assert_eq!(gaps, vec![], "gap tracking lost rows");
    // The gap poller did read: every row but those after its last request.
    assert!(
        count(
            &db,
            "SELECT COUNT(DISTINCT o.status_id) FROM observations o JOIN requests r ON r.id = o.request_id \
             JOIN pollers p ON p.id = r.poller_id WHERE p.name = 'gaps:timeout=1m,max=10000'"
        ) > 200
    );
    // No partition was dropped (one every 10 m by default): no request lost
    // rows to retention, though `behind:n=20` starts with its cursor below
    // the first ID. The table exists, empty: the check ran.
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM partition_drops WHERE run_id = 1"),
        0
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM cursor_flags WHERE run_id = 1"),
        0,
        "a request flagged below the oldest ID kept with nothing dropped"
    );
    assert!(
        !stdout.contains("cursor below the oldest ID kept"),
        "{stdout}"
    );
    eprintln!("{written} rows written; lost: naive {naive}, incrementing {incrementing}, gaps 0");
}

/// The snowflake schema with skewed writer clocks, on a real server: four
/// writers make their own Snowflake IDs from clocks up to 400 ms apart (an
/// assumption the run stores). Every row's ID carries its writer's worker
/// bits and its writer's clock inside the transaction's bracket, by our own
/// SQL; the naive and incrementing pollers lose rows, and each one only
/// because their cursor passed it before it was visible; a compensated
/// poller whose k covers the skew loses nothing.
#[test]
fn on_snowflake_ids_carry_each_writers_clock_and_only_passed_rows_are_lost() {
    let (db, stdout) = mariadb_run(
        "mariadb-snowflake",
        concat!(
            "--schema snowflake --clock-skew 400ms --duration 8s --interval 50ms ",
            "--poller naive --poller compensated:k=5s --id-poller incrementing --writers 4 ",
            "--write-rate 200 --seed 1",
        ),
    );
    assert!(stdout.contains("schema snowflake"), "{stdout}");
    let conn = Connection::open(&db).unwrap();
    let config = run_config(&conn);
    let offsets: Vec<i64> = config["workload"]["clock_offsets_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_i64().unwrap())
        .collect();
    assert_eq!(offsets.len(), 4);
    assert!(
        offsets.iter().all(|o| (-200..=200).contains(o)),
        "{offsets:?}"
    );
    let spread = offsets.iter().max().unwrap() - offsets.iter().min().unwrap();
    assert!(spread >= 100, "seed 1 skews the clocks: {offsets:?}");
    assert!(
        config["assumption"]
            .as_str()
            .unwrap()
            .contains(&format!("{offsets:?}")),
        "the skew is stored as an assumption: {config}"
    );
    // Each row: its worker bits name its writer, and its ID's time is that
    // writer's clock at a moment inside the transaction's bracket.
    let mut st = conn
        .prepare(
            "SELECT CAST(p.id AS INTEGER), p.xid, p.xact_start_ms, p.commit_returned_ms, t.id_time_ms \
             FROM writer_brackets p JOIN truth t ON t.run_id = p.run_id AND t.id = p.id WHERE p.run_id = 1",
        )
        .unwrap();
    let rows: Vec<(i64, String, i64, i64, i64)> = st
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    // Enough rows to check each one's bracket (a loaded machine wrote 83).
    assert!(rows.len() > 20, "the writers wrote ({} rows)", rows.len());
    assert_eq!(
        rows.len() as i64,
        count(&db, "SELECT COUNT(*) FROM truth WHERE run_id = 1"),
        "every row has its bracket"
    );
    for (id, xid, start, returned, id_time) in &rows {
        let worker = (id >> 12) & 1023;
        assert_eq!(xid, &format!("writer {worker}"), "row {id}");
        let offset = offsets[worker as usize];
        assert!(
            start + offset <= *id_time && *id_time <= returned + offset,
            "row {id}: ID time {id_time} outside writer {worker}'s clock ({offset} ms) over [{start}, {returned}]"
        );
    }
    assert_only_committed_rows_returned(&db);
    let naive = assert_lost_only_behind_its_cursor(&conn, "naive");
    let incrementing = assert_lost_only_behind_its_cursor(&conn, "incrementing");
    assert!(
        naive > 0 && incrementing > 0,
        "clocks {spread} ms apart at 20 Hz must cost rows: naive {naive}, incrementing {incrementing}"
    );
    assert_eq!(
        never_returned(&conn, "compensated:k=5s"),
        vec![],
        "k = 5 s covers a 400 ms skew"
    );
    eprintln!(
        "{} rows; lost: naive {naive}, incrementing {incrementing}",
        rows.len()
    );
}

/// The retention job meets a lagging poller: one incrementing poller pauses
/// for 6 s while the job drops a partition every second once the writer
/// passed it (keeping 3: the one ahead, the one written to, the one
/// before; the writer is asked for a rate it reaches on a loaded machine, as
/// partitions follow what it writes), another reads on. One
/// writer, so commits come in ID order and nothing leaks by commit order:
/// every row a poller never returned must have been dropped (truth
/// `deleted_at_ms`, from `partition_drops`) before any request of that poller
/// that could have returned it; the paused poller's lost rows are exactly the
/// dropped rows it never read, all dropped during its pause; its cursor is
/// flagged below the oldest ID kept.
#[test]
fn a_paused_poller_loses_exactly_the_rows_dropped_before_it_read_them() {
    let (db, stdout) = mariadb_run(
        "mariadb-retention",
        concat!(
            "--duration 12s --interval 200ms --id-poller incrementing,pause=6s@2s ",
            "--id-poller incrementing --writers 1 --write-rate 10 --partition-every 1s ",
            "--retain 3",
        ),
    );
    assert!(
        stdout.contains("incrementing,pause=6s@2s: cursor below the oldest ID kept"),
        "{stdout}"
    );
    let conn = Connection::open(&db).unwrap();
    let drops = count(&db, "SELECT COUNT(*) FROM partition_drops WHERE run_id = 1");
    assert!(drops >= 3, "the job dropped partitions ({drops})");
    // Every truth row in a dropped range is marked deleted at that drop, and no other.
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM truth t WHERE t.run_id = 1 AND t.deleted_at_ms IS NOT \
             (SELECT d.sent_at_ms FROM partition_drops d WHERE d.run_id = 1 \
              AND CAST(t.id AS INTEGER) >= d.lo_id AND CAST(t.id AS INTEGER) < d.hi_id)"
        ),
        0
    );
    let started: i64 = conn
        .query_row("SELECT started_at_ms FROM runs WHERE id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    for poller in ["incrementing,pause=6s@2s", "incrementing"] {
        for (id, visible_at) in never_returned(&conn, poller) {
            let deleted_at: Option<i64> = conn
                .query_row(
                    "SELECT deleted_at_ms FROM truth WHERE run_id = 1 AND CAST(id AS INTEGER) = ?1",
                    [id],
                    |r| r.get(0),
                )
                .unwrap();
            let deleted_at =
                deleted_at.unwrap_or_else(|| panic!("{poller}: row {id} lost but never dropped"));
            // No request of the poller, sent after the row was visible and
            // answered before the drop, had it in its window on a short page.
            let could_have: i64 = conn
                .query_row(
                    "SELECT COUNT(*) FROM requests r JOIN pollers p ON p.id = r.poller_id \
                     WHERE r.run_id = 1 AND p.name = ?1 AND r.error IS NULL \
                     AND r.sent_at_ms >= ?2 AND r.received_at_ms < ?3 AND r.items < r.page_limit \
                     AND (r.since_id IS NULL OR CAST(r.since_id AS INTEGER) < ?4)",
                    rusqlite::params![poller, visible_at, deleted_at, id],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(
                could_have, 0,
                "{poller}: row {id} was readable before its drop"
            );
        }
    }
    assert_eq!(
        never_returned(&conn, "incrementing"),
        vec![],
        "a poller that keeps up loses nothing to a job that keeps the last period"
    );
    // The paused poller's lost rows: exactly the dropped rows it never read,
    // each dropped while it was paused.
    let lost: Vec<(i64, i64)> = never_returned(&conn, "incrementing,pause=6s@2s");
    let dropped_unread: Vec<(i64, i64)> = {
        let mut st = conn
            .prepare(
                "SELECT CAST(t.id AS INTEGER), t.deleted_at_ms FROM truth t WHERE t.run_id = 1 \
                 AND t.deleted_at_ms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM observations o \
                 JOIN requests r ON r.id = o.request_id JOIN pollers p ON p.id = r.poller_id \
                 WHERE p.name = 'incrementing,pause=6s@2s' AND o.status_id = t.id) \
                 ORDER BY 1",
            )
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let mut lost_ids: Vec<i64> = lost.iter().map(|(id, _)| *id).collect();
    lost_ids.sort_unstable();
    let dropped_ids: Vec<i64> = dropped_unread.iter().map(|(id, _)| *id).collect();
    assert!(!lost_ids.is_empty(), "the pause met a drop");
    assert_eq!(lost_ids, dropped_ids);
    // Each was dropped while the poller did not read: after its last request
    // before the pause was sent, before its first one after the pause returned.
    let (last_before, first_after): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT MAX(r.sent_at_ms) FROM requests r JOIN pollers p ON p.id = r.poller_id \
                     WHERE p.name = ?1 AND r.sent_at_ms < ?2), \
                    (SELECT MIN(r.received_at_ms) FROM requests r JOIN pollers p ON p.id = r.poller_id \
                     WHERE p.name = ?1 AND r.sent_at_ms >= ?2)",
            rusqlite::params!["incrementing,pause=6s@2s", started + 2000],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    for (id, deleted_at) in dropped_unread {
        assert!(
            last_before < deleted_at && deleted_at < first_after,
            "row {id} dropped at {deleted_at}, outside the pause ({last_before}..{first_after})"
        );
    }
    // The flagged requests in run.db (`cursor_flags`) are exactly those whose
    // cursor lay below the oldest ID kept when they were sent: the upper
    // bound of the last range whose DROP was sent in an earlier ms, by our
    // own SQL over partition_drops and requests.
    let rows = |sql: &str| -> Vec<(i64, String, i64, i64)> {
        let mut st = conn.prepare(sql).unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let expected = rows(
        "SELECT id, name, cursor, oldest FROM (SELECT r.id, p.name, \
         CAST(r.since_id AS INTEGER) AS cursor, \
         COALESCE((SELECT MAX(d.hi_id) FROM partition_drops d WHERE d.run_id = 1 \
                   AND d.sent_at_ms < r.sent_at_ms), 0) AS oldest \
         FROM requests r JOIN pollers p ON p.id = r.poller_id \
         WHERE r.run_id = 1 AND r.since_id IS NOT NULL) WHERE cursor + 1 < oldest ORDER BY id",
    );
    let stored = rows(
        "SELECT f.request_id, p.name, f.cursor, f.oldest_kept FROM cursor_flags f \
         JOIN pollers p ON p.id = f.poller_id WHERE f.run_id = 1 ORDER BY f.request_id",
    );
    assert_eq!(stored, expected, "cursor_flags against our own SQL");
    assert!(
        stored
            .iter()
            .all(|(_, name, _, _)| name == "incrementing,pause=6s@2s"),
        "only the paused poller is flagged: {stored:?}"
    );
    let first_after_pause: i64 = conn
        .query_row(
            "SELECT r.id FROM requests r JOIN pollers p ON p.id = r.poller_id \
             WHERE p.name = ?1 AND r.sent_at_ms >= ?2 ORDER BY r.sent_at_ms, r.id LIMIT 1",
            rusqlite::params!["incrementing,pause=6s@2s", started + 8000],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        stored.first().map(|f| f.0),
        Some(first_after_pause),
        "the first flag is the paused poller's first request after the pause"
    );
    analyze_names_each_row_dropped_before_a_poller_read_it_expired(db.parent().unwrap(), &db);
}

/// Writer serialisation (`--writer-lock get-lock`, the eventsourcing
/// library's cure): on autoinc with 8 writers, no COMMIT returns after the
/// COMMIT of a higher ID returned (our own SQL over the truth's brackets),
/// and the naive and incrementing pollers at 20 Hz lose nothing.
#[test]
fn with_the_writer_lock_commits_return_in_id_order_and_naive_loses_nothing() {
    let (db, stdout) = mariadb_run(
        "mariadb-writer-lock",
        concat!(
            "--duration 8s --interval 50ms --poller naive --id-poller incrementing ",
            "--writers 8 --write-rate 200 --autoinc-lock-mode 2 --writer-lock get-lock",
        ),
    );
    assert!(stdout.contains("writers (lock: get-lock)"), "{stdout}");
    let conn = Connection::open(&db).unwrap();
    let written = count(&db, "SELECT COUNT(*) FROM writer_brackets WHERE run_id = 1");
    assert!(written > 200, "the writers wrote ({written} rows)");
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(DISTINCT xid) FROM writer_brackets WHERE run_id = 1"
        ),
        8,
        "every writer wrote"
    );
    // A row whose COMMIT returned after the COMMIT of a higher ID had returned.
    let out_of_order = count(
        &db,
        "SELECT COUNT(*) FROM (SELECT commit_returned_ms AS mine, MIN(commit_returned_ms) \
         OVER (ORDER BY CAST(id AS INTEGER) DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) \
         AS higher FROM writer_brackets WHERE run_id = 1) WHERE higher < mine",
    );
    assert_eq!(out_of_order, 0, "a COMMIT returned out of ID order");
    // Each transaction began after the previous one's COMMIT returned.
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM (SELECT xact_start_ms AS start, LAG(commit_returned_ms) \
             OVER (ORDER BY CAST(id AS INTEGER)) AS prev FROM writer_brackets WHERE run_id = 1) \
             WHERE start < prev",
        ),
        0,
        "two transactions overlapped"
    );
    assert_eq!(never_returned(&conn, "naive"), vec![], "naive lost rows");
    assert_eq!(
        never_returned(&conn, "incrementing"),
        vec![],
        "incrementing lost rows"
    );
    // The server's row lock waits over the run were read (its counters at
    // the writers' start and end), beside the commit latency.
    let waits: Option<i64> = conn
        .query_row(
            "SELECT json_extract(config, '$.machine_load.writers.lock_waits.waits') FROM runs",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        waits.is_some_and(|w| w >= 0),
        "no lock waits in the run's machine_load"
    );
}

/// `--target mariadb:URL --table T`: a table of the user's own, on the
/// throwaway server with a user and a table made by our own SQL, is polled
/// read-only with the password from `MYSQL_PWD`; wrong credentials, a missing
/// table and a password in the URL are one line and exit 2, and the
/// password is never shown or stored.
#[test]
fn your_own_table_is_polled_read_only_and_bad_input_is_one_line() {
    let server = start("1");
    let rt = runtime();
    rt.block_on(async {
        let mut conn = mysql_async::Conn::new(server.opts(None)).await.unwrap();
        for sql in [
            "CREATE DATABASE shop",
            "CREATE TABLE shop.orders (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, body TEXT)",
            "INSERT INTO shop.orders (body) VALUES ('a'), ('b'), ('c')",
            "CREATE USER 'reader'@'localhost' IDENTIFIED BY 'right-one'",
            "GRANT SELECT ON shop.* TO 'reader'@'localhost'",
        ] {
            conn.query_drop(sql).await.unwrap();
        }
        conn.disconnect().await.unwrap();
    });
    let dir = common::temp_dir("mariadb-own");
    let socket = server.socket();
    let target = format!(
        "mariadb:mysql://reader@localhost/shop?socket={}",
        socket.display()
    );
    let run = |target: &str, table: &str, password: &str, db: &Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_experiment"))
            .args(["--target", target, "--table", table, "--poller", "naive"])
            .args(["--id-poller", "incrementing", "--interval", "200ms"])
            .args(["--duration", "1s", "--db"])
            .arg(db)
            .env("MYSQL_PWD", password)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let bad = dir.join("bad.db");
    for (target, table, password, expected) in [
        (target.as_str(), "orders", "wrong-one", "Access denied"),
        (target.as_str(), "nope", "right-one", "doesn't exist"),
        (
            &*target.replace("reader@", "reader:right-one@"),
            "orders",
            "",
            "not in the URL",
        ),
    ] {
        let (code, err, _) = run(target, table, password, &bad);
        assert_eq!(code, Some(2), "{table}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{table}: {err}");
        assert!(err.contains(expected), "{table}: {err}");
        assert!(
            !err.contains("right-one") && !err.contains("wrong-one"),
            "{err}"
        );
    }
    let db = dir.join("run.db");
    let (code, err, stdout) = run(&target, "orders", "right-one", &db);
    assert_eq!(code, Some(0), "{err}");
    assert!(stdout.contains("your table orders"), "{stdout}");
    let conn = Connection::open(&db).unwrap();
    let config: String = conn
        .query_row("SELECT config FROM runs WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    assert!(
        config.contains("\"password\":\"<redacted>\"") && !config.contains("right-one"),
        "{config}"
    );
    assert!(config.contains("\"table\":\"orders\""), "{config}");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM truth"), 0, "no truth");
    for poller in ["naive", "incrementing"] {
        let mut st = conn
            .prepare(
                "SELECT DISTINCT CAST(o.status_id AS INTEGER) FROM observations o \
                 JOIN requests r ON r.id = o.request_id JOIN pollers p ON p.id = r.poller_id \
                 WHERE p.name = ?1 ORDER BY 1",
            )
            .unwrap();
        let seen: Vec<i64> = st
            .query_map([poller], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(seen, vec![1, 2, 3], "{poller}");
        assert!(
            count(
                &db,
                &format!(
                    "SELECT COUNT(*) FROM requests r JOIN pollers p ON p.id = r.poller_id \
                     WHERE p.name = '{poller}' AND r.error IS NULL"
                )
            ) >= 2,
            "{poller} polled"
        );
    }
    // Nothing was written to the user's database.
    let rows: i64 = rt.block_on(async {
        let mut conn = mysql_async::Conn::new(server.opts(Some("shop")))
            .await
            .unwrap();
        let n: Option<i64> = conn
            .query_first("SELECT COUNT(*) FROM orders")
            .await
            .unwrap();
        conn.disconnect().await.unwrap();
        n.unwrap()
    });
    assert_eq!(rows, 3);
}

/// Bad input is one line and exit status 2.
#[test]
fn mariadb_flags_are_refused_where_they_do_not_apply() {
    for (args, expected) in [
        (
            vec!["--target", "mariadb", "--poller", "compensated:k=1s"],
            "AUTO_INCREMENT IDs carry no time",
        ),
        (
            vec!["--target", "mariadb", "--autoinc-lock-mode", "3"],
            "bad innodb_autoinc_lock_mode '3'",
        ),
        (
            vec!["--target", "mariadb", "--clock-skew", "1s"],
            "--clock-skew skews the Snowflake writers' clocks",
        ),
        (
            vec!["--retain", "3"],
            "--retain applies to --target postgres and --target mariadb only",
        ),
        (
            vec!["--target", "postgres", "--partition-every", "1m"],
            "--partition-every applies to --target mariadb and --target postgres --schema partitioned or partitioned-snowflake only",
        ),
        (
            vec!["--target", "mariadb", "--pg-tail", "2%:3s"],
            "--pg-tail does not apply to --target mariadb",
        ),
        (
            vec!["--target", "mariadb", "--schema", "outbox"],
            "unknown MariaDB schema 'outbox'",
        ),
        (vec!["--target", "mariadb", "--poller", "xmin"], "xmin"),
        (
            vec![
                "--target",
                "postgres",
                "--schema",
                "partitioned",
                "--poller",
                "compensated:k=1s",
            ],
            "the partitioned schema's BIGSERIAL IDs carry no time",
        ),
        (
            vec![
                "--target", "postgres", "--schema", "outbox", "--retain", "3",
            ],
            "--retain applies to --target mariadb and --target postgres --schema partitioned or partitioned-snowflake only",
        ),
        (
            vec!["--target", "postgres", "--writer-lock", "get-lock"],
            "--writer-lock applies to --target mariadb only",
        ),
        (
            vec!["--target", "mariadb", "--writer-lock", "table"],
            "unknown --writer-lock 'table'",
        ),
        (
            vec!["--target", "mariadb", "--stall-share", "5%"],
            "--stall-share needs --stall D",
        ),
        (
            vec!["--target", "mariadb", "--stall", "2s"],
            "give --stall-share S too",
        ),
        (
            vec!["--target", "mariadb", "--rollback-share", "120%"],
            "bad share '120%'",
        ),
        (
            vec!["--target", "postgres", "--rollback-share", "1%"],
            "--rollback-share applies to --target mariadb only",
        ),
        (
            vec![
                "--target",
                "mariadb",
                "--id-poller",
                "kafka-connect:poll=0s",
            ],
            "poll must be at least 1ms",
        ),
        (
            vec![
                "--target",
                "mariadb:mysql://u@localhost/db",
                "--table",
                "t",
                "--stall-share",
                "1%",
            ],
            "--stall-share shapes the throwaway server's writers",
        ),
        (
            vec![
                "--target",
                "mariadb:mysql://u@localhost/db",
                "--table",
                "t",
                "--retain",
                "3",
            ],
            "--retain shapes the throwaway server",
        ),
        (
            vec![
                "--target",
                "mariadb:mysql://u@localhost/db",
                "--table",
                "t",
                "--writer-lock",
                "get-lock",
            ],
            "--writer-lock shapes the throwaway server",
        ),
        (
            vec![
                "--target",
                "mariadb:mysql://u@localhost/db",
                "--table",
                "t",
                "--writers",
                "2",
            ],
            "--writers shapes the throwaway server's writers",
        ),
        (
            vec!["--target", "mariadb:mysql://u@localhost/db"],
            "--target mariadb:URL needs --table",
        ),
        (
            vec![
                "--target",
                "mariadb:mysql://u@localhost/db",
                "--table",
                "t",
                "--poller",
                "compensated:k=1s",
            ],
            "compensated pollers need the IDs' --layout",
        ),
    ] {
        let out = common::experiment(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// A server that dies mid-run: failed requests and transactions, a clean
/// end with a readable run.db, and the server's directory removed.
#[test]
fn a_server_that_dies_mid_run_gives_failed_requests_and_a_clean_end() {
    let dir = common::temp_dir("mariadb-dies");
    let db = dir.join("run.db");
    let mut child = common::command(&[
        "--target",
        "mariadb",
        "--duration",
        "20s",
        "--interval",
        "200ms",
        "--id-poller",
        "incrementing",
        "--db",
        db.to_str().unwrap(),
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // The child's server directory, once its server runs and the run records
    // (its database's write-ahead log exists; the test does not open the
    // database while the run creates it).
    let prefix = format!("snowleak-mariadbd-{}-", child.id());
    let server_dir = loop {
        let found = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(Result::ok)
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path());
        if let Some(d) = found
            && d.join("mariadbd.pid").exists()
            && dir.join("run.db-wal").exists()
        {
            break d;
        }
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the run ended early: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // A poll of the condition above, not a synchronisation by time.
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let pid = std::fs::read_to_string(server_dir.join("mariadbd.pid")).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!server_dir.exists(), "the server directory is removed");
    assert_eq!(count(&db, "SELECT complete FROM runs WHERE id = 1"), 1);
    assert!(
        count(&db, "SELECT COUNT(*) FROM requests WHERE error IS NOT NULL") > 0,
        "requests after the death failed"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("failed transactions (last:"), "{stdout}");
}

/// `analyze` on the run of
/// `a_paused_poller_loses_exactly_the_rows_dropped_before_it_read_them`:
/// its JSON names as `expired`, one by one and per poller, exactly the rows
/// our own SQL finds dropped (a `partition_drops` range, at that drop) before
/// the poller read them (never among its observations, and no request of it
/// that could have returned them answered before the drop), and nothing
/// else; the paused poller's verdict is invalid, naming them; the text and
/// the page say it too.
fn analyze_names_each_row_dropped_before_a_poller_read_it_expired(dir: &Path, db: &Path) {
    let analyze = Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let page = dir.join("report.html");
    let out = std::process::Command::new(&analyze)
        .arg(db)
        .args(["--json", "--html"])
        .arg(&page)
        .arg("--out")
        .arg(dir.join("plots"))
        .output()
        .expect("analyze runs (cargo builds it for the workspace's tests)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let conn = Connection::open(db).unwrap();
    let mut total = 0;
    for poller in ["incrementing,pause=6s@2s", "incrementing"] {
        let mut st = conn
            .prepare(
                "WITH mine AS (SELECT r.* FROM requests r JOIN pollers p ON p.id = r.poller_id \
                               WHERE r.run_id = 1 AND p.name = ?1) \
                 SELECT t.id FROM truth t JOIN partition_drops d ON d.run_id = t.run_id \
                   AND CAST(t.id AS INTEGER) >= d.lo_id AND CAST(t.id AS INTEGER) < d.hi_id \
                   AND t.deleted_at_ms = d.sent_at_ms \
                 WHERE t.run_id = 1 \
                   AND NOT EXISTS (SELECT 1 FROM observations o JOIN mine ON mine.id = o.request_id \
                                   WHERE o.status_id = t.id) \
                   AND NOT EXISTS (SELECT 1 FROM mine WHERE mine.error IS NULL \
                                   AND mine.sent_at_ms >= t.visible_at_ms \
                                   AND mine.received_at_ms < t.deleted_at_ms \
                                   AND mine.items < mine.page_limit \
                                   AND (mine.since_id IS NULL \
                                        OR CAST(mine.since_id AS INTEGER) < CAST(t.id AS INTEGER))) \
                 ORDER BY CAST(t.id AS INTEGER)",
            )
            .unwrap();
        let dropped_unread: Vec<String> = st
            .query_map([poller], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut named: Vec<String> = json["expired"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["poller"] == poller)
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect();
        named.sort_by_key(|id| id.parse::<i64>().unwrap());
        assert_eq!(named, dropped_unread, "{poller}: expired, one by one");
        let report = json["pollers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == poller)
            .unwrap();
        assert_eq!(report["expired"], named.len(), "{poller}");
        if !named.is_empty() {
            assert_eq!(report["verdict"], "invalid", "{poller}");
            let why = report["verdict_reason"].as_str().unwrap();
            assert!(
                why.contains(&format!("{} expired", named.len())),
                "{poller}: {why}"
            );
        }
        total += named.len();
    }
    assert!(total > 0, "the pause met a drop");
    // The text and the page say it too.
    let text = std::process::Command::new(&analyze)
        .arg(db)
        .arg("--out")
        .arg(dir.join("plots"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let line = format!("{total} expired (dropped by the retention job before it read them)");
    assert!(text.contains(&line), "{line} in:\n{text}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&format!("<h2>Expired ({total}):")),
        "{total} in the page"
    );
}

/// `analyze DB --json`: the report of each poller, by name.
fn analyze_json(db: &Path) -> serde_json::Value {
    let analyze = Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let out = std::process::Command::new(&analyze)
        .arg(db)
        .arg("--json")
        .arg("--out")
        .arg(db.with_file_name("plots"))
        .output()
        .expect("analyze runs (cargo builds it for the workspace's tests)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn poller_report<'a>(json: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    json["pollers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no poller {name} in the report"))
}

/// `--stall-share 5% --stall 1500ms`: a seeded share of transactions holds
/// its AUTO_INCREMENT value 1.5 s before COMMIT. Kafka Connect's own loop
/// (`kafka-connect:poll=1s`) sends one query without LIMIT a poll interval
/// after the last one ended (recorded with page_limit 0), and loses rows,
/// each only because its offset had passed it; gap tracking reads them all.
/// The run stores the stalls, the arrivals and the jitter it ran with.
#[test]
fn with_stalled_writers_kafka_connect_leaks_and_gap_tracking_does_not() {
    let kc = "kafka-connect:poll=1s,batch=100";
    let (db, stdout) = mariadb_run(
        "mariadb-stalls",
        concat!(
            "--duration 12s --interval 100ms --writers 4 --write-rate 100 ",
            "--stall-share 5% --stall 1500ms --id-poller kafka-connect:poll=1s ",
            "--id-poller gaps:timeout=1m --id-poller incrementing --tick-jitter 50ms",
        ),
    );
    assert!(
        stdout.contains("assumption: injected: 5% of transactions hold"),
        "{stdout}"
    );
    let conn = Connection::open(&db).unwrap();
    let config = run_config(&conn);
    assert_eq!(config["workload"]["stall_share"], 0.05);
    assert_eq!(config["workload"]["stall_ms"], 1500);
    assert_eq!(config["workload"]["rollback_share"], 0.0);
    assert_eq!(config["arrivals"], "poisson");
    assert_eq!(config["tick_jitter_ms"], 50);
    assert!(
        config["assumption"]
            .as_str()
            .unwrap()
            .contains("hold their ID for 1500 ms"),
        "{config}"
    );
    // Only the ID pollers asked for: no since_id poller beside them (so one
    // `--id-poller` alone is a run of one poller).
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM pollers WHERE run_id = 1"),
        3
    );
    let stalled = count(
        &db,
        "SELECT COUNT(*) FROM writer_brackets WHERE run_id = 1 AND injected_sleep_ms = 1500",
    );
    assert!(stalled > 0, "some transactions were stalled");
    // One query a poll interval: each sent at least 1 s after the last one
    // ended, but the final cycle, which reads at the end whatever the time.
    let mut st = conn
        .prepare(
            "SELECT r.sent_at_ms, r.received_at_ms, r.page_limit, r.page FROM requests r \
             JOIN pollers p ON p.id = r.poller_id WHERE p.name = ?1 ORDER BY r.sent_at_ms",
        )
        .unwrap();
    let requests: Vec<(i64, i64, i64, i64)> = st
        .query_map([kc], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(requests.len() >= 3, "{requests:?}");
    assert!(requests.len() <= 14, "at most one a second: {requests:?}");
    for r in &requests {
        assert_eq!((r.2, r.3), (0, 0), "no LIMIT, one page a poll: {r:?}");
    }
    let polls = &requests[..requests.len() - 1];
    for w in polls.windows(2) {
        assert!(w[1].0 >= w[0].1 + 1000, "a poll interval apart: {w:?}");
    }
    assert_only_committed_rows_returned(&db);
    let lost = assert_lost_only_behind_its_cursor(&conn, kc);
    assert!(lost > 0, "Kafka Connect's offset passed stalled rows");
    let incrementing = assert_lost_only_behind_its_cursor(&conn, "incrementing");
    assert!(
        incrementing > 0,
        "incrementing's cursor passed stalled rows"
    );
    assert_eq!(never_returned(&conn, "gaps:timeout=1m,max=10000"), vec![]);
    let json = analyze_json(&db);
    assert_eq!(poller_report(&json, kc)["leaks"], lost);
    assert_eq!(
        poller_report(&json, "gaps:timeout=1m,max=10000")["leaks"],
        0
    );
}

/// `--rollback-share 10%`: a seeded share of transactions takes its
/// AUTO_INCREMENT value and rolls back, so IDs are missing from the table
/// for ever. None of them reaches the truth or any poller's answer; gap
/// tracking gives them up after its timeout and is not blamed for them, and
/// neither is anyone else: the checker finds no leak and no unexplained miss.
#[test]
fn rolled_back_ids_never_reach_the_truth_and_no_poller_is_blamed() {
    let gaps = "gaps:timeout=2s,max=10000";
    let (db, stdout) = mariadb_run(
        "mariadb-rollbacks",
        concat!(
            "--duration 8s --interval 100ms --writers 1 --write-rate 50 ",
            "--rollback-share 10% --id-poller gaps:timeout=2s --id-poller incrementing ",
            "--id-poller kafka-connect:poll=1s --arrivals grid --poller naive --limit 1000",
        ),
    );
    assert!(stdout.contains("rolled back (injected)"), "{stdout}");
    assert!(stdout.contains("given up after the timeout"), "{stdout}");
    let conn = Connection::open(&db).unwrap();
    let config = run_config(&conn);
    assert_eq!(config["workload"]["rollback_share"], 0.1);
    assert_eq!(config["arrivals"], "grid");
    // One writer: IDs are taken in order, so every ID missing between the
    // lowest and the highest committed one was rolled back.
    let (lo, hi, n): (i64, i64, i64) = conn
        .query_row(
            "SELECT MIN(CAST(id AS INTEGER)), MAX(CAST(id AS INTEGER)), COUNT(*) FROM truth \
             WHERE run_id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let rolled_back = hi - lo + 1 - n;
    // `--limit 1000` (the control for paging) reaches every poller with a
    // LIMIT, the since_id one and the ID pollers; Kafka Connect's has none.
    let limits = |name: &str| -> Vec<i64> {
        let mut st = conn
            .prepare(
                "SELECT DISTINCT r.page_limit FROM requests r JOIN pollers p \
                 ON p.id = r.poller_id WHERE p.name = ?1",
            )
            .unwrap();
        st.query_map([name], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    for name in ["naive", gaps, "incrementing"] {
        assert_eq!(limits(name), vec![1000], "{name}");
    }
    assert_eq!(limits("kafka-connect:poll=1s,batch=100"), vec![0]);
    assert!(
        rolled_back > 0,
        "IDs were rolled back ({lo}..={hi}, {n} rows)"
    );
    assert_only_committed_rows_returned(&db);
    let json = analyze_json(&db);
    for name in [
        gaps,
        "incrementing",
        "kafka-connect:poll=1s,batch=100",
        "naive",
    ] {
        assert_eq!(never_returned(&conn, name), vec![], "{name}");
        let report = poller_report(&json, name);
        assert_eq!(report["leaks"], 0, "{name}");
        assert_eq!(report["misses_unexplained"], 0, "{name}");
        assert_ne!(report["verdict"], "invalid", "{name}: {report}");
    }
}

/// `--arrivals bursty`: the writers write together in the run's on spells
/// and not at all in its off spells. The spells follow from the seed: seed
/// 1's first on spell ends at 967 ms and the off spell after it lasts
/// 1,330 ms (experiment/src/workload/pace.rs's `Spells`), so no transaction
/// starts in a second of that run, where Poisson writers at 200/s would
/// start one every 5 ms on average.
#[test]
fn bursty_writers_fall_silent_in_the_seeds_off_spell() {
    let (db, _) = mariadb_run(
        "mariadb-bursty",
        "--duration 4s --interval 100ms --writers 4 --write-rate 200 --arrivals bursty --poller naive --seed 1",
    );
    let conn = Connection::open(&db).unwrap();
    assert_eq!(run_config(&conn)["arrivals"], "bursty");
    let longest_pause = count(
        &db,
        "SELECT MAX(gap) FROM (SELECT xact_start_ms - LAG(xact_start_ms) \
         OVER (ORDER BY xact_start_ms) AS gap FROM writer_brackets WHERE run_id = 1)",
    );
    assert!(
        longest_pause >= 1000,
        "the longest pause between transactions was {longest_pause} ms"
    );
    assert!(
        count(&db, "SELECT COUNT(*) FROM writer_brackets WHERE run_id = 1") > 200,
        "the writers wrote in the on spells"
    );
}
