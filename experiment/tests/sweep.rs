//! `experiment sweep` end to end: a small sweep's JSON and database, bad
//! input refused with one line, and the in-memory judging of a seed's run
//! (what the sweep does) against the run database's (what `analyze` does).

use analysis::diff::analyze;
use analysis::history::History;
use snowleak::cmd::sweep::{history_of, run_args};

mod common;

fn sweep(args: &[&str]) -> std::process::Output {
    let mut all = vec!["sweep"];
    all.extend_from_slice(args);
    common::experiment(&all)
}

/// The same run through run.db: recorded by the experiment, read by `analyze`'s loader.
fn history_through_sqlite(base: &[String], seed: u64, db: &std::path::Path) -> History {
    let mut args: Vec<String> = base.to_vec();
    args.extend(["--db".to_string(), db.display().to_string()]);
    let summary = snowleak::run_experiment(run_args(&args, seed).unwrap()).unwrap();
    let conn = analysis::load::open(db).unwrap();
    analysis::load::load(&conn, summary.run_id).unwrap().history
}

/// Issue 15: the sweep's in-memory path gives exactly the history the
/// SQLite path gives (statuses in the same order, the same requests and
/// observations, the same truth), so every leak, miss and duplicate it
/// counts is the one `analyze` counts. Five policies, faults (failed
/// requests, reordered and truncated pages) and small pages (back-paging
/// and overflow), on a few seeds.
#[test]
fn in_memory_judging_is_the_sqlite_path() {
    let dir = common::temp_dir("sweep-mem");
    let mut base: Vec<String> = ["--duration", "5m", "--limit", "20", "--max-back-pages", "3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for p in snowleak::cmd::sweep::DEFAULT_POLLERS {
        base.extend(["--poller".to_string(), p.to_string()]);
    }
    let faulty: Vec<String> = base
        .iter()
        .cloned()
        .chain(["--faults".into(), "5xx=3%,reorder=2%,truncate=2%".into()])
        .collect();
    for (seed, base) in [(1, &base), (2, &base), (3, &faulty)] {
        let memory = history_of(base, seed).unwrap();
        let db = dir.join(format!("seed-{seed}.db"));
        let stored = history_through_sqlite(base, seed, &db);
        assert_eq!(memory.statuses, stored.statuses, "seed {seed}");
        assert_eq!(memory.id_times, stored.id_times, "seed {seed}");
        assert_eq!(memory.truth, stored.truth, "seed {seed}");
        assert_eq!(memory.requests.len(), stored.requests.len(), "seed {seed}");
        for (a, b) in memory.requests.iter().zip(&stored.requests) {
            assert_eq!(a, b, "seed {seed}");
        }
        assert_eq!(memory.observations, stored.observations, "seed {seed}");
        assert_eq!(
            (memory.pollers.clone(), memory.interval_ms),
            (stored.pollers.clone(), stored.interval_ms)
        );
        let (m, s) = (analyze(&memory), analyze(&stored));
        for (a, b) in m.pollers.iter().zip(&s.pollers) {
            assert_eq!(a, b, "seed {seed}");
        }
        assert!(
            s.pollers[0].leaks > 0,
            "seed {seed}: naive leaks, so the comparison has leaks to compare"
        );
        assert!(s.pollers.iter().any(|p| p.duplicates > 0));
        if seed == 3 {
            assert!(
                stored.requests.iter().any(|r| r.failed),
                "faults fail requests"
            );
        }
        assert!(stored.requests.iter().any(|r| r.overflow || r.page > 0));
    }
}

#[test]
fn a_small_sweep_prints_the_documented_json_and_keeps_only_summaries() {
    // The sweep makes its --out directory itself: give it one inside a scratch directory.
    let scratch = common::temp_dir("sweep-cli");
    let dir = scratch.join("out");
    let out = dir.to_str().unwrap();
    let o = sweep(&[
        "--seeds",
        "1-3",
        "--duration",
        "2m",
        "--poller",
        "naive",
        "--poller",
        "compensated:k=2m",
        "--poller",
        "adaptive",
        "--json",
        "--out",
        out,
        "--jobs",
        "2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let pollers = v["pollers"].as_array().unwrap();
    assert_eq!(pollers.len(), 3);
    for p in pollers {
        for field in [
            "name",
            "seeds",
            "seeds_without_leaks",
            "leaks_mean",
            "leaks_ci95",
            "duplicates_per_new",
            "requests_per_minute",
            "detection_delay_ms_p99",
            "oracle_ratio",
        ] {
            assert!(p.get(field).is_some(), "{field} in {p}");
        }
        assert_eq!(p["seeds"], 3);
        let ci = p["leaks_ci95"].as_array().unwrap();
        let mean = p["leaks_mean"].as_f64().unwrap();
        assert!(ci[0].as_f64().unwrap() <= mean && mean <= ci[1].as_f64().unwrap());
        // Issue 34: the loss rate over runs, with its bootstrap interval.
        let l = &p["lost_per_100k"];
        assert_eq!(l["runs"], 3, "{l}");
        let f = |k: &str| l[k].as_f64().unwrap_or_else(|| panic!("{k} in {l}"));
        let (lo, hi) = (
            l["ci95"][0].as_f64().unwrap(),
            l["ci95"][1].as_f64().unwrap(),
        );
        assert!(
            f("min") <= lo && lo <= f("mean") && f("mean") <= hi && hi <= f("max"),
            "{l}"
        );
        assert!(f("min") <= f("median") && f("median") <= f("max"), "{l}");
    }
    assert!(
        pollers[0]["lost_per_100k"]["mean"].as_f64().unwrap() > 0.0,
        "naive leaks"
    );
    // Waiting two minutes behind the tick catches everything in two minutes.
    assert_eq!(pollers[1]["seeds_without_leaks"], 3);
    assert!(
        pollers[1]["duplicates_per_new"].as_f64().unwrap()
            > pollers[2]["duplicates_per_new"].as_f64().unwrap()
    );
    // Only the summary table is kept: no run database is left behind.
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".db"))
        .collect();
    assert_eq!(files, vec!["sweep.db".to_string()]);
    let conn = rusqlite::Connection::open(dir.join("sweep.db")).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM seed_results", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 9);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        &["--seeds", "9-1"][..],
        &["--seeds", "1", "--poller", "compensated:k=fast"],
        &["--seeds", "1", "--profile", "friendster"],
        &["--seeds", "1", "--set", "no_such_knob=1"],
        &["--seeds", "1", "--timeline", "global"],
        &["--seeds", "1", "--profile", "misskey", "--timeline", "home"],
    ] {
        let o = sweep(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
}
