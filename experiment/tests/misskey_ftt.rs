//! `--target misskey-ftt` end to end, on a real Redis and a real PostgreSQL
//! started by the run (the test fails, never skips, without them: Debian
//! packages `redis-server` and `postgresql`): the truth's order row by row,
//! and a naive sinceId poller's lost notes computed here with our own SQL
//! against the truth, compared with the checker's leaks. And the refusals.

use rusqlite::{Connection, params};
use std::collections::BTreeSet;

mod common;
use common::temp_dir;

fn one_line_error(args: &[&str], wanted: &str) {
    let out = common::experiment(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(wanted), "{args:?}: {err}");
}

#[test]
fn flags_where_they_do_nothing_are_refused_in_one_line() {
    let dir = temp_dir("ftt-flags");
    let db = dir.join("run.db");
    let db = db.to_str().unwrap();
    one_line_error(
        &["--creators", "2", "--db", db],
        "--creators applies to --target misskey-ftt only, not 'simulator'",
    );
    one_line_error(
        &["--target", "postgres", "--no-db-fallback", "--db", db],
        "--no-db-fallback applies to --target misskey-ftt only",
    );
    one_line_error(
        &["--target", "misskey-ftt", "--writers", "2", "--db", db],
        "--writers applies to --target postgres only",
    );
    one_line_error(
        &[
            "--target",
            "misskey-ftt",
            "--layout",
            "misskey-aidx",
            "--db",
            db,
        ],
        "--layout does not apply to --target misskey-ftt",
    );
    one_line_error(
        &[
            "--target",
            "misskey-ftt",
            "--timeline",
            "global",
            "--db",
            db,
        ],
        "expected home, local or hybrid",
    );
    one_line_error(
        &["--target", "misskey-ftt", "--poller", "xmin", "--db", db],
        "the xmin policy reads PostgreSQL's",
    );
    one_line_error(
        &["--target", "misskey-ftt", "--users", "0,5,5", "--db", db],
        "bad --users",
    );
    assert!(!std::path::Path::new(db).exists(), "nothing was recorded");
}

/// A row of `ftt_pushes` joined with the truth: id, ID time, commit, push, path, visible.
type PushRow = (String, Option<i64>, i64, Option<i64>, String, Option<i64>);

