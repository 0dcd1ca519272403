//! `experiment watch --metrics ADDR` scraped by a real Prometheus (Debian's
//! `prometheus` package), and `--max-slot-lag` on a slot watch made and on
//! the user's own (left as it was). The user's database is a throwaway
//! cluster with `wal_level = logical`, as in `tests/watch.rs`.

use std::time::Duration;

mod common;
use common::their_db::TheirDb;
use common::{
    assert_refused, free_port, http_get, poll, start_watch, stop_watch, temp_dir, wait_watch, watch,
};

/// `text` percent-encoded for a URL's query.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_-.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A Prometheus server the test started, stopped when dropped.
struct Prometheus {
    child: std::process::Child,
    addr: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts Debian's `prometheus` on a free loopback port, scraping
    /// `target` every second, and waits (bounded) until it is ready.
    fn start(dir: &std::path::Path, target: &str) -> Prometheus {
        let found = std::process::Command::new("prometheus")
            .arg("--version")
            .output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "this test needs Prometheus: the `prometheus` binary is not on PATH \
             (Debian: apt-get install -y prometheus)"
        );
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: snowleak\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        let prometheus = Prometheus { child, addr };
        let ready = poll(Duration::from_secs(60), || {
            http_get(&prometheus.addr, "/-/ready").filter(|(head, _)| head.contains(" 200 "))
        });
        assert!(
            ready.is_some(),
            "prometheus not ready within 60 s: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        prometheus
    }

    /// The value of the instant query `query`, if it has one sample.
    fn query(&self, query: &str) -> Option<String> {
        let (_, body) = http_get(
            &self.addr,
            &format!("/api/v1/query?query={}", encode(query)),
        )?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        let result = json["data"]["result"].as_array()?;
        if result.len() != 1 {
            return None;
        }
        Some(result[0]["value"][1].as_str()?.to_string())
    }
}

#[test]
fn prometheus_scrapes_the_naive_relays_lost_row_from_watch() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-metrics");
    let out = dir.join("naive.csv");
    let run_db = dir.join("watch.db");
    let admin = db.session();
    db.exec(
        &admin,
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
    );
    std::fs::write(&out, "").unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let prometheus = Prometheus::start(&dir, &metrics);
    let (child, stderr) = start_watch(&[
        "watch",
        "--target",
        &db.target(),
        "--table",
        "outbox",
        "--slot",
        "metrics_watch",
        "--create-slot",
        "--delivered",
        &format!("naive={}", out.display()),
        "--metrics",
        &metrics,
        "--db",
        run_db.to_str().unwrap(),
    ]);
    // The naive relay (`id > highest read`) loses 4: writer a holds it while
    // b commits 5 and the relay reads 5; then a commits 4, b 6, the relay 6.
    let (a, b) = (db.session(), db.session());
    db.exec(&a, "BEGIN; INSERT INTO outbox VALUES (4, 'held')");
    db.exec(&b, "INSERT INTO outbox VALUES (5, 'e')");
    common::append_ids(&out, &[5]);
    db.exec(&a, "COMMIT");
    db.exec(&b, "INSERT INTO outbox VALUES (6, 'f')");
    common::append_ids(&out, &[6]);

    let lost = poll(Duration::from_secs(90), || {
        prometheus
            .query("snowleak_rows_lost_total{consumer=\"naive\"}")
            .filter(|v| v == "1")
    });
    // watch's own exposition, as Prometheus read it.
    let (head, body) = http_get(&metrics, "/metrics").expect("watch serves /metrics");
    let delivered = prometheus.query("snowleak_rows_delivered_total{consumer=\"naive\"}");
    let committed = prometheus.query("snowleak_rows_committed_total");
    let retained = prometheus.query("snowleak_slot_retained_bytes");
    drop(prometheus);
    let (code, stdout, stderr) = stop_watch((child, stderr));
    assert_eq!(
        lost.as_deref(),
        Some("1"),
        "Prometheus never read 1 lost row of naive\n{body}\n{stdout}\n{stderr}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    assert!(
        body.contains("# TYPE snowleak_rows_lost_total counter\n"),
        "{body}"
    );
    assert!(
        body.contains("snowleak_rows_lost_total{consumer=\"naive\"} 1\n"),
        "{body}"
    );
    assert!(
        body.contains("# TYPE snowleak_slot_retained_bytes gauge\n"),
        "{body}"
    );
    assert!(
        body.contains("# TYPE snowleak_slot_read_position_bytes gauge\n"),
        "{body}"
    );
    assert_eq!(delivered.as_deref(), Some("2"), "{body}");
    assert_eq!(committed.as_deref(), Some("3"), "{body}");
    assert!(retained.is_some(), "{body}");
    assert_eq!(code, 1, "the relay lost a row: exit 1\n{stdout}\n{stderr}");
    // The live line said it too, as it turned invalid.
    assert!(
        stderr.lines().any(|l| l.starts_with("watch: naive: ")
            && l.contains("1 lost so far, invalid so far")),
        "{stderr}"
    );
    assert!(
        db.slot_names(&admin).is_empty(),
        "the slot watch made is gone"
    );
}

