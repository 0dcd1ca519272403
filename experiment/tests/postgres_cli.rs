//! Bad input for PostgreSQL targets: one line on stderr, exit status 2.

use std::process::Command;

mod common;
use common::temp_dir;

fn experiment_bin(args: &[&str]) -> (i32, String) {
    let out = common::experiment(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn xmin_elsewhere_is_refused_in_one_line() {
    let dir = temp_dir("xmin-elsewhere");
    let db = dir.join("run.db");
    for target in ["simulator", "mastodon:https://example.invalid"] {
        let (code, err) = experiment_bin(&[
            "--target",
            target,
            "--poller",
            "xmin",
            "--db",
            db.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: the xmin policy reads PostgreSQL's"),
            "{err}"
        );
    }
    assert!(!db.exists(), "nothing was recorded");
}

/// A PostgreSQL flag where it does nothing is refused, not ignored: on the
/// simulator and an API, the throwaway cluster's options on your own
/// database, and your own database's options on the throwaway cluster
/// (each refused before anything is started or connected to); and so is
/// `--start` in real time.
#[test]
fn postgres_flags_where_they_do_nothing_are_refused_in_one_line() {
    let dir = temp_dir("pg-flags-elsewhere");
    let db = dir.join("run.db");
    let own = "postgres:postgresql://u@localhost/db";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--writers", "3"],
            "--writers applies to --target postgres and --target mariadb only, not 'simulator'",
        ),
        (
            vec!["--schema", "outbox"],
            "--schema applies to --target postgres and --target mariadb only",
        ),
        (
            vec!["--write-rate", "10"],
            "--write-rate applies to --target postgres and --target mariadb only",
        ),
        (
            vec!["--pg-tail", "1%:1s"],
            "--pg-tail applies to --target postgres only",
        ),
        (
            vec!["--table", "posts"],
            "--table applies to --target postgres:URL and --target mariadb:URL only",
        ),
        (
            vec!["--id-column", "uid"],
            "--id-column applies to --target postgres:URL and --target mariadb:URL only",
        ),
        (
            vec!["--via", "http"],
            "--via applies to --target postgres only",
        ),
        (
            vec![
                "--target",
                "mastodon:https://example.invalid",
                "--writers",
                "3",
            ],
            "--writers applies to --target postgres and --target mariadb only, not 'mastodon:https://example.invalid'",
        ),
        (
            vec!["--target", "postgres", "--table", "posts"],
            "--table is for your own database",
        ),
        (
            vec!["--target", "postgres", "--id-column", "uid"],
            "--id-column is for your own database",
        ),
        (
            vec!["--target", own, "--table", "t", "--writers", "3"],
            "--writers shapes the throwaway cluster's writers",
        ),
        (
            vec!["--target", own, "--table", "t", "--schema", "outbox"],
            "--schema shapes the throwaway cluster's writers",
        ),
        (
            vec!["--target", own, "--table", "t", "--write-rate", "5"],
            "--write-rate shapes the throwaway cluster's writers",
        ),
        (
            vec!["--arrivals", "grid"],
            "--arrivals paces the writers of a database target (postgres, mariadb, misskey-ftt), not 'simulator'",
        ),
        (
            vec!["--target", own, "--table", "t", "--arrivals", "grid"],
            "--arrivals shapes the throwaway cluster's writers",
        ),
        (
            vec!["--target", "postgres", "--arrivals", "uniform"],
            "unknown --arrivals 'uniform'",
        ),
    ];
    for (args, expected) in cases {
        let mut all = args.clone();
        all.extend(["--duration", "2s", "--db", db.to_str().unwrap()]);
        let (code, err) = experiment_bin(&all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    assert!(!db.exists(), "nothing was recorded");
}

/// Starts `experiment ARGS --db DB` and waits until it logs that the run
/// started (Ctrl-C is handled from then on); returns the process and the rest
/// of its stderr, to be kept open while it runs (it logs there).
fn start_run(
    args: &[&str],
    db: &std::path::Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_experiment"))
        .args(args)
        .arg("--db")
        .arg(db)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("run started") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0,
            "the run ended before it started"
        );
    }
    (child, stderr)
}

/// A throwaway cluster with a table `posts (id bigserial, body text)` of three rows.
struct OwnDb {
    cluster: snowleak::servers::postgres::Cluster,
    runtime: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl OwnDb {
    fn start() -> OwnDb {
        let cluster = snowleak::servers::postgres::Cluster::start()
            .expect("these tests need PostgreSQL (initdb, pg_ctl)");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async {
            let (client, conn) = cluster
                .config()
                .connect(tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            client
                .batch_execute(
                    "CREATE TABLE posts (id bigserial PRIMARY KEY, body text);
                     INSERT INTO posts (body) VALUES ('a'), ('b'), ('c');
                     CREATE ROLE stranger LOGIN;",
                )
                .await
                .unwrap();
            client
        });
        OwnDb {
            cluster,
            runtime,
            client,
        }
    }

    fn target(&self) -> String {
        format!(
            "postgres:postgresql://postgres@/postgres?host={}",
            self.cluster.dir().display()
        )
    }

    fn sql(&self, sql: &str) -> i64 {
        self.runtime
            .block_on(self.client.query_one(sql, &[]))
            .unwrap()
            .get(0)
    }
}

#[test]
fn your_own_table_is_polled_read_only_with_commit_timestamp_truth() {
    let own = OwnDb::start();
    let dir = temp_dir("own");
    let db = dir.join("run.db");
    let relations = own.sql("SELECT count(*) FROM pg_class");
    // Wait for the run to start (its log line), then commit rows while it polls.
    let (mut child, mut stderr) = start_run(
        &[
            "--target",
            &own.target(),
            "--table",
            "posts",
            "--duration",
            "3s",
            "--poller",
            "naive",
            "--poller",
            "naive",
            "--limit",
            "1000",
        ],
        &db,
    );
    for n in 0..20 {
        own.runtime
            .block_on(
                own.client
                    .execute("INSERT INTO posts (body) VALUES ($1)", &[&n.to_string()]),
            )
            .unwrap();
    }
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(status.success(), "{rest}");
    // Nothing was created, altered or written there.
    assert_eq!(own.sql("SELECT count(*) FROM pg_class"), relations);
    assert_eq!(own.sql("SELECT count(*) FROM posts"), 23);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    // Truth: the 20 rows committed during the run, from their commit timestamps.
    assert_eq!(
        one("SELECT count(*) FROM truth WHERE origin = 'commit-ts'"),
        20
    );
    // Both pollers returned all 23 rows.
    assert_eq!(
        one("SELECT count(DISTINCT status_id) FROM observations"),
        23
    );
    let config: String = conn
        .query_row("SELECT config FROM runs", [], |r| r.get(0))
        .unwrap();
    assert!(config.contains("\"table\":\"posts\""), "{config}");
    // `--limit 1000` (the control for paging): every request asked for 1000.
    assert!(one("SELECT count(*) FROM requests") > 0);
    assert_eq!(
        one("SELECT count(*) FROM requests WHERE page_limit != 1000"),
        0
    );
}

#[test]
fn bad_postgres_targets_get_one_line_and_exit_2() {
    let own = OwnDb::start();
    let dir = temp_dir("bad-own");
    let db = dir.join("run.db");
    let target = own.target();
    let nowhere = format!(
        "postgres:postgresql://postgres@/postgres?host={}",
        dir.display()
    );
    let stranger = target.replace("postgres@", "stranger@");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--target", &stranger, "--table", "posts"],
            "permission denied for table posts",
        ),
        (
            vec!["--target", &nowhere, "--table", "posts"],
            "cannot connect to PostgreSQL",
        ),
        (
            vec!["--target", &target, "--table", "nope"],
            "relation \"nope\" does not exist",
        ),
        (
            vec![
                "--target",
                &target,
                "--table",
                "posts",
                "--id-column",
                "uid",
            ],
            "column \"uid\" does not exist",
        ),
        (vec!["--target", &target], "needs --table"),
        (
            vec!["--target", &target, "--table", "posts", "--poller", "xmin"],
            "needs an xid8 column",
        ),
        (
            vec![
                "--target",
                "postgres:postgresql://u:secret@localhost/db",
                "--table",
                "t",
            ],
            "not in the URL",
        ),
        (
            vec!["--target", "postgres", "--schema", "oracle"],
            "unknown schema 'oracle'",
        ),
        (
            vec![
                "--target",
                "postgres",
                "--schema",
                "outbox",
                "--poller",
                "compensated:k=1s",
            ],
            "carry no time",
        ),
        (
            vec![
                "--target",
                "postgres",
                "--schema",
                "snowflake",
                "--retain",
                "3",
            ],
            "--retain applies to --target mariadb and --target postgres --schema partitioned \
             or partitioned-snowflake only, not --schema snowflake",
        ),
    ];
    for (args, expected) in cases {
        let mut all = args.clone();
        if !all.contains(&"--poller") {
            all.extend(["--poller", "naive"]);
        }
        all.extend(["--duration", "2s", "--db", db.to_str().unwrap()]);
        let (code, err) = experiment_bin(&all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(
            !err.contains("secret"),
            "the password is never echoed: {err}"
        );
    }
}

#[test]
fn ctrl_c_ends_the_run_cleanly_and_removes_the_cluster() {
    let dir = temp_dir("ctrl-c");
    let db = dir.join("run.db");
    let (mut child, _stderr) = start_run(
        &[
            "--target",
            "postgres",
            "--duration",
            "1h",
            "--poller",
            "naive",
            "--poller",
            "xmin",
            "--write-rate",
            "50",
        ],
        &db,
    );
    let prefix = format!("snowleak-pg-{}-", child.id());
    let clusters = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .count()
    };
    assert_eq!(clusters(), 1, "the run's cluster exists while it runs");
    common::signal(&child, "-INT");
    let status = child.wait().unwrap();
    assert!(status.success());
    assert_eq!(clusters(), 0, "the cluster is stopped and removed");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (complete, reason): (i64, String) = conn
        .query_row("SELECT complete, end_reason FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((complete, reason.as_str()), (1, "interrupted"));
}

#[test]
fn a_server_that_goes_away_gives_failed_requests_and_a_clean_end() {
    let own = OwnDb::start();
    let dir = temp_dir("gone");
    let db = dir.join("run.db");
    let (mut child, _stderr) = start_run(
        &[
            "--target",
            &own.target(),
            "--table",
            "posts",
            "--duration",
            "3s",
            "--poller",
            "naive",
            "--interval",
            "200ms",
        ],
        &db,
    );
    // The server goes away mid-run (stopped, its directory removed).
    drop(own);
    let status = child.wait().unwrap();
    assert!(status.success());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(one("SELECT complete FROM runs"), 1, "a clean end");
    assert!(one("SELECT count(*) FROM requests WHERE error IS NOT NULL") > 0);
}

#[test]
fn wrong_credentials_get_one_line_and_the_password_is_never_shown() {
    let own = OwnDb::start();
    // A role that must give its password (scram), the rest stays trusted.
    let hba = own.cluster.dir().join("data/pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("local all checked scram-sha-256\n{rules}")).unwrap();
    own.sql("SELECT pg_reload_conf()::int::bigint");
    own.runtime
        .block_on(own.client.batch_execute(
            "CREATE ROLE checked LOGIN PASSWORD 'right-one'; GRANT SELECT ON posts TO checked",
        ))
        .unwrap();
    let dir = temp_dir("credentials");
    let target = own.target().replace("postgres@", "checked@");
    let run = |password: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_experiment"))
            .args(["--target", &target, "--table", "posts", "--poller", "naive"])
            .args(["--duration", "1s", "--db"])
            .arg(dir.join("run.db"))
            .env("PGPASSWORD", password)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run("wrong-one");
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(!err.contains("wrong-one"), "{err}");
    let (code, err) = run("right-one");
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("right-one"), "{err}");
    let stored: String = rusqlite::Connection::open(dir.join("run.db"))
        .unwrap()
        .query_row("SELECT config FROM runs", [], |r| r.get(0))
        .unwrap();
    assert!(stored.contains("\"password\":\"<redacted>\"") && !stored.contains("right-one"));
}

/// `experiment serve --backend postgres --record`: an API client is recorded
/// as with the simulator, each status it was served is in the truth the
/// writers' commits give, and the read-only role the banner names can read
/// the table and nothing more (issue 23, items 1 and 7).
#[test]
fn serve_on_postgres_records_its_clients_and_offers_a_read_only_role() {
    let dir = temp_dir("serve-record-pg");
    let db = dir.join("rec.db");
    let mut child = Stopped(
        Command::new(env!("CARGO_BIN_EXE_experiment"))
            .args(["serve", "--backend", "postgres", "--addr", "127.0.0.1:0"])
            .arg("--record")
            .arg(&db)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = std::io::BufReader::new(child.0.stdout.take().unwrap());
    let (mut api, mut reader) = (None, None);
    while reader.is_none() {
        let mut line = String::new();
        assert!(
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0,
            "the server ended before it printed its banner"
        );
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["mastodon", url] => api = Some(url.to_string()),
            ["read-only", "SQL", url, ..] => reader = Some(url.to_string()),
            _ => {}
        }
    }
    let (api, reader) = (api.unwrap(), reader.unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let served: Vec<String> = runtime.block_on(async {
        let http = snowleak::api::http_client(std::time::Duration::from_secs(10)).unwrap();
        let mut served = Vec::new();
        let mut since: Option<String> = None;
        // Until the writers have committed something and it was served.
        while served.len() < 3 {
            let mut url = format!("{api}?limit=40");
            if let Some(s) = &since {
                url.push_str(&format!("&since_id={s}"));
            }
            let body: serde_json::Value = http
                .get(url)
                .bearer_auth("a-token")
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let ids: Vec<String> = body
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].as_str().unwrap().to_string())
                .collect();
            since = ids.first().cloned().or(since);
            served.extend(ids);
        }
        let config: tokio_postgres::Config = reader.parse().unwrap();
        let (client, conn) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        let n: i64 = client
            .query_one("SELECT count(*) FROM statuses", &[])
            .await
            .unwrap()
            .get(0);
        assert!(n > 0, "the role reads the table");
        let refused = client
            .batch_execute("INSERT INTO statuses (account_id, text) VALUES (1, 'x')")
            .await
            .unwrap_err();
        assert!(
            format!("{refused:?}").contains("read-only transaction"),
            "{refused:?}"
        );
        served
    });
    common::signal(&child.0, "-INT");
    assert!(child.0.wait().unwrap().success());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let recorded: Vec<String> = conn
        .prepare("SELECT id FROM requests ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .flat_map(|id| rundb::read::observed(&conn, id.unwrap()).unwrap())
        .collect();
    assert_eq!(
        recorded, served,
        "recorded exactly what the client was served"
    );
    let in_truth = |id: &String| -> bool {
        conn.query_row("SELECT count(*) FROM truth WHERE id = ?1", [id], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap()
            > 0
    };
    assert!(
        recorded.iter().all(in_truth),
        "every status served is in the truth"
    );
    let (target, complete): (String, i64) = conn
        .query_row("SELECT target, complete FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((target.as_str(), complete), ("postgres-serve", 1));
}

/// A child process killed if the test ends early (a failed assertion), so
/// that no server outlives its test.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn simulator_flags_on_the_postgres_backend_are_refused_in_one_line() {
    for (args, expected) in [
        (
            vec!["serve", "--backend", "postgres", "--profile", "mastodon"],
            "--profile configures the simulator and does not apply to --backend postgres",
        ),
        (
            vec!["serve", "--backend", "postgres", "--truth", "t.db"],
            "--truth is the simulator's",
        ),
        (
            // The judge on PostgreSQL judges a table against its log (docs/log-truth.md).
            vec!["judge", "--log", "postgres", "--", "true"],
            "--log postgres judges a table against PostgreSQL's log: give --table T",
        ),
        (
            // One name per face: --backend names what serves a timeline, --log
            // the database whose log a table is judged against.
            vec![
                "judge",
                "--backend",
                "postgres",
                "--table",
                "t",
                "--",
                "true",
            ],
            "a table judged against PostgreSQL's log is `--log postgres --table T`",
        ),
        (
            vec![
                "judge",
                "--backend",
                "mariadb",
                "--table",
                "t",
                "--",
                "true",
            ],
            "`experiment judge --log mariadb --table T -- COMMAND`",
        ),
        (
            vec!["serve", "--backend", "mariadb"],
            "a table judged against MariaDB's binary log is `experiment judge --log mariadb",
        ),
        (
            vec!["judge", "--backend", "misskey-ftt", "--", "true"],
            "for misskey-ftt, run `experiment serve --backend misskey-ftt --record FILE.db`",
        ),
        (
            vec![
                "judge",
                "--log",
                "mariadb",
                "--backend",
                "postgres",
                "--",
                "true",
            ],
            "--backend postgres names what serves a timeline, and --log mariadb judges",
        ),
        (
            vec!["judge", "--log", "mysql", "--", "true"],
            "unknown log 'mysql': expected postgres or mariadb",
        ),
    ] {
        let (code, err) = experiment_bin(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// `--schema partitioned`: the events table `PARTITION BY RANGE (id)`, a
/// retention job that detaches and drops the oldest partition every 500 ms
/// keeping 3, one writer (commits in ID order) and a poller that lags (every
/// 2 s). Every truth row of a dropped range is marked deleted when its drop
/// was sent (`partition_drops`), and the rows the poller never returned are
/// exactly the dropped rows it never read, none of which any of its requests
/// could have returned before its drop (our own SQL).
#[test]
fn the_partitioned_schema_drops_partitions_and_a_lagging_poller_loses_exactly_those() {
    let dir = temp_dir("pg-partitioned");
    let db = dir.join("run.db");
    let out = common::experiment_ok(&[
        "--target",
        "postgres",
        "--schema",
        "partitioned",
        "--duration",
        "8s",
        "--interval",
        "2s",
        "--poller",
        "naive",
        "--writers",
        "1",
        "--write-rate",
        "100",
        "--partition-every",
        "500ms",
        "--retain",
        "3",
        "--db",
        db.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("retention: "), "{stdout}");
    assert!(!stdout.contains("failed (last:"), "{stdout}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    let drops = one("SELECT COUNT(*) FROM partition_drops WHERE run_id = 1");
    assert!(drops >= 5, "the job dropped partitions ({drops})");
    assert_eq!(
        one(
            "SELECT COUNT(*) FROM partition_drops WHERE run_id = 1 AND partition = 'p0' AND lo_id = 0"
        ),
        1,
        "the first partition went first"
    );
    // Every truth row in a dropped range is marked deleted at that drop, and no other.
    assert_eq!(
        one(
            "SELECT COUNT(*) FROM truth t WHERE t.run_id = 1 AND t.deleted_at_ms IS NOT \
             (SELECT d.sent_at_ms FROM partition_drops d WHERE d.run_id = 1 \
              AND CAST(t.id AS INTEGER) >= d.lo_id AND CAST(t.id AS INTEGER) < d.hi_id)"
        ),
        0
    );
    // Rows visible before the poller's last request that it never returned.
    let lost: Vec<(i64, i64, Option<i64>)> = {
        let mut st = conn
            .prepare(
                "SELECT CAST(t.id AS INTEGER), t.visible_at_ms, t.deleted_at_ms FROM truth t \
                 WHERE t.run_id = 1 AND NOT EXISTS (SELECT 1 FROM observations o \
                 JOIN requests r ON r.id = o.request_id WHERE r.run_id = 1 AND o.status_id = t.id) \
                 AND t.visible_at_ms <= (SELECT MAX(sent_at_ms) FROM requests WHERE run_id = 1) \
                 ORDER BY 1",
            )
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert!(!lost.is_empty(), "the lagging poller met a drop");
    for (id, visible_at, deleted_at) in &lost {
        let deleted_at = deleted_at.unwrap_or_else(|| panic!("row {id} lost but never dropped"));
        // No request sent after the row was visible and answered before its
        // drop had it in its window on a short page.
        let could_have = conn
            .query_row(
                "SELECT COUNT(*) FROM requests r WHERE r.run_id = 1 AND r.error IS NULL \
                 AND r.sent_at_ms >= ?1 AND r.received_at_ms < ?2 AND r.items < r.page_limit \
                 AND (r.since_id IS NULL OR CAST(r.since_id AS INTEGER) < ?3) \
                 AND (r.before_id IS NULL OR CAST(r.before_id AS INTEGER) > ?3)",
                rusqlite::params![visible_at, deleted_at, id],
                |r| r.get::<_, i64>(0),
            )
            .unwrap();
        assert_eq!(could_have, 0, "row {id} was readable before its drop");
    }
    // The lost rows are exactly the dropped rows the poller never read.
    let dropped_unread: Vec<i64> = {
        let mut st = conn
            .prepare(
                "SELECT CAST(t.id AS INTEGER) FROM truth t WHERE t.run_id = 1 \
                 AND t.deleted_at_ms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM observations o \
                 JOIN requests r ON r.id = o.request_id WHERE r.run_id = 1 AND o.status_id = t.id) \
                 ORDER BY 1",
            )
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let lost_ids: Vec<i64> = lost.iter().map(|l| l.0).collect();
    assert_eq!(lost_ids, dropped_unread);
}
