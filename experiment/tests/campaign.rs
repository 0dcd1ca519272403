//! `experiment sweep --target postgres`: a campaign of real runs on a real
//! PostgreSQL (started by the harness from the system's binaries; a machine
//! without them fails with the cluster's message, never skips): every
//! combination of `--vary` times every seed, each run's database kept under
//! `--out` and readable by `analyze`'s loader, the summary one row per
//! combination and poller; bad input refused with one line and exit 2.

mod common;

use serde_json::Value;

#[test]
fn a_postgres_campaign_keeps_every_runs_database_and_sums_up_each_combination_and_poller() {
    let scratch = common::temp_dir("campaign");
    let out = scratch.join("out");
    let o = common::experiment_ok(&[
        "sweep",
        "--target",
        "postgres",
        "--write-rate",
        "100",
        "--seeds",
        "1-2",
        "--duration",
        "3s",
        "--vary",
        "interval=500ms,1s",
        "--order-seed",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["target"], "postgres");
    assert_eq!(v["jobs"], 1, "one run at a time unless --jobs");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for combination in ["interval=500ms", "interval=1s"] {
        for seed in [1, 2] {
            let db = out.join(combination).join(format!("seed-{seed}.db"));
            assert!(db.exists(), "{}", db.display());
            let conn = analysis::load::open(&db).unwrap();
            let ids = rundb::read::run_ids(&conn).unwrap();
            assert_eq!(ids.len(), 1, "one run per database");
            let loaded = analysis::load::load(&conn, ids[0]).unwrap();
            assert_eq!(loaded.run.seed, Some(seed));
            let interval = if combination.ends_with("500ms") {
                500
            } else {
                1000
            };
            assert_eq!(loaded.run.interval_ms, interval);
            assert!(
                loaded.machine_load().is_some(),
                "the machine's load is kept"
            );
            let a = analysis::diff::analyze(&loaded.history);
            let text = analysis::report::render(&loaded, &a, &[], &[]);
            assert!(text.contains("load       "), "{text}");
        }
    }
    for r in runs {
        assert!(r["rows"].as_u64().unwrap() > 0, "{r}");
        assert!(r["flags"].is_array(), "{r}");
        // Each run split by the half of its time (docs/campaigns.md, "The
        // halves of a run"): the halves add up to the run.
        let sum = |v: &Value| v[0].as_u64().unwrap() + v[1].as_u64().unwrap();
        assert_eq!(sum(&r["rows_halves"]), r["rows"].as_u64().unwrap(), "{r}");
        for p in r["pollers"].as_array().unwrap() {
            assert_eq!(sum(&p["lost_halves"]), p["lost"].as_u64().unwrap(), "{r}");
        }
    }
    // The runs ran interleaved in the plan's seeded order (--order-seed 2
    // runs places 0, 2, 3, 1: the plan's `order`, as `sweep --plan` gives
    // it), the summary in the one-machine order (combinations, then seeds).
    let started: Vec<i64> = runs
        .iter()
        .map(|r| r["started_at_ms"].as_i64().unwrap())
        .collect();
    let mut by_start: Vec<usize> = (0..started.len()).collect();
    by_start.sort_by_key(|&i| started[i]);
    assert_eq!(by_start, [0, 2, 3, 1], "the runs ran interleaved");
    let order: Vec<(String, u64)> = runs
        .iter()
        .map(|r| {
            (
                r["combination"].as_str().unwrap().to_string(),
                r["seed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("interval=500ms".to_string(), 1),
            ("interval=500ms".to_string(), 2),
            ("interval=1s".to_string(), 1),
            ("interval=1s".to_string(), 2),
        ]
    );
    assert_eq!(v["schema"], 3);
    let summary = &v["summary"];
    let rows = summary["rows"].as_array().unwrap();
    // Two combinations times the default pollers (naive, compensated:k=1s).
    assert_eq!(rows.len(), 4, "{summary}");
    for row in rows {
        assert_eq!(row["unit"], "per 100,000 rows");
        let lost = &row["lost"];
        assert_eq!(lost["runs"], 2);
        let (min, median, max) = (
            lost["min"].as_f64().unwrap(),
            lost["median"].as_f64().unwrap(),
            lost["max"].as_f64().unwrap(),
        );
        assert!(0.0 <= min && min <= median && median <= max, "{row}");
    }
    assert_eq!(summary["runs"], 4);
    assert!(summary["flagged_runs"].as_u64().unwrap() <= 4);
    // Each cell against its reference (docs/campaigns.md): compensated
    // against naive in each combination (paired), and each poller at 1s
    // against itself at 500ms, the first value (independent).
    let comparisons = summary["comparisons"].as_array().unwrap();
    let designs: Vec<(&str, &str, &str)> = comparisons
        .iter()
        .map(|c| {
            (
                c["combination"].as_str().unwrap(),
                c["poller"].as_str().unwrap(),
                c["design"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        designs,
        [
            ("interval=500ms", "compensated:k=1s", "paired"),
            ("interval=1s", "naive", "independent"),
            ("interval=1s", "compensated:k=1s", "independent"),
            ("interval=1s", "compensated:k=1s", "paired"),
        ],
        "{summary}"
    );
    // Each cell's second half against its first, over its two runs.
    let halves = summary["halves"].as_array().unwrap();
    assert_eq!(halves.len(), rows.len(), "{summary}");
    assert!(
        halves
            .iter()
            .all(|c| c["design"] == "halves" && c["runs"] == 2),
        "{summary}"
    );
    // Two runs a side: each difference has its interval, p value and finding.
    for c in comparisons {
        let d = &c["difference"];
        let (lo, hi) = (
            d["ci95"][0].as_f64().unwrap(),
            d["ci95"][1].as_f64().unwrap(),
        );
        assert!(
            lo <= hi && (0.0..=1.0).contains(&d["p"].as_f64().unwrap()),
            "{c}"
        );
        assert!(
            ["differs", "inconclusive"].contains(&c["finding"].as_str().unwrap()),
            "{c}"
        );
    }
}

#[test]
fn bad_campaign_input_is_one_line_and_exit_2() {
    let scratch = common::temp_dir("campaign-bad");
    let out = scratch.join("out");
    let out = out.to_str().unwrap();
    let base = ["sweep", "--target", "postgres", "--duration", "3s"];
    for more in [
        &["--seeds", "1-2", "--out", out, "--vary", "no-such-flag=1,2"][..],
        &["--seeds", "5-1", "--out", out],
        &["--seeds", "1-2"],
        &["--out", out],
        &["--seeds", "1", "--out", out, "--vary", "seed=1,2"],
        &[
            "--seeds",
            "1",
            "--out",
            out,
            "--vary",
            "schema=mastodon,nosuch",
        ],
        &["--seeds", "1", "--out", out, "--db", "x.db"],
        &["--seeds", "1-2", "--out", out, "--equivalence-margin", "0"],
        &["--seeds", "1-2", "--out", out, "--equivalence-margin", "-3"],
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(more);
        let o = common::experiment(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
    assert!(
        !scratch.join("out").exists(),
        "nothing is run or created before every run is checked"
    );
    // The simulator's sweep varies seeds only, in no order, and compares
    // nothing against a margin.
    for more in [
        &["--vary", "interval=1s,2s"][..],
        &["--equivalence-margin", "1"],
        &["--order-seed", "3"],
    ] {
        let mut args = vec!["sweep", "--seeds", "1"];
        args.extend_from_slice(more);
        let o = common::experiment(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}
