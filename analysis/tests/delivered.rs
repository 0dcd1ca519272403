//! `analyze --delivered NAME=FILE.csv`: a consumer judged from the IDs it
//! delivered (issue 23, item 7), end to end through the binary.

mod common;

use analysis::synth::{self, SynthTruth};
use common::{leaks_of, poller, run_bin, temp_dir};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

const T0: i64 = 1_700_000_000_000;

/// A run whose truth is statuses 1..=10, each visible 100 ms after the last,
/// except 4, which becomes visible late, after 6 (a transaction that
/// committed late); no pollers of its own.
fn run_with_truth(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("run.db");
    let mut conn = synth::create(&db).unwrap();
    let truth: Vec<SynthTruth> = (1..=10u128)
        .map(|id| {
            let at = if id == 4 {
                T0 + 650
            } else {
                T0 + 100 * id as i64
            };
            SynthTruth {
                id,
                posted_at_ms: T0 + 100 * id as i64,
                visible_at_ms: at,
                deleted_at_ms: None,
            }
        })
        .collect();
    synth::write_run(&mut conn, &synth::run(), &[], &[], &truth).unwrap();
    db
}

fn analyze_with(db: &Path, delivered: &[(&str, &Path)]) -> std::process::Output {
    let mut args = vec![db.to_str().unwrap().to_string(), "--json".to_string()];
    for (name, path) in delivered {
        args.push("--delivered".into());
        args.push(format!("{name}={}", path.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_bin(env!("CARGO_BIN_EXE_analyze"), &args)
}

fn json(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_relay_that_passed_a_late_commit_is_judged_to_have_leaked_it() {
    let dir = temp_dir("delivered");
    let db = run_with_truth(&dir);
    // A naive relay: it read 1..3 at +350 and 5..6 at +620, before 4 was
    // visible; then 7..8 after: 4 lay below its cursor from then on.
    // Status 10 lies above the last it delivered: not yet reached, not owed.
    let naive = dir.join("naive.csv");
    std::fs::write(
        &naive,
        format!(
            "id,delivered_at\n1,{a}\n2,{a}\n3,{a}\n5,{b}\n6,{b}\n7,{c}\n8,{c}\n9,{d}\n",
            a = T0 + 350,
            b = T0 + 620,
            c = T0 + 900,
            // ISO 8601 and epoch ms mix in one file.
            d = since_id::time::rfc3339_ms(T0 + 950),
        ),
    )
    .unwrap();
    // One that holds its cursor behind delivers 4 late: nothing lost.
    let behind = dir.join("behind.csv");
    std::fs::write(
        &behind,
        format!(
            "{}\n1,{a}\n2,{a}\n3,{a}\n5,{b}\n6,{b}\n4,{c}\n7,{c}\n8,{c}\n9,{c}\n",
            "id,delivered_at",
            a = T0 + 350,
            b = T0 + 620,
            c = T0 + 900,
        ),
    )
    .unwrap();
    let report = json(&analyze_with(
        &db,
        &[("naive", &naive), ("behind", &behind)],
    ));
    let n = poller(&report, "naive");
    assert_eq!(
        leaks_of(&report, "naive"),
        BTreeSet::from(["4".to_string()])
    );
    assert_eq!(n["verdict"], "invalid", "{n}");
    let b = poller(&report, "behind");
    assert!(leaks_of(&report, "behind").is_empty(), "{b}");
    assert_eq!(b["verdict"], "valid", "{b}");
}

#[test]
fn bad_delivered_files_are_refused_in_one_line() {
    let dir = temp_dir("delivered-bad");
    let db = run_with_truth(&dir);
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "1,1700000000100\n2\n").unwrap();
    let out = analyze_with(&db, &[("relay", &bad)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.csv: line 2: "), "{err}");
    // An ID the truth does not hold is counted and shown, not dropped silently.
    let stranger = dir.join("stranger.csv");
    std::fs::write(&stranger, "1,1700000000200\n999,1700000000300\n").unwrap();
    let out = analyze_with(&db, &[("relay", &stranger)]);
    json(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("relay: 1 delivered IDs are not in the run's truth") && err.contains("999"),
        "{err}"
    );
    // A missing file and a name taken.
    let out = analyze_with(&db, &[("relay", &dir.join("none.csv"))]);
    assert_eq!(out.status.code(), Some(2));
    let out = analyze_with(&db, &[("relay", &stranger), ("relay", &stranger)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already has a poller called relay"));
}
