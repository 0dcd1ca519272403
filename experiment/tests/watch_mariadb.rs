//! `experiment watch --target mariadb:URL`: the truth of the user's own
//! MariaDB read from its binary log, as a replica reads it, while the user's
//! system runs. The test plays the user: a throwaway server with the binary
//! log on in ROW format is "their" database, with their table, a row
//! committed and delivered before watch starts, and their naive relay (`id >
//! highest read`) run by hand: key 2 committed and delivered, then key 1
//! committed behind it, in the next binlog file. Watch's verdict must be the one the relay's own
//! file gives, its truth exactly the rows committed after it started. Then
//! bad input: one line each, exit 2 (the binary log off, a setting not
//! FULL, a table without the key column, no server, PostgreSQL's flags, a
//! user short of a privilege), and a user with only the documented
//! privileges, which watches.

use rusqlite::Connection;
use snowleak::targets::mariadb::server::{LockMode, Server};
use std::path::Path;

mod common;
use common::{assert_refused, command, start_watch, stop_watch, temp_dir, watch};

/// The binary log as watch needs it (docs/log-truth.md, "Your own database").
const BINLOG: [&str; 5] = [
    "--log-bin=binlog",
    "--server-id=1",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
];

fn start(options: &[&str]) -> Server {
    Server::start_with(LockMode::DEFAULT, options)
        .expect("these tests need MariaDB (mariadbd, mariadb-install-db)")
}

