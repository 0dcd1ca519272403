//! What the end-to-end tests of whole runs share: run the experiment through
//! its library, and read `analyze --json` back. Each test crate uses a part of
//! it, hence the `dead_code` allowance.
#![allow(dead_code)]

use clap::Parser;
use serde_json::Value;
use snowleak::app::{RunArgs, run_experiment};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    run: RunArgs,
}

/// A fresh directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("snowleak-analysis-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `experiment ARGS` to completion, as the binary would.
pub fn experiment(args: &[&str]) {
    let mut all = vec!["experiment"];
    all.extend_from_slice(args);
    let summary = run_experiment(Args::parse_from(all).run).expect("the run completes");
    assert!(summary.complete);
}

/// `analyze DB --json`, parsed (plots land next to the database).
pub fn analyze(db: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args([db.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
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
