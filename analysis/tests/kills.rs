//! A run killed with SIGKILL mid-way is still read by `analyze`: the report
//! says on its first line that the run is incomplete and covers what was
//! committed. The experiment runs in a child process (this test binary,
//! re-executed), so that it can be killed for real.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_DB: &str = "SNOWLEAK_KILLED_RUN_DB";

fn committed_requests(db: &Path) -> i64 {
    rusqlite::Connection::open(db)
        .and_then(|c| c.query_row("SELECT count(*) FROM requests", [], |r| r.get(0)))
        .unwrap_or(0)
}

#[cfg(unix)]
#[test]
fn a_killed_run_is_reported_as_incomplete() {
    if let Ok(db) = std::env::var(CHILD_DB) {
        // The child: a real-time run that only SIGKILL ends.
        common::experiment(&["--duration", "1h", "--interval", "100ms", "--db", &db]);
        unreachable!("the parent kills this run");
    }
    let dir = common::temp_dir("killed");
    let db = dir.join("run.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "a_killed_run_is_reported_as_incomplete",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD_DB, &db)
        .env("RUST_LOG", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while committed_requests(&db) < 20 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the child run commits requests"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let committed = committed_requests(&db);

    let out = common::run_bin(env!("CARGO_BIN_EXE_analyze"), &[db.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8_lossy(&out.stdout);
    let first = report.lines().next().unwrap_or_default();
    assert!(first.contains("INCOMPLETE"), "{first}");
    let json = common::analyze(&db);
    assert_eq!(json["run"]["complete"], false);
    let requests: u64 = json["pollers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(
        requests as i64, committed,
        "the report covers every committed request"
    );
}
