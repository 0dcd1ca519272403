//! Hand-built histories, one per definition, and properties over simulated runs.
//!
//! Keys are `id_time_ms << 4` (plus a small tie-breaker): the layout
//! `custom:epoch=0,shift=4`, so that a key's order and its time agree as they
//! do for real Snowflake IDs and required_k can replay the formula on them.

use super::*;
use crate::history::{IdTimes, PollerSpec, Status, TruthTable};
use crate::synth::{SimSpec, SynthRequest, SynthTruth, simulate};
use proptest::prelude::*;

pub(crate) struct B {
    pub(crate) h: History,
}

fn key(t: i64) -> u128 {
    (t as u128) << 4
}

impl B {
    fn new(pollers: &[(&str, Option<i64>)], truth: bool) -> B {
        B {
            h: History {
                pollers: pollers
                    .iter()
                    .map(|(n, k)| PollerSpec {
                        name: n.to_string(),
                        k_ms: *k,
                        keyset: false,
                        forward: false,
                    })
                    .collect(),
                truth: truth.then(TruthTable::default),
                interval_ms: 1000,
                unserved: Vec::new(),
                expired: Vec::new(),
                layout: "custom:epoch=0,shift=4".parse().unwrap(),
                statuses: Vec::new(),
                id_times: IdTimes::FromKeys,
                requests: Vec::new(),
                observations: Vec::new(),
            },
        }
    }

    /// A status whose ID time is `t`; with truth, visible from `visible` until `deleted`.
    fn status(&mut self, t: i64, visible: i64, deleted: Option<i64>) -> u32 {
        let i = self.h.statuses.len() as u32;
        self.h.statuses.push(Status { key: key(t) });
        self.h.id_times.push(&self.h.layout, &self.h.statuses, t);
        if let Some(tr) = &mut self.h.truth {
            tr.push(Some(Visibility {
                visible_at_ms: visible,
                deleted_at_ms: deleted,
            }));
        }
        i
    }

    /// A request of `poller` at `(cycle, page)`, sent at `sent`.
    fn req(
        &mut self,
        poller: usize,
        (cycle, page): (i64, i64),
        sent: i64,
        since: Option<u128>,
        before: Option<u128>,
        items: &[u32],
    ) -> &mut Request {
        let start = self.h.observations.len() as u32;
        self.h.observations.extend_from_slice(items);
        self.h.requests.push(Request {
            poller,
            cycle,
            page,
            sent_at_ms: sent,
            received_at_ms: sent + 10,
            since_key: since,
            since_time_ms: since.map(|k| (k / 10) as i64),
            before_key: before,
            failed: false,
            overflow: false,
            full: false,
            bytes: None,
            obs_start: start,
            obs_end: self.h.observations.len() as u32,
        });
        self.h.requests.last_mut().unwrap()
    }
}

/// naive (0) and compensated k=1s (1); `a` at 1900, `b` at 2500, and the late
/// `x`, ID time 2400, visible only at 3100, below naive's cursor (b).
pub(crate) fn late_item_history(truth: bool) -> (B, u32, u32, u32) {
    let mut b = B::new(&[("naive", None), ("compensated:k=1s", Some(1000))], truth);
    let a = b.status(1900, 1900, None);
    let bb = b.status(2500, 2500, None);
    let x = b.status(2400, 3100, None);
    // Tick 2000: the baseline.
    b.req(0, (0, 0), 2000, None, None, &[a]);
    b.req(1, (0, 0), 2001, None, None, &[a]);
    // Tick 3000: naive since a; compensated since min_id_at(2000 - 1000) - 1.
    b.req(0, (1, 0), 3000, Some(key(1900)), None, &[bb]);
    b.req(1, (1, 0), 3001, Some(key(1000) - 1), None, &[bb, a]);
    // Tick 4000: naive since b (x is below it); compensated since min_id_at(3000 - 1000) - 1.
    b.req(0, (2, 0), 4000, Some(key(2500)), None, &[]);
    b.req(1, (2, 0), 4001, Some(key(2000) - 1), None, &[bb, x]);
    // Tick 5000: compensated still within k of x's surfacing.
    b.req(0, (3, 0), 5000, Some(key(2500)), None, &[]);
    b.req(1, (3, 0), 5001, Some(key(3000) - 1), None, &[]);
    (b, a, bb, x)
}

