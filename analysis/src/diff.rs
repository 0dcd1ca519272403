//! The leak diff: given the recorded history of a run, which items did each
//! poller miss, why, and how late were they?
//!
//! This is the checker in the Jepsen sense: [`load`](crate::load) turns run.db
//! into a [`History`], this module judges it, and the report, JSON and plots
//! only print what it found. It is pure (no I/O, no clock), so every definition
//! below is tested on small hand-built histories.
//!
//! Definitions (see the project brief for the words):
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
//!   `first_sent < q.sent <= visible_until`.
//! - X is **in window** at q if `since_key < key < before_key` (NULL bounds open).
//! - X is **before the baseline** of P (not owed) if it was visible at P's
//!   first successful page-0 request, that cycle's last page was full and X
//!   lies below the lowest key the cycle returned: the backlog a poller
//!   starts from is not something its cursor policy lost. Without truth,
//!   "visible at the baseline" is read as "ID time at or before it".
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
//! - **required_k_ms** = sent time of the last cadence tick (page-0 request of
//!   any poller) strictly before X became visible - ts(X). With truth
//!   "became visible" is `visible_at_ms`; without, the tick before the one in
//!   which X first surfaced (ticks of different pollers within half an
//!   interval count as one). Negative values are kept: any k catches them.
//!   Why: the compensated since_id of the first request after X became
//!   visible is `min_id_at(t_prev - k) - 1`, with `t_prev` that tick, so it
//!   includes X iff `k >= t_prev - ts(X)`.

use std::collections::HashMap;

pub use snowleak::poller::FUTURE_TOLERANCE_MS;

/// A distinct status: its sort key (the ID as an order-preserving integer) and the time in its ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub key: u128,
    pub id_time_ms: i64,
}

/// When a status was visible according to the simulator's truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Visibility {
    pub visible_at_ms: i64,
    pub deleted_at_ms: Option<i64>,
}

/// A poller as the diff needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PollerSpec {
    pub name: String,
    /// The k of a compensated policy; `None` for naive.
    pub k_ms: Option<i64>,
}

/// One HTTP request of one poller, with the items it returned as a range of
/// [`History::observations`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub poller: usize,
    pub cycle: i64,
    pub page: i64,
    pub sent_at_ms: i64,
    pub received_at_ms: i64,
    pub since_key: Option<u128>,
    /// The time in the since ID (`None` with no since, or when unknown).
    pub since_time_ms: Option<i64>,
    pub before_key: Option<u128>,
    /// `error` was non-NULL: the cursor did not move.
    pub failed: bool,
    /// The last request of a cycle whose back-paging was cut at its bound.
    pub overflow: bool,
    /// The response returned as many items as it asked for.
    pub full: bool,
    pub bytes: Option<i64>,
    pub obs_start: u32,
    pub obs_end: u32,
}

/// Everything the diff reads. Statuses are dense indices (`u32`) into `statuses`.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub statuses: Vec<Status>,
    /// Per status, its truth row; `None` for the whole run when the target has no truth.
    pub truth: Option<Vec<Option<Visibility>>>,
    pub pollers: Vec<PollerSpec>,
    pub requests: Vec<Request>,
    pub observations: Vec<u32>,
    pub interval_ms: i64,
}

/// Why a poller missed an item without it being a leak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    Error,
    Overflow,
    Unexplained,
    /// The cursor stood on an ID from the future at every request that owed it.
    FutureId,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// Deleted before any request of this poller could see them (not owed).
    pub gone_before_seen: u64,
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
pub struct Item {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OtherMiss {
    pub status: u32,
    pub poller: usize,
    pub cause: Cause,
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
    /// Leaks and late arrivals, one per status, in order of ID time.
    pub items: Vec<Item>,
    pub other_misses: Vec<OtherMiss>,
    /// The largest required_k over all leaks (of any poller).
    pub k_to_catch_all_ms: Option<i64>,
    /// required_k over leaks and late arrivals (one value per status).
    pub required_k: Option<Distribution>,
    /// Statuses from the future, in index order.
    pub future_ids: Vec<u32>,
}

impl Analysis {
    pub fn leaks(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|i| i.leaked_by != 0)
    }
}

/// The most pollers one run may have (they are tracked as bits of a u64).
pub const MAX_POLLERS: usize = 64;

