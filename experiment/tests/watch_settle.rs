//! `experiment watch` for weeks (issue 52, item 3): rows every consumer
//! delivered settle and leave run.db (only the lost and the unsettled stay),
//! while the verdict's counts stay those of the whole run; a watch stopped
//! and started again with the same flags resumes from its slot's confirmed
//! position and its stored state, missing and counting twice nothing; and
//! so does a watch killed (SIGKILL) while writers commit, which never wrote
//! its last state.

mod common;
use common::their_db::TheirDb;
use common::{append_ids, kill_and_resume, start_watch, stop_watch, strs, temp_dir};

/// Commits keys `keys`, one transaction each, on `client`.
fn commit(db: &TheirDb, client: &tokio_postgres::Client, keys: impl Iterator<Item = i64>) {
    let sql: String = keys
        .map(|k| format!("BEGIN; INSERT INTO outbox VALUES ({k}, 'x'); COMMIT;"))
        .collect();
    db.exec(client, &sql);
}

/// The table and the user's slot, made before watch starts.
fn their_outbox(db: &TheirDb, client: &tokio_postgres::Client) {
    for sql in [
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
        "SELECT pg_create_logical_replication_slot('theirs', 'test_decoding')",
    ] {
        db.exec(client, sql);
    }
}

/// watch on their slot, judging the writers' own file, rows settled as
/// soon as every consumer delivered them (`--settle-after 0s`).
fn watch_args(db: &TheirDb, out: &std::path::Path, run_db: &std::path::Path) -> Vec<String> {
    [
        "watch",
        "--target",
        &db.target(),
        "--table",
        "outbox",
        "--slot",
        "theirs",
        "--delivered",
        &format!("writers={}", out.display()),
        "--settle-after",
        "0s",
        "--db",
        run_db.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// `log_truth`'s keys of the last run of `run_db`, and its `watch_state`.
fn stored(run_db: &std::path::Path) -> (Vec<String>, serde_json::Value) {
    let conn = rusqlite::Connection::open(run_db).unwrap();
    let run: i64 = conn
        .query_row("SELECT max(id) FROM runs", [], |r| r.get(0))
        .unwrap();
    let keys = conn
        .prepare("SELECT key FROM log_truth WHERE run_id = ?1 ORDER BY seq")
        .unwrap()
        .query_map([run], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let state: String = conn
        .query_row(
            "SELECT state FROM watch_state WHERE run_id = ?1",
            [run],
            |r| r.get(0),
        )
        .unwrap();
    (keys, serde_json::from_str(&state).unwrap())
}

#[test]
fn settled_rows_leave_run_db_and_the_lost_one_stays_with_the_counts_right() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-settle");
    let (out, run_db) = (dir.join("writers.csv"), dir.join("watch.db"));
    let admin = db.session();
    their_outbox(&db, &admin);
    let watch = start_watch(&strs(&watch_args(&db, &out, &run_db)));
    // 300 commits, each delivered after its commit but key 150.
    commit(&db, &admin, 1..=300);
    let delivered: Vec<i64> = (1..=300).filter(|k| *k != 150).collect();
    append_ids(&out, &delivered);
    let (code, stdout, stderr) = stop_watch(watch);
    assert_eq!(code, 1, "key 150 was lost: exit 1\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("300 rows of public.outbox committed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("writers: invalid (lost 1 committed rows"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "299 of 300 committed rows delivered, 1 lost, 0 not reached, 0 duplicated, \
             0 out of commit order)"
        ),
        "{stdout}"
    );
    // run.db keeps the lost row and the rows not settled at the end (those
    // committed within --settle-after, 0 s, of the newest time read):
    // the 299 delivered rows before them are folded into counts.
    let (keys, state) = stored(&run_db);
    assert!(keys.contains(&"150".to_string()), "{keys:?}");
    assert!(keys.len() < 50, "settled rows left run.db: {}", keys.len());
    assert!(!keys.contains(&"1".to_string()), "{keys:?}");
    let open = state["checker"]["open"].as_object().unwrap();
    assert_eq!(
        open.len(),
        keys.len(),
        "run.db holds the checker's open rows"
    );
    // `analyze` judges the run from the stored checker, as watch did.
    let conn = rusqlite::Connection::open(&run_db).unwrap();
    let checker = analysis::settle::stored::watch_checker(&conn, 1)
        .unwrap()
        .unwrap();
    let judged = checker.judged();
    let c = &judged.consumers[0];
    assert_eq!((judged.committed, c.delivered, c.lost.len()), (300, 299, 1));
    assert_eq!(c.lost[0].key, "150");
}

#[test]
fn a_watch_stopped_and_started_again_resumes_and_counts_every_row_once() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-resume");
    let (out, run_db) = (dir.join("writers.csv"), dir.join("watch.db"));
    let admin = db.session();
    their_outbox(&db, &admin);
    let args = watch_args(&db, &out, &run_db);
    let args = strs(&args);
    let first = start_watch(&args);
    commit(&db, &admin, 1..=100);
    append_ids(&out, &(1..=100).collect::<Vec<i64>>());
    let (code, stdout, stderr) = stop_watch(first);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("100 of 100 committed rows delivered"),
        "{stdout}"
    );
    // Meanwhile, with nobody watching: 100 more, committed and delivered.
    commit(&db, &admin, 101..=200);
    append_ids(&out, &(101..=200).collect::<Vec<i64>>());
    let second = start_watch(&args);
    commit(&db, &admin, 201..=300);
    append_ids(&out, &(201..=300).collect::<Vec<i64>>());
    let (code, stdout, stderr) = stop_watch(second);
    assert!(stderr.is_empty() || !stderr.contains("error"), "{stderr}");
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    // The writers' own account: 300 rows, each committed and delivered once.
    assert!(
        stdout.contains(
            "writers: valid (delivered every committed row up to the highest key it delivered; \
             300 of 300 committed rows delivered, 0 lost, 0 not reached, 0 duplicated, \
             0 out of commit order)"
        ),
        "{stdout}"
    );
    let (_, state) = stored(&run_db);
    let conn = rusqlite::Connection::open(&run_db).unwrap();
    let config: String = conn
        .query_row("SELECT config FROM runs WHERE id = 2", [], |r| r.get(0))
        .unwrap();
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["resumed_from"], 1);
    assert_eq!(state["checker"]["committed"], 300);
}

