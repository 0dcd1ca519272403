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
        stdout.contains("command list:1: "),
        "a verdict for the command's one timeline: {stdout} {stderr}"
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
            .any(|p| p == "command list:1")
        {
            judged_lost.insert(leak["id"].as_str().unwrap().to_string());
        }
    }
    for miss in v["other_misses"].as_array().unwrap() {
        if miss["poller"] == "command list:1" {
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
    assert!(stdout.contains("command list:1: invalid"), "{stdout}");
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

/// One token, two timelines, two cursors: the tag timeline read with
/// since_id = the newest ID seen (naive), the home timeline with since_id
/// held k = 1 s behind by the ID's time (the article's compensated formula,
/// Mastodon's IDs being ms << 16). Each writes its own output,
/// OUT.tag and OUT.home, one JSON line a request.
const TWO_TIMELINES_CLIENT: &str = r#"
import json, os, sys, time, urllib.request
base, token = os.environ["SNOWLEAK_BASE_URL"], os.environ["SNOWLEAK_TOKEN"]
out, rounds, k_ms = sys.argv[1], int(sys.argv[2]), 1000
files = {"tag": open(out + ".tag", "w"), "home": open(out + ".home", "w")}
paths = {"tag": "/api/v1/timelines/tag/snowleak", "home": "/api/v1/timelines/home"}
latest, retrieved_at = {}, {}

def cursor(name):
    if name not in latest:
        return None
    if name == "tag":
        return latest[name]
    newest, at = latest[name], retrieved_at[name]
    lower = newest if (newest >> 16) <= k_ms else ((newest >> 16) - k_ms << 16) - 1
    return min(max(((at - k_ms) << 16) - 1, lower), newest)

for _ in range(rounds):
    for name in ("tag", "home"):
        since = cursor(name)
        query = "limit=40" + (f"&since_id={since}" if since is not None else "")
        request = urllib.request.Request(f"{base}{paths[name]}?{query}",
                                         headers={"Authorization": f"Bearer {token}"})
        sent = int(time.time() * 1000)
        ids = [s["id"] for s in json.load(urllib.request.urlopen(request))]
        retrieved_at[name] = sent
        if ids:
            latest[name] = max([latest.get(name, 0)] + [int(i) for i in ids])
        files[name].write(json.dumps({"sent": sent, "ids": ids}) + "\n")
        files[name].flush()
    time.sleep(0.1)
"#;

/// What a client's own output says it lost on one timeline, computed from
/// that output and the truth without the checker: a status it was owed
/// (`owed`), visible well before its last request on that timeline, that it
/// never received, unless it lay below a first page that came full (owed
/// to nobody, docs/analysis.md). Also the statuses visible early enough to
/// count (the settled ones).
fn lost_by_own_output(
    output: &std::path::Path,
    truth: &[(String, i64)],
    first_sent: i64,
    owed: impl Fn(&str) -> bool,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut received: BTreeSet<String> = BTreeSet::new();
    let mut last_sent = 0i64;
    let mut first_low: Option<u128> = None;
    for line in std::fs::read_to_string(output).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        last_sent = last_sent.max(v["sent"].as_i64().unwrap());
        let ids: Vec<String> = v["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_str().unwrap().to_string())
            .collect();
        if first_low.is_none() && !ids.is_empty() {
            first_low = ids.iter().map(|id| id.parse().unwrap()).min();
        }
        received.extend(ids);
    }
    let margin_ms = 300;
    let settled: BTreeSet<String> = truth
        .iter()
        .filter(|(id, visible)| *visible <= last_sent - margin_ms && owed(id.as_str()))
        .map(|(id, _)| id.clone())
        .collect();
    let visible: std::collections::HashMap<&str, i64> =
        truth.iter().map(|(id, t)| (id.as_str(), *t)).collect();
    let lost = settled
        .iter()
        .filter(|id| !received.contains(*id))
        .filter(|id| {
            !(first_low.is_some_and(|low| id.parse::<u128>().unwrap() < low)
                && visible[id.as_str()] <= first_sent)
        })
        .cloned()
        .collect();
    (lost, settled)
}

/// The statuses the checker says `poller` lost: its leaks and other misses.
fn judged_lost(report: &Value, poller: &str) -> BTreeSet<String> {
    let mut lost = BTreeSet::new();
    for leak in report["leaks"].as_array().unwrap() {
        if leak["missed_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == poller)
        {
            lost.insert(leak["id"].as_str().unwrap().to_string());
        }
    }
    for miss in report["other_misses"].as_array().unwrap() {
        if miss["poller"] == poller {
            lost.insert(miss["id"].as_str().unwrap().to_string());
        }
    }
    lost
}

/// `analyze DB --json`.
fn analyze_json(db: &std::path::Path, plots: &std::path::Path) -> Value {
    let analyze = std::path::Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let out = std::process::Command::new(&analyze)
        .args([
            db.to_str().unwrap(),
            "--json",
            "--out",
            plots.to_str().unwrap(),
        ])
        .output()
        .expect("analyze runs (cargo builds it for the workspace's tests)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn one_token_on_two_timelines_is_judged_as_two_pollers() {
    let dir = temp_dir("judge-two-timelines");
    let script = dir.join("two.py");
    std::fs::write(&script, TWO_TIMELINES_CLIENT).unwrap();
    let served = dir.join("served");
    let db = dir.join("judge.db");
    let out = command(&[
        "judge",
        "--profile",
        "mastodon",
        "--seed",
        "1",
        "--backlog",
        "0s",
        "--set",
        "rate_per_s=50",
        "--set",
        "remote_fraction=0",
        "--set",
        "fetched_fraction=0",
        "--set",
        "delete_probability=0",
        "--set",
        "tail_probability=0",
        "--db",
        db.to_str().unwrap(),
        "--",
        "python3",
        script.to_str().unwrap(),
        served.to_str().unwrap(),
        "50",
    ])
    .output()
    .expect("experiment judge runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);

    let report = analyze_json(&db, &dir.join("plots"));
    let mut pollers: Vec<(&str, &Value)> = report["pollers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p))
        .collect();
    pollers.sort_by_key(|(name, _)| *name);
    let names: Vec<&str> = pollers.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        ["command home", "command tag:snowleak"],
        "{stdout} {stderr}"
    );
    assert!(pollers.iter().all(|(_, p)| p["client"] == "command"));
    for (name, p) in &pollers {
        assert_eq!(p["misses_unexplained"], 0, "{name}: nothing unexplained");
        assert_eq!(p["misses_overflow"], 0, "{name}: no page cut off");
    }

    let conn = Connection::open(&db).unwrap();
    let truth: Vec<(String, i64)> = conn
        .prepare("SELECT id, visible_at_ms FROM truth")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let authors: std::collections::HashMap<String, u32> = conn
        .prepare("SELECT id, author FROM truth_authors")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // The home timeline serves the authors the reader follows, as the
    // simulator draws them from the seed.
    let config = snowleak::sim::SimConfig::profile("mastodon").unwrap();
    let follows = snowleak::sim::model::home_follows(1, config.authors);
    // When each poller's first page with statuses was sent, as recorded.
    let first_sent = |poller: &str| -> i64 {
        conn.query_row(
            "SELECT r.sent_at_ms FROM requests r JOIN pollers p ON p.id = r.poller_id
              WHERE p.name = ?1 AND r.items > 0 ORDER BY r.sent_at_ms, r.id LIMIT 1",
            [poller],
            |r| r.get(0),
        )
        .unwrap()
    };
    let (tag_lost, tag_settled) = lost_by_own_output(
        &dir.join("served.tag"),
        &truth,
        first_sent("command tag:snowleak"),
        |_| true,
    );
    let (home_lost, home_settled) = lost_by_own_output(
        &dir.join("served.home"),
        &truth,
        first_sent("command home"),
        |id| follows.contains(&authors[id]),
    );
    assert!(
        !home_settled.is_empty() && home_settled.len() < tag_settled.len(),
        "home serves some authors: {} of {}",
        home_settled.len(),
        tag_settled.len()
    );
    assert!(
        !tag_lost.is_empty(),
        "a naive since_id loop at 50 statuses/s loses statuses to visibility delays"
    );
    for (poller, lost, settled) in [
        ("command tag:snowleak", &tag_lost, &tag_settled),
        ("command home", &home_lost, &home_settled),
    ] {
        let judged: BTreeSet<String> = judged_lost(&report, poller)
            .intersection(settled)
            .cloned()
            .collect();
        assert_eq!(&judged, lost, "{poller}: the checker's losses are its own");
        let verdict = if lost.is_empty() { "valid" } else { "invalid" };
        assert!(
            stdout.contains(&format!("{poller}: {verdict}")),
            "{poller}: {verdict} as its output says\n{stdout}"
        );
    }
    let tag_leaks = pollers[1].1["leaks"].as_u64().unwrap();
    assert!(tag_leaks > 0, "the naive timeline's leaks are reported");
    assert_eq!(
        out.status.code(),
        Some(1),
        "a timeline lost statuses: exit 1"
    );
}