/// Per status, where the run's requests saw it.
#[derive(Clone, Copy)]
struct Sightings {
    first_sent: i64,
    first_req: u32,
    last_received: i64,
}

/// Per poller: its requests in time order and what its baseline was.
struct PollerView {
    order: Vec<u32>,
    /// Suffix minimum of since_key over `order` (None = no lower bound), for
    /// the early exit in [`classify`]: once every later request's since is at
    /// or above X, X can never again be in this poller's window.
    suffix_min_since: Vec<Option<u128>>,
    baseline_sent: Option<i64>,
    /// The lowest key of the baseline cycle, when its last page was full.
    baseline_low: Option<u128>,
}

/// Judges a history. Panics only if there are more than [`MAX_POLLERS`]
/// pollers or an observation refers past `statuses` (the loader checks both).
///
/// Time O(R log R + O + S log R + M·W) and memory O(R + O + S·P), with R
/// requests, O observations, S statuses, P pollers and M the (status,
/// poller) pairs never returned; W, the span one such pair is examined over,
/// depends on k and the cadence, not on the run's length (see [`classify`]).
/// Each pass below states its own share.
pub fn analyze(h: &History) -> Analysis {
    judge(h, false)
}

/// [`analyze`] with every miss that has a cause walked over the whole of its
/// visibility, as before issue 13: quadratic in a run with many such misses.
/// For tests, which check that [`analyze`] gives the same [`Analysis`].
#[doc(hidden)]
pub fn analyze_exhaustive(h: &History) -> Analysis {
    judge(h, true)
}

