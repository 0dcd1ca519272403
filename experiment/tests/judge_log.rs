//! `experiment judge --log postgres`: an application's consumer judged
//! against PostgreSQL's own log. A tiny application (psql in a shell script)
//! commits two rows out of key order and reads its table as a naive relay
//! does (`id > highest read`); the judge must name the row it lost and the
//! lag it needed, exactly as the server's own commit timestamps give them.
//! Then bad input: one line each, exit 2, no cluster left behind.

use rusqlite::Connection;

mod common;
use common::temp_dir;

/// Runs the judge with `args`; returns (exit code, stdout, stderr) and
/// checks that the run left no PostgreSQL cluster of its own behind.
fn judge(args: &[&str]) -> (i32, String, String) {
    common::run_leaving_nothing(args, "snowleak-pg", "clusters")
}

/// The application: key 2 commits, the relay reads (`id > 0`), key 1
/// commits, a row 3 is rolled back, the relay reads again (`id > 2`).
/// Another table's row and a quoted payload are in the log too. Then it
/// writes each row's commit time in ms (`pg_xact_commit_timestamp`), for
/// the check.
const APP: &str = r#"set -eu
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
q "CREATE TABLE outbox (id bigint PRIMARY KEY, body text); CREATE TABLE other (id bigint)"
q "INSERT INTO outbox VALUES (2, 'it''s two'); INSERT INTO other VALUES (1)"
q "SELECT id FROM outbox WHERE id > 0 ORDER BY id" >> "$1"
q "INSERT INTO outbox VALUES (1, NULL)"
q "BEGIN; INSERT INTO outbox VALUES (3, 'rolled back'); ROLLBACK"
q "SELECT id FROM outbox WHERE id > 2 ORDER BY id" >> "$1"
printf '2\n,no key\n{"key": 99}\n' > "$2"
q "SELECT id, floor(extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000)::bigint FROM outbox ORDER BY id" > "$3"
"#;

#[test]
fn a_naive_relay_loses_the_row_committed_behind_its_cursor_with_the_lag_the_log_gives() {
    let dir = temp_dir("judge-log");
    let run = common::judge_naive_and_junk(&dir, "postgres", APP, "times.txt", judge);
    let (db, naive, times) = (run.db, run.naive, run.facts);
    let (code, stdout, stderr) = run.outcome;
    assert_eq!(code, 1, "a consumer lost a row: exit 1\n{stdout}\n{stderr}");
    // The commit times as the server keeps them, read by the application.
    let commit: std::collections::HashMap<i64, i64> = std::fs::read_to_string(&times)
        .unwrap()
        .lines()
        .map(|l| {
            let (id, ms) = l.split_once('|').unwrap();
            (id.parse().unwrap(), ms.parse().unwrap())
        })
        .collect();
    let lag = commit[&1] - commit[&2];
    assert!(lag >= 0, "1 committed after 2");
    // The relay's own output: it delivered 2 only, so 1 (below 2) is lost.
    assert_eq!(std::fs::read_to_string(&naive).unwrap().trim(), "2");
    assert!(
        stdout.contains("naive: invalid (lost 1 committed rows;"),
        "{stdout}"
    );
    let line = common::lost_line(&stdout, "1");
    assert!(
        line.ends_with(&format!(
            "committed {lag} ms after key 2, behind:n=2 reads it"
        )),
        "{line}"
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.trim_start().starts_with("lost key"))
            .count(),
        2,
        "1 lost by each consumer, nothing else:\n{stdout}"
    );
    // The junk consumer: a line without a key and a key never committed are
    // reported, not a crash.
    common::assert_junk_reported(&stdout);
    // The truth in run.db: 2 then 1, in commit order; the rolled-back 3 and
    // the other table's row are not there.
    let rows = common::truth_rows(&db, "commit_ms");
    assert_eq!(
        rows,
        [
            ("2".to_string(), "insert".to_string(), commit[&2]),
            ("1".to_string(), "insert".to_string(), commit[&1]),
        ]
    );
    let conn = Connection::open(&db).unwrap();
    let delivered: Vec<(String, i64, Option<String>)> = conn
        .prepare("SELECT consumer, line, key FROM log_deliveries ORDER BY consumer, line")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        delivered,
        [
            ("junk".to_string(), 1, Some("2".to_string())),
            ("junk".to_string(), 2, None),
            ("junk".to_string(), 3, Some("99".to_string())),
            ("naive".to_string(), 1, Some("2".to_string())),
        ]
    );
}

fn bad_input(args: &[&str], expected: &str) {
    common::assert_bad_input(judge(args), expected);
}

#[test]
fn bad_input_is_one_line_and_exit_2_with_nothing_left_behind() {
    let dir = temp_dir("judge-log-bad");
    let db = dir.join("judge.db");
    let db = db.to_str().unwrap();
    let base = ["judge", "--log", "postgres", "--db", db, "--drain", "0s"];
    let run = |extra: &[&str], expected: &str| {
        bad_input(&common::joined(&base, extra), expected);
    };
    // The key column is not in the table.
    run(
        &[
            "--table",
            "outbox",
            "--key",
            "event_id",
            "--",
            "sh",
            "-c",
            "psql -X -q -c 'CREATE TABLE outbox (id bigint); INSERT INTO outbox VALUES (1)'",
        ],
        "table public.outbox has no column 'event_id' (its columns: id)",
    );
    // A command that never writes the table.
    run(
        &["--table", "outbox", "--", "true"],
        "committed no row to public.outbox",
    );
    // A command that cannot run.
    run(
        &["--table", "outbox", "--", "/no/such/program"],
        "cannot run '/no/such/program'",
    );
    // Not a slot name PostgreSQL accepts: refused before anything starts.
    run(
        &["--table", "outbox", "--slot", "Bad-Name", "--", "true"],
        "bad --slot 'Bad-Name'",
    );
    // No table.
    run(&["--", "true"], "give --table T");
    // The simulator's flags do not apply.
    run(
        &["--table", "t", "--profile", "twitter", "--", "true"],
        "--profile configures the simulator",
    );
    // And --table does not apply to the simulator.
    let args = ["judge", "--table", "t", "--", "true"];
    bad_input(&args, "--table applies to --log postgres");
}

#[test]
fn ctrl_c_stops_the_command_reads_the_log_a_last_time_and_leaves_nothing_behind() {
    let dir = temp_dir("judge-log-int");
    let db = dir.join("judge.db");
    let (code, rest, stderr) = common::interrupt_when_ready(
        &[
            "judge",
            "--log",
            "postgres",
            "--table",
            "t",
            "--db",
            db.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "psql -X -q -c 'CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)' \
             && echo ready && exec sleep 600",
        ],
        "snowleak-pg",
        "cluster",
    );
    // The row is committed; Ctrl-C as a user would (at "ready").
    assert_eq!(code, Some(0), "{rest}\n{stderr}");
    assert!(rest.contains("1 rows of public.t committed"), "{rest}");
    let (reason, keys) = common::end_reason_and_truth_rows(&db);
    assert_eq!((reason.as_str(), keys), ("interrupted", 1));
}
