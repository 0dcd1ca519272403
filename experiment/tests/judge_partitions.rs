//! `experiment judge --log postgres` on what production runs: an event
//! table partitioned (LIST, a HASH sub-partitioned leaf, a RANGE leaf
//! attached mid-run), judged as its root against the writers' own account
//! of what committed, beside the same writers and relay on a plain table;
//! partitions detached and dropped under a relay (their unread rows
//! expired, not lost); and a relay killed twice and the server restarted
//! under it, judged against its promise.

use rusqlite::Connection;
use std::collections::BTreeSet;
use std::path::Path;

mod common;
use common::temp_dir;

fn judge(args: &[&str]) -> (i32, String, String) {
    common::run_leaving_nothing(args, "snowleak-pg", "clusters")
}

/// Three writers, each holding its transaction open 0-30 ms, insert rows
/// with p = 0, 1, 2 in turn and append `id,p` to their own account after
/// COMMIT returns; a naive relay (`id > highest read`) delivers to
/// `naive.txt`. `partitioned`: LIST (p) with leaf 0, leaf 1 sub-partitioned
/// by HASH (id), and leaf 2 (RANGE (id) inside) made and attached while the
/// writers run (a p = 2 row before it fails, and is not in the account).
const WRITERS_AND_RELAY: &str = r#"set -u -o pipefail
layout=$1 dir=$2
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
if [ "$layout" = plain ]; then
  q "CREATE TABLE outbox (id bigserial PRIMARY KEY, p int NOT NULL, body text)"
else
  q "CREATE TABLE outbox (id bigserial, p int NOT NULL, body text) PARTITION BY LIST (p)"
  q "CREATE TABLE outbox_0 PARTITION OF outbox FOR VALUES IN (0)"
  q "CREATE TABLE outbox_1 PARTITION OF outbox FOR VALUES IN (1) PARTITION BY HASH (id)"
  q "CREATE TABLE outbox_1_a PARTITION OF outbox_1 FOR VALUES WITH (MODULUS 2, REMAINDER 0)"
  q "CREATE TABLE outbox_1_b PARTITION OF outbox_1 FOR VALUES WITH (MODULUS 2, REMAINDER 1)"
fi
writer() {
  for i in $(seq 1 40); do
    p=$(( (i + $1) % 3 ))
    id=$(psql -X -q -At -v ON_ERROR_STOP=1 -c "BEGIN" \
      -c "INSERT INTO outbox (p, body) VALUES ($p, 'w$1') RETURNING id" \
      -c "SELECT pg_sleep(random() * 0.03)" -c "COMMIT" 2>/dev/null | sed -n 1p) \
      && echo "$id,$p" >> "$dir/committed-$1"
  done
}
writer 1 & w1=$!
writer 2 & w2=$!
writer 3 & w3=$!
if [ "$layout" = partitioned ]; then
  q "CREATE TABLE outbox_2 (LIKE outbox INCLUDING DEFAULTS) PARTITION BY RANGE (id)"
  q "CREATE TABLE outbox_2_all PARTITION OF outbox_2 FOR VALUES FROM (MINVALUE) TO (MAXVALUE)"
  q "ALTER TABLE outbox ATTACH PARTITION outbox_2 FOR VALUES IN (2)"
fi
last=0
while :; do
  running=0
  for w in $w1 $w2 $w3; do kill -0 $w 2>/dev/null && running=1; done
  rows=$(q "SELECT id FROM outbox WHERE id > $last ORDER BY id")
  for id in $rows; do echo "$id" >> "$dir/naive.txt"; last=$id; done
  [ $running = 0 ] && [ -z "$rows" ] && break
done
"#;

/// The keys of `dir`'s `committed-*` files, and how many had p = 2.
fn account(dir: &Path) -> (BTreeSet<i64>, usize) {
    let mut keys = BTreeSet::new();
    let mut p2 = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if !path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("committed-")
        {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let (id, p) = line.split_once(',').unwrap();
            keys.insert(id.parse().unwrap());
            p2 += usize::from(p == "2");
        }
    }
    (keys, p2)
}

fn keys_of(path: &Path) -> Vec<i64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