fn judge(h: &History, exhaustive: bool) -> Analysis {
    assert!(h.pollers.len() <= MAX_POLLERS, "too many pollers");
    let n_status = h.statuses.len();
    let n_pollers = h.pollers.len();

    // All requests in time order (ties: load order), and per poller.
    let mut global: Vec<u32> = (0..h.requests.len() as u32).collect();
    global.sort_by_key(|&i| (h.requests[i as usize].sent_at_ms, i));

    // O(R log R): all requests in time order; O(R) expected: the cycle
    // outcome per (poller, cycle): failed if any page failed, overflow if
    // flagged, and its page-0 send time; then per request, its cycle's outcome.
    let mut cycle_flags: HashMap<(usize, i64), (bool, bool, i64)> = HashMap::new();
    for r in &h.requests {
        let e = cycle_flags
            .entry((r.poller, r.cycle))
            .or_insert((false, false, i64::MAX));
        e.0 |= r.failed;
        e.1 |= r.overflow;
        if r.page == 0 {
            e.2 = e.2.min(r.sent_at_ms);
        }
    }

    let cycle_of: Vec<(bool, bool)> = h
        .requests
        .iter()
        .map(|r| {
            let (failed, overflow, _) = cycle_flags[&(r.poller, r.cycle)];
            (failed, overflow)
        })
        .collect();

    // O(R + O): one pass in time order: who saw what, duplicates, late
    // arrivals, and the running highest key (for id_skew).
    let mut seen_mask = vec![0u64; n_status];
    let mut sightings: Vec<Option<Sightings>> = vec![None; n_status];
    let mut stats = vec![PollerStats::default(); n_pollers];
    let mut late_for = vec![0u64; n_status];
    // Per poller: highest key over completed cycles, current cycle and its max.
    let mut cursor: Vec<(Option<u128>, i64, Option<u128>)> =
        vec![(None, i64::MIN, None); n_pollers];
    let mut prefix_max: Vec<Option<(u128, i64)>> = Vec::with_capacity(global.len());
    let mut running: Option<(u128, i64)> = None;
    let views = poller_views(h, &global);
    for &ri in &global {
        let r = &h.requests[ri as usize];
        let p = r.poller;
        let bit = 1u64 << p;
        let st = &mut stats[p];
        st.requests += 1;
        st.errors += r.failed as u64;
        st.back_pages += (r.page > 0) as u64;
        let c = &mut cursor[p];
        if r.cycle != c.1 {
            c.0 = c.0.max(c.2);
            c.1 = r.cycle;
            c.2 = None;
        }
        let view = &views[p];
        let after_baseline = view.baseline_sent.is_some_and(|b| r.sent_at_ms > b);
        let mut dups_here = 0u64;
        let obs = &h.observations[r.obs_start as usize..r.obs_end as usize];
        for &s in obs {
            let su = s as usize;
            let status = h.statuses[su];
            st.observations += 1;
            if seen_mask[su] & bit != 0 {
                dups_here += 1;
            } else {
                seen_mask[su] |= bit;
                st.seen += 1;
                let below_cursor = c.0.is_some_and(|m| status.key < m);
                if below_cursor && after_baseline && !before_baseline(h, view, su) {
                    late_for[su] |= bit;
                    st.late_arrivals += 1;
                }
            }
            c.2 = c.2.max(Some(status.key));
            if running.is_none_or(|(k, _)| status.key > k) {
                running = Some((status.key, status.id_time_ms));
            }
            match &mut sightings[su] {
                None => {
                    sightings[su] = Some(Sightings {
                        first_sent: r.sent_at_ms,
                        first_req: ri,
                        last_received: r.received_at_ms,
                    })
                }
                Some(x) => x.last_received = x.last_received.max(r.received_at_ms),
            }
        }
        st.duplicates += dups_here;
        if let (Some(b), false) = (r.bytes, obs.is_empty()) {
            let share = b as f64 * dups_here as f64 / obs.len() as f64;
            *st.duplicate_bytes.get_or_insert(0.0) += share;
        } else if r.bytes.is_some() && st.duplicate_bytes.is_none() {
            st.duplicate_bytes = Some(0.0);
        }
        prefix_max.push(running);
    }
    let global_sent: Vec<i64> = global
        .iter()
        .map(|&i| h.requests[i as usize].sent_at_ms)
        .collect();
    let mut ticks: Vec<i64> = h
        .requests
        .iter()
        .filter(|r| r.page == 0)
        .map(|r| r.sent_at_ms)
        .collect();
    ticks.sort_unstable();

    let reference = if h.truth.is_some() {
        Reference::Truth
    } else if n_pollers >= 2 {
        Reference::Union
    } else {
        Reference::None
    };

    // Misses: every (status, poller) where the poller never returned the
    // status: O(S·P) to find them, and [`classify`]'s cost for each.
    let mut leaked_by = vec![0u64; n_status];
    let mut other_misses = Vec::new();
    let all_bits = if n_pollers == 64 {
        u64::MAX
    } else {
        (1u64 << n_pollers) - 1
    };
    if reference != Reference::None {
        for su in 0..n_status {
            let missing = all_bits & !seen_mask[su];
            if missing == 0 {
                continue;
            }
            let Some(vis) = visibility(h, &sightings, su) else {
                continue; // neither truth nor sightings: nothing to owe
            };
            for (p, view) in views.iter().enumerate() {
                if missing & (1 << p) == 0 {
                    continue;
                }
                match classify(h, view, &cycle_of, su, vis, exhaustive) {
                    Outcome::NotOwed { deleted } => {
                        if deleted {
                            stats[p].gone_before_seen += 1;
                        }
                    }
                    Outcome::BeforeBaseline => stats[p].before_baseline += 1,
                    Outcome::Leak => {
                        leaked_by[su] |= 1 << p;
                        stats[p].leaks += 1;
                    }
                    Outcome::Miss(cause) => {
                        match cause {
                            Cause::Error => stats[p].misses_error += 1,
                            Cause::Overflow => stats[p].misses_overflow += 1,
                            Cause::Unexplained => stats[p].misses_unexplained += 1,
                            Cause::FutureId => stats[p].misses_future_id += 1,
                        }
                        other_misses.push(OtherMiss {
                            status: su as u32,
                            poller: p,
                            cause,
                        });
                    }
                }
            }
        }
    }

    // O(S log R): items of interest (leaks and late arrivals), with skew and
    // required k found by binary search in the time-ordered requests and ticks.
    let mut items = Vec::new();
    for su in 0..n_status {
        if leaked_by[su] == 0 && late_for[su] == 0 {
            continue;
        }
        let status = h.statuses[su];
        let sight = sightings[su];
        let truth_vis = h
            .truth
            .as_ref()
            .and_then(|t| t[su])
            .map(|v| v.visible_at_ms);
        let visible_ms = truth_vis.or(sight.map(|s| s.first_sent));
        let id_skew_ms = visible_ms.and_then(|t| {
            let n = global_sent.partition_point(|&s| s < t);
            if n == 0 {
                None
            } else {
                prefix_max[n - 1].map(|(_, time)| time - status.id_time_ms)
            }
        });
        // The bound before which the last tick counts.
        let bound = match truth_vis {
            Some(v) => Some(v),
            None => sight.map(|s| {
                let r = &h.requests[s.first_req as usize];
                let tick = cycle_flags
                    .get(&(r.poller, r.cycle))
                    .map(|f| f.2)
                    .filter(|&t| t != i64::MAX)
                    .unwrap_or(r.sent_at_ms);
                tick - h.interval_ms / 2
            }),
        };
        let required_k_ms = bound.and_then(|b| {
            let n = ticks.partition_point(|&t| t < b);
            (n > 0).then(|| ticks[n - 1] - status.id_time_ms)
        });
        items.push(Item {
            status: su as u32,
            first_seen_ms: sight.map(|s| s.first_sent),
            visible_ms,
            seen_by: seen_mask[su],
            leaked_by: leaked_by[su],
            late_for: late_for[su],
            id_skew_ms,
            required_k_ms,
        });
    }
    items.sort_by_key(|i| (h.statuses[i.status as usize].id_time_ms, i.status));
    other_misses.sort_by_key(|m| (m.poller, h.statuses[m.status as usize].key));

    let k_to_catch_all_ms = items
        .iter()
        .filter(|i| i.leaked_by != 0)
        .filter_map(|i| i.required_k_ms)
        .max();
    let required_k = Distribution::of(items.iter().filter_map(|i| i.required_k_ms).collect());
    let verdicts = stats
        .iter()
        .map(|s| match reference {
            Reference::None => Verdict::Unknown,
            _ if s.leaks == 0 && s.misses_unexplained == 0 => Verdict::Valid,
            _ => Verdict::Invalid,
        })
        .collect();
    // Statuses from the future: flagged, whatever the pollers made of them.
    let future_ids = (0..n_status)
        .filter(|&su| {
            sightings[su].is_some_and(|s| {
                h.statuses[su].id_time_ms > s.first_sent.saturating_add(FUTURE_TOLERANCE_MS)
            })
        })
        .map(|su| su as u32)
        .collect();
    Analysis {
        reference,
        pollers: stats,
        verdicts,
        items,
        other_misses,
        k_to_catch_all_ms,
        required_k,
        future_ids,
    }
}