#[test]
fn naive_leaks_a_late_item_that_compensated_catches() {
    let (b, _, _, x) = late_item_history(true);
    let a = analyze(&b.h);
    assert_eq!(a.reference, Reference::Truth);
    assert_eq!(a.pollers[0].leaks, 1);
    assert_eq!(a.pollers[1].leaks, 0);
    assert_eq!(a.verdicts, vec![Verdict::Invalid, Verdict::Valid]);
    assert_eq!(a.pollers[1].late_arrivals, 1);
    assert_eq!(a.pollers[0].late_arrivals, 0);
    let item = &a.items[0];
    assert_eq!(a.items.len(), 1);
    assert_eq!(item.status, x);
    assert_eq!(item.leaked_by, 0b01);
    assert_eq!(item.seen_by, 0b10);
    assert_eq!(item.late_for, 0b10);
    assert_eq!(item.first_seen_ms, Some(4001));
    // The highest ID returned before x became visible (3100) is b (2500).
    assert_eq!(item.id_skew_ms, Some(100));
    // The last tick before 3100: page 0s were sent at 3000 and 3001; the
    // later one counts (k >= 601 catches x for both pollers' clocks).
    assert_eq!(item.required_k_ms, Some(601));
    assert_eq!(a.k_to_catch_all_ms, Some(601));
    assert_eq!(
        a.required_k,
        Some(Distribution {
            basis: 1,
            p50: 601,
            p90: 601,
            p99: 601,
            max: 601
        })
    );
}

/// The late item's leak is the naive poller's only when its endpoint serves
/// the item: a client on a timeline that does not (`History::unserved`) is
/// not owed it, and is judged valid.
#[test]
fn a_status_the_pollers_endpoint_never_serves_is_not_owed_to_it() {
    let (mut b, _, _, x) = late_item_history(true);
    b.h.unserved = vec![0; b.h.statuses.len()];
    b.h.unserved[x as usize] = 0b01;
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].leaks, 0);
    assert_eq!(a.pollers[0].missed(), 0);
    assert_eq!(a.verdicts, vec![Verdict::Valid, Verdict::Valid]);
    assert!(a.items.iter().all(|i| i.leaked_by == 0));
}

#[test]
fn without_truth_the_union_of_the_others_is_the_reference() {
    let (b, _, _, x) = late_item_history(false);
    let a = analyze(&b.h);
    assert_eq!(a.reference, Reference::Union);
    assert_eq!(a.pollers[0].leaks, 1);
    assert_eq!(a.verdicts, vec![Verdict::Invalid, Verdict::Valid]);
    let item = &a.items[0];
    assert_eq!(item.status, x);
    // Without truth x "became visible" at its first surfacing (4001): the tick
    // before that tick was sent at 3000 and 3001.
    assert_eq!(item.required_k_ms, Some(601));
    // The highest ID returned before 4001 is still b.
    assert_eq!(item.id_skew_ms, Some(100));
}

#[test]
fn a_single_poller_without_truth_is_unknown() {
    let mut b = B::new(&[("naive", None)], false);
    let s = b.status(1000, 1000, None);
    b.req(0, (0, 0), 2000, None, None, &[s]);
    b.req(0, (1, 0), 3000, Some(key(1000)), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.reference, Reference::None);
    assert_eq!(a.verdicts, vec![Verdict::Unknown]);
    assert_eq!(a.pollers[0].missed(), 0);
}

#[test]
fn deleted_before_any_request_saw_it_is_not_owed() {
    let mut b = B::new(&[("naive", None)], true);
    let a0 = b.status(900, 900, None);
    let x = b.status(1100, 1100, Some(1500));
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].gone_before_seen, 1);
    assert_eq!(a.pollers[0].missed(), 0);
    assert_eq!(a.verdicts, vec![Verdict::Valid]);
    let _ = x;
}