/// The notes a poller never returned although every request it sent once
/// the note was readable carried a sinceId above it: lost for good.
fn lost_by_sql(conn: &Connection, poller: &str) -> BTreeSet<String> {
    let mut st = conn
        .prepare(
            "SELECT t.id FROM truth t
             WHERE t.run_id = 1
               AND NOT EXISTS (
                 SELECT 1 FROM observations o
                 JOIN requests r ON r.id = o.request_id
                 JOIN pollers p ON p.id = r.poller_id
                 WHERE p.name = ?1 AND o.status_id = t.id)
               AND EXISTS (
                 SELECT 1 FROM requests r JOIN pollers p ON p.id = r.poller_id
                 WHERE p.name = ?1 AND r.sent_at_ms >= t.visible_at_ms)
               AND NOT EXISTS (
                 SELECT 1 FROM requests r JOIN pollers p ON p.id = r.poller_id
                 WHERE p.name = ?1 AND r.sent_at_ms >= t.visible_at_ms
                   AND (r.since_key IS NULL OR r.since_key < t.id_key))",
        )
        .unwrap();
    st.query_map(params![poller], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_naive_since_id_poller_loses_late_remote_notes_and_the_truth_keeps_its_order() {
    let dir = temp_dir("ftt-run");
    let db = dir.join("run.db");
    let db_arg = db.to_str().unwrap();
    // User 0 follows everyone (5 local, 5 remote users), so its home
    // timeline holds every note; remote notes arrive about 3 s after their
    // published time, so a poller polling every second passes their IDs first.
    let out = common::experiment_ok(&[
        "--target",
        "misskey-ftt",
        "--timeline",
        "home",
        "--users",
        "5,5,9",
        "--note-rate",
        "10",
        "--remote-rate",
        "5",
        "--federation-delay",
        "3s",
        "--duration",
        "8s",
        "--interval",
        "1s",
        "--poller",
        "naive",
        "--seed",
        "3",
        "--db",
        db_arg,
    ]);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("db-fallback"),
        "sinceId reads go to PostgreSQL: {summary}"
    );
    let conn = Connection::open(&db).unwrap();
    let config: String = conn
        .query_row("SELECT config FROM runs WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    assert!(config.contains("\"redis_version\":\"") && config.contains("\"postgres_version\":\""));

    // Row by row: ID time <= commit <= push, and every pushed note is in the truth.
    let mut st = conn
        .prepare(
            "SELECT f.id, t.id_time_ms, f.committed_at_ms, f.pushed_at_ms, f.path, t.visible_at_ms
             FROM ftt_pushes f LEFT JOIN truth t ON t.run_id = f.run_id AND t.id = f.id
             WHERE f.run_id = 1",
        )
        .unwrap();
    let rows: Vec<PushRow> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!rows.is_empty(), "notes were pushed to the home list");
    for (id, id_time, committed, pushed, path, visible) in &rows {
        let id_time = id_time.unwrap_or_else(|| panic!("{id} pushed but not in the truth"));
        assert!(
            id_time <= *committed,
            "{id}: ID made at create() start, before the commit"
        );
        assert_eq!(*visible, Some(committed + 1), "{id}: owed from the commit");
        if let Some(pushed) = pushed {
            assert!(
                committed <= pushed,
                "{id}: pushed after the commit ({path})"
            );
        }
    }

    // The lost notes, by our SQL and by the checker, the same rows.
    let lost = lost_by_sql(&conn, "naive");
    let analyze = std::path::Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let out = std::process::Command::new(&analyze)
        .args([
            db_arg,
            "--json",
            "--out",
            dir.join("plots").to_str().unwrap(),
        ])
        .output()
        .expect("analyze runs (cargo builds it for the workspace's tests)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leaks: BTreeSet<String> = json["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            l["missed_by"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == "naive")
        })
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(lost, leaks, "our SQL and the checker agree row by row");
    // Remote notes are IDed at their published time and committed seconds
    // later, below a cursor that local notes had already moved past.
    let remote_lost = lost
        .iter()
        .filter(|id| {
            let origin: String = conn
                .query_row(
                    "SELECT origin FROM truth WHERE run_id = 1 AND id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .unwrap();
            origin.starts_with("remote")
        })
        .count();
    assert!(
        remote_lost > 0,
        "three-second federation delays under a 1 s poll leak: {lost:?}"
    );
}

