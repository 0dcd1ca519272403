//! A sweep planned once and run index by index (`experiment sweep ...
//! --plan DIR`, `sweep run DIR`, `sweep merge DIR`; docs/campaigns.md, "On a
//! cluster"): a seeded virtual sweep run in any order merges into the
//! summary `sweep` prints on one machine, byte for byte; a finished index
//! does nothing when run again, an unfinished attempt is replaced and a
//! task killed at any point loses no finished run; a merge lists what is
//! missing; bad input (another version, an index out of range, a runs
//! directory mixing plans) is one line and exit 2.

mod common;

use serde_json::Value;
use std::path::Path;
use std::process::Output;

const SWEEP: [&str; 8] = [
    "--seeds",
    "1-8",
    "--duration",
    "10m",
    "--poller",
    "naive",
    "--poller",
    "compensated:k=1s",
];

/// `experiment ARGS` without a scheduler's index in its environment.
fn experiment(args: &[&str]) -> Output {
    common::command(args)
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .expect("the experiment binary runs")
}

fn plan(dir: &Path, more: &[&str]) {
    let mut args = vec!["sweep"];
    args.extend_from_slice(&SWEEP);
    args.extend_from_slice(more);
    args.extend(["--plan", dir.to_str().unwrap()]);
    let o = experiment(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A PostgreSQL campaign of small runs (100 rows/s) planned in `dir`.
fn plan_postgres(dir: &Path, seeds: &str, duration: &str, more: &[&str]) {
    let mut args = vec!["sweep", "--target", "postgres", "--write-rate", "100"];
    args.extend(["--seeds", seeds, "--duration", duration]);
    args.extend_from_slice(more);
    args.extend(["--plan", dir.to_str().unwrap()]);
    let o = experiment(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn run(dir: &Path, index: usize) -> Output {
    experiment(&[
        "sweep",
        "run",
        dir.to_str().unwrap(),
        "--index",
        &index.to_string(),
    ])
}

fn merge(dir: &Path, json: bool) -> Output {
    let mut args = vec!["sweep", "merge", dir.to_str().unwrap()];
    if json {
        args.push("--json");
    }
    experiment(&args)
}

/// The bytes of a pretty-printed JSON object's top-level key `key`'s
/// value, from the key's line to the line before the next top-level key.
fn top_level<'a>(text: &'a str, key: &str) -> &'a str {
    let start = text
        .find(&format!("\n  \"{key}\": "))
        .unwrap_or_else(|| panic!("{key} in {text}"));
    let rest = &text[start + 1..];
    let end = rest[1..]
        .find("\n  \"")
        .map(|e| e + 1)
        .or_else(|| rest.find("\n}"))
        .unwrap();
    &rest[..end]
}

fn one_line_exit_2(o: &Output, says: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(says), "{says} in {err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn a_virtual_plan_run_in_any_order_merges_into_the_one_machine_summary_byte_for_byte() {
    let scratch = common::temp_dir("sweep-plan");
    let dir = scratch.join("plan");
    plan(&dir, &[]);
    let p: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    let runs = p["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8);
    let positions: Vec<u64> = runs
        .iter()
        .map(|r| r["position"].as_u64().unwrap())
        .collect();
    assert_ne!(
        positions,
        (0..8).collect::<Vec<_>>(),
        "a seeded random order"
    );
    let slurm = std::fs::read_to_string(dir.join("slurm.sh")).unwrap();
    assert!(slurm.contains("#SBATCH --array=0-7\n"), "{slurm}");
    assert!(slurm.contains("#SBATCH --exclusive\n"), "{slurm}");
    let job = std::fs::read_to_string(dir.join("job.yaml")).unwrap();
    assert!(job.contains("completionMode: Indexed"), "{job}");

    // Run by run, in an order of our own; one of them through the
    // scheduler's variables instead of --index.
    for index in [5, 2, 7, 0, 3, 6, 1] {
        let o = run(&dir, index);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let partial = merge(&dir, true);
    assert_eq!(partial.status.code(), Some(1), "a run is missing");
    let v: Value = serde_json::from_slice(&partial.stdout).unwrap();
    assert_eq!(v["missing"][0]["index"], 4, "{v}");
    let text = String::from_utf8(merge(&dir, false).stdout).unwrap();
    assert!(
        text.contains(&format!("sweep run {} --index N", dir.display())),
        "the merge says how to run the missing one: {text}"
    );
    assert_eq!(
        v["pollers"][0]["seeds"], 7,
        "the summary over the runs that finished"
    );
    let o = common::command(&["sweep", "run", dir.to_str().unwrap()])
        .env("SLURM_ARRAY_TASK_ID", "4")
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let merged = merge(&dir, true);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let merged = String::from_utf8(merged.stdout).unwrap();
    let mut args = vec!["sweep"];
    args.extend_from_slice(&SWEEP);
    let one = scratch.join("one");
    args.extend(["--out", one.to_str().unwrap(), "--json", "--no-plots"]);
    let single = experiment(&args);
    assert!(single.status.success());
    let single = String::from_utf8(single.stdout).unwrap();
    for key in [
        "schema",
        "seeds",
        "duration",
        "profile",
        "sets",
        "oracle_duplicates_per_new",
        "pollers",
    ] {
        assert_eq!(top_level(&merged, key), top_level(&single, key), "{key}");
    }
    let v: Value = serde_json::from_str(&merged).unwrap();
    assert_eq!(v["plan"]["finished"], 8);
    assert_eq!(v["missing"], Value::Array(Vec::new()));
    let machine = &v["machines"][0];
    for field in ["node", "host", "cpu_model", "kernel"] {
        assert!(
            !machine[field].as_str().unwrap().is_empty(),
            "{field}: {machine}"
        );
    }
    assert!(machine["cores"].as_u64().unwrap() >= 1);
    // Each run read the kernel's boot id; all eight ran in this boot.
    assert_eq!(machine["boots"], 1, "{machine}");
    assert_eq!(v["run_machines"].as_array().unwrap().len(), 8);
    assert_eq!(v["cells"][0]["machines"][0], machine["node"]);
    // One machine: no test of whether the machine matters.
    assert_eq!(v["machine_effect"], Value::Array(Vec::new()));
    let text = String::from_utf8(merge(&dir, false).stdout).unwrap();
    assert!(text.lines().nth(1).unwrap().ends_with("machines"), "{text}");
    assert!(text.contains("8 run(s) (0-7), load at most "), "{text}");
    assert!(text.contains(", one boot\n"), "{text}");
}

#[test]
fn a_finished_index_is_kept_an_unfinished_attempt_replaced_and_a_killed_task_loses_nothing() {
    let scratch = common::temp_dir("sweep-plan-retry");
    let dir = scratch.join("plan");
    plan(&dir, &[]);
    let runs = dir.join("runs");
    assert!(run(&dir, 0).status.success());
    let first = std::fs::read(runs.join("0.db")).unwrap();
    let again = run(&dir, 0);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to do"));
    assert_eq!(
        std::fs::read(runs.join("0.db")).unwrap(),
        first,
        "untouched"
    );

    // An attempt killed halfway on this host (a process that is gone)
    // left its aside file and a file that is no finished run.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let aside = runs.join(format!(".1.tmp-{}-{}.db", host.trim(), gone.id()));
    std::fs::write(&aside, b"half").unwrap();
    std::fs::write(runs.join("1.db"), b"not a database").unwrap();
    let v: Value = serde_json::from_slice(&merge(&dir, true).stdout).unwrap();
    let failed = v["failed"].as_array().unwrap();
    assert_eq!(failed[0]["index"], 1, "{v}");
    let o = run(&dir, 1);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!aside.exists(), "the dead attempt's file removed");

    // A task killed at whatever point it reached: its index is either
    // finished or absent, never half there, and the runs before it stay.
    let mut child = common::command(&["sweep", "run", dir.to_str().unwrap(), "--index", "2"])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .spawn()
        .unwrap();
    common::signal(&child, "-KILL");
    let _ = child.wait();
    let v: Value = serde_json::from_slice(&merge(&dir, true).stdout).unwrap();
    let finished: Vec<u64> = v["run_machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert!(finished.starts_with(&[0, 1]), "{finished:?}");
    assert!(v["failed"].as_array().unwrap().is_empty(), "{v}");
    assert!(run(&dir, 2).status.success());
    assert_eq!(
        std::fs::read(runs.join("0.db")).unwrap(),
        first,
        "still untouched"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let scratch = common::temp_dir("sweep-plan-bad");
    let (a, b) = (scratch.join("a"), scratch.join("b"));
    plan(&a, &[]);
    plan(&b, &["--order-seed", "2"]);
    let (sa, sb) = (a.to_str().unwrap(), b.to_str().unwrap());
    one_line_exit_2(&run(&a, 8), "out of range");
    one_line_exit_2(&experiment(&["sweep", "run", sa]), "SLURM_ARRAY_TASK_ID");
    let o = common::command(&["sweep", "run", sa])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env("JOB_COMPLETION_INDEX", "x")
        .output()
        .unwrap();
    one_line_exit_2(&o, "JOB_COMPLETION_INDEX");
    let nowhere = scratch.join("nowhere");
    one_line_exit_2(&run(&nowhere, 0), "no plan there");
    one_line_exit_2(&merge(&nowhere, false), "no plan there");
    // A second plan in the same directory.
    let mut args = vec!["sweep"];
    args.extend_from_slice(&SWEEP);
    args.extend(["--plan", sa]);
    one_line_exit_2(&experiment(&args), "holds one plan");
    let mut args = vec!["sweep"];
    args.extend_from_slice(&SWEEP);
    args.extend(["--plan", sb, "--jobs", "2"]);
    one_line_exit_2(&experiment(&args), "--jobs does not apply");

    // A runs directory that mixes plans: a's run 0 in b's directory.
    assert!(run(&a, 0).status.success());
    std::fs::copy(a.join("runs/0.db"), b.join("runs/0.db")).unwrap();
    one_line_exit_2(&merge(&b, true), "mixes plans");
    one_line_exit_2(&run(&b, 0), "mixes plans");
    std::fs::copy(a.join("runs/0.db"), b.join("runs/9.db")).unwrap();
    std::fs::remove_file(b.join("runs/0.db")).unwrap();
    one_line_exit_2(&merge(&b, true), "beyond this plan");
    assert!(a.join("runs/0.db").exists(), "no finished run lost");

    // A plan of another format, and one edited after it was made.
    let text = std::fs::read_to_string(a.join("plan.json")).unwrap();
    std::fs::write(
        a.join("plan.json"),
        text.replace("\"version\": 1,", "\"version\": 2,"),
    )
    .unwrap();
    one_line_exit_2(&run(&a, 1), "format 2");
    one_line_exit_2(&merge(&a, false), "format 2");
    std::fs::write(
        a.join("plan.json"),
        text.replace("\"duration\": \"10m\"", "\"duration\": \"11m\""),
    )
    .unwrap();
    one_line_exit_2(&run(&a, 1), "changed after it was made");
    assert!(a.join("runs/0.db").exists(), "no finished run lost");
}

#[test]
fn a_campaign_plans_each_cell_and_seed_interleaved() {
    let scratch = common::temp_dir("sweep-plan-campaign");
    let dir = scratch.join("plan");
    let o = experiment(&[
        "sweep",
        "--target",
        "postgres",
        "--seeds",
        "1-3",
        "--duration",
        "3m",
        "--vary",
        "interval=500ms,1s",
        "--plan",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    assert_eq!(p["kind"], "campaign");
    let runs = p["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6);
    let positions: Vec<u64> = runs
        .iter()
        .map(|r| r["position"].as_u64().unwrap())
        .collect();
    assert_ne!(positions, (0..6).collect::<Vec<_>>(), "cells interleaved");
    let mut cells: Vec<(String, u64)> = runs
        .iter()
        .map(|r| {
            let flags: Vec<&str> = r["flags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            let combination = r["combination"].as_str().unwrap().to_string();
            let interval = combination.trim_start_matches("interval=");
            assert!(
                flags.windows(2).any(|w| w == ["--interval", interval]),
                "{flags:?}"
            );
            (combination, r["seed"].as_u64().unwrap())
        })
        .collect();
    cells.sort();
    cells.dedup();
    assert_eq!(cells.len(), 6, "each cell and seed once");
    let slurm = std::fs::read_to_string(dir.join("slurm.sh")).unwrap();
    assert!(
        slurm.contains("#SBATCH --time=0:18:00\n"),
        "3 minutes and 15: {slurm}"
    );
    // A bad cell is refused before anything is written.
    let bad = scratch.join("bad");
    let o = experiment(&[
        "sweep",
        "--target",
        "postgres",
        "--seeds",
        "1",
        "--duration",
        "3m",
        "--vary",
        "schema=mastodon,nosuch",
        "--plan",
        bad.to_str().unwrap(),
    ]);
    one_line_exit_2(&o, "nosuch");
    assert!(!bad.exists());
}

/// Runs on two machines (named as Slurm names a task's node): the column
/// counts them, and each row gets the machines' means and the test.
#[test]
fn runs_on_two_machines_get_their_means_and_a_test_of_the_machine() {
    let scratch = common::temp_dir("sweep-plan-machines");
    let dir = scratch.join("plan");
    plan(&dir, &[]);
    for index in 0..8 {
        let node = if index % 2 == 0 { "node-a" } else { "node-b" };
        let o = common::command(&[
            "sweep",
            "run",
            dir.to_str().unwrap(),
            "--index",
            &index.to_string(),
        ])
        .env("SLURMD_NODENAME", node)
        .output()
        .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = merge(&dir, true);
    assert!(o.status.success());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let nodes: Vec<&str> = v["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["node-a", "node-b"]);
    let effects = v["machine_effect"].as_array().unwrap();
    assert_eq!(effects.len(), 2, "one per poller: {v}");
    for e in effects {
        let means = e["means"].as_array().unwrap();
        assert_eq!(means.len(), 2);
        assert_eq!(means[0]["runs"], 4);
        let p = e["p_value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p), "{e}");
        assert_eq!(e["differs"], p < 0.05);
    }
    let text = String::from_utf8(merge(&dir, false).stdout).unwrap();
    assert!(text.contains("2 machines"), "{text}");
    assert!(text.contains("does the machine matter?"), "{text}");
}

/// A real run planned and run as a task would run it: its database kept
/// as `runs/0.db`, judged by the merge as a campaign's run.
#[test]
fn a_planned_postgres_run_is_kept_and_merged_as_a_campaign_run() {
    let scratch = common::temp_dir("sweep-plan-postgres");
    let dir = scratch.join("plan");
    plan_postgres(&dir, "1", "3s", &["--equivalence-margin", "2.5"]);
    let p: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("plan.json")).unwrap()).unwrap();
    assert_eq!(
        p["header"]["margin"], 2.5,
        "the margin is stated with the plan"
    );
    let o = common::command(&["sweep", "run", dir.to_str().unwrap()])
        .env("JOB_COMPLETION_INDEX", "0")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let db = dir.join("runs/0.db");
    let conn = analysis::load::open(&db).unwrap();
    let ids = rundb::read::run_ids(&conn).unwrap();
    let loaded = analysis::load::load(&conn, ids[0]).unwrap();
    assert_eq!(loaded.run.seed, Some(1));
    assert!(loaded.machine_load().is_some(), "the run's own load kept");
    let o = merge(&dir, true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["target"], "postgres");
    assert_eq!(v["summary"]["runs"], 1);
    assert_eq!(
        v["summary"]["margin"], 2.5,
        "the merge judges by the plan's margin"
    );
    assert_eq!(v["schema"], 3);
    assert!(v["runs"][0]["rows"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["run_machines"][0]["index"], 0);
    // The writers at the ticks (docs/campaigns.md), as SQL over the run's
    // own brackets and its first poller's page-0 requests says.
    let (in_flight, any_time): (i64, f64) = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT (SELECT count(*) FROM writer_brackets b WHERE EXISTS (SELECT 1 FROM requests r
                     WHERE r.poller_id = (SELECT min(id) FROM pollers) AND r.page = 0
                     AND r.sent_at_ms >= b.xact_start_ms AND r.sent_at_ms < b.commit_returned_ms)),
                    (SELECT 1.0 * sum((commit_returned_ms - xact_start_ms) * (commit_returned_ms - xact_start_ms))
                     / sum(commit_returned_ms - xact_start_ms) FROM writer_brackets)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let t = &v["runs"][0]["at_ticks"];
    assert_eq!(t["in_flight"].as_i64(), Some(in_flight), "{v}");
    assert!(
        (t["any_time_ms"].as_f64().unwrap() - any_time).abs() < 1e-9,
        "{v}"
    );
    assert_eq!(t["at_ticks_ms"].is_null(), in_flight == 0, "{v}");
    let remaining: Vec<String> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        remaining,
        ["0.db"],
        "one file, no journal or aside file left"
    );
    the_kept_runs_make_the_merges_table_again(&dir, &scratch);
}

/// `sweep merge --keep FILE` keeps each run's summary and its database's
/// digest; `sweep report FILE` prints the merge's table from the file
/// alone, and refuses a file whose plan or runs were edited.
fn the_kept_runs_make_the_merges_table_again(dir: &Path, scratch: &Path) {
    let kept = scratch.join("kept.json");
    let d = dir.to_str().unwrap();
    let f = kept.to_str().unwrap();
    let merged = experiment(&["sweep", "merge", d, "--keep", f]);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    std::fs::remove_dir_all(dir.join("runs")).unwrap();
    let report = experiment(&["sweep", "report", f]);
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let (merged, report) = (
        String::from_utf8(merged.stdout).unwrap(),
        String::from_utf8(report.stdout).unwrap(),
    );
    assert!(merged.contains("naive"), "{merged}");
    assert_eq!(
        report,
        merged.replace(d, f),
        "the same table, without the databases"
    );
    let json = experiment(&["sweep", "report", f, "--json"]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["summary"]["runs"], 1);
    // The digest is the database's as it was judged.
    let text = std::fs::read_to_string(&kept).unwrap();
    let k: Value = serde_json::from_str(&text).unwrap();
    let digest = k["runs"][0]["db_sha256"].as_str().unwrap();
    assert_eq!(digest.len(), 64);
    assert!(text.len() < 8_000, "a few KB a run: {} bytes", text.len());
    // A run missing from the file is listed, exit 1.
    let mut without = k.clone();
    without["runs"] = serde_json::json!([]);
    std::fs::write(&kept, without.to_string()).unwrap();
    let o = experiment(&["sweep", "report", f]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let listed = String::from_utf8_lossy(&o.stdout);
    assert!(listed.contains("missing"), "{listed}");
    // A kept file runs nothing: no command to run them again (the merge,
    // run on the plan's directory, gives one).
    assert!(!listed.contains("run them again"), "{listed}");
    // An edited plan, a run of another cell, garbage: one line, exit 2.
    let mut edited = k.clone();
    edited["plan"]["duration"] = "1h".into();
    std::fs::write(&kept, edited.to_string()).unwrap();
    one_line_exit_2(&experiment(&["sweep", "report", f]), "the plan was edited");
    let mut moved = k.clone();
    moved["runs"][0]["result"]["seed"] = 7.into();
    std::fs::write(&kept, moved.to_string()).unwrap();
    one_line_exit_2(
        &experiment(&["sweep", "report", f]),
        "is not the plan's run 0",
    );
    std::fs::write(&kept, "{").unwrap();
    one_line_exit_2(
        &experiment(&["sweep", "report", f]),
        "not a file of `sweep merge --keep`",
    );
}

/// A campaign merged in two sittings, the first sitting's databases lost
/// with its machine: `sweep merge --keep FILE` carries over the runs FILE
/// kept before, so one file and one summary hold them all; a file of
/// another plan refuses the merge and is left as it was.
#[test]
fn a_kept_file_carries_over_the_runs_whose_databases_are_gone() {
    let scratch = common::temp_dir("sweep-plan-carried");
    let (dir, other) = (scratch.join("plan"), scratch.join("other"));
    let kept = scratch.join("kept.json");
    let (d, f) = (dir.to_str().unwrap(), kept.to_str().unwrap());
    plan_postgres(&dir, "1-2", "2s", &[]);
    plan_postgres(&other, "3", "2s", &[]);
    let ran = |index: usize| {
        let o = run(&dir, index);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    ran(0);
    let first = experiment(&["sweep", "merge", d, "--keep", f]);
    assert_eq!(
        first.status.code(),
        Some(1),
        "run 1 is missing: {}",
        String::from_utf8_lossy(&first.stderr)
    );
    std::fs::remove_dir_all(dir.join("runs")).unwrap();
    ran(1);
    let second = experiment(&["sweep", "merge", d, "--keep", f, "--json"]);
    assert!(
        second.status.success(),
        "run 0 kept before, run 1 in the directory: {}",
        String::from_utf8_lossy(&second.stderr)
    );
    let v: Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(v["summary"]["runs"], 2, "{v}");
    let text = std::fs::read_to_string(&kept).unwrap();
    let k: Value = serde_json::from_str(&text).unwrap();
    let runs = k["runs"].as_array().unwrap();
    let indices: Vec<u64> = runs.iter().map(|r| r["index"].as_u64().unwrap()).collect();
    assert_eq!(indices, [0, 1]);
    assert!(
        runs.iter()
            .all(|r| r["db_sha256"].as_str().unwrap().len() == 64)
    );
    let report = experiment(&["sweep", "report", f, "--json"]);
    assert!(
        report.status.success(),
        "every run of the plan is in the file"
    );
    let r: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(
        r["summary"], v["summary"],
        "the file's summary is the merge's"
    );
    one_line_exit_2(
        &experiment(&["sweep", "merge", other.to_str().unwrap(), "--keep", f]),
        "keeps the runs of plan",
    );
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        text,
        "the file is left as it was"
    );
}