/// A row the retention job dropped before the poller read it: expired, not
/// "deleted before it could see it", and the verdict is invalid, naming it.
/// One it had passed with its cursor before the drop stays a leak; one a
/// failed request had in its window, dropped before the next, is expired.
#[test]
fn a_row_dropped_by_retention_before_it_was_read_is_expired() {
    let mut b = B::new(&[("naive", None)], true);
    let a0 = b.status(900, 900, None);
    // Dropped while no request was sent: owed at none.
    let dropped = b.status(1100, 1100, Some(1500));
    // Visible at 1200, below the cursor when owed at 2000, dropped at 2500.
    let passed = b.status(950, 1200, Some(2500));
    // Visible before 2000, whose request failed, dropped before 3000.
    let failed = b.status(1900, 1900, Some(2900));
    // Deleted by its author, not by the job.
    let deleted = b.status(1150, 1150, Some(1400));
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(1000)), None, &[]).failed = true;
    b.req(0, (2, 0), 3000, Some(key(1000)), None, &[]);
    b.h.expired = vec![dropped, passed, failed];
    let a = analyze(&b.h);
    let p = &a.pollers[0];
    assert_eq!((p.expired, p.leaks, p.gone_before_seen), (2, 1, 1));
    assert_eq!(p.missed(), 1, "expired rows are not misses");
    assert_eq!(
        a.expired,
        vec![
            Unread {
                status: dropped,
                poller: 0
            },
            Unread {
                status: failed,
                poller: 0
            }
        ]
    );
    assert_eq!(a.verdicts, vec![Verdict::Invalid]);
    assert!(
        a.verdict_reasons[0].contains("2 expired"),
        "{}",
        a.verdict_reasons[0]
    );
    assert_eq!(a, analyze_exhaustive(&b.h));
    let _ = deleted;

    // Expired only: invalid, the reason saying so.
    let mut b = B::new(&[("naive", None)], true);
    let a0 = b.status(900, 900, None);
    let dropped = b.status(1100, 1100, Some(1500));
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[]);
    b.h.expired = vec![dropped];
    let a = analyze(&b.h);
    assert_eq!(a.verdicts, vec![Verdict::Invalid]);
    assert_eq!(
        a.verdict_reasons[0],
        "1 expired (dropped by the retention job before it read them: lost, though not by its cursor)"
    );
}

#[test]
fn surfacing_after_the_last_request_is_not_a_leak() {
    let mut b = B::new(&[("naive", None)], true);
    let a0 = b.status(900, 900, None);
    b.status(2500, 5000, None);
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[]);
    b.req(0, (2, 0), 3000, Some(key(900)), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].missed(), 0);
    assert_eq!(a.pollers[0].gone_before_seen, 0);
    assert!(a.items.is_empty());
    assert_eq!(a.verdicts, vec![Verdict::Valid]);
}

#[test]
fn a_failed_request_explains_a_miss_as_error() {
    let mut b = B::new(&[("naive", None)], true);
    let a0 = b.status(900, 900, None);
    let x = b.status(1500, 1500, Some(2500));
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[]).failed = true;
    b.req(0, (2, 0), 3000, Some(key(900)), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].leaks, 0);
    assert_eq!(a.pollers[0].misses_error, 1);
    assert_eq!(a.pollers[0].errors, 1);
    assert_eq!(
        a.other_misses,
        vec![OtherMiss {
            status: x,
            poller: 0,
            cause: Cause::Error
        }]
    );
    assert_eq!(a.verdicts, vec![Verdict::Valid]);
}

#[test]
fn a_cut_window_explains_a_miss_as_overflow() {
    let mut b = B::new(&[("naive", None)], true);
    let a0 = b.status(900, 900, None);
    let x = b.status(1500, 1500, Some(2500));
    let c = b.status(1600, 1600, None);
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    // Page limit 1: c fills the page, back-paging stopped at once (overflow).
    let r = b.req(0, (1, 0), 2000, Some(key(900)), None, &[c]);
    r.full = true;
    r.overflow = true;
    b.req(0, (2, 0), 3000, Some(key(1600)), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].leaks, 0);
    assert_eq!(a.pollers[0].misses_overflow, 1);
    assert_eq!(a.other_misses[0].status, x);
    assert_eq!(a.other_misses[0].cause, Cause::Overflow);
    assert_eq!(a.verdicts, vec![Verdict::Valid]);
}

#[test]
fn a_clean_request_that_drops_a_visible_item_is_unexplained_and_invalid() {
    let mut b = B::new(&[("naive", None)], true);
    let a0 = b.status(900, 900, None);
    let x = b.status(1500, 1500, None);
    let c = b.status(1600, 1600, None);
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[c]);
    b.req(0, (2, 0), 3000, Some(key(1600)), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].misses_unexplained, 1);
    assert_eq!(a.pollers[0].leaks, 0);
    assert_eq!(a.other_misses[0].status, x);
    assert_eq!(a.other_misses[0].cause, Cause::Unexplained);
    assert_eq!(a.verdicts, vec![Verdict::Invalid]);
}

#[test]
fn back_pages_are_not_late_arrivals_and_backlog_is_not_owed() {
    let mut b = B::new(&[("naive", None)], true);
    let old = b.status(500, 500, None); // below the full baseline page
    let p = b.status(800, 800, None);
    let q = b.status(900, 900, None);
    let r1 = b.status(1500, 1500, None);
    let r2 = b.status(1600, 1600, None);
    let r3 = b.status(1700, 1700, None);
    // Baseline page of 2, full: `old` is backlog.
    b.req(0, (0, 0), 1000, None, None, &[q, p]).full = true;
    // Cycle 1 pages back: page 0 full, page 1 reaches since.
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[r3, r2]).full = true;
    b.req(0, (1, 1), 2030, Some(key(900)), Some(key(1600)), &[r1]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].late_arrivals, 0);
    assert_eq!(a.pollers[0].back_pages, 1);
    assert_eq!(a.pollers[0].before_baseline, 1);
    assert_eq!(a.pollers[0].missed(), 0);
    assert_eq!(a.verdicts, vec![Verdict::Valid]);
    let _ = old;
}

