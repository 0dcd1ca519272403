//! `experiment watch`: the truth of the user's own PostgreSQL read from a
//! logical slot while the user's system runs. The test plays the user: a
//! throwaway cluster with `wal_level = logical` is "their" database, with
//! their table, their slot, their writers and their naive relay (`id >
//! highest read`); watch starts while all that already runs, and its
//! verdict must be the one the relay's own output gives. Then the slot watch
//! makes itself (`--create-slot`, dropped at the end), and bad input: one
//! line each, exit 2, the user's slot left as it was.

use std::process::Stdio;

mod common;
use common::their_db::TheirDb;
use common::{start_watch, stop_watch, temp_dir, watch};

/// Runs `sql` on `client` (`TheirDb::exec`).
fn exec(db: &TheirDb, client: &tokio_postgres::Client, sql: &str) {
    db.exec(client, sql);
}

/// The naive relay's read: every row above the highest key it delivered,
/// appended to its file.
fn relay_read(
    db: &TheirDb,
    client: &tokio_postgres::Client,
    last: &mut i64,
    out: &std::path::Path,
) {
    let rows = db
        .runtime
        .block_on(client.query("SELECT id FROM outbox WHERE id > $1 ORDER BY id", &[&*last]))
        .unwrap();
    let ids: Vec<i64> = rows.iter().map(|row| row.get(0)).collect();
    if let Some(id) = ids.last() {
        *last = *id;
    }
    common::append_ids(out, &ids);
}

fn slots(db: &TheirDb, client: &tokio_postgres::Client) -> Vec<(String, bool)> {
    db.slots(client)
}

/// The names of the cluster's replication slots, in order.
fn slot_names(db: &TheirDb, client: &tokio_postgres::Client) -> Vec<String> {
    db.slot_names(client)
}