/// When status `su` was visible: (from, until, owed test by truth?).
#[derive(Clone, Copy, Debug)]
enum Vis {
    Truth(Visibility),
    /// From sightings: owed at q iff `from < q.sent <= until`.
    Seen {
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
            Vis::Seen { from, until } => from < r.sent_at_ms && r.sent_at_ms <= until,
        }
    }
}

fn visibility(h: &History, sightings: &[Option<Sightings>], su: usize) -> Option<Vis> {
    if let Some(v) = h.truth.as_ref().and_then(|t| t[su]) {
        return Some(Vis::Truth(v));
    }
    sightings[su].map(|s| Vis::Seen {
        from: s.first_sent,
        until: s.last_received.max(s.first_sent + h.interval_ms * 3 / 2),
    })
}

fn poller_views(h: &History, global: &[u32]) -> Vec<PollerView> {
    let mut views: Vec<PollerView> = (0..h.pollers.len())
        .map(|_| PollerView {
            order: Vec::new(),
            suffix_min_since: Vec::new(),
            baseline_sent: None,
            baseline_low: None,
        })
        .collect();
    for &i in global {
        views[h.requests[i as usize].poller].order.push(i);
    }
    for v in &mut views {
        let mut m: Option<Option<u128>> = None;
        v.suffix_min_since = v
            .order
            .iter()
            .rev()
            .map(|&i| {
                let s = h.requests[i as usize].since_key;
                let next = m.map_or(s, |m| m.min(s));
                m = Some(next);
                next
            })
            .collect();
        v.suffix_min_since.reverse();
        // Baseline: the first cycle whose page 0 succeeded.
        let Some(&b) = v.order.iter().find(|&&i| {
            let r = &h.requests[i as usize];
            r.page == 0 && !r.failed
        }) else {
            continue;
        };
        let base = &h.requests[b as usize];
        v.baseline_sent = Some(base.sent_at_ms);
        let cycle: Vec<&Request> = v
            .order
            .iter()
            .map(|&i| &h.requests[i as usize])
            .filter(|r| r.cycle == base.cycle && !r.failed)
            .collect();
        if cycle.last().is_some_and(|r| r.full) {
            v.baseline_low = cycle
                .iter()
                .flat_map(|r| &h.observations[r.obs_start as usize..r.obs_end as usize])
                .map(|&s| h.statuses[s as usize].key)
                .min();
        }
    }
    views
}

