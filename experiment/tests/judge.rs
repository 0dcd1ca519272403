//! `experiment judge -- COMMAND`: a client nobody here wrote (a Python loop
//! on the standard library, `since_id` = the newest ID it has seen) is run
//! against the leaky server, and its verdict is checked against what its own
//! stored output and the truth say, computed here without the checker.

use rusqlite::Connection;
use serde_json::Value;
use std::collections::BTreeSet;

mod common;
use common::{command, temp_dir};

/// The client: polls the Twitter v1.1 list with since_id = the newest ID it
/// has seen, every 0.2 s, `rounds` times; writes every request's send time
/// and the IDs it was served, one JSON line each.
const NAIVE_CLIENT: &str = r#"
import json, os, sys, time, urllib.request
base, token = os.environ["SNOWLEAK_BASE_URL"], os.environ["SNOWLEAK_TOKEN"]
out, rounds = open(sys.argv[1], "w"), int(sys.argv[2])
since = None
for _ in range(rounds):
    query = "list_id=1&count=200" + (f"&since_id={since}" if since else "")
    request = urllib.request.Request(f"{base}/1.1/lists/statuses.json?{query}",
                                     headers={"Authorization": f"Bearer {token}"})
    sent = int(time.time() * 1000)
    page = json.load(urllib.request.urlopen(request))
    ids = [s["id_str"] for s in page]
    if ids:
        since = ids[0]
    out.write(json.dumps({"sent": sent, "ids": ids}) + "\n")
    time.sleep(0.2)
"#;

#[test]
fn a_naive_since_id_client_is_judged_by_what_it_lost() {
    let dir = temp_dir("judge");
    let script = dir.join("naive.py");
    std::fs::write(&script, NAIVE_CLIENT).unwrap();
    let served = dir.join("served.jsonl");
    let db = dir.join("judge.db");
    let out = command(&[
        "judge",
        "--profile",
        "twitter",
        "--set",
        "rate_per_s=100",
        "--set",
        "delete_probability=0",
        "--backlog",
        "0s",
        "--db",
        db.to_str().unwrap(),
        "--",
        "python3",
        script.to_str().unwrap(),
        served.to_str().unwrap(),
        "25",
    ])
    .output()
    .expect("experiment judge runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("command: "),
        "a verdict for the command: {stdout} {stderr}"
    );

    // What the client's own output says it got, and when it last asked.
    let mut received: BTreeSet<String> = BTreeSet::new();
    let mut last_sent = 0i64;
    // The lowest ID of its first page: a first page (no since_id) that came
    // full covers only down to it (docs/analysis.md).
    let mut first_low: Option<u64> = None;
    for line in std::fs::read_to_string(&served).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        last_sent = last_sent.max(v["sent"].as_i64().unwrap());
        let ids = v["ids"].as_array().unwrap();
        for id in ids {
            received.insert(id.as_str().unwrap().to_string());
        }
        if first_low.is_none() && !ids.is_empty() {
            first_low = ids
                .iter()
                .map(|id| id.as_str().unwrap().parse().unwrap())
                .min();
        }
    }
    // Independently: a status visible well before the client's last request
    // (the margin keeps the server's and the client's clocks of that instant
    // apart) that the client never received is lost to it, whatever the
    // cause (nothing is deleted here).
    let margin_ms = 300;
    let conn = Connection::open(&db).unwrap();
    let truth: Vec<(String, i64)> = conn
        .prepare("SELECT id, visible_at_ms FROM truth")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let settled = |visible: i64| visible <= last_sent - margin_ms;
    // Its first page with statuses, as the server recorded it: what was
    // visible below that page when it was sent was never owed (a slow start
    // on a loaded machine fills it).
    let (first_id, first_sent): (i64, i64) = conn
        .query_row(
            "SELECT id, sent_at_ms FROM requests WHERE items > 0 ORDER BY sent_at_ms, id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let below_first_page = |id: &str, visible: i64| {
        first_low.is_some_and(|low| id.parse::<u64>().unwrap() < low) && visible <= first_sent
    };
    let lost: BTreeSet<String> = truth
        .iter()
        .filter(|(id, visible)| {
            settled(*visible) && !received.contains(id) && !below_first_page(id, *visible)
        })
        .map(|(id, _)| id.clone())
        .collect();
    let full_pages: i64 = conn
        .query_row(
            "SELECT count(*) FROM requests WHERE items >= page_limit AND id != ?1",
            [first_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        full_pages, 0,
        "no later page was full: a loss is the cursor's doing"
    );

    // What the checker says, through analyze --json.
    let analyze = std::path::Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let json = std::process::Command::new(&analyze)
        .args([
            db.to_str().unwrap(),
            "--json",
            "--out",
            dir.join("plots").to_str().unwrap(),
        ])
        .output()
        .expect("analyze runs (cargo builds it for the workspace's tests)");
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let visible: std::collections::HashMap<&str, i64> =
        truth.iter().map(|(id, t)| (id.as_str(), *t)).collect();
    let mut judged_lost: BTreeSet<String> = BTreeSet::new();
    for leak in v["leaks"].as_array().unwrap() {
        if leak["missed_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "command")
        {
            judged_lost.insert(leak["id"].as_str().unwrap().to_string());
        }
    }
    for miss in v["other_misses"].as_array().unwrap() {
        if miss["poller"] == "command" {
            judged_lost.insert(miss["id"].as_str().unwrap().to_string());
        }
    }
    let judged_settled: BTreeSet<String> = judged_lost
        .iter()
        .filter(|id| visible.get(id.as_str()).is_some_and(|t| settled(*t)))
        .cloned()
        .collect();
    assert_eq!(
        judged_settled, lost,
        "the checker's losses are the client's own"
    );
    assert!(
        !lost.is_empty(),
        "at 100 statuses/s a naive since_id loop loses statuses to visibility delays"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a client that lost a status: exit 1\n{stdout}"
    );
    assert!(stdout.contains("command: invalid"), "{stdout}");
}

#[test]
fn a_command_that_cannot_run_or_exits_at_once_is_bad_input() {
    let dir = temp_dir("judge-bad");
    let db = dir.join("judge.db");
    let db = db.to_str().unwrap();
    let out = command(&["judge", "--db", db, "--", "./no-such-client"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot run './no-such-client'"), "{err}");
    let out = command(&["judge", "--db", db, "--", "false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("exited with status 1 before it asked for a timeline"),
        "{err}"
    );
    let out = command(&["judge", "--db", db, "--record", "x.db", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