fn truth_keys(db: &Path, op: &str) -> BTreeSet<i64> {
    let conn = Connection::open(db).unwrap();
    let mut st = conn
        .prepare("SELECT key FROM log_truth WHERE op = ?1")
        .unwrap();
    st.query_map([op], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|k| k.unwrap().parse().unwrap())
        .collect()
}

/// Consumer `name` of the run in `db`, judged as `analyze DB --json` judges
/// it (the same checker, with what the run recorded in `runs.config`).
fn consumer(db: &Path, name: &str) -> serde_json::Value {
    let conn = rundb::read::open(db).unwrap();
    let run = rundb::read::run(&conn, 1).unwrap().unwrap();
    let config: serde_json::Value = serde_json::from_str(&run.config).unwrap();
    let setting = analysis::consumers::Setting::from_config(&config).unwrap();
    let truth = rundb::read::side_rows::<rundb::LogTruthRow>(&conn, 1).unwrap();
    let lines = rundb::read::side_rows::<rundb::DeliveryRow>(&conn, 1).unwrap();
    let judged = analysis::consumers::judge(&truth, &lines, &[name.to_string()], &setting);
    serde_json::to_value(&judged.consumers[0]).unwrap()
}

fn keys_in(list: &serde_json::Value, field: &str) -> BTreeSet<i64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|l| l[field].as_str().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn the_same_writers_and_relay_are_judged_alike_on_a_partitioned_and_a_plain_table() {
    for layout in ["plain", "partitioned"] {
        let dir = temp_dir(&format!("judge-parts-{layout}"));
        let db = dir.join("judge.db");
        let naive = dir.join("naive.txt");
        let app = dir.join("app.sh");
        std::fs::write(&app, WRITERS_AND_RELAY).unwrap();
        let (code, stdout, stderr) = judge(&common::strs(&common::judge_outbox_args_with(
            "postgres",
            &db,
            &[("naive", &naive)],
            &["--drain", "0s"],
            &["bash", app.to_str().unwrap(), layout, dir.to_str().unwrap()],
        )));
        assert!(
            code == 0 || code == 1,
            "{layout}: {code}\n{stdout}\n{stderr}"
        );
        let (committed, p2) = account(&dir);
        assert!(committed.len() >= 80, "{layout}: {}", committed.len());
        if layout == "partitioned" {
            assert!(p2 > 0, "no row reached the partition attached mid-run");
        }
        // The log's truth is what the writers saw commit, through every leaf.
        assert_eq!(truth_keys(&db, "insert"), committed, "{layout}\n{stdout}");
        // The relay's losses, from its own output and the writers' account.
        let mine = keys_of(&naive);
        let top = *mine.iter().max().unwrap();
        let lost: BTreeSet<i64> = committed
            .iter()
            .copied()
            .filter(|k| *k < top && !mine.contains(k))
            .collect();
        let c = consumer(&db, "naive");
        assert_eq!(keys_in(&c["lost"], "key"), lost, "{layout}\n{stdout}");
        assert_eq!(c["verdict"] == "invalid", !lost.is_empty(), "{layout}: {c}");
        assert_eq!(code == 1, !lost.is_empty(), "{layout}\n{stdout}");
    }
}

/// RANGE (id) partitions a (1-40), b (41-80), rest (81-); the writer
/// inserts rows 1-100, the relay delivers 1-20, then waits until the
/// judge's slot has read past them (so the leaves were listed), detaches b
/// and drops a, inserts 101-110, and delivers what it then finds above 20.
const RETENTION: &str = r#"set -eu
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
q "CREATE TABLE outbox (id bigint NOT NULL, body text) PARTITION BY RANGE (id)"
q "CREATE TABLE outbox_a PARTITION OF outbox FOR VALUES FROM (1) TO (41)"
q "CREATE TABLE outbox_b PARTITION OF outbox FOR VALUES FROM (41) TO (81)"
q "CREATE TABLE outbox_rest PARTITION OF outbox FOR VALUES FROM (81) TO (MAXVALUE)"
q "INSERT INTO outbox SELECT g, 'x' FROM generate_series(1, 100) g"
q "SELECT id FROM outbox WHERE id <= 20 ORDER BY id" >> "$1"
lsn=$(q "SELECT pg_current_wal_lsn()")
until [ "$(q "SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = 'snowleak'")" = t ]; do
  sleep 0.1
