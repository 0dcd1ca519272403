//! The checker that streams (issue 52, item 1): a run's records fed in time
//! order, each status judged once its fate is settled, then forgotten.
//!
//! [`diff`](crate::diff) judges a whole [`History`] held in memory, about 70
//! bytes a status. This module gives the same [`Analysis`] from the records
//! fed one at a time, keeping only what is still open: the statuses not yet
//! settled, each poller's requests of the last [`Checker::horizon_ms`] (their
//! bounds, not their items), and what the report lists (leaks, late
//! arrivals, misses, expired and gone rows, IDs from the future). The
//! definitions are `diff`'s, word for word (its module docs); the tests in
//! `analysis/tests/stream.rs` check that both give the same analysis.
//!
//! **Input.** Requests in time order (`sent_at_ms`, then the order they were
//! recorded), each with the statuses it returned; truth rows in key order,
//! each fed before the first request that returns its status or whose
//! cursor passes it ([`Checker::truth_wanted`] says how far).
//!
//! **When a status settles.** Once every poller's cursor (the since_id of
//! its latest request) is at or above its key, so no later request can return it, in a cycle
//! that is over (`Poller::closed_since`), and its truth is read; then each poller that never returned it is judged by walking its
//! requests, as `diff`'s `classify` does, and the walk must end for a reason
//! that later requests cannot change: the status's visibility ended, a clean
//! cycle had it in its window, it lay below the baseline, or the cursor had
//! passed it at a request that owed it, in a cycle that is over. Until then
//! it waits. A `newest` poller (no since_id, pages that are not full) or a
//! keyset poller (`xmin`) never passes anything, so a run with one settles
//! everything only at the end: its memory is the in-memory checker's.
//!
//! **What it assumes, and checks.** That cursors do not go back: a request
//! whose since_id lies below a settled status (or that has none, once one
//! has settled), or that returns a status
//! below one that is not open, would have changed a settled fate. Also that
//! a poller's cycles do not interleave, that a cycle's page 0 is its first
//! request, and that no open status needed a request older than the horizon.
//! When any of these fails, [`Streamed::inexact`] says which, and the caller
//! judges the run in memory instead (`analyze` does): the result is never a
//! guess.
//!
//! **Memory.** The open statuses (those above the slowest cursor, about
//! (k + the cursor's lag) times the rate, plus those waiting to become
//! visible), the requests of the horizon, and the run's ticks (a few words a
//! tick: the tick table `required_k` reads, and the running highest key
//! `id_skew` reads), not the run's statuses or observations. What the
//! report names is kept too, but for the misses that are not leaks and the
//! leaks and late arrivals when [`Checker::hand_over`] is set: each is
//! handed over once its place in the report's order is final (`analyze`
//! writes them to disk, [`crate::spill`]), and a leak's `id_skew_ms` and
//! `required_k_ms` are read from the ticks at the end ([`Resolve`]).

mod delays;
mod queue;
mod ring;
mod settle;

use crate::diff::{Analysis, FUTURE_TOLERANCE_MS, MAX_POLLERS, OtherMiss, PollerStats};
use crate::history::{History, PollerSpec, Status, Visibility};
use since_id::id::{Id, Layout};
use std::collections::{HashMap as StdHashMap, VecDeque};

pub use settle::{RequiredKs, Resolve};

/// foldhash, as in `diff`: millions of keys pass through.
type HashMap<K, V> = StdHashMap<K, V, foldhash::fast::FixedState>;

/// One status a request returned: its key and the time in its ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    pub key: u128,
    pub id_time_ms: i64,
}

/// One truth row, with what the loader reads beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TruthRow {
    pub key: u128,
    pub id_time_ms: i64,
    pub visibility: Visibility,
    /// The retention job dropped it ([`History::expired`]).
    pub expired: bool,
    /// The pollers whose endpoints never serve it ([`History::unserved`]).
    pub unserved: u64,
}

/// One request, as [`crate::history::Request`] without its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRequest {
    pub poller: usize,
    pub cycle: i64,
    pub page: i64,
    pub sent_at_ms: i64,
    pub received_at_ms: i64,
    pub since_key: Option<u128>,
    pub since_time_ms: Option<i64>,
    pub before_key: Option<u128>,
    pub failed: bool,
    pub overflow: bool,
    pub full: bool,
    pub bytes: Option<i64>,
}

