//! The machine's load with every real-time run (issue 34): a real
//! PostgreSQL run and a real-time simulator run keep `machine_load` in
//! `runs.config` with plausible values, `analyze` prints it in the header
//! and carries it in `--json`; a virtual run keeps none (its database
//! depends on its seed alone). A machine without PostgreSQL fails the first
//! test with the cluster's message; it never skips.

mod common;

use common::{analyze, experiment, run_bin, temp_dir};
use serde_json::Value;
use std::path::Path;

fn cores() -> u64 {
    std::thread::available_parallelism().unwrap().get() as u64
}

fn header(db: &Path) -> String {
    let out = run_bin(env!("CARGO_BIN_EXE_analyze"), &[db.to_str().unwrap()]);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What every real-time run keeps, whatever its target.
fn check_machine(m: &Value) {
    assert_eq!(m["cores"].as_u64(), Some(cores()), "{m}");
    let samples = m["samples"].as_array().unwrap();
    assert!(samples.len() >= 2, "the start and the end: {m}");
    for s in samples {
        assert!(s["load_avg_1m"].as_f64().unwrap() >= 0.0, "{s}");
        let steal = s["steal_share"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&steal), "{s}");
    }
    let wall = m["wall_ms"].as_u64().unwrap();
    assert!(wall >= 2_000, "{m}");
    assert!(
        m["harness_cpu_ms"].as_u64().unwrap() <= wall * cores(),
        "{m}"
    );
    let t = &m["ticks"];
    let ticks = t["ticks"].as_u64().unwrap();
    assert!(ticks >= 2, "{t}");
    assert!(t["late"].as_u64().unwrap() <= ticks, "{t}");
    assert_eq!(t["late_over_ms"], 10);
    let (p50, p99, max) = (
        t["p50_ms"].as_i64().unwrap(),
        t["p99_ms"].as_i64().unwrap(),
        t["max_ms"].as_i64().unwrap(),
    );
    assert!(0 <= p50 && p50 <= p99 && p99 <= max, "{t}");
}

#[test]
fn a_postgres_run_keeps_the_machines_load_and_the_writers_rate_and_analyze_shows_them() {
    let dir = temp_dir("machine-pg");
    let db = dir.join("run.db");
    experiment(&[
        "--target",
        "postgres",
        "--duration",
        "4s",
        "--write-rate",
        "100",
        // On a grid, the rate achieved cannot pass the rate asked by more
        // than the start's rounding; Poisson arrivals (the default) can, by chance.
        "--arrivals",
        "grid",
        "--db",
        db.to_str().unwrap(),
    ]);
    let report = analyze(&db);
    let m = &report["machine_load"];
    check_machine(m);
    let w = &m["writers"];
    assert_eq!(w["asked_per_s"].as_f64(), Some(100.0));
    let achieved = w["achieved_per_s"].as_f64().unwrap();
    assert!(achieved > 0.0 && achieved <= 110.0, "{w}");
    assert!(w["commits"].as_u64().unwrap() > 0, "{w}");
    let (p50, p99) = (
        w["commit_p50_ms"].as_i64().unwrap(),
        w["commit_p99_ms"].as_i64().unwrap(),
    );
    assert!(0 <= p50 && p50 <= p99, "{w}");
    assert!(m["flags"].is_array());

    let text = header(&db);
    // The header: everything above the pollers' table.
    let head: String = text.split("\npoller ").next().unwrap_or("").to_string();
    assert!(
        head.contains(&format!("load       {} cores", cores())),
        "{text}"
    );
    assert!(head.contains("ticks      "), "{text}");
    assert!(head.contains("/s of 100.0/s asked"), "{text}");
}

#[test]
fn a_real_time_simulator_run_keeps_the_load_without_writers_and_a_virtual_run_none() {
    let dir = temp_dir("machine-sim");
    let real = dir.join("real.db");
    experiment(&[
        "--duration",
        "3s",
        "--interval",
        "200ms",
        "--db",
        real.to_str().unwrap(),
    ]);
    let report = analyze(&real);
    check_machine(&report["machine_load"]);
    assert!(report["machine_load"]["writers"].is_null());
    assert!(header(&real).contains("ticks      "));

    let virt = dir.join("virtual.db");
    experiment(&[
        "--clock",
        "virtual",
        "--duration",
        "1m",
        "--db",
        virt.to_str().unwrap(),
    ]);
    let report = analyze(&virt);
    assert!(
        report["machine_load"].is_null(),
        "{}",
        report["machine_load"]
    );
    assert!(!header(&virt).contains("load       "));
    let conn = rusqlite::Connection::open(&virt).unwrap();
    let config: String = conn
        .query_row("SELECT config FROM runs", [], |r| r.get(0))
        .unwrap();
    assert!(!config.contains("machine_load"), "{config}");
}