#[test]
fn watch_on_their_slot_judges_their_naive_relay_as_its_own_output_says() {
    let db = TheirDb::start();
    let dir = temp_dir("watch");
    let out = dir.join("naive.csv");
    let run_db = dir.join("watch.db");
    let admin = db.session();
    // Their system, running before watch starts: the table, their slot,
    // rows 1-3 committed and delivered. (One statement a call: a slot
    // cannot be made in a transaction that has written.)
    for sql in [
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
        "SELECT pg_create_logical_replication_slot('theirs', 'test_decoding')",
        "INSERT INTO outbox VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    ] {
        exec(&db, &admin, sql);
    }
    let (a, b, reader) = (db.session(), db.session(), db.session());
    let mut last = 0;
    relay_read(&db, &reader, &mut last, &out);
    assert_eq!(last, 3);

    let (child, stderr) = start_watch(&[
        "watch",
        "--target",
        &db.target(),
        "--table",
        "outbox",
        "--slot",
        "theirs",
        "--delivered",
        &format!("naive={}", out.display()),
        "--db",
        run_db.to_str().unwrap(),
    ]);
    // Writer a takes key 4 and holds its transaction; writer b commits 5;
    // the relay reads 5; a commits 4; b commits 6; the relay reads 6.
    exec(&db, &a, "BEGIN; INSERT INTO outbox VALUES (4, 'held')");
    exec(&db, &b, "INSERT INTO outbox VALUES (5, 'e')");
    relay_read(&db, &reader, &mut last, &out);
    exec(&db, &a, "COMMIT");
    exec(&db, &b, "INSERT INTO outbox VALUES (6, 'f')");
    exec(
        &db,
        &b,
        "BEGIN; INSERT INTO outbox VALUES (7, 'rolled back'); ROLLBACK",
    );
    relay_read(&db, &reader, &mut last, &out);
    let (code, stdout, stderr) = stop_watch((child, stderr));

    // The relay's own output, and what it says was lost: the rows committed
    // while watch watched, below the highest key delivered since, never in
    // the file.
    let mine: Vec<i64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(mine, [1, 2, 3, 5, 6]);
    let committed_while_watched = [4i64, 5, 6];
    let lost: Vec<i64> = committed_while_watched
        .iter()
        .copied()
        .filter(|k| *k < 6 && !mine.contains(k))
        .collect();
    assert_eq!(lost, [4]);
    assert_eq!(code, 1, "the relay lost a row: exit 1\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("naive: invalid (lost 1 committed rows; 2 of 3 committed rows delivered"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("lost key 4 ")),
        "{stdout}"
    );
    // The truth is what committed while watch watched, in commit order: not
    // what the slot held from before, not the rolled-back row.
    let conn = rusqlite::Connection::open(&run_db).unwrap();
    let truth: Vec<String> = conn
        .prepare("SELECT key FROM log_truth WHERE op = 'insert' ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(truth, ["5", "4", "6"]);
    // Their slot is still there, free again; nothing of theirs was written.
    assert_eq!(slots(&db, &admin), [("theirs".to_string(), false)]);
    // `analyze` reads a watch run as it reads a judge run: the judge's
    // target, and the consumers in its config.
    let (target, config): (String, String) = conn
        .query_row("SELECT target, config FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(target, "postgres-log");
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["delivered"][0]["name"], "naive");
}

#[test]
fn a_slot_watch_makes_is_dropped_and_bad_input_is_one_line_a_slot_in_use_among_it() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-made");
    let run_db = dir.join("watch.db");
    let run_db = run_db.to_str().unwrap();
    let admin = db.session();
    for sql in [
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
        "CREATE TABLE nokey (body text)",
        "SELECT pg_create_logical_replication_slot('other_plugin', 'pgoutput')",
        "SELECT pg_create_physical_replication_slot('physical')",
        "SELECT pg_create_logical_replication_slot('busy', 'test_decoding')",
    ] {
        exec(&db, &admin, sql);
    }
    let target = db.target();

    // --create-slot: made, read, dropped.
    let (child, stderr) = start_watch(&[
        "watch",
        "--target",
        &target,
        "--table",
        "outbox",
        "--slot",
        "made_by_watch",
        "--create-slot",
        "--db",
        run_db,
    ]);
    exec(&db, &admin, "INSERT INTO outbox VALUES (1, 'a')");
    let (code, stdout, stderr) = stop_watch((child, stderr));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 rows of public.outbox committed"),
        "{stdout}"
    );
    let names = slot_names(&db, &admin);
    assert_eq!(
        names,
        ["busy", "other_plugin", "physical"],
        "the slot watch made is gone"
    );

    // A slot another consumer streams: pg_recvlogical, PostgreSQL's own
    // client, holds it.
    // It lies beside the server's initdb (which may be a link into that
    // directory).
    let initdb = std::fs::canonicalize(db.cluster.bin_dir().join("initdb")).unwrap();
    let recvlogical = initdb.parent().unwrap().join("pg_recvlogical");
    let mut recv = std::process::Command::new(&recvlogical)
        .args(["-h"])
        .arg(db.cluster.dir())
        .args([
            "-p", "5432", "-U", "postgres", "-d", "postgres", "--slot", "busy",
        ])
        .args(["--start", "-f", "/dev/null"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{} must run: {e}", recvlogical.display()));
    // Until the server shows the slot active (a condition, not a delay).
    let mut waited = 0;
    while !slots(&db, &admin).contains(&("busy".to_string(), true)) {
        assert!(recv.try_wait().unwrap().is_none(), "pg_recvlogical ended");
        waited += 1;
        assert!(waited < 6000, "pg_recvlogical never took the slot");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }

    let bad: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--slot", "missing"], "no replication slot 'missing'"),
        (
            vec!["--slot", "other_plugin"],
            "a logical slot of plugin pgoutput",
        ),
        (vec!["--slot", "physical"], "a physical slot"),
        (vec!["--slot", "busy"], "is in use by another consumer"),
        (vec!["--slot", "busy", "--create-slot"], "exists already"),
        (vec!["--slot", "Bad-Name"], "bad --slot 'Bad-Name'"),
    ];
    let mut cases: Vec<(Vec<&str>, &str)> = bad
        .into_iter()
        .map(|(mut extra, expected)| {
            extra.extend(["--table", "outbox"]);
            (extra, expected)
        })
        .collect();
    cases.push((
        vec!["--slot", "busy", "--table", "nokey"],
        "column \"id\" does not exist",
    ));
    cases.push((
        vec!["--slot", "busy", "--table", "absent"],
        "does not exist",
    ));
    for (extra, expected) in cases {
        let mut args = vec!["watch", "--target", &target, "--db", run_db];
        args.extend(extra.iter().copied());
        let refused = watch(&args);
        common::assert_refused(refused, expected, &format!("{extra:?}"));
    }
    let _ = recv.kill();
    let _ = recv.wait();

    // A URL that does not connect, a password in the URL, another target.
    let nowhere = format!(
        "postgres:postgresql://postgres@/postgres?host={}&port=5432",
        dir.join("no-server").display()
    );
    let with_password = "postgres:postgresql://postgres:secret@localhost/postgres".to_string();
    for (target, expected) in [
        (nowhere.as_str(), "cannot connect to PostgreSQL"),
        (with_password.as_str(), "put the password in PGPASSWORD"),
        (
            "mariadb:mysql://x",
            "--slot and --create-slot are PostgreSQL's",
        ),
        ("sqlite:x", "watch reads PostgreSQL or MariaDB"),
    ] {
        let refused = watch(&[
            "watch", "--target", target, "--table", "outbox", "--slot", "s", "--db", run_db,
        ]);
        common::assert_refused(refused, expected, target);
    }
    // --duration ends a watch as Ctrl-C does, its slot dropped.
    let ended = watch(&[
        "watch",
        "--target",
        &target,
        "--table",
        "outbox",
        "--slot",
        "short",
        "--create-slot",
        "--duration",
        "300ms",
        "--db",
        run_db,
    ]);
    common::assert_ended_empty(ended);
    // Their slots are as they were: watch dropped none it did not make.
    let names = slot_names(&db, &admin);
    assert_eq!(names, ["busy", "other_plugin", "physical"]);
}

/// A `--create-slot` watch killed (SIGKILL) cannot drop its slot: the next
/// `--create-slot` watch with the same flags and `--db` drops it, saying
/// so in one line, and makes it again; a slot another live watch made is
/// refused, as any slot that exists.
#[test]
fn a_slot_a_killed_watch_made_is_dropped_by_the_next_and_a_live_ones_is_not() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-made-killed");
    let run_db = dir.join("watch.db");
    let run_db = run_db.to_str().unwrap();
    let admin = db.session();
    exec(
        &db,
        &admin,
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
    );
    let target = db.target();
    let args = |slot: &'static str, db_file: &str| -> Vec<String> {
        [
            "watch",
            "--target",
            &target,
            "--table",
            "outbox",
            "--slot",
            slot,
            "--create-slot",
            "--db",
            db_file,
        ]
        .map(String::from)
        .to_vec()
    };
    let killed = args("made_then_killed", run_db);
    let (mut child, _stderr) = start_watch(&common::strs(&killed));
    common::signal(&child, "-KILL");
    child.wait().unwrap();
    // The server drops the killed watch's temporary copy once it sees the
    // session end, which may take a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while slot_names(&db, &admin).len() > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        slot_names(&db, &admin),
        ["made_then_killed"],
        "a killed watch leaves its slot, not its copy"
    );
    let mut again = killed.clone();
    again.extend(["--duration".to_string(), "300ms".to_string()]);
    let (code, stdout, stderr) = watch(&common::strs(&again));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.lines().next().is_some_and(|l| l.starts_with(
            "watch: dropped replication slot 'made_then_killed', made by watch run 1 of"
        ) && l
            .ends_with("and left when that watch was killed; making it again")),
        "{stderr}"
    );
    assert!(
        slot_names(&db, &admin).is_empty(),
        "the slot made again is dropped at the end"
    );

    // A watch that made its slot and still runs, last in its --db: a
    // second one with its flags waits for the first's session, then
    // refuses the slot in one line.
    let other_db = dir.join("other.db");
    let live = args("made_and_live", other_db.to_str().unwrap());
    let running = start_watch(&common::strs(&live));
    common::assert_refused(
        watch(&common::strs(&live)),
        "replication slot 'made_and_live' exists already",
        "a live watch's slot",
    );
    let (code, stdout, stderr) = stop_watch(running);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(slot_names(&db, &admin).is_empty());
}

