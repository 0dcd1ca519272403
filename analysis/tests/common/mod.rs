//! What the end-to-end tests of whole runs share: run the experiment through
//! its library, and read `analyze --json` back. Each test crate uses a part of
//! it, hence the `dead_code` allowance.
#![allow(dead_code)]

use clap::Parser;
use rusqlite::Connection;
use serde_json::Value;
use snowleak::targets::{RunArgs, run_experiment};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

#[derive(Parser)]
struct ExperimentArgs {
    #[command(flatten)]
    run: RunArgs,
}

pub use testkit::temp_dir;

/// Runs a binary of this package with `args` to completion.
pub fn run_bin(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Runs `experiment ARGS` to completion, as the binary would.
pub fn experiment(args: &[&str]) {
    let mut all = vec!["experiment"];
    all.extend_from_slice(args);
    let summary = run_experiment(ExperimentArgs::parse_from(all).run).expect("the run completes");
    assert!(summary.complete);
}

/// `analyze DB --json`, parsed (plots land next to the database).
pub fn analyze(db: &Path) -> Value {
    let out = run_bin(
        env!("CARGO_BIN_EXE_analyze"),
        &[db.to_str().unwrap(), "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A poller's object in the report.
pub fn poller(report: &Value, name: &str) -> Value {
    report["pollers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()
        .clone()
}

/// The leaks the report lists for `poller`.
pub fn leak_entries<'a>(report: &'a Value, poller: &str) -> Vec<&'a Value> {
    report["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            l["missed_by"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m == poller)
        })
        .collect()
}

/// The IDs of the statuses the report lists as leaks of `poller`.
pub fn leaks_of(report: &Value, poller: &str) -> BTreeSet<String> {
    leak_entries(report, poller)
        .into_iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect()
}
/// An independent check of every reported leak of `poller`, in SQL against
/// the truth: at every request of that poller at which the status was visible,
/// the request's window was above it. Otherwise it would be a false leak.
pub fn check_no_false_leaks(db: &Path, report: &Value, poller: &str) {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT count(*) FROM requests r JOIN pollers p ON p.id = r.poller_id, truth t
             WHERE p.name = ?1 AND t.id = ?2 AND t.visible_at_ms <= r.sent_at_ms
               AND (t.deleted_at_ms IS NULL OR t.deleted_at_ms > r.received_at_ms)
               AND (r.since_key IS NULL OR r.since_key < t.id_key)
               AND (r.before_key IS NULL OR t.id_key < r.before_key)",
        )
        .unwrap();
    for id in leaks_of(report, poller) {
        let in_window: i64 = stmt
            .query_row(rusqlite::params![poller, id], |r| r.get(0))
            .unwrap();
        assert_eq!(
            in_window, 0,
            "{poller} leak {id} was inside a request's window: a false leak"
        );
    }
}
