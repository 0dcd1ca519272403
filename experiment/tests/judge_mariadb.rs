//! `experiment judge --log mariadb`: an application's consumer judged
//! against MariaDB's binary log, on a throwaway server the harness starts
//! from the system's binaries (a test that cannot start one fails). The
//! applications are shell scripts over the `mariadb` command-line client.
//! First a row committed behind a naive reader's cursor, exactly: the judge
//! names it lost, with the lag and the GTIDs the server itself reports, and
//! a rolled-back row is never in the truth. Then a naive relay under
//! concurrent writers: its lost rows are exactly the committed rows its own
//! output misses below its highest delivered key. Then bad input: one line
//! each, exit 2, no server left behind.

use rusqlite::Connection;
use std::collections::{BTreeSet, HashMap};

mod common;
use common::temp_dir;

/// Runs the judge with `args`; returns (exit code, stdout, stderr) and
/// checks that the run left no MariaDB server of its own behind.
fn judge(args: &[&str]) -> (i32, String, String) {
    common::run_leaving_nothing(args, "snowleak-mariadbd", "servers")
}

/// The application: key 2 commits, the reader reads (`id > 0`), key 1
/// commits, a row 3 is rolled back, the reader reads again (`id > 2`).
/// Another table's row is in the log too. Each commit prints the GTID the
/// server gave it (`@@last_gtid`) to "$3", for the check.
const APP: &str = r#"set -eu
q() { mariadb -S "$MYSQL_UNIX_PORT" -u root -N -B "$MYSQL_DATABASE" -e "$1"; }
q "CREATE TABLE outbox (body text, id bigint PRIMARY KEY) ENGINE=InnoDB; CREATE TABLE other (id bigint) ENGINE=InnoDB"
q "INSERT INTO outbox VALUES ('it''s two', 2); SELECT 2, @@last_gtid" >> "$3"
q "INSERT INTO other VALUES (1)"
q "SELECT id FROM outbox WHERE id > 0 ORDER BY id" >> "$1"
q "INSERT INTO outbox VALUES (NULL, 1); SELECT 1, @@last_gtid" >> "$3"
q "BEGIN; INSERT INTO outbox VALUES ('rolled back', 3); ROLLBACK"
q "SELECT id FROM outbox WHERE id > 2 ORDER BY id" >> "$1"
printf '2\n,no key\n{"key": 99}\n' > "$2"
"#;