#[test]
fn past_max_slot_lag_watch_drops_the_slot_it_made_and_exits_2_in_one_line() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-slot-lag");
    let run_db = dir.join("watch.db");
    let admin = db.session();
    db.exec(
        &admin,
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
    );
    let watching = start_watch(&[
        "watch",
        "--target",
        &db.target(),
        "--table",
        "outbox",
        "--slot",
        "lag_watch",
        "--create-slot",
        "--max-slot-lag",
        "64KiB",
        "--db",
        run_db.to_str().unwrap(),
    ]);
    let mut watching = watching;
    // Rows (about 100 KiB of WAL a batch) until watch ends, bounded.
    let mut next = 0;
    let ended = poll(Duration::from_secs(120), || {
        db.exec(
            &admin,
            &format!(
                "INSERT INTO outbox SELECT g, repeat('x', 50) FROM generate_series({}, {}) g",
                next + 1,
                next + 1000
            ),
        );
        next += 1000;
        watching.0.try_wait().unwrap()
    });
    assert!(ended.is_some(), "watch still runs past 120 s of inserts");
    let (code, stdout, stderr) = wait_watch(watching);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("replication slot 'lag_watch' keeps ")
            && errors[0].contains("more than --max-slot-lag 65536: watch drops the slot it made"),
        "{stderr}"
    );
    assert!(
        db.slot_names(&admin).is_empty(),
        "the slot watch made is gone"
    );
}

#[test]
fn past_max_slot_lag_watch_stops_and_leaves_the_users_slot_as_it_was() {
    let db = TheirDb::start();
    let dir = temp_dir("watch-slot-lag-theirs");
    let run_db = dir.join("watch.db");
    let admin = db.session();
    for sql in [
        "CREATE TABLE outbox (id bigint PRIMARY KEY, body text)",
        "SELECT pg_create_logical_replication_slot('theirs', 'test_decoding')",
    ] {
        db.exec(&admin, sql);
    }
    let mut watching = start_watch(&[
        "watch",
        "--target",
        &db.target(),
        "--table",
        "outbox",
        "--slot",
        "theirs",
        "--max-slot-lag",
        "64KiB",
        "--db",
        run_db.to_str().unwrap(),
    ]);
    let mut next = 0;
    let ended = poll(Duration::from_secs(120), || {
        db.exec(
            &admin,
            &format!(
                "INSERT INTO outbox SELECT g, repeat('x', 50) FROM generate_series({}, {}) g",
                next + 1,
                next + 1000
            ),
        );
        next += 1000;
        watching.0.try_wait().unwrap()
    });
    assert!(ended.is_some(), "watch still runs past 120 s of inserts");
    let (code, stdout, stderr) = wait_watch(watching);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0]
            .contains("more than --max-slot-lag 65536: watch stops; your slot is left as it was"),
        "{stderr}"
    );
    assert_eq!(
        db.slot_names(&admin),
        ["theirs"],
        "their slot is still there"
    );
}

#[test]
fn bad_metrics_and_slot_lag_flags_are_one_line() {
    let pg = "postgres:postgresql://nobody@/nowhere?host=/nonexistent";
    let base = ["watch", "--table", "t", "--slot", "s", "--target"];
    let with = |target: &str, extra: &[&str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.push(target);
        args.extend_from_slice(extra);
        watch(&args)
    };
    assert_refused(
        watch(&[
            "watch",
            "--table",
            "t",
            "--target",
            "mariadb:mysql://u@localhost/db",
            "--max-slot-lag",
            "1GiB",
        ]),
        "--max-slot-lag is PostgreSQL's",
        "mariadb",
    );
    assert_refused(
        with(pg, &["--max-slot-lag", "1GB"]),
        "bad --max-slot-lag '1GB'",
        "unit",
    );
    assert_refused(
        with(pg, &["--metrics", "localhost"]),
        "bad --metrics 'localhost'",
        "address",
    );
}
