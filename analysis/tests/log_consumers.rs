//! `analyze` on a run of `experiment judge --log postgres`: the
//! consumers judged against the log's truth, as text, `--json` and `--html`,
//! from a run database written here through `rundb` (no PostgreSQL needed:
//! `experiment/tests/judge_log.rs` runs the real thing).

use rundb::{DeliveryRow, LogTruthRow, RunRow, write};
use serde_json::Value;

mod common;

fn analyze(args: &[&str]) -> std::process::Output {
    common::run_bin(env!("CARGO_BIN_EXE_analyze"), args)
}

/// A run: keys 1..=4 committed in the order 1, 3, 2, 4; `relay` delivered 1,
/// 3 and 4, with a garbage line; `late` delivered nothing.
fn write_run(path: &std::path::Path) {
    let conn = write::open(path, "--db").unwrap();
    let config = serde_json::json!({
        "table": "public.outbox",
        "delivered": [{"name": "relay", "file": "r.csv"}, {"name": "late", "file": "l.csv"}],
        "expect_all": false,
    });
    let run = RunRow {
        started_at_ms: 1,
        target: analysis::consumers::TARGET.into(),
        clock: "real".into(),
        layout: "key".into(),
        config: config.to_string(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let (run_id, _) = write::add_run(&conn, &run, &[]).unwrap();
    let truth: Vec<LogTruthRow> = [("1", 100), ("3", 110), ("2", 125), ("4", 130)]
        .iter()
        .enumerate()
        .map(|(seq, (key, ms))| LogTruthRow {
            seq: seq as i64,
            key: key.to_string(),
            xid: 700 + seq as i64,
            commit_lsn: format!("0/{seq}"),
            commit_ms: *ms,
            op: "insert".into(),
            read_ms: None,
        })
        .collect();
    write::side_rows(&conn, run_id, &truth).unwrap();
    let lines: Vec<DeliveryRow> = [Some("1"), Some("3"), None, Some("4")]
        .iter()
        .enumerate()
        .map(|(n, key)| DeliveryRow {
            consumer: "relay".into(),
            line: n as i64 + 1,
            key: key.map(String::from),
            raw: key.is_none().then(|| "garbage".to_string()),
            read_at_ms: 200,
        })
        .collect();
    write::side_rows(&conn, run_id, &lines).unwrap();
    write::close(conn).unwrap();
}

#[test]
fn a_log_truth_run_reports_each_consumer_as_text_json_and_html() {
    let dir = common::temp_dir("log-consumers");
    let db = dir.join("judge.db");
    write_run(&db);
    let db = db.to_str().unwrap();

    let out = analyze(&[db, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["table"], "public.outbox");
    assert_eq!(report["committed"], 4);
    let relay = &report["consumers"][0];
    assert_eq!(relay["name"], "relay");
    assert_eq!(relay["verdict"], "invalid");
    // 2 committed 15 ms after 3, the first key above it in commit order;
    // the highest key delivered among those committed before it is 3.
    assert_eq!(relay["lost"][0]["key"], "2");
    assert_eq!(relay["lost"][0]["lag"]["lag_ms"], 15);
    assert_eq!(relay["lost"][0]["lag"]["after"], "3");
    assert_eq!(relay["lost"][0]["lag"]["behind_n"], 2);
    assert_eq!(relay["garbage"]["first"][0], "line 3: garbage");
    assert_eq!(report["consumers"][1]["verdict"], "unknown");

    // --expect-all owes `late` everything.
    let out = analyze(&[db, "--json", "--expect-all"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["consumers"][1]["verdict"], "invalid");
    assert_eq!(report["consumers"][1]["lost"].as_array().unwrap().len(), 4);

    let html = dir.join("r.html");
    let out = analyze(&[db, "--html", html.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("relay: invalid"), "{text}");
    assert!(
        text.contains(
            "lost key 2 (xid 702, commit 0/2): committed 15 ms after key 3, behind:n=2 reads it"
        ),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("relay: invalid"));

    // `--delivered` belongs to runs with pollers.
    let out = analyze(&[db, "--delivered", "x=y.csv"]);
    assert_eq!(out.status.code(), Some(2));
}
