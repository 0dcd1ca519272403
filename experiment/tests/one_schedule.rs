//! Issue 13.3: one schedule for both clocks. A real run over loopback HTTP
//! and a virtual run with the same seed, the same start and the same faults
//! send the same requests: the same cycles and pages, failing the same way,
//! backing off and obeying `Retry-After` at the same moments, up to the send
//! jitter of real time (and the 20 ms round trip virtual time assumes).

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::Command;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("snowleak-sched-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn experiment(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_experiment"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the experiment binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One request as the schedule shaped it.
#[derive(Debug)]
struct Sent {
    cycle: i64,
    page: i64,
    http_status: Option<i64>,
    failed: bool,
    /// Send time from the run's first request.
    offset_ms: i64,
    wait_ms: i64,
}

fn requests(db: &Path) -> (i64, Vec<Sent>) {
    let conn = Connection::open(db).unwrap();
    let started: i64 = conn
        .query_row("SELECT started_at_ms FROM runs", [], |r| r.get(0))
        .unwrap();
    let mut st = conn
        .prepare(
            "SELECT cycle, page, http_status, error IS NOT NULL, sent_at_ms, wait_ms FROM requests ORDER BY id",
        )
        .unwrap();
    let rows: Vec<(i64, i64, Option<i64>, bool, i64, i64)> = st
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
    let first = rows.first().map_or(0, |r| r.4);
    let sent = rows
        .into_iter()
        .map(|r| Sent {
            cycle: r.0,
            page: r.1,
            http_status: r.2,
            failed: r.3,
            offset_ms: r.4 - first,
            wait_ms: r.5,
        })
        .collect();
    (started, sent)
}

#[test]
fn a_virtual_run_backs_off_and_waits_as_a_real_one_does() {
    let dir = temp_dir("equal");
    let (real_db, virtual_db) = (dir.join("real.db"), dir.join("virtual.db"));
    // One poller, so that the faults are drawn in the same order in both
    // clocks (the server draws per request as it arrives). Failures that cost
    // no time (503, and 429 with `Retry-After: 1`), so that only the
    // schedule decides when each request goes; a slow rate, so no back pages.
    let common = [
        "--duration",
        "8s",
        "--interval",
        "500ms",
        "--poller",
        "compensated:k=1s",
        "--set",
        "rate_per_s=2",
        "--faults",
        "5xx=30%,429=20%",
        "--seed",
        "11",
    ];
    let mut real = common.to_vec();
    real.extend(["--db", real_db.to_str().unwrap()]);
    experiment(&real);
    let (started, real) = requests(&real_db);
    // The virtual run starts where the real one did: the same ticks, the same timeline.
    let start = started.to_string();
    let mut virt = common.to_vec();
    virt.extend([
        "--clock",
        "virtual",
        "--start",
        &start,
        "--db",
        virtual_db.to_str().unwrap(),
    ]);
    experiment(&virt);
    let (_, virt) = requests(&virtual_db);

    let shape = |s: &[Sent]| -> Vec<(i64, i64, Option<i64>, bool, bool)> {
        s.iter()
            .map(|r| (r.cycle, r.page, r.http_status, r.failed, r.wait_ms > 0))
            .collect()
    };
    assert_eq!(
        shape(&real),
        shape(&virt),
        "the same requests, failing alike, held alike"
    );
    // The test is not vacuous: there was a Retry-After, and a backoff of two ticks or more.
    assert!(real.iter().any(|r| r.http_status == Some(429)));
    assert!(
        real.windows(2)
            .any(|w| w[0].failed && w[1].offset_ms - w[0].offset_ms >= 1000),
        "{real:?}"
    );
    // At the same moments, up to jitter (well under half an interval).
    for (r, v) in real.iter().zip(&virt) {
        assert!(
            (r.offset_ms - v.offset_ms).abs() < 250 && (r.wait_ms - v.wait_ms).abs() < 250,
            "real {r:?} virtual {v:?}"
        );
    }
}