/// What the streaming check found: the [`Analysis`], whose status indices
/// point into `history`, a [`History`] of only the statuses it names (no
/// requests, no observations), in the loader's order (returned by some
/// poller first, then the others, each by key).
pub struct Streamed {
    pub analysis: Analysis,
    pub history: History,
    /// The truth rows read (the report's count of the truth).
    pub truth_rows: u64,
    /// Why the result may differ from the in-memory checker's (an assumption
    /// of the module docs failed); `None`: it is the same.
    pub inexact: Option<String>,
    /// The most statuses open at once (for the benchmark's account of memory).
    pub peak_open: usize,
    /// Distinct statuses some poller returned.
    pub returned: u64,
    /// Per poller, its detection delays ([`crate::oracle::detection_delays`]).
    pub detection_delays: Vec<Option<crate::diff::Distribution>>,
    /// With truth, how many truth rows had each visibility lateness
    /// (`visible_at_ms` − ID time, as [`History::lateness_ms`]), by lateness:
    /// the lateness CDF, a count per distinct value rather than one a status.
    pub lateness: Vec<(i64, u64)>,
    /// With [`Checker::hand_over`]: the misses not yet handed over,
    /// in the report's order (by poller, then key); they follow those
    /// handed over, and `analysis.other_misses` is empty.
    pub last_misses: Vec<HandedMiss>,
    /// With [`Checker::hand_over`]: the leaks and late arrivals not yet
    /// handed over, in the report's order; they follow those handed over,
    /// and `analysis.items` is empty, as are `k_to_catch_all_ms` and
    /// `required_k` until [`RequiredKs`] has read them all.
    pub last_findings: Vec<HandedFinding>,
    /// What each finding's `id_skew_ms` and `required_k_ms` are read from.
    pub resolve: Resolve,
}

/// A miss that is not a leak, handed over by key rather than kept
/// ([`Checker::hand_over`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandedMiss {
    pub poller: u8,
    pub key: u128,
    pub cause: crate::diff::Cause,
}

/// A leak or late arrival ([`crate::diff::Finding`]) by key, handed over
/// rather than kept ([`Checker::hand_over`]); its `id_skew_ms` and
/// `required_k_ms` are read at the end ([`Resolve::finding`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandedFinding {
    pub key: u128,
    pub id_time_ms: i64,
    pub first_seen_ms: Option<i64>,
    pub visible_ms: Option<i64>,
    pub seen_by: u64,
    pub leaked_by: u64,
    pub late_for: u64,
    /// How its tick is found: by a request's page-0 time (`true`) or by
    /// when it became visible (`false`).
    pub belongs: Option<(bool, i64)>,
}

impl HandedFinding {
    /// Its place in the report's order (`diff`'s: by ID time, then the
    /// loader's order, [`Names::rank`]).
    fn order(&self) -> (i64, bool, u128) {
        (self.id_time_ms, self.seen_by == 0, self.key)
    }
}

/// A [`HandedFinding`] ordered by its place in the report.
#[derive(Clone, Copy, Debug)]
struct InOrder(HandedFinding);

impl PartialEq for InOrder {
    fn eq(&self, other: &Self) -> bool {
        self.0.order() == other.0.order()
    }
}

impl Eq for InOrder {}

impl PartialOrd for InOrder {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InOrder {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.order().cmp(&other.0.order())
    }
}

/// A status not yet settled.
#[derive(Clone, Copy, Debug)]
struct Open {
    id_time_ms: i64,
    truth: Option<Visibility>,
    expired: bool,
    unserved: u64,
    /// Pollers (bit p) that returned it.
    mask: u64,
    late_for: u64,
    /// Its first sighting: the send time of the first request that returned
    /// it, and the time that request's tick is found by (its cycle's page 0).
    first: Option<(i64, i64)>,
    /// The latest receive time of a request that returned it.
    last_received: i64,
}

/// A request kept for the walks of [`settle`]: its bounds, not its items.
#[derive(Clone, Copy, Debug)]
struct Kept {
    sent: i64,
    received: i64,
    since_key: Option<u128>,
    since_time_ms: Option<i64>,
    lower: Option<u128>,
    upper: Option<u128>,
    cycle: i64,
    /// Its cycle's outcome, final once `complete`.
    failed: bool,
    overflow: bool,
    complete: bool,
    /// Once `complete`: how many requests of its cycle follow it, whether
    /// each has a since_id, and the highest of their lower bounds. A status
    /// above those bounds that this request owed in a cycle that failed or
    /// overflowed is owed by the rest of the cycle alike, with the same
    /// outcome: its walk skips them ([`Checker::walk`]).
    rest: u32,
    rest_since: bool,
    rest_lower: Option<u128>,
}

/// A cursorless cycle while the baseline is found (`diff`'s `poller_views`).
#[derive(Clone, Copy, Debug)]
struct Cursorless {
    cycle: i64,
    sent: i64,
    succeeded: bool,
    last_page_full: bool,
    lowest_key: Option<u128>,
}