#[test]
fn a_watch_killed_while_rows_commit_resumes_judging_each_row_exactly_once() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-killed");
    let (out, run_db) = (dir.join("writers.csv"), dir.join("watch.db"));
    let admin = db.session();
    their_outbox(&db, &admin);
    let writer = db.session();
    let commit = |key: i64| db.exec(&writer, &format!("INSERT INTO outbox VALUES ({key}, 'x')"));
    // The killed watch's backend may still hold the slot for a moment
    // (the call it was in ends when the server sees the connection gone).
    let free = || {
        let active: bool = db
            .runtime
            .block_on(admin.query_one(
                "SELECT active FROM pg_replication_slots WHERE slot_name = 'theirs'",
                &[],
            ))
            .unwrap()
            .get(0);
        !active
    };
    let run = kill_and_resume(
        &watch_args(&db, &out, &run_db),
        &run_db,
        &out,
        &commit,
        &free,
    );
    // Every row the writers committed, judged once, and the resumed watch
    // decoded exactly the transactions its state lacked: none the killed
    // watch's stored state held, none it read and lost.
    run.assert_judged_once("public.outbox");
    let n = run.committed;
    let state = common::watch_state(&run_db, 2).unwrap();
    assert_eq!(state["checker"]["committed"], n);
    assert!(state["log"]["lsn"].is_string(), "{state}");
    let conn = rusqlite::Connection::open(&run_db).unwrap();
    let config: String = conn
        .query_row("SELECT config FROM runs WHERE id = 2", [], |r| r.get(0))
        .unwrap();
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["resumed_from"], 1);
}