#[test]
fn a_busy_start_is_baseline_not_unexplained() {
    // Issue #10: the first cycle sees an empty timeline, the second a full
    // page without a since_id (nothing to page back to). Everything below
    // that page is the backlog the poller starts from: not owed, not an
    // unexplained miss (this was `unexplained`, verdict invalid).
    let mut b = B::new(&[("naive", None)], true);
    let old = b.status(1200, 1200, None);
    let p = b.status(1300, 1300, None);
    let q = b.status(1400, 1400, None);
    let r = b.status(2500, 2500, None);
    b.req(0, (0, 0), 1000, None, None, &[]);
    b.req(0, (1, 0), 2000, None, None, &[q, p]).full = true;
    b.req(0, (2, 0), 3000, Some(key(1400)), None, &[r]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].misses_unexplained, 0, "{:?}", a.other_misses);
    assert_eq!(a.pollers[0].before_baseline, 1);
    assert_eq!(a.verdicts, vec![Verdict::Valid]);
    // A cursorless first page that failed changes nothing.
    b.h.requests[0].failed = true;
    let a = analyze(&b.h);
    assert_eq!(
        (a.pollers[0].before_baseline, a.pollers[0].missed()),
        (1, 0)
    );
    // But a clean cursorless page that was not full and left out a visible
    // status is still a bug, whatever the later baseline hides.
    b.h.requests[0].failed = false;
    let n = b.h.statuses.len();
    b.h.truth.as_mut().unwrap().set(
        old as usize,
        n,
        Visibility {
            visible_at_ms: 900,
            deleted_at_ms: None,
        },
    );
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].misses_unexplained, 1);
    assert_eq!(a.verdicts, vec![Verdict::Invalid]);
}

#[test]
fn a_poller_that_never_succeeded_is_unknown_not_valid() {
    // Issue #10: poller 1 fails every request. It leaked nothing and missed
    // everything from errors: no evidence either way (this was `valid`).
    let mut b = B::new(&[("naive", None), ("compensated:k=1s", Some(1000))], true);
    let a0 = b.status(900, 900, None);
    let x = b.status(1500, 1500, None);
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[x]);
    for (cycle, sent) in [(0, 1001), (1, 2001)] {
        b.req(1, (cycle, 0), sent, None, None, &[]).failed = true;
    }
    let a = analyze(&b.h);
    assert_eq!(a.pollers[1].misses_error, 2);
    assert_eq!(a.verdicts, vec![Verdict::Valid, Verdict::Unknown]);
    assert!(
        a.verdict_reasons[1].contains("none of its 2 requests succeeded"),
        "{}",
        a.verdict_reasons[1]
    );
    // Its first request succeeds, every later one fails: the cursor policy was
    // never tested, still unknown.
    let mut b = B::new(&[("naive", None), ("compensated:k=1s", Some(1000))], true);
    let a0 = b.status(900, 900, None);
    let x = b.status(1500, 1500, None);
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[x]);
    b.req(1, (0, 0), 1001, None, None, &[a0]);
    b.req(1, (1, 0), 2001, Some(key(900)), None, &[]).failed = true;
    let a = analyze(&b.h);
    assert_eq!(a.verdicts[1], Verdict::Unknown);
    assert!(
        a.verdict_reasons[1].contains("never tested"),
        "{}",
        a.verdict_reasons[1]
    );
    // One clean request with a cursor afterwards is evidence: x's miss was
    // the failed request's, and the verdict is decided.
    b.req(1, (2, 0), 3001, Some(key(1600)), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.verdicts[1], Verdict::Valid);
    assert!(
        a.verdict_reasons[1].contains("1 missed from errors"),
        "{}",
        a.verdict_reasons[1]
    );
}

