//! Issue 52, item 1: the checker that streams ([`analysis::stream`]) gives
//! the in-memory checker's answers ([`diff::analyze`]): verdicts and their
//! reasons, every poller's counts, the leaks and late arrivals with their
//! `id_skew_ms` and `required_k_ms`, the other misses with their causes, the
//! expired and gone rows, the IDs from the future, `k_to_catch_all_ms` and
//! the distribution of `required_k`. On random synthetic runs (with truth and
//! without, errors, overflow, deletions, IDs ahead of their time), and on a
//! seeded run of every simulator profile.

mod common;

use analysis::diff::{self, Analysis, Cause};
use analysis::history::History;
use analysis::load;
use analysis::stream::{self, Streamed};
use analysis::synth::{self, SimSpec};
use proptest::prelude::*;
use std::path::Path;

/// A finding by key: (ID time, key, first seen, visible, seen by, leaked by,
/// late for, id_skew_ms, required_k_ms).
type Item = (
    i64,
    u128,
    Option<i64>,
    Option<i64>,
    u64,
    u64,
    u64,
    Option<i64>,
    Option<i64>,
);

/// An [`Analysis`] with statuses named by key, not by index (the two
/// checkers index different histories), each list in a fixed order.
#[derive(Debug, PartialEq)]
struct Normal {
    reference: diff::Reference,
    pollers: Vec<diff::PollerStats>,
    verdicts: Vec<diff::Verdict>,
    reasons: Vec<String>,
    items: Vec<Item>,
    other_misses: Vec<(u8, u128, Cause)>,
    expired: Vec<(u8, u128)>,
    gone: Vec<(u8, u128)>,
    k_to_catch_all_ms: Option<i64>,
    required_k: Option<diff::Distribution>,
    future_ids: Vec<u128>,
}

/// A finding as an [`Item`], its status given by ID time and key.
fn item(id_time_ms: i64, key: u128, i: &diff::Finding) -> Item {
    (
        id_time_ms,
        key,
        i.first_seen_ms,
        i.visible_ms,
        i.seen_by,
        i.leaked_by,
        i.late_for,
        i.id_skew_ms,
        i.required_k_ms,
    )
}

/// `a`'s findings as [`Item`]s, in its order.
fn items_of(h: &History, a: &Analysis) -> Vec<Item> {
    a.items
        .iter()
        .map(|i| {
            item(
                h.id_time_ms(i.status as usize),
                h.statuses[i.status as usize].key,
                i,
            )
        })
        .collect()
}

fn normal(h: &History, a: &Analysis) -> Normal {
    let key = |s: u32| h.statuses[s as usize].key;
    let mut items = items_of(h, a);
    items.sort();
    let mut future_ids: Vec<u128> = a.future_ids.iter().map(|&s| key(s)).collect();
    future_ids.sort();
    let unread = |v: &[diff::Unread]| v.iter().map(|u| (u.poller, key(u.status))).collect();
    Normal {
        reference: a.reference,
        pollers: a.pollers.clone(),
        verdicts: a.verdicts.clone(),
        reasons: a.verdict_reasons.clone(),
        items,
        other_misses: a
            .other_misses
            .iter()
            .map(|m| (m.poller, key(m.status), m.cause))
            .collect(),
        expired: unread(&a.expired),
        gone: unread(&a.gone),
        k_to_catch_all_ms: a.k_to_catch_all_ms,
        required_k: a.required_k,
        future_ids,
    }
}

fn history_of(db: &Path) -> History {
    let conn = load::open(db).unwrap();
    let run = load::pick_run(&conn, db, None).unwrap();
    load::load(&conn, run).unwrap().history
}

/// Both checkers on one history: (in memory, streamed), normalised, and
/// the streamed result itself.
fn both(h: &History, horizon_ms: i64) -> (Normal, Normal, Streamed) {
    let s = stream::check_history_with(h, horizon_ms);
    let memory = normal(h, &diff::analyze(h));
    (memory, normal(&s.history, &s.analysis), s)
}

fn synthetic(spec: &SimSpec, with_truth: bool, name: &str) -> History {
    let dir = common::temp_dir(name);
    let db = dir.join("run.db");
    synth::simulate_to_db_with(&db, spec, true, with_truth).unwrap();
    let h = history_of(&db);
    let _ = std::fs::remove_dir_all(dir);
    h
}

