//! Issue 13.1: the check stopped walking a missed status through every later
//! request once its cause was known. These tests hold it to the same answers
//! as the walk it replaced ([`diff::analyze_exhaustive`]): on random synthetic
//! histories (overflow, errors, deletions, with truth and without), and on
//! runs of the experiment itself with faults, overflow and deletions.

mod common;

use analysis::diff::{Analysis, analyze, analyze_exhaustive};
use analysis::history::History;
use analysis::load;
use analysis::synth::{self, SimSpec};
use proptest::prelude::*;
use std::path::Path;

fn judged_both_ways(db: &Path) -> (Analysis, Analysis) {
    let history = history_of(db);
    (analyze(&history), analyze_exhaustive(&history))
}

fn history_of(db: &Path) -> History {
    let conn = load::open(db).unwrap();
    let run = load::pick_run(&conn, db, None).unwrap();
    load::load(&conn, run).unwrap().history
}

/// The history with poller 0 turned into a keyset poller (PostgreSQL's
/// `xmin`): no since_id on any of its requests, so a status it missed is in
/// the window of every request that owed it.
fn as_keyset(mut h: History) -> History {
    h.pollers[0].keyset = true;
    for r in h.requests.iter_mut().filter(|r| r.poller == 0) {
        r.since_key = None;
        r.since_time_ms = None;
    }
    h
}

fn misses_with_a_cause(a: &Analysis) -> u64 {
    a.pollers
        .iter()
        .map(|p| p.misses_overflow + p.misses_error + p.misses_unexplained)
        .sum()
}

/// Records a synthetic run, with its truth or without, and judges it both ways.
fn synthetic(spec: &SimSpec, with_truth: bool, name: &str) -> (Analysis, Analysis) {
    let dir = common::temp_dir(name);
    let db = dir.join("run.db");
    synth::simulate_to_db_with(&db, spec, true, with_truth).unwrap();
    judged_both_ways(&db)
}

fn busy_spec(seed: u64) -> SimSpec {
    SimSpec {
        seed,
        ticks: 60,
        page_limit: 10,
        rate_per_s: 40.0,
        late_fraction: 0.2,
        max_late_ms: 6000,
        delete_fraction: 0.1,
        error_rate: 0.05,
        max_pages: 2,
        ..SimSpec::default()
    }
}

