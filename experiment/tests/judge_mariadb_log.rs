//! `experiment judge --log mariadb` on what the binary log holds beside
//! rows: transactions of two GTID domains (a session's `SET SESSION
//! gtid_domain_id`), a `TRUNCATE` of the judged table, an `ALTER TABLE` of
//! it that keeps its key column (followed) and one that drops it (refused:
//! exit 2, one line). The application is a shell script over the `mariadb`
//! client that writes what the server reports of each commit (`@@last_gtid`)
//! to a file; the truth in run.db is checked against it row by row.

use std::collections::HashMap;

mod common;
use common::temp_dir;

/// Runs the judge with `args`; returns (exit code, stdout, stderr) and
/// checks that the run left no MariaDB server of its own behind.
fn judge(args: &[&str]) -> (i32, String, String) {
    common::run_leaving_nothing(args, "snowleak-mariadbd", "servers")
}

/// Keys 1 and 2 commit in domain 0, 3 and 4 in domain 5 (one transaction,
/// given key 1's seq_no: `SET SESSION gtid_seq_no`, MariaDB KB
/// "gtid_seq_no"), 5 in domain 0 again; 2 is deleted; the table is truncated (in domain 5);
/// an ALTER puts a column before the key and drops another; 6 commits
/// after it. Another table is truncated and loses a column named `id`. The
/// relay delivered every key but 5. Each commit of the outbox writes
/// `NAME<TAB>GTID` to "$3" (`@@last_gtid`, in the committing session).
const APP: &str = r#"set -eu
q() { mariadb -S "$MYSQL_UNIX_PORT" -u root -N -B "$MYSQL_DATABASE" -e "$1"; }
fact() { printf '%s\t%s\n' "$1" "$(q "$2; SELECT @@last_gtid")" >> "$3"; }
q "CREATE TABLE outbox (id bigint PRIMARY KEY, body text) ENGINE=InnoDB; CREATE TABLE other (id int, x int) ENGINE=InnoDB"
fact i1 "INSERT INTO outbox VALUES (1, 'one')" "$3"
fact i2 "INSERT INTO outbox VALUES (2, 'two')" "$3"
seq=$(grep '^i1' "$3" | cut -f2 | cut -d- -f3)
fact i34 "SET SESSION gtid_domain_id=5, gtid_seq_no=$seq; BEGIN; INSERT INTO outbox VALUES (3, NULL); INSERT INTO outbox VALUES (4, NULL); COMMIT" "$3"
q "INSERT INTO other VALUES (1, 1)"
fact i5 "INSERT INTO outbox VALUES (5, 'five')" "$3"
fact d2 "DELETE FROM outbox WHERE id = 2" "$3"
q "TRUNCATE other; ALTER TABLE other DROP COLUMN id"
fact truncate "SET SESSION gtid_domain_id=5; TRUNCATE TABLE outbox" "$3"
q "ALTER TABLE outbox ADD COLUMN note text FIRST, DROP COLUMN body"
fact i6 "INSERT INTO outbox (note, id) VALUES ('six', 6)" "$3"
printf '1\n2\n3\n4\n6\n' > "$1"
"#;