#[test]
fn an_item_above_a_back_page_window_is_not_a_leak() {
    // x becomes visible between page 0 and page 1, above page 1's bound, and
    // is deleted before the next cycle: nobody's cursor skipped it.
    let mut b = B::new(&[("naive", None)], true);
    let a0 = b.status(900, 900, None);
    let r1 = b.status(1500, 1500, None);
    let r2 = b.status(1600, 1600, None);
    let x = b.status(1700, 2010, Some(2500));
    b.req(0, (0, 0), 1000, None, None, &[a0]);
    b.req(0, (1, 0), 2000, Some(key(900)), None, &[r2]).full = true;
    b.req(0, (1, 1), 2030, Some(key(900)), Some(key(1600)), &[r1]);
    b.req(0, (2, 0), 3000, Some(key(1600)), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].missed(), 0, "{:?}", a.pollers[0]);
    assert_eq!(a.pollers[0].gone_before_seen, 1);
    let _ = x;
}

#[test]
fn an_item_above_a_forward_pollers_full_page_is_its_next_pages() {
    // An ascending pager (Kafka Connect's `incrementing`) reads 1 and 2 on a
    // full page of 2; x (3), visible since 1500, lies above that page: its
    // next page would read it, but the retention job drops x first. The drop
    // lost it, not the page: expired, never an unexplained miss.
    let mut b = B::new(&[("incrementing", None)], true);
    b.h.pollers[0].forward = true;
    let s1 = b.status(100, 1500, None);
    let s2 = b.status(200, 1500, None);
    let x = b.status(300, 1500, Some(2020));
    b.h.expired = vec![x];
    b.req(0, (0, 0), 1000, None, None, &[]);
    b.req(0, (1, 0), 2000, Some(0), None, &[s2, s1]).full = true;
    b.req(0, (1, 1), 2030, Some(key(200)), None, &[]);
    let a = analyze(&b.h);
    let p = &a.pollers[0];
    assert_eq!(p.misses_unexplained, 0, "{p:?}");
    assert_eq!(p.expired, 1, "{p:?}");
    // The same page of a poller that is not forward left x in its window.
    b.h.pollers[0].forward = false;
    assert_eq!(analyze(&b.h).pollers[0].misses_unexplained, 1);
}

#[test]
fn duplicates_are_counted_per_poller_with_a_byte_estimate() {
    let mut b = B::new(&[("compensated:k=1s", Some(1000))], true);
    let s1 = b.status(900, 900, None);
    let s2 = b.status(1500, 1500, None);
    b.req(0, (0, 0), 1000, None, None, &[s1]).bytes = Some(100);
    b.req(0, (1, 0), 2000, Some(0), None, &[s2, s1]).bytes = Some(200);
    let a = analyze(&b.h);
    let p = &a.pollers[0];
    assert_eq!(p.duplicates, 1);
    assert_eq!(p.seen, 2);
    assert_eq!(p.observations, 3);
    assert_eq!(p.duplicates_per_new(), 0.5);
    assert_eq!(p.duplicate_bytes, Some(100.0));
}

#[test]
fn required_k_honours_the_lower_clamp() {
    // b's generator runs ahead: its ID time (3500) is after the tick that
    // returned it (3000). The compensated since_id is never below
    // min_id_at(ts(latest) - k) - 1, so catching x (ID time 2400) at tick
    // 4000 needs k >= 3500 - 2400, not 3001 - 2400 (this was 601).
    let (mut b, _, bb, x) = late_item_history(true);
    b.h.statuses[bb as usize] = Status { key: key(3500) };
    assert_eq!(b.h.id_time_ms(bb as usize), 3500);
    let a = analyze(&b.h);
    let item = a.items.iter().find(|i| i.status == x).unwrap();
    assert_eq!(item.required_k_ms, Some(1100));
    // Never negative: the smallest k is at least 0.
    assert!(a.items.iter().all(|i| i.required_k_ms >= Some(0)));
}

#[test]
fn a_status_returned_in_flight_belongs_to_that_request() {
    // x (ID time 1500) becomes visible at 3005, while the compensated
    // request sent at 3001 is in flight, and that request returns it. Its
    // tick is 3000, whose since_id came from the tick at 2000 and the latest
    // ID a (1900): k = 2001 - 1500 = 501 catches it there. The last tick
    // before it became visible (3001 - 1500 = 1501) is one interval too high.
    let mut b = B::new(&[("naive", None), ("compensated:k=1s", Some(1000))], true);
    let a0 = b.status(1900, 1900, None);
    let x = b.status(1500, 3005, None);
    b.req(0, (0, 0), 2000, None, None, &[a0]);
    b.req(1, (0, 0), 2001, None, None, &[a0]);
    b.req(0, (1, 0), 3000, Some(key(1900)), None, &[]);
    b.req(1, (1, 0), 3001, Some(key(1001) - 1), None, &[x, a0]);
    b.req(0, (2, 0), 4000, Some(key(1900)), None, &[]);
    b.req(1, (2, 0), 4001, Some(key(2001) - 1), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].leaks, 1);
    let item = a.items.iter().find(|i| i.status == x).unwrap();
    assert_eq!(item.required_k_ms, Some(501));
}

