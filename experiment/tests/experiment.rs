//! End-to-end tests of the `experiment` binary: real runs over loopback HTTP,
//! virtual runs, determinism, back-paging, and what Ctrl-C and SIGKILL leave.

use rusqlite::Connection;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{experiment, temp_dir};

/// A run in virtual time into `db`, with more options.
fn virtual_run(db: &Path, duration: &str, more: &[&str]) -> Output {
    let mut args = vec![
        "--clock",
        "virtual",
        "--duration",
        duration,
        "--db",
        db.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    experiment(&args)
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Run 1's clock as run.db stores it twice: the `runs.clock` column and the config's `clock`.
fn stored_clock(conn: &Connection) -> (String, String) {
    let (column, config): (String, String) = conn
        .query_row("SELECT clock, config FROM runs WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    (column, config["clock"].as_str().unwrap().to_string())
}

/// Statuses (by truth) that the compensated poller returned and the naive poller never did,
/// though they became visible while the naive poller was polling.
const NAIVE_MISSED_COMPENSATED_CAUGHT: &str = "
    WITH seen AS (
        SELECT DISTINCT p.name AS poller, o.status_id AS id
        FROM observations o JOIN requests r ON r.id = o.request_id JOIN pollers p ON p.id = r.poller_id
        WHERE r.run_id = ?1),
    naive_span AS (
        SELECT min(r.sent_at_ms) AS first, max(r.sent_at_ms) AS last
        FROM requests r JOIN pollers p ON p.id = r.poller_id WHERE r.run_id = ?1 AND p.name = 'naive')
    SELECT count(*) FROM truth t, naive_span s
    WHERE t.run_id = ?1 AND t.visible_at_ms > s.first AND t.visible_at_ms < s.last
      AND t.id IN (SELECT id FROM seen WHERE poller LIKE 'compensated%')
      AND t.id NOT IN (SELECT id FROM seen WHERE poller = 'naive')";

fn naive_missed_compensated_caught(db: &Path, run: i64) -> i64 {
    let conn = Connection::open(db).unwrap();
    conn.query_row(NAIVE_MISSED_COMPENSATED_CAUGHT, [run], |r| r.get(0))
        .unwrap()
}

#[test]
fn virtual_hour_at_defaults_naive_leaks_what_compensation_catches() {
    let dir = temp_dir("virtual-hour");
    let db = dir.join("run.db");
    let out = virtual_run(&db, "1h", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("analyze it with: cargo run --release --bin analyze"),
        "{stdout}"
    );
    let conn = Connection::open(&db).unwrap();
    assert_eq!(count(&conn, "SELECT complete FROM runs WHERE id = 1"), 1);
    // The clock is an enum in the code; its stored text is part of the schema.
    assert_eq!(stored_clock(&conn), ("virtual".into(), "virtual".into()));
    assert_eq!(
        count(&conn, "SELECT count(*) FROM pollers WHERE run_id = 1"),
        2
    );
    // One cycle a second for an hour, plus the final drain, per poller.
    assert!(count(&conn, "SELECT count(*) FROM requests WHERE page = 0") >= 2 * 3600);
    assert!(count(&conn, "SELECT count(*) FROM truth") > 1000);
    let caught = naive_missed_compensated_caught(&db, 1);
    assert!(
        caught >= 10,
        "naive missed only {caught} statuses that k = 1 s caught"
    );
}

#[test]
fn same_seed_same_records() {
    let dir = temp_dir("determinism");
    let dump = |db: &Path| -> Vec<String> {
        let conn = Connection::open(db).unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT r.cycle, r.page, r.sent_at_ms, r.since_id, r.before_id, r.items, o.position, o.status_id
                 FROM requests r LEFT JOIN observations o ON o.request_id = r.id ORDER BY r.id, o.position",
            )
            .unwrap();
        stmt.query_map([], |r| {
            Ok(format!(
                "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, Option<i64>>(6)?,
                r.get::<_, Option<String>>(7)?
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    let mut dumps = Vec::new();
    for name in ["a.db", "b.db"] {
        let db = dir.join(name);
        let out = virtual_run(&db, "10m", &["--seed", "42"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dumps.push(dump(&db));
    }
    assert!(dumps[0].len() > 1000);
    assert_eq!(dumps[0], dumps[1]);
    let other = dir.join("c.db");
    let out = virtual_run(&other, "10m", &["--seed", "43"]);
    assert!(out.status.success());
    assert_ne!(dumps[0], dump(&other), "another seed, another history");
}

#[test]
fn full_pages_page_back_to_the_cursor() {
    let dir = temp_dir("backpaging");
    let db = dir.join("run.db");
    let out = virtual_run(&db, "2m", &["--limit", "3", "--max-back-pages", "1000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conn = Connection::open(&db).unwrap();
    assert!(
        count(&conn, "SELECT count(*) FROM requests WHERE page > 0") > 10,
        "back-pages were sent"
    );
    assert_eq!(
        count(&conn, "SELECT count(*) FROM requests WHERE overflow = 1"),
        0
    );
    // Back-pages keep the cycle's since_id and move before_id down.
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM requests b JOIN requests f ON f.poller_id = b.poller_id AND f.cycle = b.cycle AND f.page = 0
             WHERE b.page > 0 AND (b.since_id IS NOT f.since_id OR b.before_id IS NULL)"
        ),
        0
    );
    // A tight bound reports the cut window as overflow instead.
    let db2 = dir.join("overflow.db");
    let out = virtual_run(&db2, "2m", &["--limit", "1", "--max-back-pages", "0"]);
    assert!(out.status.success());
    let conn = Connection::open(&db2).unwrap();
    assert!(count(&conn, "SELECT count(*) FROM requests WHERE overflow = 1") > 0);
}

#[test]
fn real_http_run_naive_leaks_what_compensation_catches() {
    let dir = temp_dir("real");
    let db = dir.join("run.db");
    // A timeline tuned to leak quickly: many statuses, visibility delays up to a second.
    let out = experiment(&[
        "--duration",
        "4s",
        "--interval",
        "250ms",
        "--set",
        "rate_per_s=300",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conn = Connection::open(&db).unwrap();
    assert_eq!(count(&conn, "SELECT complete FROM runs"), 1);
    assert_eq!(stored_clock(&conn), ("real".into(), "real".into()));
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM requests WHERE error IS NOT NULL"
        ),
        0
    );
    // Every poller answered in several cycles (how many a loaded machine
    // fits in 4 s is no business of this test).
    assert!(
        count(
            &conn,
            "SELECT min(n) FROM (SELECT count(DISTINCT cycle) AS n FROM requests
              WHERE http_status = 200 GROUP BY poller_id)"
        ) >= 2
    );
    assert_eq!(
        count(&conn, "SELECT count(DISTINCT poller_id) FROM requests"),
        2
    );
    assert!(naive_missed_compensated_caught(&db, 1) > 0);
}

fn wait_for(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A real-time run of an hour in a child process, for a test to stop or kill.
fn spawn_real_run(db: &Path, interval: &str) -> std::process::Child {
    common::command(&[
        "--duration",
        "1h",
        "--interval",
        interval,
        "--db",
        db.to_str().unwrap(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
}

fn committed_requests(db: &Path) -> i64 {
    Connection::open(db)
        .and_then(|c| c.query_row("SELECT count(*) FROM requests", [], |r| r.get(0)))
        .unwrap_or(0)
}

#[cfg(unix)]
#[test]
fn sigint_completes_the_run_and_sigkill_leaves_it_readable() {
    let dir = temp_dir("signals");
    for (signal, expect_complete) in [("-INT", 1), ("-TERM", 1), ("-KILL", 0)] {
        let db = dir.join(format!("run{signal}.db"));
        let mut child = spawn_real_run(&db, "100ms");
        assert!(
            wait_for(Duration::from_secs(60), || committed_requests(&db) >= 4),
            "requests were committed"
        );
        let before = committed_requests(&db);
        common::signal(&child, signal);
        let status = child.wait().unwrap();
        let conn = Connection::open(&db).unwrap();
        assert_eq!(
            count(&conn, "SELECT complete FROM runs"),
            expect_complete,
            "{signal}"
        );
        assert!(
            committed_requests(&db) >= before,
            "{signal}: nothing committed was lost"
        );
        if expect_complete == 1 {
            assert!(status.success(), "{signal}: clean exit");
            assert_eq!(
                count(&conn, "SELECT end_reason = 'interrupted' FROM runs"),
                1
            );
        }
    }
}

/// The misskey profile's global timeline holds remote notes, IDed at their
/// `published` time and visible once federated: its truth has them (the local
/// timeline's has none), and the naive poller leaks some of them.
#[test]
fn the_misskey_global_timeline_serves_remote_notes_and_they_leak() {
    let dir = temp_dir("misskey-global");
    let global = dir.join("global.db");
    let local = dir.join("local.db");
    let out = virtual_run(
        &global,
        "5m",
        &["--profile", "misskey", "--timeline", "global"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = virtual_run(&local, "5m", &["--profile", "misskey"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let remote = "SELECT count(*) FROM truth WHERE origin = 'remote'";
    let global = Connection::open(&global).unwrap();
    assert!(
        count(&global, remote) > 0,
        "remote notes in the global timeline's truth"
    );
    assert_eq!(count(&Connection::open(&local).unwrap(), remote), 0);
    let config: String = global
        .query_row("SELECT config FROM runs", [], |r| r.get(0))
        .unwrap();
    assert!(config.contains("global-timeline"), "{config}");
    // Remote notes that became visible during the run and that the naive
    // poller never returned: they surfaced below its cursor.
    let leaked_remote = count(
        &global,
        "SELECT count(*) FROM truth t WHERE t.origin = 'remote' AND t.deleted_at_ms IS NULL \
         AND t.visible_at_ms > (SELECT min(sent_at_ms) FROM requests) \
         AND t.visible_at_ms < (SELECT max(sent_at_ms) FROM requests) \
         AND NOT EXISTS (SELECT 1 FROM observations o JOIN requests r ON r.id = o.request_id \
                         JOIN pollers p ON p.id = r.poller_id \
                         WHERE o.status_id = t.id AND p.name = 'naive')",
    );
    assert!(
        leaked_remote > 0,
        "federated notes arrive below the naive cursor"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = temp_dir("bad");
    let db = dir.join("run.db");
    let db = db.to_str().unwrap();
    for (args, needle) in [
        (vec!["--duration", "soon"], "soon"),
        (vec!["--interval", "0s"], "interval"),
        (vec!["--poller", "compensated:k=fast"], "compensated:k=fast"),
        (vec!["--profile", "friendster"], "friendster"),
        (vec!["--target", "gopher:x"], "gopher:x"),
        (vec!["--set", "no_such_knob=1"], "no_such_knob"),
        (vec!["--backlog", "soon"], "soon"),
        // The simulator serves Misskey's local and global timelines only, and
        // no --timeline for the other profiles.
        (vec!["--profile", "misskey", "--timeline", "home"], "home"),
        (vec!["--timeline", "global"], "--timeline"),
    ] {
        let mut all = args.clone();
        all.extend(["--clock", "virtual", "--duration", "1s", "--db", db]);
        if args[0] == "--duration" {
            all = args.clone();
            all.extend(["--clock", "virtual", "--db", db]);
        }
        let out = experiment(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // The simulator's backlog means nothing to a real target (refused before any request).
    let out = experiment(&[
        "--target",
        "mastodon:https://mastodon.invalid",
        "--backlog",
        "1m",
        "--db",
        db,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--backlog"), "{stderr}");
    let not_a_dir = dir.join("file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let bad_db = not_a_dir.join("run.db");
    let out = virtual_run(&bad_db, "1s", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

#[cfg(unix)]
#[test]
fn killed_at_random_moments_the_database_stays_readable() {
    use rand::{Rng, SeedableRng};
    let dir = temp_dir("random-kills");
    let db = dir.join("run.db");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut committed = 0;
    for round in 1..=4 {
        let mut child = spawn_real_run(&db, "50ms");
        // Kill at a random point: after a random number of further requests were committed.
        let target = committed + rng.random_range(1..40);
        assert!(wait_for(Duration::from_secs(60), || committed_requests(
            &db
        ) >= target));
        child.kill().unwrap();
        child.wait().unwrap();
        let conn = Connection::open(&db).unwrap();
        let ok: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "round {round}");
        assert_eq!(count(&conn, "SELECT count(*) FROM runs"), round);
        assert_eq!(
            count(&conn, "SELECT count(*) FROM runs WHERE complete = 1"),
            0
        );
        let now = committed_requests(&db);
        assert!(now >= target, "round {round}: nothing committed was lost");
        // Every committed request has its observations: transactions are whole.
        assert_eq!(
            count(
                &conn,
                "SELECT count(*) FROM requests r WHERE items <> (SELECT count(*) FROM observations o WHERE o.request_id = r.id)"
            ),
            0
        );
        committed = now;
    }
}

#[test]
fn a_locked_database_is_a_clear_error() {
    let dir = temp_dir("locked");
    let db = dir.join("run.db");
    let out = virtual_run(&db, "1s", &[]);
    assert!(out.status.success());
    let holder = Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let out = virtual_run(&db, "1s", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("locked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// Issue 11.8: concurrent virtual runs on one database take turns writing
/// (each waits for the others' commits) instead of dying with `database is
/// locked` and leaving empty incomplete runs.
#[test]
fn concurrent_virtual_runs_on_one_database_all_complete() {
    let dir = temp_dir("concurrent");
    let db = dir.join("run.db");
    let children: Vec<_> = (1..=4)
        .map(|seed| {
            common::command(&["--clock", "virtual", "--duration", "10m", "--seed"])
                .arg(seed.to_string())
                .arg("--db")
                .arg(&db)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let conn = Connection::open(&db).unwrap();
    assert_eq!(
        count(&conn, "SELECT count(*) FROM runs WHERE complete = 1"),
        4
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM runs r WHERE NOT EXISTS (SELECT 1 FROM requests q WHERE q.run_id = r.id)"
        ),
        0
    );
}

/// Issue 11.7 and 11.8: values that would exhaust memory or never end are
/// refused at the start, one line and exit 2, before any run row is made.
#[test]
fn huge_values_are_refused_with_one_line_and_exit_2() {
    let dir = temp_dir("huge");
    let db = dir.join("run.db");
    let many_pollers: Vec<&str> = ["--poller", "naive"].repeat(65);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--duration", "1000000h"],
            "error: invalid value '1000000h' for '--duration <DURATION>': bad duration '1000000h': at most 366days (a run must end)",
        ),
        (
            vec!["--duration", "1000h", "--interval", "1ms"],
            "error: a virtual run of 3600001000 ticks (--duration and k over --interval) is more than 10000000: raise --interval or shorten --duration",
        ),
        (
            vec!["--duration", "1s", "--poller", "compensated:k=1y"],
            "error: invalid value 'compensated:k=1y' for '--poller <SPEC>': bad poller policy 'compensated:k=1y': k is at most 1day (the run's final drain waits k)",
        ),
        (
            vec!["--duration", "1s", "--set", "rate_per_s=1e308"],
            "error: bad simulator value rate_per_s=1e308: at most 100000",
        ),
        (
            vec![
                "--duration",
                "1s",
                "--set",
                "rate_per_s=100000",
                "--set",
                "burst_factor=1000",
            ],
            "error: the simulator would create about 100000000 statuses every 1s (rate_per_s=100000 x burst_factor=1000), more than 1000000: lower rate_per_s, or shorten --interval or k",
        ),
        (
            [vec!["--duration", "1s"], many_pollers].concat(),
            "error: 65 --poller values: at most 64 per run",
        ),
        (
            vec!["--duration", "1s", "--timeout", "100000h"],
            "error: invalid value '100000h' for '--timeout <TIMEOUT>': bad timeout '100000h': at most 1h",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["--clock", "virtual", "--db", db.to_str().unwrap()];
        all.extend_from_slice(&args);
        let out = experiment(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end(), message, "{args:?}");
    }
    assert!(!db.exists(), "no run was started");
    // The largest accepted count of pollers runs.
    let sixty_four: Vec<&str> = ["--poller", "naive"].repeat(64);
    let out = virtual_run(&db, "2s", &sixty_four);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every row of every table of a run database, as text, in a fixed order:
/// what "the same database" means for a virtual run (rowids included).
fn dump_all(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).unwrap();
    let mut out = Vec::new();
    for table in rundb::schema::TABLES {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2, 3"))
            .unwrap();
        let columns = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                let mut line = String::from(table);
                for i in 0..columns {
                    let v: rusqlite::types::Value = r.get(i)?;
                    line.push_str(&format!("|{v:?}"));
                }
                Ok(line)
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// FNV-1a, 64 bits: a digest stable across Rust versions and platforms.
fn fnv1a(lines: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for line in lines {
        for b in line.bytes().chain([b'\n']) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The same seed in virtual time gives the same database, row for row, and
/// the same one as before the code was reshaped: the digest was taken from
/// a run of the code as it was before issue 22's restructuring (0565301) and
/// equals this code's. A change of behaviour changes it; a change that only
/// moves code does not.
#[test]
fn a_virtual_run_gives_the_database_it_always_gave() {
    let dir = temp_dir("golden");
    let db = dir.join("run.db");
    let out = virtual_run(
        &db,
        "10m",
        &[
            "--seed",
            "42",
            "--poller",
            "naive",
            "--poller",
            "compensated:k=1s",
            "--faults",
            "5xx=2%,reorder=2%",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = dump_all(&db);
    assert!(lines.len() > 10_000, "{} rows", lines.len());
    assert_eq!(fnv1a(&lines), GOLDEN_DIGEST, "the run's rows changed");
}

/// See [`a_virtual_run_gives_the_database_it_always_gave`].
const GOLDEN_DIGEST: u64 = 2_781_662_962_162_664_915;

/// `--tick-jitter 300ms`: every cycle's first request goes within [tick,
/// tick + 300 ms) of its grid tick, off the grid, the pollers together; the
/// same seed gives the same send times; `runs.config` records the jitter.
#[test]
fn tick_jitter_moves_each_tick_within_its_bound_the_same_for_a_seed() {
    let dir = temp_dir("tick-jitter");
    let sends = |name: &str, seed: &str| -> Vec<(i64, i64)> {
        let db = dir.join(name);
        let out = virtual_run(&db, "20s", &["--tick-jitter", "300ms", "--seed", seed]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let conn = Connection::open(&db).unwrap();
        let config: String = conn
            .query_row("SELECT config FROM runs", [], |r| r.get(0))
            .unwrap();
        assert!(config.contains("\"tick_jitter_ms\":300"), "{config}");
        let mut stmt = conn
            .prepare(
                "SELECT poller_id, sent_at_ms FROM requests WHERE page = 0 \
                 ORDER BY sent_at_ms, poller_id",
            )
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let a = sends("a.db", "1");
    assert!(a.len() >= 40, "two pollers, 20 ticks: {}", a.len());
    // The final cycle (the drain) is not a tick: leave the last pair out.
    let ticks = &a[..a.len() - 2];
    for &(_, at) in ticks {
        assert!(at.rem_euclid(1000) < 300, "sent at {at}");
    }
    assert!(ticks.iter().any(|&(_, at)| at % 1000 != 0), "off the grid");
    for pair in ticks.chunks(2) {
        assert_eq!(pair[0].1, pair[1].1, "the pollers send together");
    }
    assert_eq!(a, sends("b.db", "1"), "the same seed, the same ticks");
    assert_ne!(a, sends("c.db", "2"));
}

/// `experiment --help` lists every target `--target` accepts (the
/// simulator and its profiles, each API's forms, the databases and your own
/// tables, misskey-ftt), each with the flags it reads (issue 51).
#[test]
fn the_help_names_every_target() {
    let out = experiment(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for form in [
        "`simulator`",
        "profiles twitter|mastodon|misskey|discord): --timeline, --profile",
        "`postgres`",
        "`postgres:postgresql://USER@HOST/DB`",
        "`mariadb`",
        "`mariadb:mysql://USER@HOST/DB`",
        "`misskey-ftt`",
        "`mastodon:https://HOST`",
        "`x:users/ID/tweets`",
        "`x:search?query=...`",
        "`twitter-v1:https://HOST`",
        "`misskey:https://HOST`",
        "`discord:CHANNEL_ID`",
    ] {
        assert!(help.contains(form), "{form} is not in --help:\n{help}");
    }
    assert!(help.contains("`misskey-ftt` (Misskey's Fanout Timeline on Redis and PostgreSQL): --timeline, --arrivals, --creators"));
    // `-h`, shorter, names every kind too.
    let short = String::from_utf8(experiment(&["-h"]).stdout).unwrap();
    for name in [
        "simulator",
        "postgres",
        "mariadb",
        "misskey-ftt",
        "mastodon:",
    ] {
        assert!(short.contains(name), "{name} is not in -h:\n{short}");
    }
}
