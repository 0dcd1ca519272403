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
        "--writers applies to --target postgres and --target mariadb only",
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
    one_line_error(
        &["--target", "postgres", "--delete-share", "0.1", "--db", db],
        "--delete-share applies to --target misskey-ftt only",
    );
    one_line_error(
        &["--ftt-off", "1s..2s", "--db", db],
        "--ftt-off applies to --target misskey-ftt only, not 'simulator'",
    );
    one_line_error(
        &[
            "--target",
            "postgres",
            "--redis-restart-at",
            "3s",
            "--db",
            db,
        ],
        "--redis-restart-at applies to --target misskey-ftt only",
    );
    let ftt = |extra: &[&str], wanted: &str| {
        let mut args = vec!["--target", "misskey-ftt", "--duration", "10s", "--db", db];
        args.extend_from_slice(extra);
        one_line_error(&args, wanted);
    };
    ftt(&["--ftt-off", "4s..2s"], "FROM must come before TO");
    ftt(&["--ftt-off", "2s"], "expected FROM..TO such as 2m..4m");
    ftt(
        &["--ftt-off", "2s..11s"],
        "ends after the run (--duration 10s)",
    );
    ftt(
        &["--ftt-off", "2s..5s", "--ftt-off", "4s..6s"],
        "starts before the previous window ends",
    );
    ftt(
        &["--ftt-off", "5s..6s", "--ftt-off", "1s..2s"],
        "starts before the previous window ends",
    );
    ftt(
        &["--ftt-off", "1s..2s", "--no-fanout-timeline"],
        "off for the whole run",
    );
    ftt(&["--delete-after", "5s"], "give --delete-share above 0 too");
    ftt(&["--late-max", "500ms"], "bad --late-max '500ms'");
    ftt(
        &["--federation-delay-dist", "gamma"],
        "expected exponential or lognormal",
    );
    one_line_error(
        &["--target", "postgres", "--graph-seed", "7", "--db", db],
        "--graph-seed applies to --target misskey-ftt only",
    );
    ftt(&["--delete-share", "1.5"], "expected a number from 0 to 1");
    ftt(&["--redis-restart-at", "10s"], "is not inside the run");
    ftt(&["--redis-restart-at", "0s"], "is not inside the run");
    ftt(
        &["--redis-restart-at", "5s", "--redis-restart-at", "2s"],
        "ascending order",
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
        "leak {}, trimmed {}, never-pushed {}, in-lists {}, gone 0",
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

/// The notes deleted before `poller` could see them: deleted, never
/// returned to it, and no request of it sent once the note was readable and
/// answered before its `DELETE` was sent (docs/analysis.md, "visible").
fn gone_by_sql(conn: &Connection, poller: &str) -> BTreeSet<String> {
    let mut st = conn.prepare(testkit::GONE_BY_SQL).unwrap();
    let ids = st.query_map([poller], |r| r.get(0)).unwrap();
    ids.map(Result::unwrap).collect()
}

/// `--delete-share 0.5 --delete-after 300ms`: the authors delete half their
/// notes (`NoteDeleteService.delete`: the row only, the lists keep the ID).
/// Each `DELETE` is bracketed in `ftt_deletes` and marks the truth at its
/// sending; no read sent after a `DELETE` returned serves the note, not even
/// a Redis page whose range spans it (dropped at the PostgreSQL lookup); and
/// the notes each poller lost to a deletion, fate `gone`, are exactly those
/// our SQL finds, none of them a leak.
#[test]
fn deleted_notes_are_never_served_after_their_delete_and_are_gone_not_leaked() {
    let dir = temp_dir("ftt-deletes");
    let db = dir.join("run.db");
    let db_arg = db.to_str().unwrap();
    let out = common::experiment_ok(&[
        "--target",
        "misskey-ftt",
        "--timeline",
        "home",
        "--users",
        "5,5,9",
        "--note-rate",
        "30",
        "--remote-rate",
        "5",
        "--delete-share",
        "0.5",
        "--delete-after",
        "300ms",
        "--duration",
        "8s",
        "--interval",
        "1s",
        "--poller",
        "naive",
        "--poller",
        "newest",
        "--seed",
        "6",
        "--db",
        db_arg,
    ]);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("notes deleted by their authors"),
        "{summary}"
    );
    let conn = Connection::open(&db).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert!(count("SELECT count(*) FROM ftt_deletes") > 0);
    assert_eq!(
        count("SELECT count(*) FROM ftt_deletes WHERE sent_at_ms > returned_at_ms"),
        0
    );
    // The truth is marked deleted when the DELETE was sent, and only then.
    assert_eq!(
        count(
            "SELECT count(*) FROM truth t LEFT JOIN ftt_deletes d ON d.id = t.id
              WHERE t.deleted_at_ms IS NOT d.sent_at_ms"
        ),
        0
    );
    assert!(count("SELECT count(*) FROM truth WHERE deleted_at_ms IS NOT NULL") > 0);
    // Never served once the DELETE returned.
    assert_eq!(
        count(
            "SELECT count(*) FROM observations o JOIN requests r ON r.id = o.request_id
               JOIN ftt_deletes d ON d.id = o.status_id WHERE r.sent_at_ms > d.returned_at_ms"
        ),
        0
    );
    // ... though Redis pages read after it spanned deleted notes whose LPUSH
    // had returned before the DELETE was sent (the lists keep them).
    let spanned = count(
        "SELECT count(*) FROM ftt_deletes d JOIN truth t ON t.id = d.id
           JOIN requests r ON r.sent_at_ms > d.returned_at_ms
           JOIN pollers p ON p.id = r.poller_id AND p.name = 'newest'
          WHERE EXISTS (SELECT 1 FROM ftt_pushes f WHERE f.id = d.id
                          AND f.pushed_at_ms < d.sent_at_ms)
            AND (SELECT min(t2.id_key) FROM observations o JOIN truth t2 ON t2.id = o.status_id
                  WHERE o.request_id = r.id) < t.id_key
            AND (SELECT max(t2.id_key) FROM observations o JOIN truth t2 ON t2.id = o.status_id
                  WHERE o.request_id = r.id) > t.id_key",
    );
    assert!(spanned > 0, "a Redis page spanned a deleted note");
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
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (i, p) in json["pollers"].as_array().unwrap().iter().enumerate() {
        let name = p["name"].as_str().unwrap();
        // This poller's leaks: gone and owed are each a poller's own (its
        // requests' times), so a note gone for one poller may still be
        // another's leak when only the other asked while it was visible.
        let leaks: BTreeSet<String> = json["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["missed_by"].as_array().unwrap().iter().any(|m| m == name))
            .map(|l| l["id"].as_str().unwrap().to_string())
            .collect();
        let gone = gone_by_sql(&conn, name);
        assert!(!gone.is_empty(), "{name} lost notes to deletions");
        assert_eq!(
            p["gone_before_seen"].as_u64(),
            Some(gone.len() as u64),
            "{name}"
        );
        let ftt = &json["ftt"]["pollers"][i];
        assert_eq!(ftt["name"], p["name"]);
        let by_fate: BTreeSet<String> = ftt["lost"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["fate"] == "gone")
            .map(|l| l["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(by_fate, gone, "{name}: fate gone against our SQL");
        assert!(gone.is_disjoint(&leaks), "{name}: a gone note is no leak");
    }
}

/// The run's start and its stored configuration.
fn run_start_and_config(conn: &Connection) -> (i64, serde_json::Value) {
    let (start, config): (i64, String) = conn
        .query_row(
            "SELECT started_at_ms, config FROM runs WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    (start, serde_json::from_str(&config).unwrap())
}

/// `--ftt-off 2s..4s` (misskey-dev/misskey#17547, #12126): every note
/// committed inside the window, counted from the run's start, has no
/// `ftt_pushes` row (its `pushToTl` returned at once), every note committed
/// outside it has its row, reads inside the window went to PostgreSQL
/// directly, and the window is in the run's configuration.
#[test]
fn notes_committed_while_ftt_is_off_are_never_pushed() {
    let dir = temp_dir("ftt-off");
    let db = dir.join("run.db");
    let out = common::experiment_ok(&[
        "--target",
        "misskey-ftt",
        "--timeline",
        "home",
        "--users",
        "5,5,9",
        "--note-rate",
        "20",
        "--remote-rate",
        "5",
        "--ftt-off",
        "2s..4s",
        "--duration",
        "6s",
        "--interval",
        "200ms",
        "--poller",
        "naive",
        "--seed",
        "5",
        "--db",
        db.to_str().unwrap(),
    ]);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("FTT off from 2s to 4s"), "{summary}");
    // A push that fails (redis-rs gives up on an answer after 500 ms, which a
    // loaded machine can exceed) leaves a note outside the window without
    // its row, and the run incomplete: only then may one lack it.
    let complete = !summary.contains("INCOMPLETE");
    assert!(
        summary.contains("db-direct"),
        "reads inside the window skip Redis: {summary}"
    );
    let conn = Connection::open(&db).unwrap();
    let (start, config) = run_start_and_config(&conn);
    assert_eq!(
        config["ftt_off"],
        serde_json::json!([{"from_ms": 2000, "to_ms": 4000}])
    );
    let mut st = conn
        .prepare(
            "SELECT t.id, t.visible_at_ms - 1,
                    EXISTS (SELECT 1 FROM ftt_pushes f WHERE f.run_id = 1 AND f.id = t.id)
             FROM truth t WHERE t.run_id = 1",
        )
        .unwrap();
    let notes: Vec<(String, i64, bool)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let (mut off, mut on) = (0, 0);
    for (id, committed, pushed) in &notes {
        let inside = (2000..4000).contains(&(committed - start));
        let into = committed - start;
        if inside {
            assert!(!pushed, "{id} committed {into} ms into the run was pushed");
        } else {
            assert!(
                *pushed || !complete,
                "{id} committed {into} ms into the run was not pushed"
            );
        }
        if inside {
            off += 1;
        } else {
            on += 1;
        }
    }
    assert!(off > 0 && on > 0, "notes on both sides: {off} off, {on} on");
    assert!(
        notes.iter().any(|(_, _, pushed)| *pushed),
        "notes outside the window were pushed"
    );
}

/// `--redis-restart-at 3s`: Redis is stopped and started again empty on
/// the same socket; the run goes on, pushes after it land in the new
/// server's lists, the restart's times are in the run, and the run is
/// complete (a planned restart is no crash: compare
/// `redis_dying_mid_run_ends_it_cleanly_and_marks_it_incomplete`).
#[test]
fn a_planned_redis_restart_empties_the_lists_and_leaves_the_run_complete() {
    let dir = temp_dir("ftt-restart");
    let db = dir.join("run.db");
    let out = common::experiment_ok(&[
        "--target",
        "misskey-ftt",
        "--timeline",
        "home",
        "--users",
        "5,5,9",
        "--note-rate",
        "20",
        "--remote-rate",
        "5",
        "--redis-restart-at",
        "3s",
        "--duration",
        "6s",
        "--interval",
        "200ms",
        "--poller",
        "naive",
        "--poller",
        "newest",
        "--seed",
        "6",
        "--db",
        db.to_str().unwrap(),
    ]);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(!summary.contains("INCOMPLETE"), "{summary}");
    assert!(summary.contains("Redis restarted at 3s"), "{summary}");
    let conn = Connection::open(&db).unwrap();
    let (complete, start): (i64, i64) = conn
        .query_row(
            "SELECT complete, started_at_ms FROM runs WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(complete, 1);
    let (_, config) = run_start_and_config(&conn);
    assert_eq!(config["redis_restart_at_ms"], serde_json::json!([3000]));
    let restarts = config["redis_restarts"].as_array().unwrap();
    assert_eq!(restarts.len(), 1, "{config}");
    let stopped = restarts[0]["stopped_at_ms"].as_i64().unwrap();
    let ready = restarts[0]["ready_at_ms"].as_i64().unwrap();
    assert!(start + 3000 <= stopped && stopped <= ready, "{restarts:?}");
    // Pushes before the stop and after the new server answered.
    let pushes = |sql: &str, at: i64| -> i64 { conn.query_row(sql, [at], |r| r.get(0)).unwrap() };
    assert!(
        pushes(
            "SELECT count(*) FROM ftt_pushes WHERE run_id = 1 AND pushed_at_ms < ?1",
            stopped
        ) > 0
    );
    assert!(
        pushes(
            "SELECT count(*) FROM ftt_pushes WHERE run_id = 1 AND committed_at_ms > ?1 AND pushed_at_ms IS NOT NULL",
            ready
        ) > 0,
        "the creators push to the restarted server"
    );
    // The newest-page reader read the emptied lists: a note pushed only
    // before the stop and not returned to it before then is served after
    // it only by PostgreSQL's fill, below every Redis ID; none is lost
    // at this load (fewer notes between two reads than a page holds).
}

/// `analyze --json` of a run: (leaks of `poller`, its other misses by cause).
fn checker_verdicts(
    dir: &std::path::Path,
    db: &str,
    poller: &str,
) -> (
    BTreeSet<String>,
    std::collections::BTreeMap<String, BTreeSet<String>>,
) {
    let analyze = std::path::Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let out = std::process::Command::new(&analyze)
        .args([db, "--json", "--out", dir.join("plots").to_str().unwrap()])
        .output()
        .expect("analyze runs (cargo builds it for the workspace's tests)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leaks = json["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            l["missed_by"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == poller)
        })
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    let mut other = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for m in json["other_misses"].as_array().unwrap() {
        if m["poller"] == poller {
            other
                .entry(m["cause"].as_str().unwrap().to_string())
                .or_default()
                .insert(m["id"].as_str().unwrap().to_string());
        }
    }
    (leaks, other)
}

/// A newest-page poller's requests (`?1`, its name) and, per note it never
/// returned, how the checker's rules place it, by our own SQL: `req` its
/// requests (full: as many items as asked; low: the lowest key returned),
/// `cyc` its cycles (the lowest key of all pages, whether the last was
/// full), the baseline the cycles up to its first non-empty one. A note is
/// owed at a request sent from its commit on, unless above a lower page's
/// `untilId` (page 0 answered for it); in reach of it when the page was
/// not full or the note's key is at least the page's lowest.
const NEWEST_SQL: &str = "
WITH req AS (
  SELECT r.id, r.cycle, r.page, r.sent_at_ms, r.before_key,
         (r.error IS NULL AND r.items >= r.page_limit) AS full,
         (SELECT min(s.id_key) FROM observations o
            JOIN statuses s ON s.run_id = r.run_id AND s.id = o.status_id
           WHERE o.request_id = r.id) AS low
  FROM requests r JOIN pollers p ON p.id = r.poller_id
  WHERE r.run_id = 1 AND p.name = ?1),
cyc AS (
  SELECT cycle, min(sent_at_ms) AS sent, min(low) AS low,
         (SELECT q.full FROM req q WHERE q.cycle = req.cycle ORDER BY q.page DESC LIMIT 1)
           AS last_full
  FROM req GROUP BY cycle),
base AS (SELECT min(cycle) AS cycle FROM req WHERE low IS NOT NULL),
lost AS (
  SELECT t.id, t.id_key, t.visible_at_ms FROM truth t
  WHERE t.run_id = 1 AND NOT EXISTS (
    SELECT 1 FROM observations o JOIN req ON req.id = o.request_id WHERE o.status_id = t.id)),
placed AS (
  SELECT l.id,
    EXISTS (SELECT 1 FROM req WHERE req.sent_at_ms >= l.visible_at_ms
              AND (req.before_key IS NULL OR l.id_key < req.before_key)) AS owed,
    EXISTS (SELECT 1 FROM cyc, base WHERE cyc.cycle <= base.cycle
              AND cyc.sent >= l.visible_at_ms AND cyc.last_full AND l.id_key < cyc.low)
      AS backlog,
    EXISTS (SELECT 1 FROM req WHERE req.sent_at_ms >= l.visible_at_ms
              AND (req.before_key IS NULL OR l.id_key < req.before_key)
              AND NOT (req.full AND l.id_key < req.low)) AS in_reach
  FROM lost l)
SELECT id, CASE WHEN NOT owed THEN 'not-owed' WHEN backlog THEN 'backlog'
                WHEN in_reach THEN 'in-reach' ELSE 'leak' END
FROM placed";

/// Our SQL's placement of each note `poller` never returned ([`NEWEST_SQL`]).
fn placed_by_sql(
    conn: &Connection,
    poller: &str,
) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let mut st = conn.prepare(NEWEST_SQL).unwrap();
    let mut by_sql = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for row in st
        .query_map([poller], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .unwrap()
    {
        let (id, place) = row.unwrap();
        by_sql.entry(place).or_default().insert(id);
    }
    by_sql
}

/// Every request of `poller` that had note `id` in reach (sent from its
/// commit on, below the page's `untilId`, not below a full page's lowest
/// key) found it in none of the lists the endpoint reads, by `ftt_pushes`
/// and `ftt_trims`: in a list means its LPUSH there had returned before the
/// request was sent and no LTRIM had cut it there by the answer. There is
/// at least one such request.
fn assert_in_no_list_when_read(conn: &Connection, id: &str, poller: &str) {
    let mut st = conn
        .prepare(
            "SELECT r.id, r.sent_at_ms,
               EXISTS (SELECT 1 FROM ftt_pushes f WHERE f.run_id = 1 AND f.id = ?1
                         AND f.pushed_at_ms IS NOT NULL AND f.pushed_at_ms <= r.sent_at_ms
                         AND NOT EXISTS (SELECT 1 FROM ftt_trims x WHERE x.run_id = 1
                               AND x.id = ?1 AND x.list = f.list
                               AND x.trimmed_at_ms <= r.received_at_ms))
             FROM requests r JOIN pollers p ON p.id = r.poller_id
             WHERE r.run_id = 1 AND p.name = ?2 AND r.error IS NULL
               AND r.sent_at_ms >= (SELECT visible_at_ms FROM truth WHERE run_id = 1 AND id = ?1)
               AND (r.before_key IS NULL
                    OR (SELECT id_key FROM truth WHERE run_id = 1 AND id = ?1) < r.before_key)
               AND (r.items < r.page_limit OR (SELECT id_key FROM truth WHERE run_id = 1 AND id = ?1)
                    >= (SELECT min(s.id_key) FROM observations o
                          JOIN statuses s ON s.run_id = 1 AND s.id = o.status_id
                         WHERE o.request_id = r.id))",
        )
        .unwrap();
    let rows: Vec<(i64, i64, bool)> = st
        .query_map([id, poller], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!rows.is_empty(), "{id}: no request had it in reach");
    for (request, sent, in_list) in rows {
        assert!(
            !in_list,
            "{id} was in a list before request {request} (sent {sent}) and not served"
        );
    }
}

/// A client that re-reads the newest page without sinceId (`--poller
/// newest`, the seed article's first approach) on the home timeline with
/// pages of 10 and about 40 notes a second: every request is answered by
/// Redis (no request carries a sinceId, so none falls back), the notes it
/// loses are those our SQL finds (leaks: below every full page it read once
/// they were committed; in reach of a page but not on it: unexplained
/// misses), and each note in reach of a page yet left off it was not in the
/// Redis list then: its LPUSH had not returned when the request was sent
/// (push order: committed, not yet pushed) or an LTRIM had cut it.
#[test]
fn a_newest_page_reader_is_served_by_redis_and_loses_what_the_lists_and_its_page_hide() {
    let dir = temp_dir("ftt-newest");
    let db = dir.join("run.db");
    let db_arg = db.to_str().unwrap();
    let out = common::experiment_ok(&[
        "--target",
        "misskey-ftt",
        "--timeline",
        "home",
        "--users",
        "5,5,9",
        "--note-rate",
        "30",
        "--remote-rate",
        "10",
        "--federation-delay",
        "2s",
        "--duration",
        "8s",
        "--interval",
        "500ms",
        "--limit",
        "10",
        "--poller",
        "newest",
        "--seed",
        "7",
        "--db",
        db_arg,
    ]);
    let summary = String::from_utf8_lossy(&out.stdout);
    let paths = summary
        .lines()
        .find(|l| l.starts_with("read paths:"))
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(paths.contains("redis"), "{paths}");
    assert!(!paths.contains("db-direct"), "{paths}");
    let conn = Connection::open(&db).unwrap();
    // A request without sinceId falls back only while the lists give
    // nothing (`shouldFallbackToDb`): at most those sent before the first
    // push into user 0's home list returned.
    let fell_back: i64 = paths
        .trim_start_matches("read paths: ")
        .split(", ")
        .find_map(|p| p.strip_prefix("db-fallback "))
        .map_or(0, |n| n.trim().parse().unwrap());
    let before_first_push: i64 = conn
        .query_row(
            "SELECT count(*) FROM requests WHERE run_id = 1 AND sent_at_ms <=
               (SELECT min(pushed_at_ms) FROM ftt_pushes
                 WHERE run_id = 1 AND list = 'list:homeTimeline:0')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        fell_back <= before_first_push,
        "no request without sinceId falls back once the list holds a note: {paths}"
    );
    let since: i64 = conn
        .query_row(
            "SELECT count(*) FROM requests WHERE run_id = 1 AND since_id IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(since, 0, "no request carried a sinceId");
    let by_sql = placed_by_sql(&conn, "newest");
    let (leaks, other) = checker_verdicts(&dir, db_arg, "newest");
    let sql = |place: &str| by_sql.get(place).cloned().unwrap_or_default();
    assert_eq!(leaks, sql("leak"), "leaks: the checker and our SQL");
    assert!(
        !leaks.is_empty(),
        "40 notes a second push notes below pages of 10"
    );
    assert_eq!(
        other.get("unexplained").cloned().unwrap_or_default(),
        sql("in-reach"),
        "in reach of a page, not on it"
    );
    assert!(
        other.keys().all(|c| c == "unexplained"),
        "no failed request: {other:?}"
    );
    // Each note in reach of a page and left off it was not in the list then.
    for id in sql("in-reach") {
        assert_in_no_list_when_read(&conn, &id, "newest");
    }
}

/// misskey-dev/misskey#13488 (PR #13495) in a run: the hybrid timeline reads
/// the home list (300) and the local list (1000). A reader of the newest
/// page that pages down with `untilId` (`newest:pages=10`, pages of 100,
/// every 4 s at about 150 notes a second) reaches below the home list's
/// tail, where Redis still holds the local list's notes: those pages are
/// answered by Redis alone and lack the remote notes LTRIM cut from the
/// home list, while PostgreSQL holds them. The checker's misses agree row
/// by row with our SQL, and each note missed within a page's reach was cut
/// from the lists or not yet pushed when the page was read; some are remote
/// notes cut from the home list (the depth case itself: no local list holds
/// them).
#[test]
fn a_hybrid_reader_paging_below_the_home_lists_tail_misses_its_trimmed_notes() {
    let dir = temp_dir("ftt-hybrid-depth");
    let db = dir.join("run.db");
    let db_arg = db.to_str().unwrap();
    let out = common::experiment_ok(&[
        "--target",
        "misskey-ftt",
        "--timeline",
        "hybrid",
        "--users",
        "5,5,9",
        "--note-rate",
        "100",
        "--remote-rate",
        "50",
        "--duration",
        "10s",
        "--interval",
        "4s",
        "--limit",
        "100",
        "--poller",
        "newest:pages=10",
        "--seed",
        "8",
        "--db",
        db_arg,
    ]);
    let summary = String::from_utf8_lossy(&out.stdout);
    let paths = summary
        .lines()
        .find(|l| l.starts_with("read paths:"))
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(paths.contains("redis "), "pages from Redis alone: {paths}");
    // A page below every list's tail gets nothing from Redis and falls back
    // (`getMiNotes`: `noteIds.length === 0`); how many do depends on how many
    // notes the creators reached on this machine, so it is not asserted.
    let conn = Connection::open(&db).unwrap();
    let by_sql = placed_by_sql(&conn, "newest:pages=10");
    let sql = |place: &str| by_sql.get(place).cloned().unwrap_or_default();
    let (leaks, other) = checker_verdicts(&dir, db_arg, "newest:pages=10");
    assert_eq!(leaks, sql("leak"), "leaks: the checker and our SQL");
    let missed = other.get("unexplained").cloned().unwrap_or_default();
    assert_eq!(missed, sql("in-reach"), "in reach of a page, not on it");
    let mut cut_remote = 0;
    for id in &missed {
        assert_in_no_list_when_read(&conn, id, "newest:pages=10");
        let (origin, trimmed): (String, bool) = conn
            .query_row(
                "SELECT t.origin, EXISTS (SELECT 1 FROM ftt_trims x WHERE x.run_id = 1
                   AND x.id = t.id AND x.list = 'list:homeTimeline:0')
                 FROM truth t WHERE t.run_id = 1 AND t.id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        cut_remote += (trimmed && origin.starts_with("remote")) as u32;
    }
    assert!(
        cut_remote > 0,
        "remote notes cut from the home list were missed: {missed:?}"
    );
}

/// A short home-timeline run of misskey-ftt with `extra` flags; its run.db.
fn home_run(dir: &std::path::Path, name: &str, extra: &[&str]) -> (Connection, String) {
    let db = dir.join(format!("{name}.db"));
    let mut args = vec![
        "--target",
        "misskey-ftt",
        "--timeline",
        "home",
        "--note-rate",
        "5",
        "--remote-rate",
        "5",
        "--duration",
        "5s",
        "--interval",
        "1s",
        "--db",
        db.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = common::experiment_ok(&args);
    (
        Connection::open(&db).unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Each remote note's lateness, `create()`'s start minus its ID's time
/// (ms), and its origin.
fn remote_lateness(conn: &Connection) -> Vec<(i64, String)> {
    let mut st = conn
        .prepare(
            "SELECT posted_at_ms - id_time_ms, origin FROM truth
             WHERE run_id = 1 AND origin LIKE 'remote%'",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Issue 34: Misskey's assumptions as flags. Two runs of different
/// `--seed` with `--graph-seed 7` follow the same graph (the same remote
/// share of the pollers' account's followees, in `runs.config`); with
/// `--late-share 0` no remote note is later than the federation delay's
/// tail (none on the `remote-late` path); with `--late-share 1 --late-max
/// 10m` every remote note is late, from 181 s up to 10 minutes; and each
/// flag is in `runs.config`. (Without `--graph-seed` seeds 1 and 2 draw two
/// graphs: `creators.rs`'s unit test.)
#[test]
fn graph_seed_late_share_and_late_max_do_what_they_say() {
    let dir = temp_dir("ftt-assumptions");
    let (a, _) = home_run(
        &dir,
        "a",
        &[
            "--seed",
            "1",
            "--graph-seed",
            "7",
            "--late-share",
            "0",
            "--federation-delay",
            "500ms",
        ],
    );
    let (b, _) = home_run(
        &dir,
        "b",
        &[
            "--seed",
            "2",
            "--graph-seed",
            "7",
            "--late-share",
            "1",
            "--late-max",
            "10m",
            "--federation-delay-dist",
            "lognormal",
        ],
    );
    let (_, ca) = run_start_and_config(&a);
    let (_, cb) = run_start_and_config(&b);
    assert_eq!(ca["load"]["graph_seed"], 7, "{ca}");
    assert_eq!(
        (ca["seed"].clone(), cb["seed"].clone()),
        (1.into(), 2.into())
    );
    let share = ca["home_followed_remote_share"].as_f64().unwrap();
    assert!(share > 0.0, "{ca}");
    assert_eq!(cb["home_followed_remote_share"].as_f64(), Some(share));
    assert_eq!(ca["load"]["late_share"], 0.0);
    assert_eq!(ca["load"]["federation_delay_ms"], 500);
    assert_eq!(ca["load"]["federation_delay_dist"], "exponential");
    assert_eq!(cb["load"]["federation_delay_dist"], "lognormal");
    assert_eq!(cb["load"]["late_max_ms"], 600_000);
    assert_eq!(ca["load"]["late_max_ms"], 540_000, "the default, 9 minutes");

    let on_time = remote_lateness(&a);
    assert!(!on_time.is_empty(), "remote notes arrived");
    for (lateness, origin) in &on_time {
        assert_eq!(origin, "remote", "{lateness} ms");
        assert!(*lateness < 179_000 + 1_000, "{lateness} ms");
    }
    let late = remote_lateness(&b);
    assert!(!late.is_empty(), "remote notes arrived");
    for (lateness, origin) in &late {
        assert_eq!(origin, "remote-late", "{lateness} ms");
        // Drawn on [181 s, 600 s); `create()`'s start is read after the draw.
        assert!((181_000..601_000).contains(lateness), "{lateness} ms");
    }
}

/// `--no-fanout-timeline`: Misskey's `enableFanoutTimeline` off for the
/// whole run. Nothing is pushed (no `ftt_pushes` row) and every read, with
/// `sinceId` or without, is answered by PostgreSQL directly: no page comes
/// from Redis.
#[test]
fn without_the_fanout_timeline_nothing_is_pushed_and_redis_serves_no_read() {
    let dir = temp_dir("ftt-none");
    let (conn, summary) = home_run(
        &dir,
        "run",
        &[
            "--no-fanout-timeline",
            "--poller",
            "naive",
            "--poller",
            "newest",
            "--seed",
            "4",
        ],
    );
    let paths = summary
        .lines()
        .find(|l| l.starts_with("read paths:"))
        .unwrap_or_else(|| panic!("{summary}"));
    let parts: Vec<&str> = paths
        .trim_start_matches("read paths: ")
        .split(", ")
        .collect();
    assert_eq!(parts.len(), 1, "{paths}");
    assert!(parts[0].starts_with("db-direct "), "{paths}");
    let pushes: i64 = conn
        .query_row(
            "SELECT count(*) FROM ftt_pushes WHERE run_id = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(pushes, 0);
    let notes: i64 = conn
        .query_row("SELECT count(*) FROM truth WHERE run_id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(notes > 0, "notes were created");
    let (_, config) = run_start_and_config(&conn);
    assert_eq!(config["enable_fanout_timeline"], false, "{config}");
}
