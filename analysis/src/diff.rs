//! The leak diff: given the recorded history of a run, which items did each
//! poller miss, why, and how late were they?
//!
//! This is the checker in the Jepsen sense: [`load`](crate::load) turns run.db
//! into a [`History`], this module judges it, and the report, JSON and plots
//! only print what it found. It is pure (no I/O, no clock), so every definition
//! below is tested on small hand-built histories.
//!
//! Definitions (the README's "Definitions" gives them in words, and
//! `docs/analysis.md` the reasoning):
//!
//! - An item X is **visible** from `visible_at_ms` until `deleted_at_ms`
//!   (truth), or, without truth for X, from the earliest `sent_at_ms` of a
//!   request that returned it until the latest `received_at_ms` of one that
//!   did, but at least 1.5 cadence intervals after it surfaced (an item that
//!   surfaced is taken to stay up until every poller's next tick, whatever
//!   the jitter between pollers' sends; without that, whether a leak is found
//!   would depend on which poller's request of a tick left a few ms earlier).
//! - X is **owed** to poller P at request q if X was visible at q: with truth
//!   `visible_at <= q.sent` and `deleted_at > q.received`; from sightings
//!   `first_sent < q.sent <= visible_until`; and never if P's endpoints do
//!   not serve X (a recorded client on a local timeline is not owed remote
//!   statuses: [`History::unserved`]).
//! - X is **in window** at q if `since_key < key < before_key` (NULL bounds open);
//!   a request without a since_id whose page was full covers only what it
//!   reached: X is in its window if `key >= ` the lowest key it returned
//!   (a `newest` poller's every request, a cursor poller's baseline page);
//!   a full page of a forward poller (the integer-ID pollers, which page
//!   upward) likewise only up to the highest key it returned.
//! - P's **baseline** is every successful cycle whose page 0 had no
//!   since_id (P had no cursor, so it did not page back), up to and
//!   including the first that returned anything (a cursor poller has a
//!   cursor from then on; a `newest` poller never has one, and what its
//!   later pages leave below them is its policy's loss). X is **before the
//!   baseline** (not owed) if it was visible at such a cycle, that cycle's
//!   last page was full and X lies below the lowest key the cycle returned,
//!   and no earlier clean cycle had X in its window: the backlog a poller
//!   starts from is not something its cursor policy lost. Without truth,
//!   "visible at the baseline" is read as "ID time at or before it".
//! - X is **expired** for P (a cause of its own, neither a leak nor a miss
//!   nor "deleted before it could see them") if P never returned X, the
//!   retention job dropped X ([`History::expired`]: a partition drop), and
//!   the drop, not P's cursor, lost it: X was owed at no request of P before
//!   the drop, or only at requests that failed or were cut by overflow.
//!   Owed and below P's cursor at every such request is still a leak (the
//!   cursor had passed it; the drop came after), inside a clean request's
//!   window still unexplained, below a cursor from the future still
//!   `future-id`.
//! - The **verdict**: `invalid` with a leak or an unexplained miss, or an
//!   expired row (a loss, though not the cursor policy's: the reason names
//!   it, `N expired`); else
//!   `unknown` when the check cannot decide (no reference; no successful
//!   request with a since_id; or nothing returned and every owed status
//!   missed from errors or overflow); else `valid` (`judge` below).
//! - Owed requests where X lies above a back page's upper bound (and not
//!   below its since) do not count: that range was page 0's responsibility,
//!   and an item that became visible between page 0 and page 1 is the next
//!   cycle's.
//! - For X never returned by P and owed at some request: if X was in window at
//!   an owed request, it is a miss that is not a leak, caused by the cycle of
//!   that request: `unexplained` if some such cycle neither failed nor
//!   overflowed (a bug somewhere: reported loudly), else `error` if one failed,
//!   else `overflow`. If X was owed but below (or outside) the window at every
//!   owed request, it is a **leak**: the cursor policy skipped it, unless at
//!   every such request the cursor's own ID time was more than
//!   [`FUTURE_TOLERANCE_MS`] past the request's send time: then the cursor
//!   followed an ID from the future, and the miss is that ID's (`future-id`).
//! - A status is **from the future** if its ID time is more than
//!   [`FUTURE_TOLERANCE_MS`] past the send time of the first request that
//!   returned it (listed in [`Analysis::future_ids`]).
//! - A **late arrival** of P is an item P returned for the first time with a
//!   key below the highest key P returned in its earlier *cycles* (back-paging
//!   pages of the same cycle are below page 0 by construction and are not
//!   late), and not before P's baseline.
//! - **id_skew_ms** = ts(highest key returned by any poller in requests sent
//!   before X became visible (truth) or first surfaced) - ts(X).
//! - **required_k_ms** = the smallest k for which the compensated policy,
//!   replayed on this run's history, asks for a since_id below X at the tick
//!   X belongs to. Ticks are the page-0 requests of all pollers (sends within
//!   half an interval count as one tick). X belongs to the first tick sent at
//!   or after `visible_at_ms`, or to an earlier tick whose request, sent
//!   before then, returned X (X became visible while it was in flight);
//!   without truth, to the tick of its first sighting. The replay uses the
//!   policy's own function ([`smallest_k_catching`]) with `retrieved_at` =
//!   the previous tick's last send and `latest` = the highest key returned in
//!   earlier ticks, so both bounds of the clamp count: `k >=
//!   max(retrieved_at, ts(latest)) - ts(X)`, never negative. Later ticks
//!   only need more (both inputs grow), so with a smaller k no request of
//!   X's tick or a later one has X in its window; only a back page of an
//!   earlier cycle, sent after X became visible, can come upon it (whether
//!   it reaches that far depends on how full the cycle's pages were).

use crate::history::{History, Request, Visibility};
use since_id::id::Id;
use since_id::policy::smallest_k_catching;
use std::collections::HashMap as StdHashMap;

/// foldhash, not SipHash: the keys are our own indices, millions of them.
type HashMap<K, V> = StdHashMap<K, V, foldhash::fast::FixedState>;

pub use since_id::poller::FUTURE_TOLERANCE_MS;