#[test]
fn two_domains_a_truncate_and_an_alter_that_keeps_the_key_are_in_the_truth() {
    let dir = temp_dir("judge-mariadb-log");
    let script = dir.join("app.sh");
    std::fs::write(&script, APP).unwrap();
    let (relay, facts, db) = (
        dir.join("relay.csv"),
        dir.join("gtids.txt"),
        dir.join("judge.db"),
    );
    let args = common::judge_outbox_args(
        "mariadb",
        &db,
        &[("relay", relay.as_path())],
        &[
            "sh",
            script.to_str().unwrap(),
            relay.to_str().unwrap(),
            dir.join("unused").to_str().unwrap(),
            facts.to_str().unwrap(),
        ],
    );
    let (code, stdout, stderr) = judge(&common::strs(&args));
    assert_eq!(code, 1, "the relay lost key 5: exit 1\n{stdout}\n{stderr}");
    // The GTIDs as the server gave them: domain-server-seq.
    let gtid: HashMap<String, String> = std::fs::read_to_string(&facts)
        .unwrap()
        .lines()
        .map(|l| {
            let (name, g) = l.split_once('\t').unwrap();
            (name.to_string(), g.to_string())
        })
        .collect();
    assert!(
        gtid["i34"].starts_with("5-") && gtid["truncate"].starts_with("5-"),
        "{gtid:?}"
    );
    assert!(gtid["i1"].starts_with("0-") && gtid["i5"].starts_with("0-"));
    // The truth, in commit order, each row with the GTID of its commit:
    // the TRUNCATE expires the keys live at it (1, 3, 4, 5: 2 was deleted
    // before) in the order they committed; 6 is read after the ALTER by the
    // key column's name, not by its old place.
    let expected = [
        ("1", "insert", "i1"),
        ("2", "insert", "i2"),
        ("3", "insert", "i34"),
        ("4", "insert", "i34"),
        ("5", "insert", "i5"),
        ("2", "delete", "d2"),
        ("1", "expire", "truncate"),
        ("3", "expire", "truncate"),
        ("4", "expire", "truncate"),
        ("5", "expire", "truncate"),
        ("6", "insert", "i6"),
    ];
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<(String, String, i64, String)> = conn
        .prepare("SELECT key, op, xid, commit_lsn FROM log_truth ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| (r.0.as_str(), r.1.as_str()))
            .collect::<Vec<_>>(),
        expected.map(|(k, o, _)| (k, o)),
        "{rows:?}"
    );
    for (row, (_, _, fact)) in rows.iter().zip(expected) {
        let g = &gtid[fact];
        let seq: i64 = g.rsplit('-').next().unwrap().parse().unwrap();
        assert_eq!(row.2, seq, "{row:?}: the xid is the GTID's seq_no ({g})");
        assert!(
            row.3.starts_with("binlog.") && row.3.ends_with(&format!(" GTID {g}")),
            "{row:?}: the commit position names the GTID {g}"
        );
    }
    // The commit positions tell the domains apart where seq_no repeats.
    assert_eq!(
        rows[0].2, rows[2].2,
        "keys 1 and 3: one seq_no in two domains"
    );
    assert_ne!(rows[0].3, rows[2].3);
    let positions: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.3.as_str()).collect();
    assert_eq!(positions.len(), 7, "one per commit: {positions:?}");
    // Key 5 went with the TRUNCATE before the relay had delivered any key
    // above it (it wrote its file at the end): expired, not lost.
    assert!(
        stdout.contains("relay: invalid (1 rows expired"),
        "{stdout}"
    );
    assert!(stdout.contains("expired: 1 (first: 5)"), "{stdout}");
    assert!(
        stdout.contains("6 rows of app.outbox committed"),
        "{stdout}"
    );
}

/// Keys 1 and 2 commit, then an ALTER drops the key column and a column of
/// the same type is left where it was: the judge must not take it as the key.
const DROPS_KEY: &str = r#"set -eu
q() { mariadb -S "$MYSQL_UNIX_PORT" -u root -N -B "$MYSQL_DATABASE" -e "$1"; }
q "CREATE TABLE outbox (id bigint, n bigint) ENGINE=InnoDB"
q "INSERT INTO outbox VALUES (1, 10), (2, 20)"
q "ALTER TABLE outbox DROP COLUMN id"
q "INSERT INTO outbox VALUES (30)"
"#;

#[test]
fn an_alter_that_drops_the_key_column_is_one_line_and_exit_2() {
    let dir = temp_dir("judge-mariadb-log-bad");
    let script = dir.join("app.sh");
    std::fs::write(&script, DROPS_KEY).unwrap();
    let db = dir.join("judge.db");
    let args = common::judge_outbox_args("mariadb", &db, &[], &["sh", script.to_str().unwrap()]);
    let outcome = judge(&common::strs(&args));
    common::assert_bad_input(
        outcome.clone(),
        "ALTER TABLE app.outbox dropped the key column id at binlog.000001:",
    );
    assert!(
        outcome.2.contains(": the judge cannot follow it"),
        "{}",
        outcome.2
    );
}