/// The run's throwaway Redis: its directory is named after the run's pid.
fn redis_pid_of(run_pid: u32) -> Option<i32> {
    let prefix = format!("snowleak-redis-{run_pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .ok()?
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .and_then(|e| std::fs::read_to_string(e.path().join("redis.pid")).ok())
        .and_then(|p| p.trim().parse().ok())
}

#[test]
fn redis_dying_mid_run_ends_it_cleanly_and_marks_it_incomplete() {
    let dir = temp_dir("ftt-redis-dies");
    let db = dir.join("run.db");
    let mut child = common::command(&[
        "--target",
        "misskey-ftt",
        "--duration",
        "20s",
        "--interval",
        "200ms",
        "--poller",
        "naive",
        "--db",
        db.to_str().unwrap(),
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("the experiment binary runs");
    // Wait (bounded) until the creators have committed notes: the truth has rows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let truth_rows = || {
        Connection::open(&db)
            .and_then(|c| c.query_row("SELECT count(*) FROM truth", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(0)
    };
    while truth_rows() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never wrote truth"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let pid = redis_pid_of(child.id()).expect("the run's Redis has a pid file");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("INCOMPLETE"), "{stdout}");
    let conn = Connection::open(&db).unwrap();
    let (complete, reason): (i64, String) = conn
        .query_row(
            "SELECT complete, end_reason FROM runs WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(complete, 0);
    assert!(reason.starts_with("a server failed"), "{reason}");
}

/// The fate of each lost note (`analysis::ftt`), checked row by row against
/// our own SQL over `ftt_pushes` and `ftt_trims`, on a real run with the
/// fallback off (every sinceId page is empty, so notes are lost while in the
/// lists, and at 50 notes a second into a home list capped at 300, LTRIM
/// cuts some); and the report's line for it.
#[test]
fn the_fate_of_each_lost_note_agrees_with_our_sql_over_the_ftt_tables() {
    let dir = temp_dir("ftt-fates");
    let db = dir.join("run.db");
    let db_arg = db.to_str().unwrap();
    common::experiment_ok(&[
        "--target",
        "misskey-ftt",
        "--timeline",
        "home",
        "--no-db-fallback",
        "--users",
        "5,5,9",
        "--note-rate",
        "40",
        "--remote-rate",
        "10",
        "--late-share",
        "0.1",
        "--duration",
        "10s",
        "--interval",
        "1s",
        "--poller",
        "naive",
        "--seed",
        "4",
        "--db",
        db_arg,
    ]);
    let conn = analysis::load::open(&db).unwrap();
    let loaded = analysis::load::load(&conn, 1).unwrap();
    let judged = analysis::diff::analyze(&loaded.history);
    let truth = analysis::ftt::load(&conn, 1)
        .unwrap()
        .expect("a misskey-ftt run has its FTT truth");
    let lost = analysis::ftt::fates(&loaded, &judged, &truth);
    drop(conn);
    let conn = Connection::open(&db).unwrap();
    let leaks = lost_by_sql(&conn, "naive");
    let mut counts = std::collections::BTreeMap::new();
    for l in &lost {
        let (trimmed, pushed): (bool, bool) = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM ftt_trims WHERE run_id = 1 AND id = ?1),
                        EXISTS (SELECT 1 FROM ftt_pushes WHERE run_id = 1 AND id = ?1
                                  AND pushed_at_ms IS NOT NULL)",
                [&l.id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let expected = if leaks.contains(&l.id) {
            "leak"
        } else if trimmed {
            "trimmed"
        } else if !pushed {
            "never-pushed"
        } else {
            "in-lists"
        };
        assert_eq!(l.fate.as_str(), expected, "{}", l.id);
        *counts.entry(expected).or_insert(0) += 1;
    }
    // Every leak our SQL finds has its row.
    let leak_rows: BTreeSet<&str> = lost
        .iter()
        .filter(|l| l.fate.as_str() == "leak")
        .map(|l| l.id.as_str())
        .collect();
    assert_eq!(
        leak_rows,
        leaks.iter().map(String::as_str).collect(),
        "leaks"
    );
    assert!(
        counts.get("trimmed").is_some_and(|&n| n > 0)
            && counts.get("in-lists").is_some_and(|&n| n > 0),
        "the fallback off loses notes in the lists and LTRIM cuts some: {counts:?}"
    );
    let analyze = std::path::Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let out = std::process::Command::new(&analyze)
        .args([db_arg, "--out", dir.join("plots").to_str().unwrap()])
        .output()
        .expect("analyze runs (cargo builds it for the workspace's tests)");
    let report = String::from_utf8_lossy(&out.stdout);
    let line = format!(
        "leak {}, trimmed {}, never-pushed {}, in-lists {}",
        counts.get("leak").unwrap_or(&0),
        counts["trimmed"],
        counts.get("never-pushed").unwrap_or(&0),
        counts["in-lists"]
    );
    assert!(report.contains(&line), "{line} in:\n{report}");
    // --json and --html carry the same fates, note by note.
    let page = dir.join("report.html");
    let out = std::process::Command::new(&analyze)
        .args([db_arg, "--json", "--html", page.to_str().unwrap()])
        .args(["--out", dir.join("plots").to_str().unwrap()])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    let naive = &json["ftt"]["pollers"][0];
    let in_json: Vec<(String, String)> = naive["lost"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["id"].as_str().unwrap().into(),
                l["fate"].as_str().unwrap().into(),
            )
        })
        .collect();
    let in_text: Vec<(String, String)> = lost
        .iter()
        .map(|l| (l.id.clone(), l.fate.as_str().into()))
        .collect();
    assert_eq!(in_json, in_text);
    assert!(
        html.contains(&format!("<h3>naive</h3>\n<p>{line}</p>")),
        "{line}"
    );
    for (id, fate) in &in_json {
        assert!(html.contains(&format!("<tr><td>{id}</td><td>{fate}</td><td>")));
    }
}