#[test]
fn percentiles_are_nearest_rank() {
    let d = Distribution::of((1..=100).collect()).unwrap();
    assert_eq!(
        (d.basis, d.p50, d.p90, d.p99, d.max),
        (100, 50, 90, 99, 100)
    );
    let d = Distribution::of(vec![7]).unwrap();
    assert_eq!((d.p50, d.p99, d.max), (7, 7, 7));
    assert_eq!(Distribution::of(vec![]), None);
}

/// Builds a History straight from a simulated run (what the loader would produce).
pub(crate) fn history_of(
    spec: &SimSpec,
    requests: &[SynthRequest],
    truth: &[SynthTruth],
) -> History {
    let layout: since_id::id::Layout = "mastodon".parse().unwrap();
    let mut index = HashMap::default();
    let mut statuses = Vec::new();
    let mut vis = TruthTable::default();
    for t in truth {
        index.insert(t.id, statuses.len() as u32);
        statuses.push(Status { key: t.id });
        vis.push(Some(Visibility {
            visible_at_ms: t.visible_at_ms,
            deleted_at_ms: t.deleted_at_ms,
        }));
    }
    let mut observations = Vec::new();
    let reqs = requests
        .iter()
        .map(|r| {
            let start = observations.len() as u32;
            observations.extend(r.ids.iter().map(|id| index[id]));
            Request {
                poller: r.poller,
                cycle: r.cycle,
                page: r.page,
                sent_at_ms: r.sent_at_ms,
                received_at_ms: r.received_at_ms,
                since_key: r.since,
                since_time_ms: r.since.map(|k| layout.ts_ms(since_id::id::Id(k))),
                before_key: r.before,
                failed: r.error.is_some(),
                overflow: r.overflow,
                full: r.ids.len() == spec.page_limit,
                bytes: r.bytes,
                obs_start: start,
                obs_end: observations.len() as u32,
            }
        })
        .collect();
    History {
        layout,
        statuses,
        id_times: IdTimes::FromKeys,
        truth: Some(vis),
        pollers: spec
            .policies
            .iter()
            .map(|p| PollerSpec {
                name: p.clone(),
                k_ms: p
                    .parse::<since_id::policy::CursorPolicy>()
                    .unwrap()
                    .k_ms()
                    .map(|k| k as i64),
                keyset: false,
                forward: false,
            })
            .collect(),
        requests: reqs,
        observations,
        interval_ms: spec.interval_ms,
        unserved: Vec::new(),
        expired: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// The meaning of required_k: a compensated poller whose k exceeds an
    /// item's required_k (plus the few ms between pollers' sends) does not leak it;
    /// and the poller with the largest k, above every lateness, leaks nothing.
    #[test]
    fn required_k_is_the_k_that_catches(seed in any::<u64>(), late in 0.0f64..0.3, max_late in 300i64..4000, errors in 0.0f64..0.05) {
        let spec = SimSpec {
            seed,
            ticks: 40,
            late_fraction: late,
            max_late_ms: max_late,
            error_rate: errors,
            policies: vec!["naive".into(), "compensated:k=500ms".into(), "compensated:k=2s".into(), "compensated:k=6s".into()],
            ..SimSpec::default()
        };
        let (requests, truth) = simulate(&spec);
        let h = history_of(&spec, &requests, &truth);
        let a = analyze(&h);
        for item in a.leaks() {
            let rk = item.required_k_ms.unwrap();
            for (p, poller) in h.pollers.iter().enumerate() {
                if poller.k_ms.is_some_and(|k| k >= rk + 50) {
                    prop_assert!(item.leaked_by & (1 << p) == 0, "{} leaked an item with required_k {rk}", poller.name);
                }
            }
        }
        prop_assert_eq!(a.pollers[3].leaks, 0);
        prop_assert_eq!(a.pollers.iter().map(|p| p.misses_unexplained).sum::<u64>(), 0);
        // Shuffling the request rows changes nothing: the diff orders by time itself.
        let mut shuffled = h.clone();
        shuffled.requests.reverse();
        prop_assert_eq!(analyze(&shuffled), a);
    }
}

#[test]
fn union_reference_tolerates_send_jitter() {
    // No truth. The compensated poller returns x once, at 4001; naive's
    // request of that tick left earlier (3990) and its next one 1 s + 9 ms
    // after x surfaced: x is still owed to it then, and below its cursor.
    let mut b = B::new(&[("naive", None), ("compensated:k=1s", Some(1000))], false);
    let a0 = b.status(1900, 0, None);
    let bb = b.status(2500, 0, None);
    let x = b.status(2400, 0, None);
    b.req(0, (0, 0), 1990, None, None, &[a0]);
    b.req(1, (0, 0), 2001, None, None, &[a0]);
    b.req(0, (1, 0), 2990, Some(key(1900)), None, &[bb]);
    b.req(1, (1, 0), 3001, Some(key(1000) - 1), None, &[bb, a0]);
    b.req(0, (2, 0), 3990, Some(key(2500)), None, &[]);
    b.req(1, (2, 0), 4001, Some(key(2000) - 1), None, &[bb, x]);
    b.req(0, (3, 0), 5010, Some(key(2500)), None, &[]);
    b.req(1, (3, 0), 5001, Some(key(3000) - 1), None, &[]);
    let a = analyze(&b.h);
    assert_eq!(a.pollers[0].leaks, 1);
    assert_eq!(a.items[0].status, x);
    assert_eq!(a.verdicts, vec![Verdict::Invalid, Verdict::Valid]);
}

/// Issue 11.4: a poller whose cursor followed an ID from the future misses
/// what comes after; that is the ID's doing, not the policy's.
#[test]
fn misses_below_a_cursor_from_the_future_are_not_leaks() {
    let three_years = 3 * 365 * 24 * 3600 * 1000_i64;
    let mut b = B::new(&[("naive", None)], true);
    let a = b.status(1900, 1900, None);
    let future = b.status(1900 + three_years, 1900, None);
    let x = b.status(2500, 2500, None);
    b.req(0, (0, 0), 2000, None, None, &[future, a]);
    // An unclamped poller moved its cursor to the future ID.
    b.req(0, (1, 0), 3000, Some(key(1900 + three_years)), None, &[]);
    b.req(0, (2, 0), 4000, Some(key(1900 + three_years)), None, &[]);
    let an = analyze(&b.h);
    assert_eq!(an.pollers[0].leaks, 0);
    assert_eq!(an.pollers[0].misses_future_id, 1);
    assert_eq!(an.pollers[0].missed(), 1);
    assert_eq!(an.verdicts, vec![Verdict::Valid]);
    assert_eq!(
        an.other_misses,
        vec![OtherMiss {
            status: x,
            poller: 0,
            cause: Cause::FutureId
        }]
    );
    assert_eq!(an.future_ids, vec![future]);
    assert_eq!(Cause::FutureId.as_str(), "future-id");
    // With a cursor within the tolerance, the same miss is a leak of the policy.
    let mut b = B::new(&[("naive", None)], true);
    let a = b.status(1900, 1900, None);
    let y = b.status(2600, 2600, None);
    let x = b.status(2500, 2700, None);
    b.req(0, (0, 0), 2000, None, None, &[a]);
    b.req(0, (1, 0), 2650, Some(key(1900)), None, &[y]);
    b.req(0, (2, 0), 4000, Some(key(2600)), None, &[]);
    let an = analyze(&b.h);
    assert_eq!(an.pollers[0].leaks, 1, "{:?}", an.other_misses);
    assert!(an.future_ids.is_empty());
    assert_eq!(an.leaks().next().map(|i| i.status), Some(x));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// required_k is exact: replaying the run with a compensated poller at
    /// k = required_k catches each status the naive poller leaked, and at
    /// required_k - 1 ms no request of the tick the status belongs to, or of
    /// a later one, has it in its window: such a poller can come upon it only
    /// on a back page of an earlier cycle, sent after the status became
    /// visible (luck that depends on how full its pages were). Some
    /// generators' clocks run ahead (IDs later than the tick that returned
    /// them), so the formula's lower clamp binds for some statuses; pollers
    /// send at the same instant, as in virtual time, so that the replayed
    /// ticks are the run's own.
    #[test]
    fn required_k_is_the_smallest_k_that_catches(
        seed in any::<u64>(),
        late in 0.05f64..0.3,
        max_late in 300i64..4000,
        ahead in 0.0f64..0.3,
        max_ahead in 1i64..3000,
    ) {
        let spec = SimSpec {
            seed,
            ticks: 30,
            late_fraction: late,
            max_late_ms: max_late,
            ahead_fraction: ahead,
            max_ahead_ms: max_ahead,
            delete_fraction: 0.0,
            send_spread_ms: 0,
            max_pages: 1000,
            policies: vec!["naive".into()],
            ..SimSpec::default()
        };
        let (requests, truth) = simulate(&spec);
        let a = analyze(&history_of(&spec, &requests, &truth));
        // The requests of the compensated poller at `k` that returned `id`,
        // each with the send time of its cycle's page 0.
        let caught_with = |k: i64, id: u128| -> Vec<(i64, i64)> {
            let spec = SimSpec {
                policies: vec!["naive".into(), format!("compensated:k={k}ms")],
                ..spec.clone()
            };
            let requests = simulate(&spec).0;
            let page0_sent = |cycle: i64| {
                requests.iter().find(|r| r.poller == 1 && r.cycle == cycle && r.page == 0).map(|r| r.sent_at_ms)
            };
            requests
                .iter()
                .filter(|r| r.poller == 1 && r.ids.contains(&id))
                .map(|r| (r.page, page0_sent(r.cycle).expect("every cycle has a page 0")))
                .collect()
        };
        for item in a.leaks() {
            // Statuses are in truth order (see history_of).
            let status = &truth[item.status as usize];
            let rk = item.required_k_ms.expect("a leak has a required_k");
            prop_assert!(rk >= 0);
            prop_assert!(!caught_with(rk, status.id).is_empty(), "k = required_k {rk} missed it");
            if rk > 0 {
                for (page, cycle_sent) in caught_with(rk - 1, status.id) {
                    prop_assert!(
                        page > 0 && cycle_sent < status.visible_at_ms,
                        "k = required_k - 1 = {} caught it on page {page} of a cycle sent at {cycle_sent}, visible at {}",
                        rk - 1,
                        status.visible_at_ms
                    );
                }
            }
        }
    }
}

/// A keyset poller (PostgreSQL's `xmin`) has no since_id: every request after
/// its first tests its cursor, and it has no baseline, so a clean run is
/// valid (not "never tested") and a row it never returned is a loud miss.
#[test]
fn a_keyset_poller_is_judged_from_its_first_request() {
    let mut b = B::new(&[("xmin", None)], true);
    b.h.pollers[0].keyset = true;
    let a = b.status(1900, 1900, None);
    let x = b.status(2500, 2600, None);
    b.req(0, (0, 0), 2000, None, None, &[a]);
    b.req(0, (1, 0), 3000, None, None, &[x]);
    let an = analyze(&b.h);
    assert_eq!(an.pollers[0].cursor_requests_ok, 1);
    assert_eq!(an.verdicts, vec![Verdict::Valid]);

    let mut b = B::new(&[("xmin", None)], true);
    b.h.pollers[0].keyset = true;
    let a = b.status(1900, 1900, None);
    b.status(2500, 2600, None);
    b.req(0, (0, 0), 2000, None, None, &[a]);
    b.req(0, (1, 0), 3000, None, None, &[]);
    let an = analyze(&b.h);
    assert_eq!(an.pollers[0].misses_unexplained, 1);
    assert_eq!(an.verdicts, vec![Verdict::Invalid]);
}

/// A `newest` poller (pages of 2, never a since_id): a request without a
/// lower bound covers its page from the lowest key returned up when the
/// page is full. `y`, visible before tick 3000 but pushed below that full
/// page by `c` and `d`, is a leak (the policy's loss), not baseline backlog
/// and not an unexplained miss; `z`, inside a page's reach and left out, is
/// unexplained (as a newest page served from Redis before its push would
/// be); `old`, below the first full page, is the backlog.
#[test]
fn a_newest_pollers_full_page_covers_down_to_its_lowest_key() {
    let mut b = B::new(&[("newest", None)], true);
    let old = b.status(1000, 1000, None);
    let a = b.status(1500, 1500, None);
    let a2 = b.status(1600, 1600, None);
    let y = b.status(2100, 2200, None);
    let c = b.status(2600, 2600, None);
    let d = b.status(2700, 2700, None);
    let z = b.status(3500, 3500, None);
    b.req(0, (0, 0), 2000, None, None, &[a2, a]).full = true;
    b.req(0, (1, 0), 3000, None, None, &[d, c]).full = true;
    // z is visible from 3500; the page at 4000 reaches below it and leaves it out.
    b.req(0, (2, 0), 4000, None, None, &[d, c]).full = true;
    let r = analyze(&b.h);
    let s = &r.pollers[0];
    assert_eq!(
        s.cursor_requests_ok, 2,
        "the requests after its baseline test it"
    );
    assert_eq!((s.leaks, s.before_baseline), (1, 1));
    assert_eq!(s.misses_unexplained, 1);
    assert_eq!(r.verdicts, vec![Verdict::Invalid]);
    assert_eq!(r.leaks().map(|l| l.status).collect::<Vec<_>>(), vec![y]);
    assert!(r.other_misses.iter().any(|m| m.status == z));
    let _ = (old, a, a2);
    assert_eq!(analyze_exhaustive(&b.h), r);
}