/// A role that must give its password: watch takes it from PGPASSWORD or
/// from `--token-file` (which wins), refuses a wrong one in one line, and
/// never shows or stores it.
#[test]
fn watch_takes_the_password_from_pgpassword_or_its_file_and_never_shows_it() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-password");
    let admin = db.session();
    // scram for this role alone, over the socket watch uses; the rest stays trusted.
    let hba = db.cluster.dir().join("data/pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("local all watcher scram-sha-256\n{rules}")).unwrap();
    for sql in [
        "SELECT pg_reload_conf()",
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
        // A slot needs REPLICATION; the table, SELECT.
        "CREATE ROLE watcher LOGIN REPLICATION PASSWORD 'right-one'",
        "GRANT SELECT ON outbox TO watcher",
    ] {
        exec(&db, &admin, sql);
    }
    let target = db.target().replace("postgres@", "watcher@");
    let password_file = dir.join("password");
    std::fs::write(&password_file, "right-one\n").unwrap();
    let run_db = |name: &str| dir.join(name).to_str().unwrap().to_string();
    // The slot is made by watch and dropped at its end. The line is split on
    // spaces, which the scratch paths hold none of.
    let command = |db: &str| {
        let line = format!(
            "watch --target {target} --table outbox --slot by_watcher --create-slot --db {db}"
        );
        common::command(&line.split(' ').collect::<Vec<_>>())
    };

    // A wrong password: one line, exit 2, the password not in it.
    let wrong = common::outcome(
        command(&run_db("wrong.db"))
            .env("PGPASSWORD", "wrong-one")
            .output()
            .unwrap(),
    );
    assert!(!wrong.2.contains("wrong-one"), "{}", wrong.2);
    common::assert_refused(
        wrong,
        "password authentication failed",
        "a wrong PGPASSWORD",
    );

    // The right one from PGPASSWORD, then from the file over a wrong PGPASSWORD.
    for (name, env, file) in [
        ("env.db", "right-one", None),
        ("file.db", "wrong-one", Some(&password_file)),
    ] {
        let db_path = run_db(name);
        let mut cmd = command(&db_path);
        if let Some(file) = file {
            cmd.arg("--token-file").arg(file);
        }
        cmd.env("PGPASSWORD", env);
        let running = common::start_watch_command(cmd);
        exec(&db, &admin, "INSERT INTO outbox VALUES (1, 'a')");
        let (code, stdout, stderr) = stop_watch(running);
        exec(&db, &admin, "DELETE FROM outbox");
        assert_eq!(code, 0, "{name}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("1 rows of public.outbox committed"),
            "{name}: read as watcher: {stdout}"
        );
        for text in [&stdout, &stderr] {
            assert!(
                !text.contains("right-one") && !text.contains("wrong-one"),
                "{name}: {text}"
            );
        }
        let stored = std::fs::read(&db_path).unwrap();
        let shown = |secret: &[u8]| stored.windows(secret.len()).any(|w| w == secret);
        assert!(
            !shown(b"right-one") && !shown(b"wrong-one"),
            "{name}: no password in the run database"
        );
    }
    assert!(
        slot_names(&db, &admin).is_empty(),
        "the slots watch made are dropped"
    );
}