/// Why a poller missed an item without it being a leak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    Error,
    Overflow,
    Unexplained,
    /// The cursor stood on an ID from the future at every request that owed it.
    FutureId,
}

impl PollerStats {
    /// Counts a miss that is not a leak under its cause.
    pub(crate) fn count_miss(&mut self, cause: Cause) {
        match cause {
            Cause::Error => self.misses_error += 1,
            Cause::Overflow => self.misses_overflow += 1,
            Cause::Unexplained => self.misses_unexplained += 1,
            Cause::FutureId => self.misses_future_id += 1,
        }
    }
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Error => "error",
            Cause::Overflow => "overflow",
            Cause::Unexplained => "unexplained",
            Cause::FutureId => "future-id",
        }
    }
}

/// What the misses were measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// The simulator's truth table.
    Truth,
    /// The union of what the other pollers saw.
    Union,
    /// No truth and a single poller: nothing to compare with.
    None,
}

/// A poller's verdict, or a consumer's (`consumers`); serialized as
/// [`Verdict::as_str`] says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Valid,
    Invalid,
    Unknown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PollerStats {
    pub requests: u64,
    pub errors: u64,
    /// Successful requests that carried a since_id: the ones that test the
    /// cursor policy.
    pub cursor_requests_ok: u64,
    /// Distinct statuses returned.
    pub seen: u64,
    pub observations: u64,
    /// Observations of statuses this poller had already returned.
    pub duplicates: u64,
    /// Estimated bytes spent on duplicates: per request, bytes × duplicates / items.
    pub duplicate_bytes: Option<f64>,
    pub back_pages: u64,
    pub late_arrivals: u64,
    pub leaks: u64,
    pub misses_error: u64,
    pub misses_overflow: u64,
    pub misses_unexplained: u64,
    /// Below a cursor that had followed an ID from the future.
    pub misses_future_id: u64,
    /// Deleted before any request of this poller could see them (not owed),
    /// other than by the retention job.
    pub gone_before_seen: u64,
    /// Dropped by the retention job before this poller read them: lost,
    /// though neither leaks nor misses (not in [`PollerStats::missed`]).
    pub expired: u64,
    /// Below the poller's baseline page (not owed).
    pub before_baseline: u64,
}

impl PollerStats {
    /// All misses against the reference: leaks and misses with a cause.
    pub fn missed(&self) -> u64 {
        self.leaks
            + self.misses_error
            + self.misses_overflow
            + self.misses_unexplained
            + self.misses_future_id
    }

    pub fn duplicates_per_new(&self) -> f64 {
        if self.seen == 0 {
            0.0
        } else {
            self.duplicates as f64 / self.seen as f64
        }
    }
}

/// A status that is a leak or a late arrival of at least one poller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub status: u32,
    /// Sent time of the first request (any poller) that returned it.
    pub first_seen_ms: Option<i64>,
    /// When it became visible: truth, or else its first sighting.
    pub visible_ms: Option<i64>,
    /// Pollers (bit i = poller i) that returned it, leaked it, saw it late.
    pub seen_by: u64,
    pub leaked_by: u64,
    pub late_for: u64,
    pub id_skew_ms: Option<i64>,
    pub required_k_ms: Option<i64>,
}

/// 8 bytes: a run with heavy overflow has ten million of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OtherMiss {
    pub status: u32,
    /// Index of the poller (at most [`MAX_POLLERS`], so a byte).
    pub poller: u8,
    pub cause: Cause,
}

/// A status a poller never returned that is not counted against its
/// cursor: expired (the retention job dropped it first) or gone (deleted
/// before the poller could see it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unread {
    pub status: u32,
    pub poller: u8,
}

/// Nearest-rank percentiles of a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Distribution {
    pub basis: usize,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
}