/// A busy synthetic run: late, deleted and failed, with small pages.
fn busy(seed: u64) -> SimSpec {
    SimSpec {
        seed,
        ticks: 200,
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

/// The property below is not vacuous: a busy run has leaks,
/// misses from overflow and errors, deleted rows; and the streaming check
/// settled most statuses before the end (it held a fraction of them at once).
#[test]
fn a_busy_run_is_judged_the_same_and_settles_as_it_goes() {
    let h = synthetic(&busy(3), true, "stream-busy");
    let (memory, streamed, s) = both(&h, stream::HORIZON_MS);
    assert_eq!(s.inexact, None);
    assert_eq!(memory, streamed);
    let a = &s.analysis;
    assert!(a.pollers.iter().any(|p| p.leaks > 0));
    assert!(a.pollers.iter().any(|p| p.misses_overflow > 0));
    assert!(a.pollers.iter().any(|p| p.misses_error > 0));
    assert!(a.pollers.iter().any(|p| p.gone_before_seen > 0));
    assert!(a.required_k.is_some());
    assert!(
        s.peak_open * 5 < h.statuses.len(),
        "{} open at most of {}",
        s.peak_open,
        h.statuses.len()
    );
}

/// What the streaming check handed over as `analyze` has it hand over
/// (the misses that are not leaks and the leaks and late arrivals, each
/// list in the order handed, the rest appended), how many of each were
/// handed over before the end, and `k_to_catch_all_ms` and `required_k`
/// read from the findings handed over.
struct HandedOver {
    misses: Vec<(u8, u128, Cause)>,
    items: Vec<Item>,
    during: (usize, usize),
    required_k: (Option<i64>, Option<diff::Distribution>),
    s: Streamed,
}

fn hand_over(h: &History) -> HandedOver {
    let mut handed = stream::Handed::default();
    let s = stream::check_history_handing_over(h, stream::HORIZON_MS, &mut handed);
    let during = (handed.misses.len(), handed.findings.len());
    handed.misses.extend(s.last_misses.iter().copied());
    handed.findings.extend(s.last_findings.iter().copied());
    let mut ks = stream::RequiredKs::default();
    let items = handed
        .findings
        .iter()
        .map(|f| {
            let i = s.resolve.finding(0, f);
            ks.add(&i);
            item(f.id_time_ms, f.key, &i)
        })
        .collect();
    HandedOver {
        misses: handed
            .misses
            .iter()
            .map(|m| (m.poller, m.key, m.cause))
            .collect(),
        items,
        during,
        required_k: ks.finish(),
        s,
    }
}

/// The in-memory checker's misses that are not leaks: (poller, key, cause).
fn memory_misses(h: &History, a: &Analysis) -> Vec<(u8, u128, Cause)> {
    a.other_misses
        .iter()
        .map(|m| (m.poller, h.statuses[m.status as usize].key, m.cause))
        .collect()
}

/// `analyze` hands the misses that are not leaks over as they become final
/// (to a file, by poller then key) instead of keeping them: each poller's
/// misses come in key order, and all of them are the in-memory checker's.
#[test]
fn misses_are_handed_over_in_the_report_order() {
    let h = synthetic(&busy(7), true, "stream-handed");
    let handed = hand_over(&h);
    assert_eq!(handed.s.inexact, None);
    assert!(handed.s.analysis.other_misses.is_empty());
    let during = handed.during.0;
    assert!(
        during * 2 > handed.misses.len(),
        "{during} of {} handed over while streaming",
        handed.misses.len()
    );
    let mut per_poller = handed.misses.clone();
    per_poller.sort_by_key(|m| m.0);
    assert!(per_poller.iter().any(|m| m.2 == Cause::Overflow));
    assert_eq!(per_poller, memory_misses(&h, &diff::analyze(&h)));
}

/// `analyze` hands the leaks and late arrivals over too, as their place in
/// the report's order (by ID time) becomes final, rather than keeping them
/// to the end: they come in the in-memory checker's order, every field the
/// same (`id_skew_ms` and `required_k_ms`, read from the ticks at the end,
/// included), most of them before the end, and `k_to_catch_all_ms` and the
/// distribution of `required_k` read from them are the same.
#[test]
fn findings_are_handed_over_in_the_report_order() {
    let h = synthetic(&busy(11), true, "stream-found");
    let handed = hand_over(&h);
    assert_eq!(handed.s.inexact, None);
    let a = &handed.s.analysis;
    assert!(a.items.is_empty());
    assert_eq!((a.k_to_catch_all_ms, a.required_k), (None, None));
    let memory = diff::analyze(&h);
    assert!(handed.items.iter().any(|i| i.5 != 0), "a leak");
    let during = handed.during.1;
    assert!(
        during * 2 > handed.items.len(),
        "{during} of {} handed over while streaming",
        handed.items.len()
    );
    assert_eq!(handed.items, items_of(&h, &memory));
    assert!(memory.k_to_catch_all_ms.is_some());
    assert_eq!(
        handed.required_k,
        (memory.k_to_catch_all_ms, memory.required_k)
    );
}

/// A horizon shorter than a status stays open is detected, never guessed:
/// the result says it may differ.
#[test]
fn a_horizon_too_short_is_reported() {
    let spec = SimSpec {
        seed: 5,
        ticks: 60,
        late_fraction: 0.3,
        max_late_ms: 8000,
        ..SimSpec::default()
    };
    let h = synthetic(&spec, true, "stream-horizon");
    let (_, _, s) = both(&h, 1);
    assert!(s.inexact.is_some());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn streaming_and_in_memory_agree_on_random_runs(
        seed in any::<u64>(),
        rate in 2.0f64..60.0,
        late in 0.0f64..0.4,
        max_late in 300i64..8000,
        ahead in 0.0f64..0.2,
        max_ahead in 1i64..3000,
        deletes in 0.0f64..0.3,
        errors in 0.0f64..0.1,
        max_pages in 1i64..4,
        spread in 0i64..20,
        with_truth in any::<bool>(),
    ) {
        let spec = SimSpec {
            seed,
            ticks: 50,
            page_limit: 10,
            rate_per_s: rate,
            late_fraction: late,
            max_late_ms: max_late,
            ahead_fraction: ahead,
            max_ahead_ms: max_ahead,
            delete_fraction: deletes,
            error_rate: errors,
            max_pages,
            send_spread_ms: spread,
            ..SimSpec::default()
        };
        let h = synthetic(&spec, with_truth, &format!("stream-{seed}"));
        let (memory, streamed, s) = both(&h, stream::HORIZON_MS);
        prop_assert_eq!(s.inexact, None);
        prop_assert_eq!(memory, streamed);
        // Handed over as `analyze` hands them over: the same lists, in
        // the in-memory checker's order.
        let a = diff::analyze(&h);
        let handed = hand_over(&h);
        prop_assert_eq!(handed.s.inexact, None);
        let mut misses = handed.misses;
        misses.sort_by_key(|m| m.0);
        prop_assert_eq!(misses, memory_misses(&h, &a));
        prop_assert_eq!(handed.items, items_of(&h, &a));
        prop_assert_eq!(handed.required_k, (a.k_to_catch_all_ms, a.required_k));
    }
}

/// `analyze DB --json` (streaming by default) with `extra`, without what a
/// run judged streaming does not compute (`not_computed`) and the plots'
/// names; that list is checked to be the streaming one's.
fn json_of(db: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![db.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = common::run_bin(env!("CARGO_BIN_EXE_analyze"), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("gave up"), "{stderr}");
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let streamed = extra.is_empty();
    let not_computed = v["not_computed"].as_array().unwrap().len();
    assert_eq!(not_computed, if streamed { 1 } else { 0 });
    let o = v.as_object_mut().unwrap();
    for field in ["not_computed", "oracle", "plots"] {
        o.remove(field);
    }
    for p in o["pollers"].as_array_mut().unwrap() {
        let p = p.as_object_mut().unwrap();
        if streamed {
            assert!(p["oracle_ratio"].is_null());
        }
        p.remove("oracle_ratio");
    }
    v
}

/// A seeded virtual run of every simulator profile, with faults, overflow
/// (small pages, one back page) and deletions.
#[test]
fn every_profile_is_judged_the_same() {
    let dir = common::temp_dir("stream-profiles");
    for profile in ["twitter", "mastodon", "misskey", "discord"] {
        let db = dir.join(format!("{profile}.db"));
        common::experiment(&[
            "--clock",
            "virtual",
            "--db",
            db.to_str().unwrap(),
            "--duration",
            "3m",
            "--profile",
            profile,
            "--set",
            "rate_per_s=40",
            "--faults",
            "5xx=3%,timeout=2%,reorder=2%",
            "--limit",
            "40",
            "--max-back-pages",
            "1",
            "--poller",
            "naive",
            "--poller",
            "compensated:k=1s",
            "--poller",
            "compensated:k=10s",
            "--seed",
            "7",
        ]);
        let h = history_of(&db);
        let (memory, streamed, s) = both(&h, stream::HORIZON_MS);
        assert_eq!(s.inexact, None, "{profile}");
        assert_eq!(memory, streamed, "{profile}");
        assert!(s.analysis.pollers[0].requests > 0, "{profile}");
        let (streamed, memory) = (json_of(&db, &[]), json_of(&db, &["--in-memory"]));
        assert_eq!(streamed, memory, "{profile}: analyze --json");
    }
    let _ = std::fs::remove_dir_all(dir);
}