#[test]
fn a_naive_reader_loses_the_row_committed_behind_its_cursor_and_a_rollback_is_not_in_the_truth() {
    let dir = temp_dir("judge-mariadb");
    let run = common::judge_naive_and_junk(&dir, "mariadb", APP, "gtids.txt", judge);
    let (db, naive, gtids) = (run.db, run.naive, run.facts);
    let (code, stdout, stderr) = run.outcome;
    assert_eq!(code, 1, "a consumer lost a row: exit 1\n{stdout}\n{stderr}");
    // The GTIDs as the server gave them: domain-server-seq.
    let gtid: HashMap<String, i64> = std::fs::read_to_string(&gtids)
        .unwrap()
        .lines()
        .map(|l| {
            let (key, g) = l.split_once('\t').unwrap();
            (
                key.to_string(),
                g.rsplit('-').next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(std::fs::read_to_string(&naive).unwrap().trim(), "2");
    assert!(
        stdout.contains("naive: invalid (lost 1 committed rows;"),
        "{stdout}"
    );
    // The truth in run.db: 2 then 1, in commit order, each with its GTID's
    // seq; the rolled-back 3 and the other table's row are not there.
    let conn = Connection::open(&db).unwrap();
    type Row = (String, String, i64, String, i64, i64);
    let rows: Vec<Row> = conn
        .prepare("SELECT key, op, xid, commit_lsn, commit_ms, read_ms FROM log_truth ORDER BY seq")
        .unwrap()
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let keys: Vec<(&str, &str, i64)> = rows
        .iter()
        .map(|r| (r.0.as_str(), r.1.as_str(), r.2))
        .collect();
    assert_eq!(
        keys,
        [("2", "insert", gtid["2"]), ("1", "insert", gtid["1"])],
        "2 then 1 with their GTIDs; no 3"
    );
    for r in &rows {
        assert_eq!(r.4 % 1000, 0, "the binlog's commit time is whole seconds");
        assert!(r.5 >= r.4, "read after its commit second began");
        assert!(r.3.starts_with("binlog.") && r.3.contains(':'), "{}", r.3);
    }
    // The lag is measured on the read times (docs/log-truth.md, "MariaDB").
    let lag = rows[1].5 - rows[0].5;
    let line = common::lost_line(&stdout, "1");
    assert!(
        line.ends_with(&format!(
            "committed {lag} ms after key 2, behind:n=2 reads it"
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!("(xid {}, commit {})", gtid["1"], rows[1].3)),
        "{line}"
    );
    // The junk consumer: a line without a key and a key never committed are
    // reported, not a crash.
    common::assert_junk_reported(&stdout);
    let target: String = conn
        .query_row("SELECT target FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(target, "mariadb-log");
}

/// A naive relay reading `id > last` every 20 ms until the writers are
/// done, then once more; key 2 committed and delivered before key 1 commits
/// (one loss for sure); then four writers, each committing 25 rows of an
/// AUTO_INCREMENT outbox one transaction at a time, each held 0-20 ms (`DO
/// SLEEP`) after its INSERT took its id. Random with a seed (bash's `RANDOM`).
const RELAY_APP: &str = r#"set -eu
out="$1"; done="$2"; RANDOM="$3"
q() { mariadb -S "$MYSQL_UNIX_PORT" -u root -N -B "$MYSQL_DATABASE" -e "$1"; }
q "CREATE TABLE outbox (id bigint AUTO_INCREMENT PRIMARY KEY, body text) ENGINE=InnoDB"
relay() {
  last=0
  while :; do
    finished=0; [ -e "$done" ] && finished=1
    for id in $(q "SELECT id FROM outbox WHERE id > $last ORDER BY id"); do
      echo "$id" >> "$out"; last=$id
    done
    [ "$finished" = 1 ] && return 0
    sleep 0.02
  done
}
relay &
relay_pid=$!
# Key 2 commits, the relay delivers it, then key 1 commits: one loss
# whatever the writers' race gives.
q "INSERT INTO outbox VALUES (2, 'second')"
until grep -qx 2 "$out" 2>/dev/null; do sleep 0.01; done
q "INSERT INTO outbox VALUES (1, 'first')"
writers=""
for w in 1 2 3 4; do
  (
    i=0
    while [ $i -lt 25 ]; do
      hold=$((RANDOM % 21))
      q "BEGIN; INSERT INTO outbox (body) VALUES ('w$w'); DO SLEEP($hold / 1000); COMMIT"
      i=$((i + 1))
    done
  ) &
  writers="$writers $!"
done
for job in $writers; do wait "$job"; done
touch "$done"
wait "$relay_pid"
"#;

#[test]
fn a_naive_relay_under_concurrent_writers_loses_exactly_what_its_output_misses() {
    let dir = temp_dir("judge-mariadb-relay");
    let script = dir.join("relay_app.sh");
    std::fs::write(&script, RELAY_APP).unwrap();
    let out = dir.join("naive.csv");
    let done = dir.join("writers.done");
    let db = dir.join("judge.db");
    let args = common::judge_outbox_args(
        "mariadb",
        &db,
        &[("naive", out.as_path())],
        &[
            "bash",
            script.to_str().unwrap(),
            out.to_str().unwrap(),
            done.to_str().unwrap(),
            "7",
        ],
    );
    let (code, stdout, stderr) = judge(&common::strs(&args));
    assert_eq!(
        code, 1,
        "the naive relay lost rows: exit 1\n{stdout}\n{stderr}"
    );
    // The loss computed without the checker: the keys the log committed
    // that the relay's own file lacks, below the highest it delivered.
    let conn = Connection::open(&db).unwrap();
    let committed: BTreeSet<i64> = conn
        .prepare("SELECT key FROM log_truth WHERE op = 'insert'")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|k| k.unwrap().parse().unwrap())
        .collect();
    assert_eq!(committed.len(), 102, "every row committed is in the truth");
    let delivered: BTreeSet<i64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let highest = *delivered.last().unwrap();
    let expected: BTreeSet<i64> = committed
        .iter()
        .copied()
        .filter(|k| *k < highest && !delivered.contains(k))
        .collect();
    assert!(expected.contains(&1), "key 1 is lost: {expected:?}");
    // The judge's lost rows, as run.db gives them to the checker.
    let truth = rundb::read::side_rows::<rundb::LogTruthRow>(&conn, 1).unwrap();
    let lines = rundb::read::side_rows::<rundb::DeliveryRow>(&conn, 1).unwrap();
    let judged = analysis::consumers::judge(
        &truth,
        &lines,
        &["naive".to_string()],
        &analysis::consumers::Setting::default(),
    );
    let lost: BTreeSet<i64> = judged.consumers[0]
        .lost
        .iter()
        .map(|l| l.key.parse().unwrap())
        .collect();
    assert_eq!(lost, expected);
    assert!(
        stdout.contains(&format!(
            "naive: invalid (lost {} committed rows;",
            expected.len()
        )),
        "{stdout}"
    );
}

fn bad_input(args: &[&str], expected: &str) {
    common::assert_bad_input(judge(args), expected);
}

#[test]
fn bad_input_is_one_line_and_exit_2_with_no_server_left_behind() {
    let dir = temp_dir("judge-mariadb-bad");
    let db = dir.join("judge.db");
    let db = db.to_str().unwrap();
    let base = ["judge", "--log", "mariadb", "--db", db, "--drain", "0s"];
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
            "mariadb -S \"$MYSQL_UNIX_PORT\" -u root app -e \
             'CREATE TABLE outbox (id bigint, body text); INSERT INTO outbox VALUES (1, NULL)'",
        ],
        "table app.outbox has no column 'event_id' (its columns: id, body)",
    );
    // A command that never writes the table.
    run(
        &["--table", "outbox", "--", "true"],
        "committed no row to app.outbox",
    );
    // A command that cannot run.
    run(
        &["--table", "outbox", "--", "/no/such/program"],
        "cannot run '/no/such/program'",
    );
    // Refused before anything starts: a slot, a bad table name, no table.
    run(
        &["--table", "outbox", "--slot", "s", "--", "true"],
        "--slot names PostgreSQL's replication slot",
    );
    run(&["--table", "a.b.c", "--", "true"], "bad --table 'a.b.c'");
    run(&["--", "true"], "give --table T");
}

#[test]
fn ctrl_c_stops_the_command_reads_the_log_to_its_end_and_leaves_nothing_behind() {
    let dir = temp_dir("judge-mariadb-int");
    let db = dir.join("judge.db");
    let (code, rest, stderr) = common::interrupt_when_ready(
        &[
            "judge",
            "--log",
            "mariadb",
            "--table",
            "t",
            "--db",
            db.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "mariadb -S \"$MYSQL_UNIX_PORT\" -u root app -e \
             'CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)' \
             && echo ready && exec sleep 600",
        ],
        "snowleak-mariadbd",
        "server",
    );
    // The row is committed; Ctrl-C as a user would (at "ready").
    assert_eq!(code, Some(0), "{rest}\n{stderr}");
    assert!(rest.contains("1 rows of app.t committed"), "{rest}");
    let (reason, keys) = common::end_reason_and_truth_rows(&db);
    assert_eq!((reason.as_str(), keys), ("interrupted", 1));
}
