//! `analyze --follow` (analysis/src/follow.rs, docs/analysis.md "Following a
//! run"): on a run a real `experiment` process writes in real time, on a run
//! that has ended, and on a file that is not there.
//!
//! The writing process is this test binary run again with
//! `FOLLOW_TEST_EXPERIMENT_DB` set (`experiment_process` below), which runs
//! the experiment through its library as the `experiment` binary does: a
//! test of the analysis package cannot count on the `experiment` binary
//! being built. Synchronisation is by what the processes print (the
//! experiment's first tally line, written once its run's row is committed),
//! never by sleeping.

mod common;

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};

const CHILD_DB: &str = "FOLLOW_TEST_EXPERIMENT_DB";

/// A short real-time run on the simulator that leaks: the twitter profile
/// at 300 statuses a second, whose naive poller leaks within seconds
/// (docs/simulator.md's profile table; the same seed in virtual time has 96).
const LEAKY: [&str; 6] = ["--set", "rate_per_s=300", "--seed", "3", "--duration", "6s"];

/// Not a test of its own: the experiment process of `follows_a_run_being_written`.
#[test]
fn experiment_process() {
    let Ok(db) = std::env::var(CHILD_DB) else {
        return;
    };
    let mut args = vec!["--db", &db, "--clock", "real"];
    args.extend(LEAKY);
    common::experiment(&args);
}

fn analyze(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args(args)
        .output()
        .expect("analyze runs")
}

/// The leak lines of `--follow`'s stdout (their IDs, each once: asserted)
/// and the rest, which is the report.
fn split(stdout: &str) -> (BTreeSet<String>, String) {
    let mut ids = BTreeSet::new();
    let mut report = String::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("leak ") {
            let id = rest.split_whitespace().next().unwrap().to_string();
            assert!(
                line.contains("  missed by ") && line.contains("  required_k_ms "),
                "a leak line names who missed it and its required_k_ms: {line}"
            );
            assert!(ids.insert(id), "each leak is printed once: {line}");
        } else {
            report.push_str(line);
            report.push('\n');
        }
    }
    (ids, report)
}

/// `analyze DB --json`'s leaks, by ID.
fn leaks_of(db: &Path, out: &Path) -> BTreeSet<String> {
    let o = analyze(&[
        db.to_str().unwrap(),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect()
}

/// `--follow`'s leak lines are the checker's leaks, each once, and the rest
/// of its output is `analyze DB`'s report, run afterwards.
fn assert_follow_agrees(db: &Path, out: &Path, followed: Output) {
    assert!(
        followed.status.success(),
        "{}",
        String::from_utf8_lossy(&followed.stderr)
    );
    let (printed, report) = split(&String::from_utf8(followed.stdout).unwrap());
    let leaks = leaks_of(db, out);
    assert!(!leaks.is_empty(), "the run leaks");
    assert_eq!(printed, leaks, "each leak printed once, and only leaks");
    let after = analyze(&[db.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(after.status.success());
    assert_eq!(report, String::from_utf8(after.stdout).unwrap());
}

#[test]
fn follows_a_run_being_written() {
    let dir = common::temp_dir("follow-live");
    let db = dir.join("run.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "experiment_process", "--nocapture"])
        .env(CHILD_DB, &db)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the experiment process starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    // The first tally line is printed when the pollers start: the run's row
    // and its pollers are in the file by then.
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the experiment ended before its first tally line: {seen}"
        );
        seen.push_str(&line);
        if line.starts_with("tally ") {
            break;
        }
    }
    let followed = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args([
            "--follow",
            db.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("analyze --follow starts");
    // Drained while the run goes on, so that its pipe never fills.
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{seen}{rest}");
    // --follow ends by itself once the run's row says the run ended.
    let followed = followed.wait_with_output().unwrap();
    assert_follow_agrees(&db, &dir, followed);
}

#[test]
fn follows_a_run_that_has_ended() {
    let dir = common::temp_dir("follow-ended");
    let db = dir.join("run.db");
    let mut args = vec!["--db", db.to_str().unwrap(), "--clock", "virtual"];
    args.extend(LEAKY);
    common::experiment(&args);
    let followed = analyze(&[
        "--follow",
        db.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_follow_agrees(&db, &dir, followed);
}

/// A run whose row never says it ended (as a killed run's): `--follow` waits
/// for it until Ctrl-C, then prints the leaks not printed yet and the report.
#[test]
fn ctrl_c_ends_following_with_the_report() {
    let dir = common::temp_dir("follow-ctrl-c");
    let db = dir.join("run.db");
    let mut args = vec!["--db", db.to_str().unwrap(), "--clock", "virtual"];
    args.extend(LEAKY);
    common::experiment(&args);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE runs SET ended_at_ms = NULL, complete = 0", [])
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args([
            "--follow",
            db.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("analyze --follow starts");
    // Its first line on stderr comes once Ctrl-C is caught.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with("analyze: following run 1 of "), "{line}");
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let (printed, report) = split(&stdout);
    assert_eq!(printed, leaks_of(&db, &dir));
    let after = analyze(&[db.to_str().unwrap(), "--out", dir.to_str().unwrap()]);
    assert_eq!(report, String::from_utf8(after.stdout).unwrap());
}

#[test]
fn follow_refuses_in_one_line() {
    let dir = common::temp_dir("follow-missing");
    let missing = dir.join("no-such.db");
    let cases: [(&[&str], &str); 2] = [
        (&["--follow", missing.to_str().unwrap()], "cannot open"),
        (&["--follow", "--json", missing.to_str().unwrap()], "--json"),
    ];
    for (args, expected) in cases {
        let o = analyze(args);
        let stderr = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}
