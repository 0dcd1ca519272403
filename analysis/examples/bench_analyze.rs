//! Benchmark: analyze a run of about 10 million observations.
//!
//! ```text
//! # 1. write the database (once; about a minute in release)
//! cargo run --release -p analysis --example bench_analyze -- --generate /tmp/bench.db
//! # 2. time load + diff + JSON in-process, with peak RSS (VmHWM)
//! cargo run --release -p analysis --example bench_analyze -- /tmp/bench.db
//! # 3. or time the real binary, plots included
//! /usr/bin/time -v target/release/analyze /tmp/bench.db --json > /dev/null
//! ```
//!
//! Generation and measurement are separate processes so that the peak memory
//! measured is the analysis's alone. `--obs N` changes the size.

use analysis::synth::{SimSpec, simulate_to_db};
use analysis::{diff, json, load};
use std::path::PathBuf;
use std::time::Instant;

fn vm_hwm() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "unknown".into())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let generate = args.iter().any(|a| a == "--generate");
    let obs: f64 = args
        .iter()
        .position(|a| a == "--obs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000.0);
    let path = args
        .iter()
        .enumerate()
        .find(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--obs"))
        .map(|(_, a)| PathBuf::from(a))
        .unwrap_or_else(|| PathBuf::from("/tmp/snowleak-bench.db"));

    if generate {
        // Four pollers; per tick they return about rate × (k + 1 s) items each.
        let rate = 200.0;
        let policies = [
            "naive",
            "compensated:k=1s",
            "compensated:k=5s",
            "compensated:k=20s",
        ];
        let per_tick = rate * (1.0 + 2.0 + 6.0 + 21.0);
        let spec = SimSpec {
            ticks: (obs / per_tick).ceil() as i64,
            rate_per_s: rate,
            page_limit: 200,
            max_pages: 60,
            late_fraction: 0.02,
            max_late_ms: 8000,
            delete_fraction: 0.005,
            error_rate: 0.001,
            policies: policies.iter().map(|p| p.to_string()).collect(),
            ..SimSpec::default()
        };
        let _ = std::fs::remove_file(&path);
        let t = Instant::now();
        simulate_to_db(&path, &spec, true).expect("write the benchmark run");
        println!(
            "wrote {} ({} ticks) in {:.1} s",
            path.display(),
            spec.ticks,
            t.elapsed().as_secs_f64()
        );
        return;
    }

    let t0 = Instant::now();
    let conn = load::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let run = load::pick_run(&conn, &path, None).unwrap_or_else(|e| panic!("{e}"));
    let loaded = load::load(&conn, run).unwrap_or_else(|e| panic!("{e}"));
    let t_load = t0.elapsed();
    let t1 = Instant::now();
    let a = diff::analyze(&loaded.history);
    let t_diff = t1.elapsed();
    let t2 = Instant::now();
    let out = serde_json::to_string(&json::build(&loaded, &a, &[], None)).unwrap();
    let t_json = t2.elapsed();
    println!(
        "{} observations, {} requests, {} statuses; leaks {}, late arrivals and leaks {}",
        loaded.history.observations.len(),
        loaded.history.requests.len(),
        loaded.history.statuses.len(),
        a.leaks().count(),
        a.items.len()
    );
    println!(
        "load {:.2} s, diff {:.2} s, json {:.2} s ({} bytes), total {:.2} s; peak RSS (VmHWM) {}",
        t_load.as_secs_f64(),
        t_diff.as_secs_f64(),
        t_json.as_secs_f64(),
        out.len(),
        t0.elapsed().as_secs_f64(),
        vm_hwm()
    );
}