/// A relay whose cursor is the key before the last one it delivered, read
/// back from its own output at each start (so a restart redelivers exactly
/// that key; its output is its only state, as in `judge_partitions.rs`),
/// its writer started detached on the first start only: it writes until
/// the relay has started a third time and 100 rows committed, appending
/// each key whose COMMIT returned (a failed one, while the server restarts,
/// is tried again); each start noted.
const RESTARTED: &str = r#"set -u
dir=$1
m() { mariadb -N -B -S "$MYSQL_UNIX_PORT" -u root "$MYSQL_DATABASE" -e "$1" 2>/dev/null; }
echo "${SNOWLEAK_START:-unset}" >> "$dir/starts"
if [ "${SNOWLEAK_START:-0}" = 0 ]; then
  m "CREATE TABLE outbox (id bigint AUTO_INCREMENT PRIMARY KEY, body text) ENGINE=InnoDB"
  setsid bash -c 'i=0
    while [ $i -lt 100 ] || [ "$(wc -l < "$0/starts")" -lt 3 ]; do
      id=$(mariadb -N -B -S "$MYSQL_UNIX_PORT" -u root "$MYSQL_DATABASE" \
        -e "INSERT INTO outbox (body) VALUES (1); SELECT LAST_INSERT_ID()" 2>/dev/null) \
        && echo "$id" >> "$0/committed" && i=$((i + 1))
    done; touch "$0/writers.done"' "$dir" > /dev/null 2>&1 &
fi
last=$(awk '{ before = key; key = $0 } END { print before + 0 }' "$dir/relay.txt" 2>/dev/null || echo 0)
while :; do
  done_=0; [ -e "$dir/writers.done" ] && done_=1
  # A query that fails (the server restarting) is asked again: read as
  # "nothing new", it would end the relay before it read the last rows.
  rows=$(m "SELECT id FROM outbox WHERE id > $last ORDER BY id") || continue
  for id in $rows; do
    echo "$id" >> "$dir/relay.txt"
    last=$id
  done
  [ $done_ = 1 ] && [ -z "$rows" ] && exit 0
done
"#;

#[test]
fn a_relay_killed_twice_and_the_server_restarted_breaks_exactly_once_with_its_redeliveries() {
    let dir = temp_dir("judge-mariadb-nemesis");
    let db = dir.join("judge.db");
    let relay = dir.join("relay.txt");
    let (code, stdout, stderr) = judge(&common::strs(&common::judge_outbox_args_with(
        "mariadb",
        &db,
        &[("relay", &relay)],
        &[
            "--drain",
            "1s",
            "--kill-at",
            "1s,3s",
            "--restart-server-at",
            "2s",
            "--promise",
            "exactly-once",
            "--duration",
            "120s",
        ],
        &["bash", "-c", RESTARTED, "restarted", dir.to_str().unwrap()],
    )));
    assert_eq!(code, 1, "exactly-once broken\n{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("starts")).unwrap(),
        "0\n1\n2\n"
    );
    // Every row the writer saw commit, before and after the restart, is in
    // the truth: the reader dumped on from where it stopped into the
    // server's new binlog. (A COMMIT cut off by the shutdown may be in it
    // too, unseen by the writer.)
    let conn = rusqlite::Connection::open(&db).unwrap();
    let inserted: std::collections::BTreeSet<i64> = conn
        .prepare("SELECT CAST(key AS INTEGER) FROM log_truth WHERE op = 'insert'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let committed: std::collections::BTreeSet<i64> = std::fs::read_to_string(dir.join("committed"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert!(committed.len() >= 100);
    let unseen: Vec<&i64> = inserted.difference(&committed).collect();
    assert!(
        committed.is_subset(&inserted) && unseen.len() <= 1,
        "{unseen:?}"
    );
    assert!(
        stdout
            .contains("faults injected: kill at +1.0 s, restart-server at +2.0 s, kill at +3.0 s"),
        "{stdout}"
    );
    // Each kill redelivers one key; nothing is lost; exactly-once is broken by the two.
    assert!(
        stdout.contains(
            "relay: invalid (delivered 2 rows twice (2 redelivered after a restart); \
             it promised exactly-once; "
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{n} of {n} committed rows delivered, 0 lost, 0 not reached, 2 redelivered",
            n = inserted.len()
        )),
        "{stdout}"
    );
}
