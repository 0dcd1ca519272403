//! The incremental checker against the whole-run judge on seeded random
//! histories: losses, duplicates, reorderings, late commits, deletes,
//! expiries, garbage and keys never committed.

use super::*;
use crate::consumers::{Setting, judge};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How often the files and the log are read (watch's period).
const STEP_MS: i64 = 50;

/// A history: the log's rows and each consumer's lines, each with the time
/// it becomes readable.
struct History {
    log: Vec<(i64, LogTruthRow)>,
    plans: Vec<Vec<(i64, Option<String>)>>,
    names: Vec<String>,
    setting: Setting,
    /// The latest a row commits after a row with a higher key.
    late_ms: i64,
}

fn row(key: &str, commit_ms: i64, op: &str, read: bool) -> LogTruthRow {
    LogTruthRow {
        seq: 0,
        key: key.into(),
        xid: 0,
        commit_lsn: String::new(),
        commit_ms,
        op: op.into(),
        read_ms: read.then_some(commit_ms + 3),
    }
}

fn history(rng: &mut ChaCha8Rng) -> History {
    let n = rng.random_range(1..400i64);
    let late_ms = [0, 30, 200, 1000][rng.random_range(0..4)];
    let text = rng.random_bool(0.2);
    let read = rng.random_bool(0.3);
    let name = |k: i64| {
        if text {
            format!("t{k:05}")
        } else {
            k.to_string()
        }
    };
    let mut log = Vec::new();
    let mut committed = Vec::new();
    for k in 1..=n {
        if rng.random_bool(0.05) {
            continue; // rolled back: never in the log
        }
        let at = k * 10 + rng.random_range(0..=late_ms);
        log.push((at, row(&name(k), at, "insert", read)));
        committed.push((at, k));
        if rng.random_bool(0.05) {
            let later = at + rng.random_range(1..3000);
            log.push((later, row(&name(k), later, "delete", read)));
        }
    }
    // Retention: the lowest keys' partition goes at some time.
    if rng.random_bool(0.3) {
        let (upto, at) = (rng.random_range(1..=n), rng.random_range(0..n * 10 + 500));
        for &(c, k) in &committed {
            if k <= upto {
                log.push((at.max(c + 1), row(&name(k), at.max(c + 1), "expire", read)));
            }
        }
    }
    log.sort_by_key(|(at, r)| (*at, r.op != "insert"));
    for (seq, (_, r)) in log.iter_mut().enumerate() {
        r.seq = seq as i64;
        r.xid = 1000 + seq as i64;
        r.commit_lsn = format!("0/{seq:X}");
    }
    committed.sort();
    let consumers = rng.random_range(1..=3);
    let names: Vec<String> = (0..consumers).map(|c| format!("c{c}")).collect();
    let plans = (0..consumers)
        .map(|_| plan(rng, &committed, &name))
        .collect();
    let mut setting = Setting {
        expect_all: rng.random_bool(0.3),
        ..Setting::default()
    };
    for n in &names {
        let promise = [None, Some(Promise::ExactlyOnce), Some(Promise::Ordered)];
        if let Some(p) = promise[rng.random_range(0..3)] {
            setting.promises.insert(n.clone(), p);
        }
    }
    History {
        log,
        plans,
        names,
        setting,
        late_ms,
    }
}

/// One consumer's lines: the committed keys in commit order, some lost,
/// some swapped, some delivered again (some much later), some garbage or
/// never committed; each readable a while after its commit, in file order.
fn plan(
    rng: &mut ChaCha8Rng,
    committed: &[(i64, i64)],
    name: &dyn Fn(i64) -> String,
) -> Vec<(i64, Option<String>)> {
    let loss = [0.0, 0.02, 0.2][rng.random_range(0..3)];
    let stop = rng.random_range(0..=committed.len());
    let mut items: Vec<(i64, Option<String>)> = Vec::new();
    let mut i = 0;
    while i < stop {
        let (at, k) = committed[i];
        if rng.random_bool(0.05) && i + 1 < stop {
            let (at2, k2) = committed[i + 1];
            items.push((at2, Some(name(k2))));
            items.push((at, Some(name(k))));
            i += 2;
            continue;
        }
        if !rng.random_bool(loss) {
            items.push((at, Some(name(k))));
        }
        if rng.random_bool(0.03) && !items.is_empty() {
            let again = items[rng.random_range(0..items.len())].clone();
            items.push((at, again.1));
        }
        if rng.random_bool(0.01) {
            items.push((at, None));
        }
        if rng.random_bool(0.01) {
            items.push((at, Some(name(999_999))));
        }
        i += 1;
    }
    let mut ready: i64 = 0;
    items
        .into_iter()
        .map(|(at, key)| {
            ready = ready.max(at + rng.random_range(0..100));
            (ready, key)
        })
        .collect()
}

/// Feeds `h` to a checker of horizon `horizon_ms` as watch reads it, every
/// [`STEP_MS`]: the log up to now, then the lines readable now; saved and
/// restored once on the way. Returns it and every line fed (for the judge).
fn feed(h: &History, horizon_ms: i64, rng: &mut ChaCha8Rng) -> (Checker, Vec<DeliveryRow>) {
    let mut checker = Checker::new(
        &h.names,
        h.setting.expect_all,
        &h.setting.promises,
        horizon_ms,
    );
    let end = h.log.last().map_or(0, |(at, _)| *at).max(
        h.plans
            .iter()
            .filter_map(|p| p.last().map(|(at, _)| *at))
            .max()
            .unwrap_or(0),
    );
    let (mut logged, mut next) = (0, vec![0; h.plans.len()]);
    let mut lines = Vec::new();
    let save_at = rng.random_range(0..=end / STEP_MS + 1) * STEP_MS;
    let mut t = 0;
    while t <= end + STEP_MS {
        let upto = h.log.partition_point(|(at, _)| *at <= t);
        let batch: Vec<LogTruthRow> = h.log[logged..upto].iter().map(|(_, r)| r.clone()).collect();
        checker.log(&batch);
        logged = upto;
        let mut read = Vec::new();
        for (c, plan) in h.plans.iter().enumerate() {
            while next[c] < plan.len() && plan[next[c]].0 <= t {
                let key = plan[next[c]].1.clone();
                next[c] += 1;
                read.push(DeliveryRow {
                    consumer: h.names[c].clone(),
                    line: next[c] as i64,
                    raw: key.is_none().then(|| "junk".to_string()),
                    key,
                    read_at_ms: t,
                });
            }
        }
        checker.deliver(&read);
        lines.extend(read);
        if t == save_at {
            checker = Checker::from_json(&checker.to_json()).unwrap();
        }
        t += STEP_MS;
    }
    (checker, lines)
}

#[test]
fn the_incremental_checker_judges_as_the_whole_run_judge_on_random_histories() {
    let mut folded_some = 0;
    for seed in 0..400u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let h = history(&mut rng);
        let truth: Vec<LogTruthRow> = h.log.iter().map(|(_, r)| r.clone()).collect();
        // A horizon longer than the run: nothing of the staircases is dropped.
        // One just past the latest commit after a higher key: rows fold.
        for horizon in [i64::MAX / 4, h.late_ms + 2 * STEP_MS] {
            let (checker, lines) = feed(&h, horizon, &mut rng);
            let whole = judge(&truth, &lines, &h.names, &h.setting);
            assert_eq!(checker.judged(), whole, "seed {seed}, horizon {horizon}");
            if horizon < i64::MAX / 4 && checker.open_rows() < whole.committed {
                folded_some += 1;
            }
            // Open: a row some consumer did not deliver, or one within the horizon.
            let cutoff = checker.now_ms - horizon;
            for row in checker.open.values() {
                assert!(
                    row.stamp.commit_ms >= cutoff || row.per.iter().any(|s| !s.delivered),
                    "seed {seed}: a settled row stayed open"
                );
            }
        }
    }
    assert!(folded_some > 100, "the histories fold rows: {folded_some}");
}