/// Per poller: its window of requests, its cycle, its baseline.
#[derive(Debug, Default)]
struct Poller {
    window: VecDeque<Kept>,
    /// Each of `window`'s send times, beside it: where a walk starts is a
    /// binary search over these (dense), not over the requests.
    sent: VecDeque<i64>,
    /// The window's suffix minimum of lower bounds, as segments (first
    /// position counted from the poller's first request, value), values
    /// increasing: where a status lies below every later bound is a binary
    /// search, not a walk back over the window.
    suffix_min: Vec<(u64, Option<u128>)>,
    /// Requests dropped from the front of `window`.
    dropped: u64,
    /// The latest send time dropped from `window` (`i64::MIN`: none).
    evicted_through: i64,
    /// The since_id of its latest request (`None` inside: none; outer
    /// `None`: no request yet). Only a cursor promises anything of later
    /// requests: what a full page without one reached does not (the
    /// cursor it then takes may lie lower).
    latest_since: Option<Option<u128>>,
    /// `latest_since` when its last cycle closed: a status at or below it
    /// was passed in a cycle that is over, so its walks end (the walk waits
    /// on a request whose cycle is open), and settling it is tried once,
    /// not again at every page 0 until the cycle closes.
    closed_since: Option<Option<u128>>,
    /// The open cycle: its number, page 0's send, its highest key, and per
    /// request (without a page 0) its send and highest key.
    cycle: Option<i64>,
    max_closed_cycle: Option<i64>,
    page0: Option<i64>,
    cycle_top: Option<u128>,
    tops: Vec<(i64, Option<u128>)>,
    /// Late arrivals: the highest key of its earlier cycles and of this one.
    earlier_cycles: Option<u128>,
    this_cycle: Option<u128>,
    /// The baseline, as `diff` finds it: done once a page 0 ends the search.
    found: Vec<Cursorless>,
    baseline_done: bool,
    baseline_sent: Option<i64>,
    baseline: Vec<(i64, u128)>,
}

/// Where settling resumes: at the ring's `version`, the positions tried
/// that wait (ascending), and the first position not tried yet. A status
/// that waited is tried again at each call, as one never tried; the
/// positions between that settled are not visited again.
#[derive(Debug, Default)]
struct Resume {
    version: u64,
    waiting: Vec<usize>,
    from: usize,
}

/// A finding kept until the end (without [`Checker::hand_over`]), when
/// the ticks are known: its name and what it is.
#[derive(Clone, Copy, Debug)]
struct Found {
    kept: u32,
    f: HandedFinding,
}

/// The statuses the output names, in the order they settled: 17 bytes
/// each (a run with heavy overflow names ten million), their keys being the
/// compact history's statuses; what is rare is kept apart.
#[derive(Default)]
struct Names {
    statuses: Vec<Status>,
    /// Some poller returned it (the loader lists those first).
    returned: Vec<bool>,
    /// The ID times the key does not give (none in the simulator's runs).
    odd_times: HashMap<u32, i64>,
    unserved: HashMap<u32, u64>,
    expired: Vec<u32>,
}

impl Names {
    fn add(&mut self, layout: &Layout, key: u128, o: &Open) -> u32 {
        let i = self.statuses.len() as u32;
        self.statuses.push(Status { key });
        self.returned.push(o.mask != 0);
        if layout.ts_ms(Id(key)) != o.id_time_ms {
            self.odd_times.insert(i, o.id_time_ms);
        }
        if o.unserved != 0 {
            self.unserved.insert(i, o.unserved);
        }
        if o.expired {
            self.expired.push(i);
        }
        i
    }

    fn id_time(&self, layout: &Layout, i: u32) -> i64 {
        match self.odd_times.get(&i) {
            Some(&t) => t,
            None => layout.ts_ms(Id(self.statuses[i as usize].key)),
        }
    }

    /// The loader's order of statuses: returned by some poller first, then
    /// the others, each by key (ID text, for the IDs of one run).
    fn rank(&self, i: u32) -> (bool, u128) {
        (!self.returned[i as usize], self.statuses[i as usize].key)
    }
}

