//! The `sweep` command end to end: a small sweep's JSON and database, and
//! bad input refused with one line.

mod common;

fn sweep(args: &[&str]) -> std::process::Output {
    common::run_bin(env!("CARGO_BIN_EXE_sweep"), args)
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
    }
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
    ] {
        let o = sweep(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
}