impl Distribution {
    pub fn of(mut values: Vec<i64>) -> Option<Distribution> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let n = values.len();
        let rank = |p: f64| values[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Distribution {
            basis: n,
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: values[n - 1],
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    pub reference: Reference,
    pub pollers: Vec<PollerStats>,
    pub verdicts: Vec<Verdict>,
    /// Why each verdict, in words (the report and `--json` print them).
    pub verdict_reasons: Vec<String>,
    /// Leaks and late arrivals, one per status, in order of ID time.
    pub items: Vec<Finding>,
    pub other_misses: Vec<OtherMiss>,
    /// The rows each poller lost to the retention job, by poller then key.
    pub expired: Vec<Unread>,
    /// The statuses deleted before each poller could see them (not owed),
    /// by poller then key.
    pub gone: Vec<Unread>,
    /// The largest required_k over all leaks (of any poller).
    pub k_to_catch_all_ms: Option<i64>,
    /// required_k over leaks and late arrivals (one value per status).
    pub required_k: Option<Distribution>,
    /// Statuses from the future, in index order.
    pub future_ids: Vec<u32>,
}

impl Analysis {
    pub fn leaks(&self) -> impl Iterator<Item = &Finding> {
        self.items.iter().filter(|i| i.leaked_by != 0)
    }
}

/// The most pollers one run may have (they are tracked as bits of a u64).
pub const MAX_POLLERS: usize = 64;

/// Where the run's requests saw a status: the first request (in time order)
/// that returned it and the one that received it last, as indices into
/// [`History::requests`] (8 bytes a status, where the times themselves took
/// 32 with their `Option`). `NONE` in both: never returned.
#[derive(Clone, Copy)]
struct Sighting {
    first: u32,
    last: u32,
}

impl Sighting {
    const NONE: Sighting = Sighting {
        first: u32::MAX,
        last: u32::MAX,
    };

    fn get(self) -> Option<Sighting> {
        (self.first != u32::MAX).then_some(self)
    }

    fn first_sent(self, h: &History) -> i64 {
        h.requests[self.first as usize].sent_at_ms
    }

    fn last_received(self, h: &History) -> i64 {
        h.requests[self.last as usize].received_at_ms
    }
}

/// How one cycle of one poller went, as every page of it is judged: failed
/// if any page failed, overflow if its back-paging was cut, and when its
/// page 0 was sent (`i64::MAX` if no page 0 was recorded).
#[derive(Clone, Copy, Debug)]
struct CycleOutcome {
    failed: bool,
    overflow: bool,
    page0_sent_ms: i64,
}

impl CycleOutcome {
    /// Neither failed nor cut: a status in its window should have come back.
    fn clean(self) -> bool {
        !self.failed && !self.overflow
    }
}

/// Every cycle's outcome, by (poller, cycle) and by request.
struct Cycles {
    by_cycle: HashMap<(usize, i64), CycleOutcome>,
    of_request: Vec<CycleOutcome>,
}

impl Cycles {
    /// O(R) expected.
    fn of(h: &History) -> Cycles {
        let mut by_cycle: HashMap<(usize, i64), CycleOutcome> = HashMap::default();
        for r in &h.requests {
            let e = by_cycle.entry((r.poller, r.cycle)).or_insert(CycleOutcome {
                failed: false,
                overflow: false,
                page0_sent_ms: i64::MAX,
            });
            e.failed |= r.failed;
            e.overflow |= r.overflow;
            if r.page == 0 {
                e.page0_sent_ms = e.page0_sent_ms.min(r.sent_at_ms);
            }
        }
        let of_request = h
            .requests
            .iter()
            .map(|r| by_cycle[&(r.poller, r.cycle)])
            .collect();
        Cycles {
            by_cycle,
            of_request,
        }
    }
}

/// Per poller: its requests in time order and what its baseline was.
struct PollerView {
    order: Vec<u32>,
    /// Per position in `order`, the request's lower bound ([`lower_bound`]:
    /// X is below the window when `key <= bound`; None = no lower bound).
    lower: Vec<Option<u128>>,
    /// Per position in `order`, the request's upper bound ([`upper_bound`]:
    /// X is above the window when `key >= bound`; None = no upper bound).
    upper: Vec<Option<u128>>,
    /// Suffix minimum of `lower` over `order`, for the early exit in
    /// [`classify`]: once every later request's bound is at or above X, X
    /// can never again be in this poller's window.
    suffix_min_since: Vec<Option<u128>>,
    /// Per position in `order`, the next position (itself included) whose
    /// cycle was clean, and the next whose cycle failed or was clean
    /// (`order.len()` when none): [`classify`] jumps over requests that
    /// cannot change a miss's cause once it has one.
    next_clean: Vec<u32>,
    next_failed_or_clean: Vec<u32>,
    /// Positions before this may be checked against the baseline, so are
    /// never jumped over: 0 without a baseline.
    jumps_from: usize,
    /// The send time of the poller's last successful cycle without a cursor:
    /// nothing it returned up to then can be late.
    baseline_sent: Option<i64>,
    /// Its successful cycles without a cursor (page 0 had no since_id) whose
    /// last page was full: what lies below such a page is the backlog it
    /// started from. Usually one: a full page gives the poller its cursor.
    baseline: Vec<Baseline>,
}

#[derive(Clone, Copy)]
struct Baseline {
    sent: i64,
    /// The lowest key the cycle returned.
    low: u128,
}

/// A cycle of a poller without a cursor yet, while its baseline is found.
struct CursorlessCycle {
    cycle: i64,
    sent: i64,
    succeeded: bool,
    last_page_full: bool,
    lowest_key: Option<u128>,
}

/// Judges a history. Panics only if there are more than [`MAX_POLLERS`]
/// pollers or an observation refers past `statuses` (the loader checks both).
///
/// Time O(R log R + O + S log R + M·W) and memory O(R + O + S·P/64 + L),
/// with R requests, O observations, S statuses, P pollers, L the leaks,
/// late arrivals and other misses reported, and M the (status, poller) pairs
/// never returned; W, the requests one such pair is examined over, depends
/// on k, the cadence and the pages of a cycle, not on the run's length (see
/// `classify`). Each pass below states its own share. Per status the check
/// holds 16 bytes (who returned it, and where it was first and last seen).
pub fn analyze(h: &History) -> Analysis {
    check(h, false)
}

/// [`analyze`] with every miss that has a cause walked over the whole of its
/// visibility, as before issue 13: quadratic in a run with many such misses.
/// For tests, which check that [`analyze`] gives the same [`Analysis`].
#[doc(hidden)]
pub fn analyze_exhaustive(h: &History) -> Analysis {
    check(h, true)
}

fn check(h: &History, exhaustive: bool) -> Analysis {
    assert!(h.pollers.len() <= MAX_POLLERS, "too many pollers");
    let cycles = Cycles::of(h);
    let global = time_order(h);
    let views = poller_views(h, &global, &cycles);
    let mut seen = sightings_in_time_order(h, &global, &views);
    let reference = if h.truth.is_some() {
        Reference::Truth
    } else if h.pollers.len() >= 2 {
        Reference::Union
    } else {
        Reference::None
    };
    let misses = if reference == Reference::None {
        Misses::default()
    } else {
        misses_by_cause(h, &views, &cycles, &mut seen, exhaustive)
    };
    let ticks = Ticks::of(h, &cycles);
    let items = leaks_and_late_arrivals(h, &global, &seen, &misses, &ticks, &cycles);

    let k_to_catch_all_ms = items
        .iter()
        .filter(|i| i.leaked_by != 0)
        .filter_map(|i| i.required_k_ms)
        .max();
    let required_k = Distribution::of(items.iter().filter_map(|i| i.required_k_ms).collect());
    let (verdicts, verdict_reasons) = seen.stats.iter().map(|s| judge(reference, s)).unzip();
    let future_ids = from_the_future(h, &seen.sightings);
    let mut other_misses = misses.other;
    other_misses.sort_by_key(|m| (m.poller, h.statuses[m.status as usize].key));
    let by_poller_then_key = |mut v: Vec<Unread>| {
        v.sort_by_key(|m| (m.poller, h.statuses[m.status as usize].key));
        v
    };
    let expired = by_poller_then_key(misses.expired);
    let gone = by_poller_then_key(misses.gone);
    Analysis {
        reference,
        pollers: seen.stats,
        verdicts,
        verdict_reasons,
        items,
        other_misses,
        expired,
        gone,
        k_to_catch_all_ms,
        required_k,
        future_ids,
    }
}

/// All requests in time order (ties: load order). O(R log R).
fn time_order(h: &History) -> Vec<u32> {
    let mut global: Vec<u32> = (0..h.requests.len() as u32).collect();
    global.sort_by_key(|&i| (h.requests[i as usize].sent_at_ms, i));
    global
}

/// What one pass over the requests in time order finds.
struct PassState {
    /// Per status, the pollers (bit i = poller i) that returned it.
    mask: Vec<u64>,
    sightings: Vec<Sighting>,
    stats: Vec<PollerStats>,
    /// Status -> the pollers that returned it late (only statuses returned late).
    late_for: HashMap<u32, u64>,
    /// Per request in time order, the highest key (and its ID time) returned
    /// by any request up to it: id_skew's naive cursor.
    prefix_max: Vec<Option<(u128, i64)>>,
}

/// The highest key of a poller's earlier cycles, against which a status
/// returned for the first time is late (back pages of the same cycle lie
/// below its page 0 by construction and are not).
#[derive(Clone, Copy)]
struct CycleHigh {
    earlier_cycles: Option<u128>,
    cycle: i64,
    this_cycle: Option<u128>,
}

/// O(R + O): who returned what, duplicates, late arrivals, where each status
/// was first and last seen, and the running highest key (for id_skew).
fn sightings_in_time_order(h: &History, global: &[u32], views: &[PollerView]) -> PassState {
    let n_status = h.statuses.len();
    let mut seen = PassState {
        mask: vec![0u64; n_status],
        sightings: vec![Sighting::NONE; n_status],
        stats: vec![PollerStats::default(); h.pollers.len()],
        late_for: HashMap::default(),
        prefix_max: Vec::with_capacity(global.len()),
    };
    let mut high = vec![
        CycleHigh {
            earlier_cycles: None,
            cycle: i64::MIN,
            this_cycle: None,
        };
        h.pollers.len()
    ];
    let mut running: Option<(u128, i64)> = None;
    for &ri in global {
        let r = &h.requests[ri as usize];
        let p = r.poller;
        let bit = 1u64 << p;
        let st = &mut seen.stats[p];
        st.requests += 1;
        st.errors += r.failed as u64;
        let view = &views[p];
        let after_baseline = view.baseline_sent.is_some_and(|b| r.sent_at_ms > b);
        // A request without a since_id after the baseline (a `newest`
        // poller's) tests the policy as one with a since_id does.
        let has_cursor =
            r.since_key.is_some() || (h.pollers[p].keyset && r.cycle > 0) || after_baseline;
        st.cursor_requests_ok += (!r.failed && has_cursor) as u64;
        st.back_pages += (r.page > 0) as u64;
        let c = &mut high[p];
        if r.cycle != c.cycle {
            c.earlier_cycles = c.earlier_cycles.max(c.this_cycle);
            c.cycle = r.cycle;
            c.this_cycle = None;
        }
        let mut dups_here = 0u64;
        let obs = &h.observations[r.obs_start as usize..r.obs_end as usize];
        for &s in obs {
            let su = s as usize;
            let status = h.statuses[su];
            st.observations += 1;
            if seen.mask[su] & bit != 0 {
                dups_here += 1;
            } else {
                seen.mask[su] |= bit;
                st.seen += 1;
                let below_cursor = c.earlier_cycles.is_some_and(|m| status.key < m);
                if below_cursor && after_baseline && !before_baseline(h, view, su, i64::MAX) {
                    *seen.late_for.entry(s).or_insert(0) |= bit;
                    st.late_arrivals += 1;
                }
            }
            c.this_cycle = c.this_cycle.max(Some(status.key));
            if running.is_none_or(|(k, _)| status.key > k) {
                running = Some((status.key, h.id_time_ms(su)));
            }
            let sight = &mut seen.sightings[su];
            if sight.get().is_none() {
                *sight = Sighting {
                    first: ri,
                    last: ri,
                };
            } else if r.received_at_ms > sight.last_received(h) {
                sight.last = ri;
            }
        }
        st.duplicates += dups_here;
        if let (Some(b), false) = (r.bytes, obs.is_empty()) {
            let share = b as f64 * dups_here as f64 / obs.len() as f64;
            *st.duplicate_bytes.get_or_insert(0.0) += share;
        } else if r.bytes.is_some() && st.duplicate_bytes.is_none() {
            st.duplicate_bytes = Some(0.0);
        }
        seen.prefix_max.push(running);
    }
    seen
}

/// The misses of every poller, by cause.
#[derive(Default)]
struct Misses {
    /// (status, pollers that leaked it), in status order.
    leaked_by: Vec<(u32, u64)>,
    other: Vec<OtherMiss>,
    expired: Vec<Unread>,
    gone: Vec<Unread>,
}

/// Every (status, poller) where the poller never returned the status: O(S·P)
/// to find them, and [`classify`]'s cost for each. Counts go into `seen.stats`.
fn misses_by_cause(
    h: &History,
    views: &[PollerView],
    cycles: &Cycles,
    seen: &mut PassState,
    exhaustive: bool,
) -> Misses {
    let mut misses = Misses::default();
    let n_pollers = h.pollers.len();
    let all_bits = if n_pollers == 64 {
        u64::MAX
    } else {
        (1u64 << n_pollers) - 1
    };
    for su in 0..h.statuses.len() {
        // A status the poller's endpoints never serve is not owed to it.
        let missing = all_bits & !seen.mask[su] & !h.unserved_to(su);
        if missing == 0 {
            continue;
        }
        let Some(vis) = visibility(h, seen.sightings[su], su) else {
            continue; // neither truth nor sightings: nothing to owe
        };
        let mut leaked = 0u64;
        for (p, view) in views.iter().enumerate() {
            if missing & (1 << p) == 0 {
                continue;
            }
            let stats = &mut seen.stats[p];
            let outcome = classify(h, view, &cycles.of_request, su, vis, exhaustive);
            // The drop, not the poller, lost it (the module's definition).
            let by_the_drop = matches!(
                outcome,
                Unowed::NotOwed { deleted: true } | Unowed::Miss(Cause::Error | Cause::Overflow)
            );
            if by_the_drop && h.is_expired(su) {
                stats.expired += 1;
                misses.expired.push(Unread {
                    status: su as u32,
                    poller: p as u8,
                });
                continue;
            }
            match outcome {
                Unowed::NotOwed { deleted } => {
                    if deleted {
                        stats.gone_before_seen += 1;
                        misses.gone.push(Unread {
                            status: su as u32,
                            poller: p as u8,
                        });
                    }
                }
                Unowed::BeforeBaseline => stats.before_baseline += 1,
                Unowed::Leak => {
                    leaked |= 1 << p;
                    stats.leaks += 1;
                }
                Unowed::Miss(cause) => {
                    stats.count_miss(cause);
                    misses.other.push(OtherMiss {
                        status: su as u32,
                        poller: p as u8,
                        cause,
                    });
                }
            }
        }
        if leaked != 0 {
            misses.leaked_by.push((su as u32, leaked));
        }
    }
    misses
}

/// O(L log R): the items of interest (leaks and late arrivals), with skew
/// and required k found by binary search in the time-ordered requests and
/// ticks, in order of ID time.
fn leaks_and_late_arrivals(
    h: &History,
    global: &[u32],
    seen: &PassState,
    misses: &Misses,
    ticks: &Ticks,
    cycles: &Cycles,
) -> Vec<Finding> {
    let leaked: HashMap<u32, u64> = misses.leaked_by.iter().copied().collect();
    let mut of_interest: Vec<u32> = leaked.keys().chain(seen.late_for.keys()).copied().collect();
    of_interest.sort_unstable();
    of_interest.dedup();
    let mut items = Vec::with_capacity(of_interest.len());
    for s in of_interest {
        let su = s as usize;
        let status = h.statuses[su];
        let sight = seen.sightings[su].get();
        let first_sent = sight.map(|x| x.first_sent(h));
        let truth_vis = h.truth_of(su).map(|v| v.visible_at_ms);
        let visible_ms = truth_vis.or(first_sent);
        let id_skew_ms = visible_ms.and_then(|t| {
            let n = global.partition_point(|&i| h.requests[i as usize].sent_at_ms < t);
            if n == 0 {
                None
            } else {
                seen.prefix_max[n - 1].map(|(_, time)| time - h.id_time_ms(su))
            }
        });
        // The tick the status belongs to. With truth: the first tick sent
        // after it became visible (owed from then on to every poller), or an
        // earlier one whose request, sent before it became visible, returned
        // it (it became visible while that request was in flight). Without
        // truth: the tick of its first sighting.
        let first_returned = sight.map(|x| (x.first_sent(h), x.first));
        let belongs = match (truth_vis, first_returned) {
            (Some(v), Some((sent, req))) if sent < v => ticks.of_request(h, cycles, req),
            (Some(v), _) => Some(ticks.sent.partition_point(|&t| t < v)),
            (None, Some((_, req))) => ticks.of_request(h, cycles, req),
            (None, None) => None,
        };
        let required_k_ms = belongs.and_then(|c| ticks.required_k(h, c, status.key));
        items.push(Finding {
            status: s,
            first_seen_ms: first_sent,
            visible_ms,
            seen_by: seen.mask[su],
            leaked_by: leaked.get(&s).copied().unwrap_or(0),
            late_for: seen.late_for.get(&s).copied().unwrap_or(0),
            id_skew_ms,
            required_k_ms,
        });
    }
    items.sort_by_key(|i| (h.id_time_ms(i.status as usize), i.status));
    items
}

/// O(S): statuses whose ID time is past the first request that returned
/// them by more than [`FUTURE_TOLERANCE_MS`], whatever the pollers made of
/// them, in index order.
fn from_the_future(h: &History, sightings: &[Sighting]) -> Vec<u32> {
    (0..h.statuses.len())
        .filter(|&su| {
            sightings[su].get().is_some_and(|s| {
                h.id_time_ms(su) > s.first_sent(h).saturating_add(FUTURE_TOLERANCE_MS)
            })
        })
        .map(|su| su as u32)
        .collect()
}

/// The run's cadence: page-0 sends of every poller, those within half an
/// interval of a tick's first send merged into it, and per tick the highest
/// key any request of an earlier tick returned (the latest ID a poller holds
/// when it sends that tick's request).
struct Ticks {
    /// The first page-0 send of each tick: which tick a time falls in.
    sent: Vec<i64>,
    /// The last page-0 send of each tick: the `retrieved_at` of the next tick's
    /// since_id, taken from the latest poller so that required_k suffices for
    /// each poller of the run (in virtual time all pollers send at once).
    last: Vec<i64>,
    latest_before: Vec<Option<u128>>,
}

impl Ticks {
    fn of(h: &History, cycles: &Cycles) -> Ticks {
        let mut page0: Vec<i64> = h
            .requests
            .iter()
            .filter(|r| r.page == 0)
            .map(|r| r.sent_at_ms)
            .collect();
        page0.sort_unstable();
        let (mut sent, mut last): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
        for t in page0 {
            if sent
                .last()
                .is_none_or(|&first| t > first + h.interval_ms / 2)
            {
                sent.push(t);
                last.push(t);
            } else if let Some(l) = last.last_mut() {
                *l = t;
            }
        }
        let mut ticks = Ticks {
            latest_before: vec![None; sent.len() + 1],
            sent,
            last,
        };
        let mut highest_in: Vec<Option<u128>> = vec![None; ticks.sent.len()];
        for (i, r) in h.requests.iter().enumerate() {
            let top = h.observations[r.obs_start as usize..r.obs_end as usize]
                .iter()
                .map(|&s| h.statuses[s as usize].key)
                .max();
            if let (Some(top), Some(c)) = (top, ticks.of_request(h, cycles, i as u32)) {
                highest_in[c] = highest_in[c].max(Some(top));
            }
        }
        for (c, highest) in highest_in.into_iter().enumerate() {
            ticks.latest_before[c + 1] = ticks.latest_before[c].max(highest);
        }
        ticks
    }

    /// The tick of a request: that of its cycle's page 0.
    fn of_request(&self, h: &History, cycles: &Cycles, ri: u32) -> Option<usize> {
        let r = &h.requests[ri as usize];
        let page0 = cycles
            .by_cycle
            .get(&(r.poller, r.cycle))
            .map(|f| f.page0_sent_ms)
            .filter(|&t| t != i64::MAX)
            .unwrap_or(r.sent_at_ms);
        self.sent.partition_point(|&t| t <= page0).checked_sub(1)
    }

    /// The smallest k for which the compensated policy, at tick `c`, with
    /// the previous tick as `retrieved_at` and the latest ID of the ticks
    /// before, asks for a since_id below `key`. Later ticks only need more
    /// (both inputs of the formula only grow), so this is the k that catches
    /// the status at all. `None` without a previous tick or a latest ID.
    fn required_k(&self, h: &History, c: usize, key: u128) -> Option<i64> {
        let retrieved_at = *self.last.get(c.checked_sub(1)?)?;
        let latest = self.latest_before.get(c).copied().flatten()?;
        smallest_k_catching(&h.layout, Id(latest), retrieved_at, Id(key))
            .map(|k| k.min(i64::MAX as u64) as i64)
    }
}

/// A poller's verdict, and why. As in Jepsen, `unknown` when the check
/// cannot decide: without a reference, and when the cursor policy was never
/// put to the test (no request with a since_id succeeded) or everything the
/// poller owed was lost to errors or overflow, so that "nothing leaked" would
/// rest on no evidence. A leak or an unexplained miss is evidence enough for
/// `invalid` whatever else happened; so is an expired row: the consumer lost
/// it, and a verdict of `valid` would say it delivered everything. The
/// reason names it apart, since the cursor policy is not to blame (a relay
/// that keeps up with the retention job loses none: docs/analysis.md).
pub(crate) fn judge(reference: Reference, s: &PollerStats) -> (Verdict, String) {
    let lost = s.misses_error + s.misses_overflow + s.misses_future_id;
    if reference == Reference::None {
        return (
            Verdict::Unknown,
            "no truth and no other poller to compare with".into(),
        );
    }
    if s.leaks > 0 || s.misses_unexplained > 0 || s.expired > 0 {
        let mut parts = Vec::new();
        if s.leaks > 0 || s.misses_unexplained > 0 {
            parts.push(format!("{} leaks", s.leaks));
        }
        if s.misses_unexplained > 0 {
            parts.push(format!("{} unexplained misses", s.misses_unexplained));
        }
        if s.expired > 0 {
            parts.push(format!(
                "{} expired (dropped by the retention job before it read them: lost, though not by its cursor)",
                s.expired
            ));
        }
        return (Verdict::Invalid, parts.join(", "));
    }
    if s.cursor_requests_ok == 0 {
        let why = if s.requests == s.errors {
            format!(
                "none of its {} requests succeeded: no evidence either way",
                s.requests
            )
        } else {
            "no request with a since_id succeeded: its cursor policy was never tested".into()
        };
        return (Verdict::Unknown, why);
    }
    if s.seen == 0 && lost > 0 {
        return (
            Verdict::Unknown,
            format!(
                "every status it owed ({lost}) was missed from errors or overflow: no evidence either way"
            ),
        );
    }
    let mut why = "no leaks, no unexplained misses".to_string();
    if lost > 0 {
        why += &format!(
            " ({lost} missed from errors, overflow or IDs from the future, not the policy's doing)"
        );
    }
    (Verdict::Valid, why)
}

/// When status `su` was visible: (from, until, owed test by truth?).
#[derive(Clone, Copy, Debug)]
enum Vis {
    Truth(Visibility),
    /// From sightings: owed at q iff `from < q.sent <= until`.
    PassState {
        from: i64,
        until: i64,
    },
}

impl Vis {
    /// Whether the status was visible throughout request `r`.
    fn visible_at(&self, r: &Request) -> bool {
        match *self {
            Vis::Truth(v) => {
                v.visible_at_ms <= r.sent_at_ms
                    && v.deleted_at_ms.is_none_or(|d| d > r.received_at_ms)
            }
            Vis::PassState { from, until } => from < r.sent_at_ms && r.sent_at_ms <= until,
        }
    }
}

fn visibility(h: &History, sighting: Sighting, su: usize) -> Option<Vis> {
    if let Some(v) = h.truth_of(su) {
        return Some(Vis::Truth(v));
    }
    sighting.get().map(|s| {
        let from = s.first_sent(h);
        Vis::PassState {
            from,
            until: s.last_received(h).max(from + h.interval_ms * 3 / 2),
        }
    })
}

/// For each lost `(poller, status)`, the first of that poller's requests
/// that owed the status (visible at it, by the same test as the check, and
/// not above a back page's window): the request that should have returned
/// it, its cursor below the status (a miss) or past it (a leak). An index
/// into [`History::requests`]; `None` when none owed it (or the status has
/// neither truth nor sightings). Pure; O(R log R) for the time order, then
/// per pair a binary search and a walk to that request.
pub fn first_owing(h: &History, lost: &[(usize, u32)]) -> Vec<Option<u32>> {
    let global = time_order(h);
    let mut order: Vec<Vec<u32>> = vec![Vec::new(); h.pollers.len()];
    for &i in &global {
        order[h.requests[i as usize].poller].push(i);
    }
    let mut sightings = vec![Sighting::NONE; h.statuses.len()];
    for &ri in &global {
        let r = &h.requests[ri as usize];
        for &s in &h.observations[r.obs_start as usize..r.obs_end as usize] {
            let sight = &mut sightings[s as usize];
            if sight.get().is_none() {
                *sight = Sighting {
                    first: ri,
                    last: ri,
                };
            } else if r.received_at_ms > sight.last_received(h) {
                sight.last = ri;
            }
        }
    }
    lost.iter()
        .map(|&(p, s)| {
            let su = s as usize;
            let vis = visibility(h, sightings[su], su)?;
            let key = h.statuses[su].key;
            let start_after = match vis {
                Vis::Truth(v) => v.visible_at_ms - 1,
                Vis::PassState { from, .. } => from,
            };
            let mine = order.get(p)?;
            let j = mine.partition_point(|&i| h.requests[i as usize].sent_at_ms <= start_after);
            for &ri in &mine[j..] {
                let r = &h.requests[ri as usize];
                let past_end = match vis {
                    Vis::Truth(v) => v.deleted_at_ms.is_some_and(|d| r.sent_at_ms >= d),
                    Vis::PassState { until, .. } => r.sent_at_ms > until,
                };
                if past_end {
                    return None;
                }
                let below = r.since_key.is_some_and(|s| key <= s);
                let above = r.before_key.is_some_and(|b| key >= b);
                // Above a back page's window only: page 0 owed it (as in `classify`).
                if vis.visible_at(r) && (below || !above) {
                    return Some(ri);
                }
            }
            None
        })
        .collect()
}

/// Per poller, its requests in time order, the suffix minimum of their
/// since_id, the jump tables of [`classify`] and its baseline: O(R) after
/// the time order.
fn poller_views(h: &History, global: &[u32], cycles: &Cycles) -> Vec<PollerView> {
    let mut views: Vec<PollerView> = (0..h.pollers.len())
        .map(|_| PollerView {
            order: Vec::new(),
            lower: Vec::new(),
            upper: Vec::new(),
            suffix_min_since: Vec::new(),
            next_clean: Vec::new(),
            next_failed_or_clean: Vec::new(),
            jumps_from: 0,
            baseline_sent: None,
            baseline: Vec::new(),
        })
        .collect();
    for &i in global {
        views[h.requests[i as usize].poller].order.push(i);
    }
    for (p, v) in views.iter_mut().enumerate() {
        v.lower = v
            .order
            .iter()
            .map(|&i| lower_bound(h, &h.requests[i as usize]))
            .collect();
        v.upper = v
            .order
            .iter()
            .map(|&i| upper_bound(h, &h.requests[i as usize]))
            .collect();
        let mut m: Option<Option<u128>> = None;
        v.suffix_min_since = v
            .lower
            .iter()
            .rev()
            .map(|&s| {
                let next = m.map_or(s, |m| m.min(s));
                m = Some(next);
                next
            })
            .collect();
        v.suffix_min_since.reverse();
        let n = v.order.len();
        v.next_clean = vec![n as u32; n + 1];
        v.next_failed_or_clean = vec![n as u32; n + 1];
        for j in (0..n).rev() {
            let c = cycles.of_request[v.order[j] as usize];
            v.next_clean[j] = if c.clean() {
                j as u32
            } else {
                v.next_clean[j + 1]
            };
            v.next_failed_or_clean[j] = if c.clean() || c.failed {
                j as u32
            } else {
                v.next_failed_or_clean[j + 1]
            };
        }
        // Baseline: every successful cycle whose page 0 had no since_id. A
        // poller without a cursor has nothing to page back to (see
        // `since_id::poller`), so a full page then cuts the backlog, and what
        // lies below it was never the cursor policy's to lose.
        let mut found: Vec<CursorlessCycle> = Vec::new();
        let cursorless = if h.pollers[p].keyset {
            &[][..]
        } else {
            &v.order[..]
        };
        for &i in cursorless {
            let r = &h.requests[i as usize];
            if r.page == 0 {
                let had_one = found
                    .last()
                    .is_some_and(|c| c.succeeded && c.lowest_key.is_some());
                if r.since_key.is_some() || had_one {
                    break;
                }
                found.push(CursorlessCycle {
                    cycle: r.cycle,
                    sent: r.sent_at_ms,
                    succeeded: true,
                    last_page_full: false,
                    lowest_key: None,
                });
            }
            let Some(c) = found.last_mut().filter(|c| c.cycle == r.cycle) else {
                continue;
            };
            c.succeeded &= !r.failed;
            c.last_page_full = r.full;
            let low = h.observations[r.obs_start as usize..r.obs_end as usize]
                .iter()
                .map(|&s| h.statuses[s as usize].key)
                .min();
            c.lowest_key = match (c.lowest_key, low) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        for c in found.into_iter().filter(|c| c.succeeded) {
            v.baseline_sent = Some(c.sent);
            if let (true, Some(low)) = (c.last_page_full, c.lowest_key) {
                v.baseline.push(Baseline { sent: c.sent, low });
            }
        }
        if !v.baseline.is_empty() {
            // Every request without a since_id may meet the baseline check.
            v.jumps_from = v
                .order
                .iter()
                .rposition(|&i| h.requests[i as usize].since_key.is_none())
                .map_or(0, |j| j + 1);
        }
    }
    views
}

/// A request's lower bound: X lies below its window when `key <= bound`.
/// The since_id when it has one; without one (not a keyset poller's), a
/// full page reached down to its lowest key and no further, so the bound is
/// just below that key; else none.
fn lower_bound(h: &History, r: &Request) -> Option<u128> {
    if r.since_key.is_some() || h.pollers[r.poller].keyset || !r.full || r.failed {
        return r.since_key;
    }
    returned_keys(h, r).min().map(|low| low.saturating_sub(1))
}

/// A request's upper bound: X lies above its window when `key >= bound`.
/// A back page's before_id; a forward poller's full page reached up to its
/// highest key and no further (its next page, or the next cycle, reads on);
/// else none.
fn upper_bound(h: &History, r: &Request) -> Option<u128> {
    if r.before_key.is_some() || !h.pollers[r.poller].forward || !r.full || r.failed {
        return r.before_key;
    }
    returned_keys(h, r).max().map(|high| high.saturating_add(1))
}

/// The keys of the statuses request `r` returned.
fn returned_keys<'h>(h: &'h History, r: &Request) -> impl Iterator<Item = u128> + 'h {
    h.observations[r.obs_start as usize..r.obs_end as usize]
        .iter()
        .map(|&s| h.statuses[s as usize].key)
}

/// Whether status `su` lies below a baseline page of the poller, sent at or
/// before `by_ms`, that it was visible at (without truth: whose send time its
/// ID time is not after).
fn before_baseline(h: &History, view: &PollerView, su: usize, by_ms: i64) -> bool {
    let status = h.statuses[su];
    let visible = match h.truth_of(su) {
        Some(v) => v.visible_at_ms,
        None => h.id_time_ms(su),
    };
    view.baseline
        .iter()
        .any(|b| status.key < b.low && visible <= b.sent && b.sent <= by_ms)
}

enum Unowed {
    NotOwed { deleted: bool },
    BeforeBaseline,
    Leak,
    Miss(Cause),
}

/// The causes found so far for a miss: in-window requests whose cycle was
/// clean, failed, or cut by back-paging's bound.
#[derive(Clone, Copy, Default)]
struct Causes {
    clean: bool,
    failed: bool,
    overflow: bool,
}

/// Judges one (status, poller) pair the poller never returned.
///
/// Cost: O(log R) to find the first request after X became visible, then
/// steps over the poller's requests from there until the outcome cannot
/// change: a clean request that had X in its window (an unexplained miss,
/// whatever follows), the cursor above X for good (the suffix minimum of
/// since_id passes X's key), the end of X's visibility, or the end of the
/// run. Once X has a cause, the walk jumps straight to the next request
/// whose cycle could make it a stronger one (`next_clean`,
/// `next_failed_or_clean`), so a run of failed or cut cycles costs one step,
/// not one per request: this is what keeps keyset pollers (`xmin`, no
/// since_id, so X never falls below their cursor) linear. The span walked is
/// the requests during which X sat above the lowest later cursor: about
/// (k + the cursor's lag) / interval cycles, times the pages of a cycle,
/// whatever the length of the run. With `exhaustive`, every request is
/// visited and a pair with a cause is walked to the end of X's visibility,
/// as before issue 13: the reference the tests compare the fast path with.
fn classify(
    h: &History,
    view: &PollerView,
    cycle_of: &[CycleOutcome],
    su: usize,
    vis: Vis,
    exhaustive: bool,
) -> Unowed {
    let key = h.statuses[su].key;
    let deleted = matches!(vis, Vis::Truth(v) if v.deleted_at_ms.is_some());
    let start_after = match vis {
        Vis::Truth(v) => v.visible_at_ms - 1,
        Vis::PassState { from, .. } => from,
    };
    let mut j = view
        .order
        .partition_point(|&i| h.requests[i as usize].sent_at_ms <= start_after);
    let mut owed_any = false;
    // Whether every request that had X below its cursor had a cursor from the future.
    let mut below_future_cursor_only = true;
    let mut causes: Option<Causes> = None;
    // The next position to look at: with a cause found, only a request of a
    // stronger kind (clean > failed > overflow) can change the outcome, and
    // nothing skipped can meet the baseline check (`jumps_from`).
    let next = |j: usize, causes: Option<Causes>| -> usize {
        match causes {
            Some(c) if !exhaustive && j + 1 >= view.jumps_from => {
                let table = if c.failed {
                    &view.next_clean
                } else {
                    &view.next_failed_or_clean
                };
                table[j + 1] as usize
            }
            _ => j + 1,
        }
    };
    while j < view.order.len() {
        let ri = view.order[j];
        let r = &h.requests[ri as usize];
        if !vis.visible_at(r) {
            // Past the deletion or the last sighting: nothing later is owed.
            let past_end = match vis {
                Vis::Truth(v) => v.deleted_at_ms.is_some_and(|d| r.sent_at_ms >= d),
                Vis::PassState { until, .. } => r.sent_at_ms > until,
            };
            if past_end {
                break;
            }
            j = next(j, causes);
            continue;
        }
        let below = view.lower[j].is_some_and(|s| key <= s);
        let above = view.upper[j].is_some_and(|b| key >= b);
        if above && !below {
            // Above a back page's window: the cycle's page 0 was responsible
            // (above a forward poller's full page: its next page was)
            // for it, and if it surfaced after that page, the next cycle is.
            j = next(j, causes);
            continue;
        }
        // Below a baseline page it was visible at: the backlog, not owed;
        // earlier cursorless cycles that failed do not change that. (One that
        // succeeded, was not full and still left it out stays a miss.)
        if r.since_key.is_none()
            && !causes.is_some_and(|c| c.clean)
            && before_baseline(h, view, su, r.sent_at_ms)
        {
            return Unowed::BeforeBaseline;
        }
        owed_any = true;
        if below {
            below_future_cursor_only &= r
                .since_time_ms
                .is_some_and(|t| t > r.sent_at_ms.saturating_add(FUTURE_TOLERANCE_MS));
        }
        if !below {
            let cycle = cycle_of[ri as usize];
            let c = causes.get_or_insert_default();
            c.clean |= cycle.clean();
            c.failed |= cycle.failed;
            c.overflow |= cycle.overflow;
            if c.clean && !exhaustive {
                // Unexplained, whatever the later requests say.
                break;
            }
        } else if (!exhaustive || causes.is_none())
            && view.suffix_min_since[j].is_some_and(|s| s >= key)
        {
            // Every later request has X below its cursor: none can put X in
            // window (so `causes` is final), `owed_any` is already true, and
            // with no cause the leak-or-future-id question was answered here.
            // Walking on once a cause is found (what `exhaustive` does, as
            // this check did before issue 13) changes nothing, but it made a
            // status missed from an overflow walk every later request of the
            // poller: quadratic in the run.
            break;
        }
        j = next(j, causes);
    }
    match (owed_any, causes) {
        (false, _) => Unowed::NotOwed { deleted },
        (true, None) if below_future_cursor_only => Unowed::Miss(Cause::FutureId),
        (true, None) => Unowed::Leak,
        (true, Some(c)) if c.clean => Unowed::Miss(Cause::Unexplained),
        (true, Some(c)) if c.failed => Unowed::Miss(Cause::Error),
        (true, Some(_)) => Unowed::Miss(Cause::Overflow),
    }
}

#[cfg(test)]
pub(crate) mod tests;