/// The streaming checker: feed it, then [`Checker::finish`].
pub struct Checker {
    layout: Layout,
    pollers: Vec<PollerSpec>,
    interval_ms: i64,
    has_truth: bool,
    /// How long (run time) each poller's requests are kept behind the newest.
    pub horizon_ms: i64,
    /// The misses that are not leaks, and the leaks and late arrivals, are
    /// handed over in order ([`Checker::misses_in_order`],
    /// [`Checker::findings_in_order`]) instead of kept: a run with heavy
    /// overflow has millions of misses (one each per missed status and
    /// poller), the hour at 3,000/s a million leaks, which would grow with
    /// the run.
    pub hand_over: bool,
    /// Truth rows per visibility lateness ([`Streamed::lateness`]).
    lateness: HashMap<i64, u64>,
    /// Per poller, misses settled but not handed over: (key, cause).
    waiting_misses: Vec<queue::NearlySorted<(u128, crate::diff::Cause)>>,
    /// Leaks and late arrivals settled but not handed over.
    waiting_found: queue::NearlySorted<InOrder>,
    /// The place of the last finding handed over.
    found_handed_through: Option<(i64, bool, u128)>,
    /// The open statuses, by key.
    open: ring::Ring,
    /// Where [`Checker::settle_ready`] resumes.
    resume: Resume,
    truth_through: Option<u128>,
    truth_rows: u64,
    polls: Vec<Poller>,
    stats: Vec<PollerStats>,
    /// Requests held until every poller's baseline is known.
    held: VecDeque<(StreamRequest, Vec<Item>)>,
    running: Option<(u128, i64)>,
    /// (send time, highest key so far, its ID time), appended when it rises.
    running_hist: Vec<(i64, u128, i64)>,
    page0_sends: Vec<i64>,
    tick_tops: Vec<(i64, u128)>,
    last_sent: i64,
    settled_max: Option<u128>,
    named: Names,
    found: Vec<Found>,
    other: Vec<OtherMiss>,
    expired: Vec<(u32, u8)>,
    gone: Vec<(u32, u8)>,
    future: Vec<u32>,
    inexact: Option<String>,
    peak_open: usize,
    returned: u64,
    delays: delays::Delays,
}

/// The default horizon: requests older than this (run time) behind the
/// newest are dropped; an open status that needed one makes the result
/// [`Streamed::inexact`].
pub const HORIZON_MS: i64 = 30 * 60 * 1000;

impl Checker {
    pub fn new(
        layout: Layout,
        pollers: Vec<PollerSpec>,
        interval_ms: i64,
        has_truth: bool,
    ) -> Checker {
        assert!(pollers.len() <= MAX_POLLERS, "too many pollers");
        let polls = pollers
            .iter()
            .map(|p| Poller {
                evicted_through: i64::MIN,
                // A keyset poller has no baseline (`diff`'s `poller_views`).
                baseline_done: p.keyset,
                ..Poller::default()
            })
            .collect();
        let delays = delays::Delays::new(pollers.len(), interval_ms);
        let waiting_misses = (0..pollers.len()).map(|_| Default::default()).collect();
        Checker {
            stats: vec![PollerStats::default(); pollers.len()],
            layout,
            pollers,
            interval_ms,
            has_truth,
            horizon_ms: HORIZON_MS,
            hand_over: false,
            waiting_misses,
            waiting_found: Default::default(),
            found_handed_through: None,
            lateness: HashMap::default(),
            open: ring::Ring::default(),
            resume: Resume::default(),
            truth_through: None,
            truth_rows: 0,
            polls,
            held: VecDeque::new(),
            running: None,
            running_hist: Vec::new(),
            page0_sends: Vec::new(),
            tick_tops: Vec::new(),
            last_sent: i64::MIN,
            settled_max: None,
            named: Names::default(),
            found: Vec::new(),
            other: Vec::new(),
            expired: Vec::new(),
            gone: Vec::new(),
            future: Vec::new(),
            inexact: None,
            peak_open: 0,
            returned: 0,
            delays,
        }
    }

    fn inexact(&mut self, why: impl FnOnce() -> String) {
        if self.inexact.is_none() {
            self.inexact = Some(why());
        }
    }

    /// The key through which the truth must have been fed before request
    /// `r` with `items`: its highest item, its since_id and before_id.
    pub fn truth_wanted(r: &StreamRequest, items: &[Item]) -> Option<u128> {
        let top = items.iter().map(|i| i.key).max();
        top.max(r.since_key).max(r.before_key)
    }

    /// One truth row; rows come in key order.
    pub fn truth(&mut self, t: TruthRow) {
        self.truth_rows += 1;
        if self.truth_through.is_some_and(|k| t.key <= k) {
            return self.inexact(|| "a truth row out of key order".into());
        }
        if self.settled_max.is_some_and(|m| t.key <= m) {
            self.inexact(|| "a truth row below a settled status".into());
        }
        let (o, _) = self.open.get_or_open(t.key, || Open::new(t.id_time_ms));
        *self
            .lateness
            .entry(t.visibility.visible_at_ms - t.id_time_ms)
            .or_insert(0) += 1;
        o.truth = Some(t.visibility);
        o.expired = t.expired;
        o.unserved = t.unserved;
        self.truth_through = Some(t.key);
    }

