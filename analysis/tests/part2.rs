//! The part-2 observation, pinned: a one-hour virtual run of the default
//! experiment (twitter profile, seed 1, naive and compensated:k=1s, every
//! second, 200 a page), analyzed against the truth. The naive poller leaks
//! tens of statuses, k = 1 s catches most of them, and several needed more
//! than 1 s, so k = 1 s missed them as well.

mod common;

use common::{analyze, experiment, leak_entries, poller, temp_dir};
use serde_json::Value;

/// One virtual hour of the default experiment with `extra` arguments, analyzed.
fn virtual_hour(name: &str, extra: &[&str]) -> Value {
    let dir = temp_dir(name);
    let db = dir.join("run.db");
    let mut args = vec!["--clock", "virtual", "--duration", "1h"];
    args.extend_from_slice(extra);
    args.extend(["--db", db.to_str().unwrap()]);
    experiment(&args);
    analyze(&db)
}

#[test]
fn default_virtual_hour_reproduces_part_2() {
    let report = virtual_hour("part2", &[]);
    let (naive, k1) = (
        poller(&report, "naive"),
        poller(&report, "compensated:k=1s"),
    );
    let (naive_leaks, k1_leaks) = (
        naive["leaks"].as_u64().unwrap(),
        k1["leaks"].as_u64().unwrap(),
    );
    assert_eq!(naive["verdict"], "invalid");
    assert!(
        (10..100).contains(&naive_leaks),
        "naive leaked tens of statuses: {naive_leaks}"
    );
    assert!(
        k1_leaks * 2 < naive_leaks,
        "k = 1 s caught most of them: {k1_leaks} of {naive_leaks} left"
    );
    // Every leak of k = 1 s needed more than 1 s, and there are several.
    let beyond_1s = leak_entries(&report, "compensated:k=1s");
    assert_eq!(beyond_1s.len() as u64, k1_leaks);
    assert!(beyond_1s.len() >= 3, "several leaks needed more than 1 s");
    assert!(
        beyond_1s
            .iter()
            .all(|l| l["required_k_ms"].as_i64().unwrap() > 1000),
        "{beyond_1s:?}"
    );
    // No miss is blamed on anything but the cursor policy in a fault-free run.
    assert_eq!(naive["misses_unexplained"], 0);
    assert_eq!(k1["misses_unexplained"], 0);
    assert!(report["k_to_catch_all_ms"].as_i64().unwrap() > 1000);
}

/// Issue #10's example: seed 4, where a generator's clock runs ahead, so the
/// compensated formula's lower clamp decides. "k to catch all leaks" must be
/// exactly the edge: a poller at that k is valid, one at a millisecond less
/// leaks (before the fix it said 5735 ms, and k = 5735 ms leaked one).
#[test]
fn k_to_catch_all_is_exact_on_seed_4() {
    let k = virtual_hour("seed4-a", &["--seed", "4"])["k_to_catch_all_ms"]
        .as_i64()
        .unwrap();
    let (at_k, below) = (
        format!("compensated:k={k}ms"),
        format!("compensated:k={}ms", k - 1),
    );
    let report = virtual_hour(
        "seed4-b",
        &[
            "--seed", "4", "--poller", "naive", "--poller", &at_k, "--poller", &below,
        ],
    );
    let name = |spec: &str| {
        spec.parse::<since_id::policy::CursorPolicy>()
            .unwrap()
            .to_string()
    };
    assert_eq!(poller(&report, &name(&at_k))["verdict"], "valid");
    assert_eq!(poller(&report, &name(&below))["verdict"], "invalid");
    assert_eq!(report["k_to_catch_all_ms"], k);
}

/// The basis of the observation, pinned (README "What an hour shows"): the
/// naive leak follows from k-sorted IDs and a visibility delay of tens of ms,
/// while "k = 1 s is not enough" comes from the profile's assumed tail.
/// Without the tail the naive poller still leaks and k = 1 s catches all.
#[test]
fn without_the_tail_k_1s_catches_every_leak() {
    let report = virtual_hour("notail", &["--set", "tail_probability=0"]);
    assert!(poller(&report, "naive")["leaks"].as_u64().unwrap() >= 10);
    assert_eq!(poller(&report, "compensated:k=1s")["verdict"], "valid");
    assert!(report["k_to_catch_all_ms"].as_i64().unwrap() < 1000);
}