/// Runs SQL with the `mariadb` client as root; its output (tab-separated).
fn sql(server: &Server, db: &str, statement: &str) -> String {
    let out = std::process::Command::new("mariadb")
        .arg("-S")
        .arg(server.socket())
        .args(["-u", "root", "-N", "-B", db, "-e", statement])
        .output()
        .expect("the mariadb client runs");
    assert!(
        out.status.success(),
        "{statement}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn target(server: &Server) -> String {
    format!(
        "mariadb:mysql://root@localhost/app?socket={}",
        server.socket().display()
    )
}

/// The naive relay's read: every row above the highest key it delivered,
/// appended to its file.
fn relay_read(server: &Server, last: &mut i64, out: &Path) {
    let rows = sql(
        server,
        "app",
        &format!("SELECT id FROM outbox WHERE id > {last} ORDER BY id"),
    );
    let ids: Vec<i64> = rows.lines().map(|id| id.parse().unwrap()).collect();
    if let Some(id) = ids.last() {
        *last = *id;
    }
    common::append_ids(out, &ids);
}

#[test]
fn watch_reads_their_binlog_and_judges_their_naive_relay_as_its_own_file_says() {
    let dir = temp_dir("watch-mariadb");
    let server = start(&BINLOG);
    let relay = dir.join("relay.csv");
    let run_db = dir.join("watch.db");
    // Their system before watch starts: the table, row 0 committed and
    // delivered.
    sql(&server, "", "CREATE DATABASE app");
    sql(
        &server,
        "app",
        "CREATE TABLE outbox (body text, id bigint PRIMARY KEY) ENGINE=InnoDB; \
         CREATE TABLE other (id bigint) ENGINE=InnoDB; \
         INSERT INTO outbox VALUES ('before', 0)",
    );
    let mut last = -1;
    relay_read(&server, &mut last, &relay);
    assert_eq!(last, 0);

    let target = target(&server);
    let delivered = format!("relay={}", relay.display());
    let args = [
        "watch",
        "--target",
        &target,
        "--table",
        "outbox",
        "--delivered",
        &delivered,
        "--db",
        run_db.to_str().unwrap(),
    ];
    let watching = start_watch(&args);
    // Key 2 committed and delivered; key 1 committed behind the relay's
    // cursor; a rolled-back 3, another table's row. Each commit's GTID as
    // the server gave it.
    let gtid = |out: String| -> i64 { out.trim().rsplit('-').next().unwrap().parse().unwrap() };
    let g2 = gtid(sql(
        &server,
        "app",
        "INSERT INTO outbox VALUES ('two', 2); SELECT @@last_gtid",
    ));
    relay_read(&server, &mut last, &relay);
    // A new binlog file while watch reads (as `expire_logs` or a backup's
    // FLUSH makes one): watch follows the ROTATE into it.
    sql(&server, "", "FLUSH BINARY LOGS");
    let g1 = gtid(sql(
        &server,
        "app",
        "INSERT INTO outbox VALUES ('one', 1); SELECT @@last_gtid",
    ));
    sql(
        &server,
        "app",
        "BEGIN; INSERT INTO outbox VALUES ('rolled back', 3); ROLLBACK",
    );
    sql(&server, "app", "INSERT INTO other VALUES (1)");
    relay_read(&server, &mut last, &relay);
    assert_eq!(last, 2);

    let (code, stdout, rest) = stop_watch(watching);

    // The relay's own file: 0 (before watch), 2; 1 is missing below 2.
    let mine: Vec<String> = std::fs::read_to_string(&relay)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(mine, ["0", "2"]);
    assert_eq!(code, 1, "the relay lost a row: exit 1\n{stdout}\n{rest}");
    assert!(
        stdout.contains("relay: invalid (lost 1 committed rows;"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(ended: interrupted): 2 rows of app.outbox committed"),
        "{stdout}"
    );
    let lost = common::lost_line(&stdout, "1");
    assert!(
        lost.contains(&format!("(xid {g1}, commit binlog.000002:")),
        "{lost}"
    );
    // The truth: exactly the rows committed after watch started, in commit
    // order, with their GTIDs; not row 0, not the rolled-back 3, not the
    // other table's row.
    let truth = common::truth_rows(&run_db, "xid");
    let conn = Connection::open(&run_db).unwrap();
    assert_eq!(
        truth,
        [
            ("2".to_string(), "insert".to_string(), g2),
            ("1".to_string(), "insert".to_string(), g1)
        ]
    );
    // The lag rests on the times watch read the two commits (whole-second
    // commit times cannot give it).
    let read: Vec<i64> = conn
        .prepare("SELECT read_ms FROM log_truth ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        lost.ends_with(&format!(
            "committed {} ms after key 2, behind:n=2 reads it",
            read[1] - read[0]
        )),
        "{lost}"
    );
    let (target_row, config): (String, String) = conn
        .query_row("SELECT target, config FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(target_row, "mariadb-log");
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["server_id"], 1_734_921_553);
    assert_eq!(config["delivered"][0]["name"], "relay");
    // Nothing of theirs was written: the only table rows are theirs.
    assert_eq!(
        sql(&server, "app", "SELECT id FROM outbox ORDER BY id"),
        "0\n1\n2\n"
    );
    // Started again with the same flags and --db, watch resumes run 1 from
    // the binlog position its state holds: nothing committed since, key 1
    // still lost.
    let mut again = args.to_vec();
    again.extend(["--duration", "300ms"]);
    let (code, stdout, stderr) = common::watch(&again);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("(ended: duration): 2 rows of app.outbox committed in 0 transactions"),
        "{stdout}"
    );
    assert!(
        stdout.contains("relay: invalid (lost 1 committed rows;"),
        "{stdout}"
    );
    let resumed: String = conn
        .query_row("SELECT config FROM runs WHERE id = 2", [], |r| r.get(0))
        .unwrap();
    let resumed: serde_json::Value = serde_json::from_str(&resumed).unwrap();
    assert_eq!(resumed["resumed_from"], 1);
}