done
q "ALTER TABLE outbox DETACH PARTITION outbox_b"
q "DROP TABLE outbox_a"
q "INSERT INTO outbox SELECT g, 'y' FROM generate_series(101, 110) g"
q "SELECT id FROM outbox WHERE id > 20 ORDER BY id" >> "$1"
"#;

#[test]
fn rows_of_a_partition_detached_or_dropped_before_the_relay_read_them_expire_and_are_not_lost() {
    let dir = temp_dir("judge-parts-retention");
    let db = dir.join("judge.db");
    let relay = dir.join("relay.txt");
    let (code, stdout, stderr) = judge(&common::strs(&common::judge_outbox_args_with(
        "postgres",
        &db,
        &[("relay", &relay)],
        &["--drain", "0s"],
        &[
            "bash",
            "-c",
            RETENTION,
            "retention",
            relay.to_str().unwrap(),
        ],
    )));
    assert_eq!(code, 1, "expired rows make it invalid\n{stdout}\n{stderr}");
    let c = consumer(&db, "relay");
    assert_eq!(c["lost"].as_array().unwrap().len(), 0, "{c}");
    // 1-40 went with a, 41-80 with b; of them 21-80 were never delivered.
    assert_eq!(truth_keys(&db, "expire"), (1..=80).collect());
    assert_eq!(c["expired"]["count"], 60, "{c}");
    assert_eq!(c["delivered"], 50, "1-20 and 81-110");
    assert!(
        stdout.contains("relay: invalid (60 rows expired"),
        "{stdout}"
    );
}

/// A relay whose cursor is the key before the last one it delivered, read
/// back from its own output at each start (so a restart redelivers exactly
/// that key). Its output is its only state: each key is one append, so a
/// kill at any instant leaves the cursor and what was delivered agreeing.
/// (A cursor file beside it, written at each key, broke this once in CI: a
/// kill after `>` truncated it left it empty, and the relay asked
/// `id >  ORDER BY` for the rest of the run.) Its writer started detached
/// on the first start only: it writes until the relay has started a third
/// time and 100 rows committed, appending each key whose COMMIT returned (a
/// failed one, while the server restarts, is tried again); each start noted.
///
/// Each query has 10 s (coreutils' `timeout`): a connection that hangs
/// across the restart is given up and asked again rather than holding the
/// relay to the end of the run; psql's errors go to `psql.err`, which the
/// test prints when it fails.
const RESTARTED: &str = r#"set -u
dir=$1
q() { timeout 10 psql -X -q -At -c "$1" 2>>"$dir/psql.err"; }
echo "${SNOWLEAK_START:-unset}" >> "$dir/starts"
if [ "${SNOWLEAK_START:-0}" = 0 ]; then
  q "CREATE TABLE outbox (id bigserial PRIMARY KEY, body text)"
  setsid bash -c 'i=0
    while [ $i -lt 100 ] || [ "$(wc -l < "$0/starts")" -lt 3 ]; do
      id=$(psql -X -q -At -c "INSERT INTO outbox (body) VALUES ('"'"'x'"'"') RETURNING id" 2>/dev/null) \
        && [ -n "$id" ] && echo "$id" >> "$0/committed" && i=$((i + 1))
    done; touch "$0/writers.done"' "$dir" > /dev/null 2>&1 &
fi
last=$(awk '{ before = key; key = $0 } END { print before + 0 }' "$dir/relay.txt" 2>/dev/null || echo 0)
while :; do
  done_=0; [ -e "$dir/writers.done" ] && done_=1
  # A query that fails (the server restarting) is asked again: read as
  # "nothing new", it would end the relay before it read the last rows.
  rows=$(q "SELECT id FROM outbox WHERE id > $last ORDER BY id") || continue
  for id in $rows; do
    echo "$id" >> "$dir/relay.txt"
    last=$id
  done
  [ $done_ = 1 ] && [ -z "$rows" ] && exit 0
done
"#;

