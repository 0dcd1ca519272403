//! End-to-end tests of the `analyze` binary on databases written in a temporary
//! directory: a synthetic run (report, JSON, plots) and every kind of bad input.

use analysis::synth::{self, SimSpec, SynthRequest, SynthTruth};
use rundb::RunRow;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::temp_dir as tempdir;

fn analyze(args: &[&str]) -> Output {
    common::run_bin(env!("CARGO_BIN_EXE_analyze"), args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A bad input ends with exit status 2 and one line on stderr containing `needle`.
fn assert_refused(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

fn small_spec() -> SimSpec {
    SimSpec {
        ticks: 60,
        late_fraction: 0.1,
        ..SimSpec::default()
    }
}

#[test]
fn synthetic_run_gives_report_json_and_plots() {
    let dir = tempdir("synthetic");
    let db = dir.join("run.db");
    synth::simulate_to_db(&db, &small_spec(), true).unwrap();
    let before = std::fs::read(&db).unwrap();

    // Streaming (the default), the figures that need the whole run say so.
    let o = analyze(&[db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("oracle: not computed: needs the whole run"),
        "{text}"
    );
    // The lateness CDF is drawn from a count per distinct lateness.
    assert!(!text.contains("lateness CDF not computed"), "{text}");
    assert!(text.contains("lateness-cdf.svg"), "{text}");
    let cdf = dir.join("run1-lateness-cdf.svg");
    let streamed_cdf = std::fs::read(&cdf).unwrap();
    assert!(text.contains("detection delay ms:"), "{text}");
    // In memory, every figure; the lateness CDF drawn the same.
    let o = analyze(&[db.to_str().unwrap(), "--in-memory"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        std::fs::read(&cdf).unwrap() == streamed_cdf,
        "the lateness CDF differs"
    );
    let text = stdout(&o);
    let first = text.lines().next().unwrap();
    assert_eq!(first, "run 1 is complete (duration reached).");
    for needle in [
        "target     simulator (profile synthetic, seed 7)",
        "reference  truth:",
        "naive",
        "compensated:k=10s",
        "k to catch all leaks:",
        "required_k_ms over leaks and late arrivals (basis:",
        "verdict:",
        "oracle (knows what is visible;",
        "detection delay ms:",
        "naive              INVALID (",
        "compensated:k=10s  VALID",
        "plots written:",
    ] {
        assert!(text.contains(needle), "missing '{needle}' in:\n{text}");
    }
    // Analysis never changes the database.
    assert_eq!(std::fs::read(&db).unwrap(), before);

    for stem in ["required-k", "leaks", "lateness-cdf", "price-of-safety"] {
        let png = std::fs::read(dir.join(format!("run1-{stem}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{stem}.png");
        assert!(png.len() > 10_000, "{stem}.png is only {} bytes", png.len());
        let svg = std::fs::read_to_string(dir.join(format!("run1-{stem}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("<text"), "{stem}.svg");
        assert!(svg.len() > 2_000, "{stem}.svg");
    }

    // JSON, with plots in another directory.
    let out = dir.join("plots");
    let o = analyze(&[
        db.to_str().unwrap(),
        "--json",
        "--in-memory",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert_eq!(v["schema"], 1);
    assert_eq!(v["run"]["id"], 1);
    assert_eq!(v["run"]["target"], "simulator");
    assert_eq!(v["run"]["complete"], true);
    assert!(v["run"]["started_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(v["reference"], "truth");
    let pollers = v["pollers"].as_array().unwrap();
    assert_eq!(pollers.len(), 3);
    assert_eq!(pollers[0]["name"], "naive");
    assert!(pollers[0]["k_ms"].is_null());
    assert_eq!(pollers[1]["k_ms"], 1000);
    assert_eq!(pollers[0]["verdict"], "invalid");
    assert_eq!(pollers[2]["verdict"], "valid");
    let naive_leaks = pollers[0]["leaks"].as_u64().unwrap();
    assert!(naive_leaks > 0);
    let leaks = v["leaks"].as_array().unwrap();
    assert!(leaks.len() as u64 >= naive_leaks);
    let l = &leaks[0];
    for field in [
        "id",
        "id_time",
        "first_seen",
        "seen_by",
        "missed_by",
        "id_skew_ms",
        "required_k_ms",
    ] {
        assert!(l.get(field).is_some(), "leak field {field}");
    }
    assert!(v["truth"]["statuses"].as_u64().unwrap() > 0);
    assert_eq!(v["truth"]["missed"]["naive"], pollers[0]["missed"]);
    // Issue 15: the oracle, each poller's ratio to it, and detection delays.
    let oracle_dups = v["oracle"]["duplicates"].as_f64().unwrap();
    assert!(v["oracle"]["new"].as_u64().unwrap() > 0);
    let k10 = &pollers[2];
    assert!(
        k10["duplicates"].as_f64().unwrap() >= oracle_dups,
        "a valid poller pays at least the oracle"
    );
    let ratio = k10["oracle_ratio"].as_f64().unwrap();
    assert!((ratio - k10["duplicates"].as_f64().unwrap() / oracle_dups).abs() < 0.001);
    let delay = &k10["detection_delay_ms"];
    assert!(delay["p50"].as_i64().unwrap() <= delay["p99"].as_i64().unwrap());
    assert!(delay["p99"].as_i64().unwrap() <= delay["max"].as_i64().unwrap());
    assert!(delay["basis"].as_u64().unwrap() > 0);
    assert!(v["k_to_catch_all_ms"].as_i64().unwrap() > 0);
    let rk = &v["required_k"];
    assert!(rk["basis"].as_u64().unwrap() >= leaks.len() as u64);
    assert!(rk["p50"].as_i64() <= rk["p90"].as_i64() && rk["p99"].as_i64() <= rk["max"].as_i64());
    assert_eq!(v["plots"].as_array().unwrap().len(), 8);
    assert!(out.join("run1-required-k.png").exists());
}

#[test]
fn without_truth_the_other_pollers_are_the_reference() {
    let dir = tempdir("union");
    let db = dir.join("run.db");
    let spec = small_spec();
    let (requests, _truth) = synth::simulate(&spec);
    let pollers = spec.pollers();
    let run = RunRow {
        target: "mastodon:https://example.social".into(),
        profile: None,
        seed: None,
        clock: "real".into(),
        ..synth::run()
    };
    let mut conn = synth::create(&db).unwrap();
    synth::write_run(&mut conn, &run, &pollers, &requests, &[]).unwrap();
    drop(conn);
    let o = analyze(&[db.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["reference"], "union");
    assert!(v["truth"].is_null());
    assert!(v["run"]["profile"].is_null());
    assert_eq!(v["pollers"][0]["verdict"], "invalid");
    assert!(v["pollers"][0]["leaks"].as_u64().unwrap() > 0);
    assert_eq!(v["pollers"][2]["verdict"], "valid");
    assert!(
        v["plots"].as_array().unwrap().len() == 6,
        "no lateness CDF without truth"
    );
    let o = analyze(&[db.to_str().unwrap()]);
    let text = stdout(&o);
    assert!(
        text.contains("reference  no truth: each poller is checked against the union"),
        "{text}"
    );
    assert!(text.contains("lateness CDF skipped"));
}

#[test]
fn the_latest_run_is_the_default_and_run_n_picks_another() {
    let dir = tempdir("two-runs");
    let db = dir.join("run.db");
    let mut conn = synth::create(&db).unwrap();
    let pollers = [("naive", "naive")];
    let req = |sent| SynthRequest {
        sent_at_ms: sent,
        received_at_ms: sent + 10,
        ..SynthRequest::default()
    };
    synth::write_run(&mut conn, &synth::run(), &pollers, &[req(1000)], &[]).unwrap();
    let second = RunRow {
        target: "mastodon:https://example.social".into(),
        profile: None,
        seed: None,
        clock: "real".into(),
        ..synth::run()
    };
    synth::write_run(&mut conn, &second, &pollers, &[req(1000)], &[]).unwrap();
    drop(conn);
    let o = analyze(&[db.to_str().unwrap(), "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("run 2 is complete"), "{text}");
    assert!(text.contains("target     mastodon:https://example.social\n"));
    // One poller, no truth: nothing to compare with.
    assert!(
        text.contains("UNKNOWN (no truth and no other poller to compare with)"),
        "{text}"
    );
    // One poller, no k: nobody asked for the price-of-safety plot, so nothing is said of it.
    assert!(!text.contains("price-of-safety"), "{text}");
    let o = analyze(&[db.to_str().unwrap(), "--run", "1"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("run 1 is complete"));
    let o = analyze(&[db.to_str().unwrap(), "--run", "7"]);
    assert_refused(&o, "no run 7 (runs recorded: 1, 2)");
}

#[test]
fn an_incomplete_run_says_so_on_its_first_line() {
    let dir = tempdir("incomplete");
    let db = dir.join("run.db");
    synth::simulate_to_db(&db, &small_spec(), false).unwrap();
    let o = analyze(&[db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .starts_with("run 1 is INCOMPLETE (killed or still running): "),
        "{text}"
    );
    let o = analyze(&[db.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["run"]["complete"], false);
    assert!(v["run"]["ended_at"].is_null());
}

#[test]
fn a_run_that_has_only_just_started_is_reported() {
    let dir = tempdir("just-started");
    let db = dir.join("run.db");
    let mut conn = synth::create(&db).unwrap();
    let run = RunRow {
        complete: false,
        end_reason: None,
        ..synth::run()
    };
    synth::write_run(&mut conn, &run, &[], &[], &[]).unwrap();
    drop(conn);
    let o = analyze(&[db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("run 1 is INCOMPLETE"), "{text}");
    assert!(
        text.contains("history    0 requests, 0 observations"),
        "{text}"
    );
}

/// Writes a run through a connection in WAL mode and leaves the WAL behind,
/// as a killed experiment does.
fn db_with_leftover_wal(dir: &Path) -> PathBuf {
    let db = dir.join("run.db");
    let mut conn = synth::create(&db).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;")
        .unwrap();
    let spec = small_spec();
    let (requests, truth): (Vec<SynthRequest>, Vec<SynthTruth>) = synth::simulate(&spec);
    let pollers = spec.pollers();
    let run = RunRow {
        complete: false,
        end_reason: None,
        ..synth::run()
    };
    synth::write_run(&mut conn, &run, &pollers, &requests, &truth).unwrap();
    // Closing the last connection would checkpoint and delete the WAL: a killed process does not.
    std::mem::forget(conn);
    let wal = dir.join("run.db-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    db
}

#[test]
fn a_leftover_wal_is_readable() {
    let dir = tempdir("wal");
    let db = db_with_leftover_wal(&dir);
    let o = analyze(&[db.to_str().unwrap(), "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("run 1 is INCOMPLETE"));

    // The same files copied elsewhere, without the -shm of a live connection.
    let copy = tempdir("wal-copy");
    std::fs::copy(&db, copy.join("run.db")).unwrap();
    std::fs::copy(dir.join("run.db-wal"), copy.join("run.db-wal")).unwrap();
    let o = analyze(&[copy.join("run.db").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("run 1 is INCOMPLETE"), "{text}");
    assert!(text.contains("compensated:k=10s"));
}

/// A run whose analysis would need more memory than allowed (by
/// `--max-memory`, else what the system has available) is refused in one
/// line before it is loaded, with its size and the estimate; within the
/// limit it is analyzed. The footprint's counts are the run's own.
#[test]
fn a_run_too_big_for_the_memory_is_refused_before_loading() {
    let dir = tempdir("max-memory");
    let db = dir.join("run.db");
    synth::simulate_to_db(&db, &small_spec(), true).unwrap();
    let conn = analysis::load::open(&db).unwrap();
    let size = analysis::load::footprint(&conn, 1).unwrap();
    let history = analysis::load::load(&conn, 1).unwrap().history;
    assert_eq!(size.statuses, history.statuses.len() as u64);
    assert_eq!(size.observations, history.observations.len() as u64);
    assert_eq!(size.requests, history.requests.len() as u64);
    let path = db.to_str().unwrap();
    // Streaming (the default), memory is bounded by the horizon, not the run.
    let o = analyze(&[path, "--max-memory", "1KiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = analyze(&[path, "--in-memory", "--max-memory", "1KiB"]);
    assert_refused(
        &o,
        &format!(
            "run 1 holds {} statuses and {} observations: analyzing it needs about",
            size.statuses, size.observations
        ),
    );
    assert!(stderr(&o).contains("more than the 1.0 KiB --max-memory allows"));
    let o = analyze(&[path, "--max-memory", "1GiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_refused(&analyze(&[path, "--max-memory", "lots"]), "bad size 'lots'");
}

#[test]
fn a_missing_file_is_refused() {
    let dir = tempdir("missing");
    let o = analyze(&[dir.join("nope.db").to_str().unwrap()]);
    assert_refused(&o, "cannot open");
    assert!(
        !dir.join("nope.db").exists(),
        "analyze must not create the file"
    );
}

#[test]
fn a_file_that_is_not_sqlite_is_refused() {
    let dir = tempdir("not-sqlite");
    let f = dir.join("notes.db");
    std::fs::write(
        &f,
        "these are not the droids you are looking for\n".repeat(100),
    )
    .unwrap();
    let o = analyze(&[f.to_str().unwrap()]);
    assert_refused(&o, "not a SQLite database");
}

#[test]
fn another_programs_database_is_refused() {
    let dir = tempdir("foreign");
    let f = dir.join("other.db");
    let c = Connection::open(&f).unwrap();
    c.execute_batch("CREATE TABLE things (a, b); INSERT INTO things VALUES (1, 2);")
        .unwrap();
    drop(c);
    let o = analyze(&[f.to_str().unwrap()]);
    assert_refused(&o, "not a snowleak run database");

    // A runs table is not enough: the application_id must be ours.
    let f = dir.join("lookalike.db");
    let c = Connection::open(&f).unwrap();
    c.execute_batch("CREATE TABLE runs (id INTEGER PRIMARY KEY); PRAGMA application_id = 42;")
        .unwrap();
    drop(c);
    let o = analyze(&[f.to_str().unwrap()]);
    assert_refused(&o, "application_id 0x2a");
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempdir("newer");
    let db = dir.join("run.db");
    let c = synth::create(&db).unwrap();
    c.execute_batch(&format!(
        "PRAGMA user_version = {}",
        rundb::schema::SCHEMA_VERSION + 1
    ))
    .unwrap();
    drop(c);
    let o = analyze(&[db.to_str().unwrap()]);
    assert_refused(&o, "is newer than this build of analyze knows");
}

#[test]
fn an_empty_database_is_refused() {
    let dir = tempdir("empty");
    let db = dir.join("run.db");
    drop(synth::create(&db).unwrap());
    let o = analyze(&[db.to_str().unwrap()]);
    assert_refused(&o, "no runs recorded yet");
}

/// Issue 11.8: a FIFO (or any non-regular file) is refused at once instead of
/// blocking on SQLite's first read. Without the check this test never returns.
#[cfg(unix)]
#[test]
fn a_fifo_is_refused_not_waited_on() {
    let dir = tempdir("fifo");
    let fifo = dir.join("run.db");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let out = analyze(&[fifo.to_str().unwrap()]);
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "analyze: {}: not a regular file (a FIFO, socket or device), not a run database",
            fifo.display()
        )
    );
    assert_eq!(out.status.code(), Some(2));
}

/// Reading a finished run leaves nothing beside it: no `-wal`, no `-shm`
/// (a read-only connection could not remove them).
#[test]
fn analyze_leaves_no_files_beside_a_finished_run() {
    let dir = tempdir("no-leftovers");
    let db = dir.join("run.db");
    common::experiment(&[
        "--clock",
        "virtual",
        "--duration",
        "2m",
        "--db",
        db.to_str().unwrap(),
    ]);
    let names = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        names(&dir),
        ["run.db"],
        "the recorder cleaned up after itself"
    );
    let out = dir.join("plots");
    let o = analyze(&[db.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("naive"));
    assert_eq!(
        names(&dir),
        ["plots", "run.db"],
        "analyze left files beside the run"
    );
    // A run with a -wal beside it (a writer live, or killed) is still read through it.
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("BEGIN; CREATE TABLE scratch (x); COMMIT;")
        .unwrap();
    let o = analyze(&[db.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    drop(conn);
}

/// A run.db begun before the writers' brackets table was named
/// `writer_brackets` holds it as `pg_truth`: `analyze` reports on it exactly
/// as on the same file without it, and rundb still reads its brackets.
#[test]
fn a_file_with_the_old_pg_truth_table_reads_as_before() {
    let dir = tempdir("pg-truth");
    let db = dir.join("run.db");
    synth::simulate_to_db(&db, &small_spec(), true).unwrap();
    let without = analyze(&[db.to_str().unwrap()]);
    assert!(without.status.success(), "{}", stderr(&without));

    let conn = Connection::open(&db).unwrap();
    let old = <rundb::WriterBracketRow as rundb::SideTable>::CREATE
        .replace("writer_brackets", "pg_truth");
    conn.execute_batch(&old).unwrap();
    conn.execute(
        "INSERT INTO pg_truth VALUES (1, '1', '740', 1, 2, 3, 0)",
        [],
    )
    .unwrap();
    drop(conn);

    let with = analyze(&[db.to_str().unwrap()]);
    assert!(with.status.success(), "{}", stderr(&with));
    assert_eq!(stdout(&with), stdout(&without));
    let conn = rundb::read::open(&db).unwrap();
    let brackets = rundb::read::side_rows::<rundb::WriterBracketRow>(&conn, 1).unwrap();
    assert_eq!(
        brackets,
        vec![rundb::WriterBracketRow {
            id: "1".into(),
            xid: "740".into(),
            xact_start_ms: 1,
            commit_ts_ms: Some(2),
            commit_returned_ms: 3,
            injected_sleep_ms: 0,
        }]
    );
}