#[test]
fn settled_rows_leave_memory_a_run_of_keys_is_one_range() {
    let names = ["r".to_string()];
    let mut checker = Checker::new(&names, false, &HashMap::new(), 1000);
    for k in 1..=100_000i64 {
        let at = k * 3;
        checker.log(&[LogTruthRow {
            seq: k,
            ..row(&k.to_string(), at, "insert", false)
        }]);
        if k % 1000 != 7 {
            checker.deliver(&[DeliveryRow {
                consumer: "r".into(),
                line: k,
                key: Some(k.to_string()),
                raw: None,
                read_at_ms: at + 1,
            }]);
        }
    }
    // Open: the 100 lost rows and the last second's rows; held: a range
    // of folded keys between each lost one, and a second of steps.
    assert!(checker.open_rows() < 100 + 400, "{}", checker.open_rows());
    assert!(checker.held() < 101 + 2 * 400, "{}", checker.held());
    let judged = checker.judged();
    let c = &judged.consumers[0];
    assert_eq!(
        (judged.committed, c.delivered, c.lost.len()),
        (100_000, 99_900, 100)
    );
    // A key folded long ago, delivered again: a duplicate, not a stranger.
    checker.deliver(&[DeliveryRow {
        consumer: "r".into(),
        line: 100_001,
        key: Some("5".into()),
        raw: None,
        read_at_ms: 400_000,
    }]);
    let c = &checker.judged().consumers[0];
    assert_eq!((c.duplicates.count, c.never_committed.count), (1, 0));
}

#[test]
fn key_sets_merge_neighbours() {
    let mut s = KeySet::default();
    for k in [5, 7, 6, 1, 3, 2, 10] {
        s.insert(&Key::Int(k));
    }
    assert_eq!(s.ranges, [(1, 3), (5, 7), (10, 10)]);
    assert!(s.contains(&Key::Int(6)) && !s.contains(&Key::Int(4)) && !s.contains(&Key::Int(11)));
    s.insert(&Key::Int(4));
    assert_eq!(s.ranges, [(1, 7), (10, 10)]);
    s.insert(&Key::Text("a".into()));
    assert!(s.contains(&Key::Text("a".into())));
    assert_eq!(s.pieces(), 3);
}