#[test]
fn a_relay_killed_twice_and_a_server_restart_keep_at_least_once_and_each_fault_is_recorded() {
    let dir = temp_dir("judge-parts-nemesis");
    let db = dir.join("judge.db");
    let relay = dir.join("relay.txt");
    let (code, stdout, stderr) = judge(&common::strs(&common::judge_outbox_args_with(
        "postgres",
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
            "at-least-once",
            "--duration",
            "60s",
        ],
        &["bash", "-c", RESTARTED, "restarted", dir.to_str().unwrap()],
    )));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("starts")).unwrap(),
        "0\n1\n2\n",
        "started again after each kill, SNOWLEAK_START counting"
    );
    // Every row the writer saw commit through the restart is in the truth
    // (a COMMIT cut off by the shutdown may be in it too, unseen by the writer).
    let inserted = truth_keys(&db, "insert");
    let committed: BTreeSet<i64> = keys_of(&dir.join("committed")).into_iter().collect();
    assert!(committed.len() >= 100);
    let unseen: Vec<&i64> = inserted.difference(&committed).collect();
    assert!(
        committed.is_subset(&inserted) && unseen.len() <= 1,
        "{unseen:?}"
    );
    let c = consumer(&db, "relay");
    let errors = std::fs::read_to_string(dir.join("psql.err")).unwrap_or_default();
    assert_eq!(c["lost"].as_array().unwrap().len(), 0, "{c}");
    assert_eq!(c["verdict"], "valid", "{c}");
    assert_eq!(c["promise"], "at-least-once");
    // Each kill redelivers the last key the relay had delivered; nothing
    // else is delivered twice.
    assert_eq!(
        c["redelivered"]["count"], 2,
        "{c}\nthe relay's psql:\n{errors}"
    );
    assert_eq!(c["duplicates"]["count"], 0, "{c}");
    let conn = Connection::open(&db).unwrap();
    let config: String = conn
        .query_row("SELECT config FROM runs", [], |r| r.get(0))
        .unwrap();
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    let actions: Vec<&str> = config["nemesis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["kill", "restart-server", "kill"]);
    assert!(
        stdout
            .contains("faults injected: kill at +1.0 s, restart-server at +2.0 s, kill at +3.0 s"),
        "{stdout}"
    );
}

#[test]
fn bad_nemesis_and_promise_flags_are_one_line_and_exit_2() {
    let dir = temp_dir("judge-parts-bad");
    let db = dir.join("judge.db");
    let base = [
        "judge",
        "--log",
        "postgres",
        "--db",
        db.to_str().unwrap(),
        "--table",
        "t",
        "--delivered",
        "r=/dev/null",
    ];
    let bad = |extra: &[&str], expected: &str| {
        common::assert_bad_input(judge(&common::joined(&base, extra)), expected);
    };
    bad(
        &["--kill-every", "5s", "--", "true"],
        "--kill-every needs --duration",
    );
    bad(
        &["--kill-at", "5s,later", "--", "true"],
        "bad --kill-at '5s,later'",
    );
    bad(
        &["--kill-at", "20s", "--duration", "10s", "--", "true"],
        "a fault at 20s is not before --duration 10s",
    );
    bad(
        &["--promise", "twice", "--", "true"],
        "unknown promise 'twice'",
    );
    bad(
        &["--promise", "other=ordered", "--", "true"],
        "--promise other=ordered: no --delivered consumer is named 'other'",
    );
    // A command that cannot start again after a kill (it removed itself) is
    // one line, and what was recorded stays readable.
    let once = dir.join("once.sh");
    std::fs::write(
        &once,
        "#!/bin/sh\npsql -X -q -c 'CREATE TABLE t (id int); INSERT INTO t VALUES (1)'\nrm \"$0\"\nexec sleep 60\n",
    )
    .unwrap();
    std::fs::set_permissions(&once, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, stdout, stderr) = judge(&common::joined(
        &base,
        &[
            "--kill-at",
            "2s",
            "--duration",
            "30s",
            "--",
            once.to_str().unwrap(),
        ],
    ));
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("(start 1, after a kill)") && stderr.trim().lines().count() <= 2,
        "{stderr}"
    );
    assert_eq!(
        common::end_reason_and_truth_rows(&db).1,
        1,
        "the row recorded before stays"
    );
    let flags = ["judge", "--kill-at", "1s", "--", "true"];
    common::assert_bad_input(judge(&flags), "--kill-at applies to --log postgres");
}