/// The property below is not vacuous: such histories have misses with a
/// cause (the ones the old walk followed to the end), and leaks.
#[test]
fn busy_synthetic_runs_have_overflow_misses_and_leaks() {
    let (fast, reference) = synthetic(&busy_spec(1), true, "linear-busy");
    assert_eq!(fast, reference);
    assert!(fast.pollers.iter().any(|p| p.misses_overflow > 0));
    assert!(fast.pollers.iter().any(|p| p.leaks > 0));
    assert!(misses_with_a_cause(&fast) > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_fast_check_agrees_with_the_exhaustive_walk(
        seed in any::<u64>(),
        rate in 2.0f64..60.0,
        late in 0.0f64..0.4,
        deletes in 0.0f64..0.3,
        errors in 0.0f64..0.1,
        max_pages in 1i64..4,
        with_truth in any::<bool>(),
    ) {
        let spec = SimSpec {
            seed,
            ticks: 40,
            page_limit: 10,
            rate_per_s: rate,
            late_fraction: late,
            delete_fraction: deletes,
            error_rate: errors,
            max_pages,
            ..SimSpec::default()
        };
        let (fast, reference) = synthetic(&spec, with_truth, &format!("linear-{seed}"));
        prop_assert_eq!(fast, reference);
    }

    /// Keyset pollers (no since_id: a missed status stays in their window)
    /// are judged the same by the jumps over failed and cut cycles as by the
    /// walk over every request.
    #[test]
    fn keyset_pollers_agree_with_the_exhaustive_walk(
        seed in any::<u64>(),
        late in 0.0f64..0.4,
        deletes in 0.0f64..0.3,
        errors in 0.0f64..0.3,
        with_truth in any::<bool>(),
    ) {
        let spec = SimSpec {
            seed,
            error_rate: errors,
            late_fraction: late,
            delete_fraction: deletes,
            ..busy_spec(seed)
        };
        let dir = common::temp_dir(&format!("linear-keyset-{seed}"));
        let db = dir.join("run.db");
        synth::simulate_to_db_with(&db, &spec, true, with_truth).unwrap();
        let h = as_keyset(history_of(&db));
        let _ = std::fs::remove_dir_all(dir);
        let fast = analyze(&h);
        prop_assert_eq!(&fast, &analyze_exhaustive(&h));
    }
}

/// The keyset property above is not vacuous: its pollers miss statuses with
/// each cause, and the walk has runs of failed or cut cycles to jump over.
#[test]
fn keyset_histories_have_misses_of_every_cause() {
    let dir = common::temp_dir("linear-keyset-causes");
    let db = dir.join("run.db");
    let spec = SimSpec {
        error_rate: 0.3,
        ..busy_spec(3)
    };
    synth::simulate_to_db_with(&db, &spec, true, true).unwrap();
    let h = as_keyset(history_of(&db));
    let _ = std::fs::remove_dir_all(dir);
    let fast = analyze(&h);
    assert_eq!(fast, analyze_exhaustive(&h));
    let keyset = &fast.pollers[0];
    assert!(keyset.misses_error > 0, "{keyset:?}");
    assert!(
        keyset.misses_overflow + keyset.misses_unexplained > 0,
        "{keyset:?}"
    );
}

/// Runs of the experiment itself (virtual time): faults, overflow from a
/// small page and one back-page, deletions; leaks, misses and causes identical.
#[test]
fn experiment_runs_are_judged_the_same() {
    let runs: [&[&str]; 3] = [
        &[
            "--duration",
            "3m",
            "--profile",
            "mastodon",
            "--set",
            "rate_per_s=60",
            "--set",
            "delete_probability=0.2",
            "--set",
            "delete_after_mean_ms=5000",
            "--limit",
            "40",
            "--max-back-pages",
            "1",
            "--poller",
            "naive",
            "--poller",
            "compensated:k=2s",
            "--seed",
            "4",
        ],
        &[
            "--duration",
            "3m",
            "--profile",
            "misskey",
            "--set",
            "rate_per_s=30",
            "--faults",
            "5xx=5%,timeout=2%,429=2%,reorder=2%",
            "--max-back-pages",
            "2",
            "--poller",
            "naive",
            "--poller",
            "compensated:k=5s",
            "--seed",
            "5",
        ],
        &[
            "--duration",
            "2m",
            "--set",
            "rate_per_s=300",
            "--max-back-pages",
            "2",
            "--poller",
            "naive",
            "--poller",
            "compensated:k=1s",
            "--poller",
            "compensated:k=10s",
            "--seed",
            "6",
        ],
    ];
    let dir = common::temp_dir("linear-runs");
    let mut with_cause = 0;
    for (i, extra) in runs.iter().enumerate() {
        let db = dir.join(format!("run{i}.db"));
        let mut args = vec!["--clock", "virtual", "--db", db.to_str().unwrap()];
        args.extend_from_slice(extra);
        common::experiment(&args);
        let (fast, reference) = judged_both_ways(&db);
        assert_eq!(fast, reference, "run {i}: {extra:?}");
        with_cause += misses_with_a_cause(&fast);
    }
    assert!(with_cause > 0, "the corpus has misses with a cause");
}

/// A status is kept as its key alone, its ID time read from the key; a run
/// that recorded other ID times (an outbox of BIGSERIAL IDs, whose IDs carry
/// no time) keeps them, and every figure reads them.
#[test]
fn recorded_id_times_that_the_key_does_not_give_are_kept() {
    let dir = common::temp_dir("id-times");
    let db = dir.join("run.db");
    synth::simulate_to_db(&db, &busy_spec(3), true).unwrap();
    let from_keys = history_of(&db);
    assert_eq!(from_keys.id_times, analysis::history::IdTimes::FromKeys);
    let conn = rusqlite::Connection::open(&db).unwrap();
    for table in ["statuses", "truth"] {
        conn.execute(
            &format!("UPDATE {table} SET id_time_ms = id_time_ms - 1000"),
            [],
        )
        .unwrap();
    }
    drop(conn);
    let recorded = history_of(&db);
    assert!(matches!(
        recorded.id_times,
        analysis::history::IdTimes::Recorded(_)
    ));
    assert_eq!(recorded.statuses, from_keys.statuses);
    for su in 0..recorded.statuses.len() {
        assert_eq!(recorded.id_time_ms(su), from_keys.id_time_ms(su) - 1000);
    }
    let later: Vec<i64> = from_keys.lateness_ms().map(|l| l + 1000).collect();
    assert_eq!(recorded.lateness_ms().collect::<Vec<_>>(), later);
    assert!(!later.is_empty());
}