    /// The truth rows fed so far.
    pub fn truth_rows(&self) -> u64 {
        self.truth_rows
    }

    /// Every truth row with a key at or below `key` has been fed.
    pub fn truth_done_through(&mut self, key: u128) {
        self.truth_through = self.truth_through.max(Some(key));
    }

    /// One request and what it returned, in time order.
    pub fn request(&mut self, r: StreamRequest, items: Vec<Item>) {
        if r.sent_at_ms < self.last_sent {
            self.inexact(|| "requests out of time order".into());
        }
        self.last_sent = self.last_sent.max(r.sent_at_ms);
        if self.polls.iter().all(|p| p.baseline_done) && self.held.is_empty() {
            return self.process(r, &items);
        }
        self.find_baseline(&r, &items);
        self.held.push_back((r, items));
        if self.polls.iter().all(|p| p.baseline_done) {
            while let Some((r, items)) = self.held.pop_front() {
                self.process(r, &items);
            }
        }
    }

    /// `diff`'s baseline search, one request at a time (the poller's
    /// requests in time order).
    fn find_baseline(&mut self, r: &StreamRequest, items: &[Item]) {
        let p = &mut self.polls[r.poller];
        if p.baseline_done {
            return;
        }
        if r.page == 0 {
            let had_one = p
                .found
                .last()
                .is_some_and(|c| c.succeeded && c.lowest_key.is_some());
            if r.since_key.is_some() || had_one {
                return close_baseline(p);
            }
            p.found.push(Cursorless {
                cycle: r.cycle,
                sent: r.sent_at_ms,
                succeeded: true,
                last_page_full: false,
                lowest_key: None,
            });
        }
        let Some(c) = p.found.last_mut().filter(|c| c.cycle == r.cycle) else {
            return;
        };
        c.succeeded &= !r.failed;
        c.last_page_full = r.full;
        let low = items.iter().map(|i| i.key).min();
        c.lowest_key = match (c.lowest_key, low) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// `diff`'s `sightings_in_time_order` for one request, then its cycle,
    /// the window, and the statuses it lets settle.
    fn process(&mut self, r: StreamRequest, items: &[Item]) {
        let pi = r.poller;
        self.close_cycle_if_new(&r);
        if r.page == 0 {
            // Every page 0 is a tick's send, as in `diff`'s `Ticks::of`.
            self.page0_sends.push(r.sent_at_ms);
        }
        let lower = self.lower_bound(&r, items);
        let upper = upper_bound(&self.pollers[pi], &r, items);
        if let Some(m) = self.settled_max
            && r.since_key.is_none_or(|l| l < m)
        {
            let name = self.pollers[pi].name.clone();
            self.inexact(|| format!("a cursor of {name} went back below a settled status"));
        }
        let bit = 1u64 << pi;
        self.delays.request(pi, r.sent_at_ms, r.page);
        let p = &mut self.polls[pi];
        let st = &mut self.stats[pi];
        st.requests += 1;
        st.errors += r.failed as u64;
        let after_baseline = p.baseline_sent.is_some_and(|b| r.sent_at_ms > b);
        let has_cursor =
            r.since_key.is_some() || (self.pollers[pi].keyset && r.cycle > 0) || after_baseline;
        st.cursor_requests_ok += (!r.failed && has_cursor) as u64;
        st.back_pages += (r.page > 0) as u64;
        let tick_t = p.page0.unwrap_or(r.sent_at_ms);
        let mut dups_here = 0u64;
        let mut top: Option<u128> = None;
        for it in items {
            st.observations += 1;
            top = top.max(Some(it.key));
            let (o, opened) = self.open.get_or_open(it.key, || Open::new(it.id_time_ms));
            if opened && self.settled_max.is_some_and(|m| it.key <= m) && self.inexact.is_none() {
                self.inexact = Some("a status returned below the settled ones".into());
            }
            if o.mask & bit != 0 {
                dups_here += 1;
            } else {
                o.mask |= bit;
                st.seen += 1;
                let visible = o.truth.map(|v| v.visible_at_ms);
                self.delays.first_return(pi, r.sent_at_ms, visible);
                let below_cursor = p.earlier_cycles.is_some_and(|m| it.key < m);
                if below_cursor
                    && after_baseline
                    && !before_baseline(&p.baseline, it.key, o, i64::MAX)
                {
                    o.late_for |= bit;
                    st.late_arrivals += 1;
                }
            }
            p.this_cycle = p.this_cycle.max(Some(it.key));
            if self.running.is_none_or(|(k, _)| it.key > k) {
                self.running = Some((it.key, it.id_time_ms));
            }
            match o.first {
                None => {
                    self.returned += 1;
                    o.first = Some((r.sent_at_ms, tick_t));
                    o.last_received = r.received_at_ms;
                }
                Some(_) if r.received_at_ms > o.last_received => o.last_received = r.received_at_ms,
                Some(_) => {}
            }
        }
        st.duplicates += dups_here;
        if let (Some(b), false) = (r.bytes, items.is_empty()) {
            let share = b as f64 * dups_here as f64 / items.len() as f64;
            *st.duplicate_bytes.get_or_insert(0.0) += share;
        } else if r.bytes.is_some() && st.duplicate_bytes.is_none() {
            st.duplicate_bytes = Some(0.0);
        }
        if let Some((k, t)) = self.running
            && self.running_hist.last().is_none_or(|&(_, hk, _)| hk != k)
        {
            self.running_hist.push((r.sent_at_ms, k, t));
        }
        p.cycle_top = p.cycle_top.max(top);
        if p.page0.is_none() {
            p.tops.push((r.sent_at_ms, top));
        }
        p.latest_since = Some(r.since_key);
        p.keep(&r, lower, upper);
        self.evict(r.sent_at_ms);
        self.peak_open = self.peak_open.max(self.open.len());
        if r.page == 0 {
            self.settle_ready(false);
        }
    }

    /// A request of a new cycle closes the poller's open one: its outcome
    /// is final, its tick's highest key known, its page 0 recorded.
    fn close_cycle_if_new(&mut self, r: &StreamRequest) {
        let p = &mut self.polls[r.poller];
        if p.cycle == Some(r.cycle) {
            if r.page == 0 && p.page0.is_none() {
                self.inexact = self
                    .inexact
                    .take()
                    .or(Some("a cycle's page 0 after another of its pages".into()));
            }
            return;
        }
        close_cycle(p, &mut self.tick_tops);
        if p.max_closed_cycle.is_some_and(|c| r.cycle <= c) && self.inexact.is_none() {
            self.inexact = Some("a poller's cycles interleave".into());
        }
        p.cycle = Some(r.cycle);
        if r.page == 0 {
            p.page0 = Some(r.sent_at_ms);
        }
        p.earlier_cycles = p.earlier_cycles.max(p.this_cycle);
        p.this_cycle = None;
    }

    /// `diff`'s `lower_bound`.
    fn lower_bound(&self, r: &StreamRequest, items: &[Item]) -> Option<u128> {
        if r.since_key.is_some() || self.pollers[r.poller].keyset || !r.full || r.failed {
            return r.since_key;
        }
        items
            .iter()
            .map(|i| i.key)
            .min()
            .map(|low| low.saturating_sub(1))
    }

    /// Drops each poller's requests older than the horizon.
    fn evict(&mut self, now: i64) {
        let limit = now.saturating_sub(self.horizon_ms);
        for p in &mut self.polls {
            while let Some(k) = p.window.front().filter(|k| k.complete && k.sent < limit) {
                p.evicted_through = p.evicted_through.max(k.sent);
                p.window.pop_front();
                p.sent.pop_front();
                p.dropped += 1;
            }
        }
    }

    /// With [`Checker::hand_over`], appends to `out` every miss
    /// settled whose place in the report's order (by poller, then key) is
    /// final, per poller in key order: `out` then holds, per poller, the
    /// next run of its list. A miss yet to settle is of a status open now
    /// (whose key is at least the lowest open key) or of one opened later
    /// (above every settled key, else the result is [`Streamed::inexact`]),
    /// so the misses below the lowest open key are final.
    pub fn misses_in_order(&mut self, out: &mut Vec<HandedMiss>) {
        let below = self.open.first_key();
        for (p, waiting) in self.waiting_misses.iter_mut().enumerate() {
            while let Some(&(key, cause)) = waiting.peek() {
                if below.is_some_and(|b| key >= b) {
                    break;
                }
                waiting.pop();
                out.push(HandedMiss {
                    poller: p as u8,
                    key,
                    cause,
                });
            }
        }
    }

    /// With [`Checker::hand_over`], appends to `out`, in the report's
    /// order (by ID time, then the loader's order), every leak and late
    /// arrival settled whose place in that order is final. One yet to
    /// settle is of a status open now, whose key is at least the lowest
    /// open key, or of one opened later, above every settled key (else the
    /// result is [`Streamed::inexact`]); an ID's time does not fall as its
    /// key rises, so those settled with an ID time below that of the least
    /// such key are final. A finding that settles below one handed over
    /// (an ID time that is not its key's) makes the result inexact.
    pub fn findings_in_order(&mut self, out: &mut Vec<HandedFinding>) {
        let lowest_open = self.open.first_key();
        let above_settled = self.settled_max.map(|m| m.saturating_add(1));
        let Some(next) = lowest_open.into_iter().chain(above_settled).min() else {
            return;
        };
        self.hand_findings_before(Some(self.layout.ts_ms(Id(next))), out);
    }

    /// Hands over the findings waiting with an ID time before `before_ms`
    /// (`None`: all), in order.
    fn hand_findings_before(&mut self, before_ms: Option<i64>, out: &mut Vec<HandedFinding>) {
        while let Some(&InOrder(f)) = self.waiting_found.peek() {
            if before_ms.is_some_and(|t| f.id_time_ms >= t) {
                break;
            }
            self.found_handed_through = Some(f.order());
            out.push(f);
            self.waiting_found.pop();
        }
    }

    /// Ends the stream: every open status is judged on what was fed.
    pub fn finish(mut self) -> Streamed {
        while let Some((r, items)) = self.held.pop_front() {
            // Baselines never closed: close them on what was seen, as `diff` does at the end.
            for p in &mut self.polls {
                if !p.baseline_done {
                    close_baseline(p);
                }
            }
            self.process(r, &items);
        }
        for p in &mut self.polls {
            if !p.baseline_done {
                close_baseline(p);
            }
            close_cycle(p, &mut self.tick_tops);
        }
        self.settle_ready(true);
        self.output()
    }
}

impl Poller {
    /// Keeps request `r` in the window with its bounds, its cycle's outcome
    /// so far shared by the cycle's requests, and the suffix minimum of
    /// lower bounds updated.
    fn keep(&mut self, r: &StreamRequest, lower: Option<u128>, upper: Option<u128>) {
        for k in self
            .window
            .iter_mut()
            .rev()
            .take_while(|k| k.cycle == r.cycle)
        {
            k.failed |= r.failed;
            k.overflow |= r.overflow;
        }
        let (failed, overflow) = self
            .window
            .back()
            .filter(|k| k.cycle == r.cycle)
            .map_or((r.failed, r.overflow), |k| (k.failed, k.overflow));
        let mut start = self.dropped + self.window.len() as u64;
        while self.suffix_min.last().is_some_and(|&(_, v)| v >= lower) {
            if let Some((s, _)) = self.suffix_min.pop() {
                start = s;
            }
        }
        self.suffix_min.push((start, lower));
        self.sent.push_back(r.sent_at_ms);
        self.window.push_back(Kept {
            sent: r.sent_at_ms,
            received: r.received_at_ms,
            since_key: r.since_key,
            since_time_ms: r.since_time_ms,
            lower,
            upper,
            cycle: r.cycle,
            failed,
            overflow,
            complete: false,
            rest: 0,
            rest_since: true,
            rest_lower: None,
        });
    }
}

/// Closes a poller's open cycle: its requests' outcome final, its highest
/// key (or each request's, without a page 0) added to the ticks'.
fn close_cycle(p: &mut Poller, tick_tops: &mut Vec<(i64, u128)>) {
    let Some(c) = p.cycle else { return };
    let (mut rest, mut since, mut lower) = (0u32, true, None);
    for k in p.window.iter_mut().rev().take_while(|k| k.cycle == c) {
        k.complete = true;
        (k.rest, k.rest_since, k.rest_lower) = (rest, since, lower);
        rest += 1;
        since &= k.since_key.is_some();
        lower = lower.max(k.lower);
    }
    p.closed_since = p.latest_since;
    match (p.page0, p.cycle_top) {
        (Some(t), Some(top)) => tick_tops.push((t, top)),
        (Some(_), None) => {}
        (None, _) => tick_tops.extend(p.tops.iter().filter_map(|&(t, top)| top.map(|k| (t, k)))),
    }
    p.max_closed_cycle = p.max_closed_cycle.max(Some(c));
    p.cycle = None;
    p.page0 = None;
    p.cycle_top = None;
    p.tops.clear();
}

/// The baseline search ends: `diff`'s reading of the cycles found.
fn close_baseline(p: &mut Poller) {
    p.baseline_done = true;
    for c in p.found.drain(..).filter(|c| c.succeeded) {
        p.baseline_sent = Some(c.sent);
        if let (true, Some(low)) = (c.last_page_full, c.lowest_key) {
            p.baseline.push((c.sent, low));
        }
    }
}

/// `diff`'s `upper_bound`.
fn upper_bound(spec: &PollerSpec, r: &StreamRequest, items: &[Item]) -> Option<u128> {
    if r.before_key.is_some() || !spec.forward || !r.full || r.failed {
        return r.before_key;
    }
    items
        .iter()
        .map(|i| i.key)
        .max()
        .map(|high| high.saturating_add(1))
}

/// `diff`'s `before_baseline`: below a baseline page, sent by `by_ms`, that
/// the status was visible at (without truth: its ID time not after it).
fn before_baseline(baseline: &[(i64, u128)], key: u128, o: &Open, by_ms: i64) -> bool {
    let visible = o.truth.map_or(o.id_time_ms, |v| v.visible_at_ms);
    baseline
        .iter()
        .any(|&(sent, low)| key < low && visible <= sent && sent <= by_ms)
}

/// Feeds a whole in-memory history to a [`Checker`], as a reader of run.db
/// would: requests in time order, the truth in key order just ahead of them.
/// What the tests compare with [`crate::diff::analyze`].
pub fn check_history(h: &History) -> Streamed {
    check_history_with(h, HORIZON_MS)
}

/// [`check_history`] with a horizon.
pub fn check_history_with(h: &History, horizon_ms: i64) -> Streamed {
    feed_history(h, horizon_ms, None)
}

/// What [`check_history_handing_over`] was handed, in the order handed.
#[derive(Debug, Default)]
pub struct Handed {
    pub misses: Vec<HandedMiss>,
    pub findings: Vec<HandedFinding>,
}

/// [`check_history_with`], the misses that are not leaks and the leaks and
/// late arrivals handed over as `analyze` hands them over
/// ([`Checker::misses_in_order`], [`Checker::findings_in_order`], after
/// each request): appended to `handed`, the rest in
/// [`Streamed::last_misses`] and [`Streamed::last_findings`].
pub fn check_history_handing_over(h: &History, horizon_ms: i64, handed: &mut Handed) -> Streamed {
    feed_history(h, horizon_ms, Some(handed))
}

fn feed_history(h: &History, horizon_ms: i64, mut handed: Option<&mut Handed>) -> Streamed {
    let mut c = Checker::new(
        h.layout.clone(),
        h.pollers.clone(),
        h.interval_ms,
        h.truth.is_some(),
    );
    c.horizon_ms = horizon_ms;
    c.hand_over = handed.is_some();
    let mut truth: Vec<TruthRow> = match &h.truth {
        None => Vec::new(),
        Some(t) => t
            .iter()
            .enumerate()
            .filter_map(|(su, v)| {
                v.map(|v| TruthRow {
                    key: h.statuses[su].key,
                    id_time_ms: h.id_time_ms(su),
                    visibility: v,
                    expired: h.is_expired(su),
                    unserved: h.unserved_to(su),
                })
            })
            .collect(),
    };
    truth.sort_by_key(|t| t.key);
    let mut truth = truth.into_iter().peekable();
    let mut order: Vec<u32> = (0..h.requests.len() as u32).collect();
    order.sort_by_key(|&i| (h.requests[i as usize].sent_at_ms, i));
    for i in order {
        let q = &h.requests[i as usize];
        let items: Vec<Item> = h.observations[q.obs_start as usize..q.obs_end as usize]
            .iter()
            .map(|&s| Item {
                key: h.statuses[s as usize].key,
                id_time_ms: h.id_time_ms(s as usize),
            })
            .collect();
        let r = StreamRequest {
            poller: q.poller,
            cycle: q.cycle,
            page: q.page,
            sent_at_ms: q.sent_at_ms,
            received_at_ms: q.received_at_ms,
            since_key: q.since_key,
            since_time_ms: q.since_time_ms,
            before_key: q.before_key,
            failed: q.failed,
            overflow: q.overflow,
            full: q.full,
            bytes: q.bytes,
        };
        if let Some(want) = Checker::truth_wanted(&r, &items) {
            while let Some(t) = truth.next_if(|t| t.key <= want) {
                c.truth(t);
            }
            c.truth_done_through(want);
        }
        c.request(r, items);
        if let Some(handed) = handed.as_deref_mut() {
            c.misses_in_order(&mut handed.misses);
            c.findings_in_order(&mut handed.findings);
        }
    }
    for t in truth {
        c.truth(t);
    }
    c.finish()
}

impl Open {
    fn new(id_time_ms: i64) -> Open {
        Open {
            id_time_ms,
            truth: None,
            expired: false,
            unserved: 0,
            mask: 0,
            late_for: 0,
            first: None,
            last_received: i64::MIN,
        }
    }

    fn is_from_the_future(&self) -> bool {
        self.first
            .is_some_and(|(sent, _)| self.id_time_ms > sent.saturating_add(FUTURE_TOLERANCE_MS))
    }
}