#[test]
fn a_watch_killed_while_rows_commit_resumes_judging_each_row_exactly_once() {
    let dir = temp_dir("watch-mariadb-killed");
    let server = start(&BINLOG);
    let (out, run_db) = (dir.join("writers.csv"), dir.join("watch.db"));
    sql(&server, "", "CREATE DATABASE app");
    sql(
        &server,
        "app",
        "CREATE TABLE outbox (body text, id bigint PRIMARY KEY) ENGINE=InnoDB",
    );
    let args: Vec<String> = [
        "watch",
        "--target",
        &target(&server),
        "--table",
        "outbox",
        "--delivered",
        &format!("writers={}", out.display()),
        "--settle-after",
        "0s",
        "--db",
        run_db.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let commit = |key: i64| {
        sql(
            &server,
            "app",
            &format!("INSERT INTO outbox VALUES ('x', {key})"),
        );
    };
    // The killed watch's dump stays registered until the server sees its
    // connection gone, and watch refuses an id a replica holds.
    let gone = || {
        !sql(&server, "", "SHOW SLAVE HOSTS")
            .lines()
            .any(|l| l.starts_with("1734921553\t"))
    };
    let run = common::kill_and_resume(&args, &run_db, &out, &commit, &gone);
    // Every row judged once; the resumed watch read exactly the
    // transactions its state lacked, from the binlog position it holds.
    run.assert_judged_once("app.outbox");
    let n = run.committed;
    let state = common::watch_state(&run_db, 2).unwrap();
    assert_eq!(state["checker"]["committed"], n);
    assert!(
        state["log"]["file"].is_string() && state["log"]["pos"].is_u64(),
        "{state}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2_each() {
    let dir = temp_dir("watch-mariadb-bad");
    let run_db = dir.join("watch.db");
    let run_db = run_db.to_str().unwrap();
    let server = start(&BINLOG);
    sql(&server, "", "CREATE DATABASE app");
    sql(
        &server,
        "app",
        "CREATE TABLE outbox (id bigint PRIMARY KEY); CREATE TABLE nokey (name text)",
    );
    let off = start(&[]);
    sql(&off, "", "CREATE DATABASE app");
    sql(&off, "app", "CREATE TABLE outbox (id bigint PRIMARY KEY)");
    let theirs = target(&server);
    let binlog_off = target(&off);
    let nowhere = format!(
        "mariadb:mysql://root@localhost/app?socket={}",
        dir.join("no-server.sock").display()
    );
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (&binlog_off, vec![], "log_bin is OFF"),
        (
            &theirs,
            vec!["--table", "nokey"],
            "table app.nokey, key column id",
        ),
        (&theirs, vec!["--table", "absent"], "table app.absent"),
        (&nowhere, vec![], "cannot connect to MariaDB"),
        (
            &theirs,
            vec!["--slot", "s"],
            "--slot and --create-slot are PostgreSQL's",
        ),
        (
            &theirs,
            vec!["--create-slot"],
            "--slot and --create-slot are PostgreSQL's",
        ),
        (
            &theirs,
            vec!["--server-id", "1"],
            "--server-id 1 is the server's own server_id",
        ),
        (
            "mariadb:mysql://root:secret@localhost/app",
            vec![],
            "put the password in MYSQL_PWD",
        ),
    ];
    for (target, extra, expected) in &cases {
        let mut args = vec!["watch", "--target", target, "--db", run_db];
        if !extra.contains(&"--table") {
            args.extend(["--table", "outbox"]);
        }
        args.extend(extra.iter().copied());
        let refused = watch(&args);
        common::assert_refused(refused, expected, &format!("{target} {extra:?}"));
    }
    // Each setting the truth needs, refused by name when it is not as needed.
    for (name, bad) in [
        ("binlog_format", "MIXED"),
        ("binlog_row_image", "MINIMAL"),
        ("binlog_row_metadata", "MINIMAL"),
    ] {
        sql(&server, "", &format!("SET GLOBAL {name} = {bad}"));
        let refused = watch(&[
            "watch", "--target", &theirs, "--table", "outbox", "--db", run_db,
        ]);
        let wanted = if name == "binlog_format" {
            "ROW"
        } else {
            "FULL"
        };
        sql(&server, "", &format!("SET GLOBAL {name} = {wanted}"));
        common::assert_refused(
            refused,
            &format!("{name} is {bad}: watch needs {name}={wanted}"),
            name,
        );
    }
    // The privileges docs/log-truth.md names are enough: a user with them
    // alone, its password from MYSQL_PWD; without REPLICATION SLAVE, or
    // without BINLOG MONITOR, one line and exit 2.
    sql(
        &server,
        "",
        "CREATE USER watcher@localhost IDENTIFIED BY 'pw'; \
         GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO watcher@localhost; \
         GRANT SELECT ON app.outbox TO watcher@localhost; \
         CREATE USER nodump@localhost IDENTIFIED BY 'pw'; \
         GRANT BINLOG MONITOR ON *.* TO nodump@localhost; \
         GRANT SELECT ON app.outbox TO nodump@localhost; \
         CREATE USER noend@localhost IDENTIFIED BY 'pw'; \
         GRANT REPLICATION SLAVE ON *.* TO noend@localhost; \
         GRANT SELECT ON app.outbox TO noend@localhost",
    );
    let as_user = |user: &str| {
        format!(
            "mariadb:mysql://{user}@localhost/app?socket={}",
            server.socket().display()
        )
    };
    let run_as = |user: &str| {
        let out = command(&[
            "watch",
            "--target",
            &as_user(user),
            "--table",
            "outbox",
            "--duration",
            "300ms",
            "--db",
            run_db,
        ])
        .env("MYSQL_PWD", "pw")
        .output()
        .expect("experiment watch runs");
        common::outcome(out)
    };
    let ended = run_as("watcher");
    common::assert_ended_empty(ended);
    for (user, expected) in [("nodump", "REPLICATION SLAVE"), ("noend", "BINLOG MONITOR")] {
        let refused = run_as(user);
        common::assert_refused(refused, expected, user);
    }
    // --duration ends a watch as Ctrl-C does; nothing committed: exit 0.
    let ended = watch(&[
        "watch",
        "--target",
        &theirs,
        "--table",
        "outbox",
        "--duration",
        "300ms",
        "--db",
        run_db,
    ]);
    common::assert_ended_empty(ended);
}

#[test]
fn a_replica_with_watchs_server_id_is_refused_in_one_line() {
    let dir = temp_dir("watch-mariadb-id");
    let server = start(&BINLOG);
    sql(&server, "", "CREATE DATABASE app");
    sql(
        &server,
        "app",
        "CREATE TABLE outbox (id bigint PRIMARY KEY)",
    );
    // A replica holding its dump open with server id 77, registered as
    // MariaDB's own replicas are (COM_REGISTER_SLAVE, then the dump).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let replica = runtime.block_on(async {
        let conn = mysql_async::Conn::new(server.opts(None)).await.unwrap();
        conn.get_binlog_stream(mysql_async::BinlogStreamRequest::new(77))
            .await
            .unwrap()
    });
    let listed = sql(&server, "", "SHOW SLAVE HOSTS");
    assert!(listed.starts_with("77\t"), "{listed}");
    // watch reads the log in rounds, each a dump registered again: with
    // the replica's id each round would end the replica's dump
    // (sql/sql_repl.cc, kill_zombie_dump_threads), so the id is refused
    // before the first, in one line naming --server-id.
    let db = dir.join("watch.db");
    assert_refused(
        watch(&[
            "watch",
            "--target",
            &target(&server),
            "--table",
            "outbox",
            "--server-id",
            "77",
            "--db",
            db.to_str().unwrap(),
        ]),
        "registered with server id 77 (SHOW SLAVE HOSTS): give watch its own --server-id",
        "a replica's id",
    );
    // The replica's dump was left alone: it still reads.
    let listed = sql(&server, "", "SHOW SLAVE HOSTS");
    assert!(listed.starts_with("77\t"), "{listed}");
    runtime.block_on(replica.close()).unwrap();
    // Another id is taken.
    let (code, _, rest) = stop_watch(start_watch(&[
        "watch",
        "--target",
        &target(&server),
        "--table",
        "outbox",
        "--server-id",
        "78",
        "--db",
        dir.join("other.db").to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{rest}");
}