fn before_baseline(h: &History, view: &PollerView, su: usize) -> bool {
    let (Some(sent), Some(low)) = (view.baseline_sent, view.baseline_low) else {
        return false;
    };
    let status = h.statuses[su];
    let visible = match h.truth.as_ref().and_then(|t| t[su]) {
        Some(v) => v.visible_at_ms,
        None => status.id_time_ms,
    };
    status.key < low && visible <= sent
}

enum Outcome {
    NotOwed { deleted: bool },
    BeforeBaseline,
    Leak,
    Miss(Cause),
}

/// Judges one (status, poller) pair the poller never returned.
///
/// Cost: O(log R) to find the first request after X became visible, then one
/// step per request of the poller from there until its cursor is above X for
/// good (the suffix minimum of since_id passes X's key), the end of X's
/// visibility, or the end of the run, whichever comes first. That span is the
/// requests during which X sat above the lowest later cursor: about (k + the
/// cursor's lag) / interval cycles, times the pages of a cycle, whatever the
/// length of the run. With `exhaustive`, a pair with a cause is walked to the
/// end of X's visibility, as before issue 13: the reference the tests compare
/// the fast path with.
fn classify(
    h: &History,
    view: &PollerView,
    cycle_of: &[(bool, bool)],
    su: usize,
    vis: Vis,
    exhaustive: bool,
) -> Outcome {
    let key = h.statuses[su].key;
    let deleted = matches!(vis, Vis::Truth(v) if v.deleted_at_ms.is_some());
    let start_after = match vis {
        Vis::Truth(v) => v.visible_at_ms - 1,
        Vis::Seen { from, .. } => from,
    };
    let first = view
        .order
        .partition_point(|&i| h.requests[i as usize].sent_at_ms <= start_after);
    let mut owed_any = false;
    // Whether every request that had X below its cursor had a cursor from the future.
    let mut below_future_cursor_only = true;
    let mut causes: Option<(bool, bool, bool)> = None; // (clean, failed, overflow)
    for (j, &ri) in view.order.iter().enumerate().skip(first) {
        let r = &h.requests[ri as usize];
        if !vis.visible_at(r) {
            // Past the deletion or the last sighting: nothing later is owed.
            let past_end = match vis {
                Vis::Truth(v) => v.deleted_at_ms.is_some_and(|d| r.sent_at_ms >= d),
                Vis::Seen { until, .. } => r.sent_at_ms > until,
            };
            if past_end {
                break;
            }
            continue;
        }
        let below = r.since_key.is_some_and(|s| key <= s);
        let above = r.before_key.is_some_and(|b| key >= b);
        if above && !below {
            // Above a back page's window: the cycle's page 0 was responsible
            // for it, and if it surfaced after that page, the next cycle is.
            continue;
        }
        if !owed_any && before_baseline(h, view, su) {
            return Outcome::BeforeBaseline;
        }
        owed_any = true;
        if below {
            below_future_cursor_only &= r
                .since_time_ms
                .is_some_and(|t| t > r.sent_at_ms.saturating_add(FUTURE_TOLERANCE_MS));
        }
        if !below {
            let (failed, overflow) = cycle_of[ri as usize];
            let c = causes.get_or_insert((false, false, false));
            c.0 |= !failed && !overflow;
            c.1 |= failed;
            c.2 |= overflow;
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
    }
    match (owed_any, causes) {
        (false, _) => Outcome::NotOwed { deleted },
        (true, None) if below_future_cursor_only => Outcome::Miss(Cause::FutureId),
        (true, None) => Outcome::Leak,
        (true, Some((true, _, _))) => Outcome::Miss(Cause::Unexplained),
        (true, Some((false, true, _))) => Outcome::Miss(Cause::Error),
        (true, Some(_)) => Outcome::Miss(Cause::Overflow),
    }
}

#[cfg(test)]
mod tests;