/// Waits until watch's slot `name` has read the log past where it ends now
/// (its confirmed position, which watch moves once what it read is stored,
/// passes the current WAL position): every transaction committed before is
/// in the truth, and the table's partitions were listed after it.
fn wait_read_past_now(db: &TheirDb, client: &tokio_postgres::Client, name: &str) {
    let lsn: String = db
        .runtime
        .block_on(client.query_one("SELECT pg_current_wal_lsn()::text", &[]))
        .unwrap()
        .get(0);
    loop {
        let past: Option<bool> = db
            .runtime
            .block_on(client.query_one(
                "SELECT confirmed_flush_lsn >= $1::text::pg_lsn FROM pg_replication_slots \
                 WHERE slot_name = $2",
                &[&lsn, &name],
            ))
            .unwrap()
            .get(0);
        if past == Some(true) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn watch_judges_a_partitioned_table_as_its_root_and_a_dropped_partitions_unread_rows_expire() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-parts");
    let out = dir.join("relay.csv");
    let run_db = dir.join("watch.db");
    let admin = db.session();
    exec(
        &db,
        &admin,
        "CREATE TABLE parts (id bigint NOT NULL, p int NOT NULL) PARTITION BY LIST (p); \
         CREATE TABLE parts_0 PARTITION OF parts FOR VALUES IN (0)",
    );
    let watching = start_watch(&[
        "watch",
        "--target",
        &db.target(),
        "--table",
        "parts",
        "--slot",
        "w",
        "--create-slot",
        "--delivered",
        &format!("relay={}", out.display()),
        "--db",
        run_db.to_str().unwrap(),
    ]);
    // Rows in the first leaf, a leaf made while watch runs and a row in it;
    // the relay delivers 1 so far.
    exec(&db, &admin, "INSERT INTO parts VALUES (1, 0), (2, 0)");
    exec(
        &db,
        &admin,
        "CREATE TABLE parts_1 PARTITION OF parts FOR VALUES IN (1)",
    );
    exec(&db, &admin, "INSERT INTO parts VALUES (3, 1)");
    common::append_ids(&out, &[1]);
    wait_read_past_now(&db, &admin, "w");
    // Retention drops the first leaf, 2 unread and not passed yet; a last
    // row; the relay delivers 3 and 4.
    exec(&db, &admin, "DROP TABLE parts_0");
    exec(&db, &admin, "INSERT INTO parts VALUES (4, 1)");
    common::append_ids(&out, &[3, 4]);
    wait_read_past_now(&db, &admin, "w");
    let (code, stdout, stderr) = stop_watch(watching);
    assert_eq!(code, 1, "an expired row: invalid\n{stdout}\n{stderr}");
    let rows = common::truth_rows(&run_db, "xid");
    let ops: Vec<(&str, &str)> = rows
        .iter()
        .map(|(k, op, _)| (k.as_str(), op.as_str()))
        .collect();
    assert_eq!(
        ops,
        [
            ("1", "insert"),
            ("2", "insert"),
            ("3", "insert"),
            // The drop is not in the log: the leaf's rows expire at the
            // first drain that no longer lists it, after what committed before.
            ("4", "insert"),
            ("1", "expire"),
            ("2", "expire")
        ],
        "{stdout}"
    );
    assert!(
        stdout.contains("relay: invalid (1 rows expired"),
        "{stdout}"
    );
    assert!(stdout.contains("0 lost, 1 expired"), "{stdout}");
    // The slot watch made is gone.
    assert!(slot_names(&db, &admin).is_empty());
}

/// watch consumes a temporary copy of their slot, made on its own session
/// and named after it (`theirs_watch_PID`), and leaves their slot free and
/// unconsumed between its stored states; with no free slot for the copy
/// (`max_replication_slots`) it peeks at their slot instead, saying so in
/// one line, and judges alike.
#[test]
fn watch_reads_a_temporary_copy_of_their_slot_or_peeks_when_no_slot_is_free() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-copy");
    let admin = db.session();
    for sql in [
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
        "SELECT pg_create_logical_replication_slot('theirs', 'test_decoding')",
    ] {
        exec(&db, &admin, sql);
    }
    let target = db.target();
    let run = |db_file: &str, extra: &[&str]| {
        let mut args = vec![
            "watch", "--target", &target, "--table", "outbox", "--slot", "theirs", "--db", db_file,
        ];
        args.extend_from_slice(extra);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let first = dir.join("copy.db");
    let running = start_watch(&common::strs(&run(first.to_str().unwrap(), &[])));
    let copies: Vec<(String, bool, bool)> = db
        .runtime
        .block_on(admin.query(
            "SELECT slot_name::text, temporary, slot_name = 'theirs_watch_' || active_pid \
             FROM pg_replication_slots WHERE slot_name <> 'theirs'",
            &[],
        ))
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert!(copies[0].1 && copies[0].2, "{copies:?}");
    exec(&db, &admin, "INSERT INTO outbox VALUES (1, 'a'), (2, 'b')");
    let (code, stdout, stderr) = stop_watch(running);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("2 rows of public.outbox committed"),
        "{stdout}"
    );
    assert!(!stderr.contains("no free replication slot"), "{stderr}");
    assert_eq!(slots(&db, &admin), [("theirs".to_string(), false)]);

    // Every slot taken: watch peeks, in one line, and still reads what
    // commits (row 3, committed before it started, was skipped: the truth
    // starts at watch's start).
    for n in 1..=7 {
        exec(
            &db,
            &admin,
            &format!("SELECT pg_create_logical_replication_slot('filler_{n}', 'test_decoding')"),
        );
    }
    exec(&db, &admin, "INSERT INTO outbox VALUES (3, 'c')");
    let second = dir.join("peek.db");
    let running = start_watch(&common::strs(&run(second.to_str().unwrap(), &[])));
    exec(&db, &admin, "INSERT INTO outbox VALUES (4, 'd')");
    let (code, stdout, stderr) = stop_watch(running);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 rows of public.outbox committed"),
        "{stdout}"
    );
    let (code, _, stderr) = watch(&common::strs(&run(
        dir.join("peek2.db").to_str().unwrap(),
        &["--duration", "300ms"],
    )));
    assert_eq!(code, 0, "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("no free replication slot"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].starts_with(
            "watch: no free replication slot for a temporary copy of 'theirs' \
             (max_replication_slots): peeking at it instead"
        ),
        "{stderr}"
    );
    assert_eq!(slots(&db, &admin).len(), 8);
}
