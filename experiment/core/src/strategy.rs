//! Cursor policies as small state machines: told each page, asked for the
//! next request's bounds.
//!
//! [`crate::policy::CursorPolicy`] is the spec (parsed from `--poller`);
//! [`PolicyState`] is its running state. The poller ([`crate::poller`]) tells
//! it every page (items, their ID times, which were late arrivals and which
//! lay below the tick's cursor, the send time) and asks it, at each tick,
//! what that tick's cycle is: an ordinary tick (the compensated window), an
//! audit (the same request with its since lowered to `depth` below the tick,
//! paged back as needed), or nothing (a tick skipped to stay within the
//! request budget). It reads no clock: every time is passed in.
//!
//! **Why an audit is the tick's own request made deeper.** The deep window
//! `(tick - depth, now]` contains the compensated one, so one request (and its
//! back-pages) serves both; a separate request would fetch the top twice. The
//! cost is about `k + depth / every` duplicates per new status at one tick a
//! second (every status is fetched again by each tick within k of its ID time,
//! and by each audit within depth of it).
//!
//! **Adaptive** (`adaptive`), after RFC 6298 (TCP's retransmission timer,
//! <https://www.rfc-editor.org/rfc/rfc6298>), which solves the same problem:
//! cover a delay whose distribution is unknown and heavy-tailed, learning from
//! samples, backing off fast when the cover proved too short.
//!
//! - **k** (the ticks' lag) is `SRTT + 4 RTTVAR` (RFC 6298 section 2, gains 1/8
//!   and 1/4) over the lateness (`send time - ID time`) of late arrivals the
//!   ticks found, starting at 1 s (the RFC's initial RTO) and held within
//!   100 ms..1 s: each second of k costs one duplicate per new status at 1 s
//!   ticks, so k only serves detection delay; what it misses the audits catch.
//!   These samples are censored at k (a tick sees nothing below its window).
//! - **C** (the lateness the audits surely cover) sets the audits: every 2C,
//!   depth 3C. An item that became visible λ after its ID time is then caught
//!   by the next audit (at most 2C later) whenever λ <= C, and the audits cost
//!   `depth / every` = 1.5 duplicates per new status *whatever C is*: a larger C
//!   only delays the rare items the ticks missed, and makes each audit longer
//!   (its pages are paid back by skipped ticks, below). C starts at the floor
//!   (2 min unless `adaptive:floor=D`), doubles (RFC 6298 section 5.5's
//!   backoff) to at least twice the sample when an audit finds an item later
//!   than C (the audit's window reaches 3C, so it can see beyond its cover:
//!   this is how the censored sample reveals the tail), rises to
//!   `SRTT + 4 RTTVAR` of the audit finds after an audit that found something
//!   beyond C/2, and shrinks slowly (1/64 per audit that found nothing beyond
//!   C/2) back toward the floor.
//!   The floor is a cost choice, not knowledge of the tail: below it nothing is
//!   saved in duplicates, only detection delay of the rare audit finds.
//! - **Period**: while more than [`ADAPTIVE_FIND_SHARE`] (1 %) of the new
//!   statuses are found only by the audits (smoothed, gain 1/8; the first
//!   audit's backlog below the baseline page excluded), the audits go every C
//!   instead of 2C (depth still 3C). The audit period is then the detection
//!   delay of many statuses, and one deleted before the audit comes was owed
//!   and never returned: on the simulator's misskey global timeline every
//!   leak of the 2C period was such a note, seconds late and deleted within
//!   minutes (docs/policies.md, "misskey, global timeline").
//! - **Budget**: a hard bound, [`ADAPTIVE_BUDGET`] = 900 requests in any
//!   15 minutes: X's v1.1 `lists/statuses` limit for one poller
//!   (<https://developer.x.com/en/docs/x-api/v1/rate-limits>). The state keeps
//!   the send time of every request it let through (page 0 of a tick or an
//!   audit, every back-page, failed ones too) and lets a request go at `t`
//!   only if fewer than the budget went in `(t - window, t]`; then no window
//!   of that length ever holds more (the last request of any window saw all
//!   the others when it went). Ticks keep a reserve free for the next audit's
//!   pages (twice the last audit's, within 2..budget/2), so an audit is
//!   rarely cut: inside the reserve only every other tick goes (paying an
//!   audit back never leaves a long gap); an audit is put off while the
//!   reserve is not free; a
//!   back-page the budget refuses cuts the cycle, recorded as an overflow,
//!   with the cursor left where it was (the next cycle fetches the window
//!   again, once the budget has freed up), and a cut audit is made again.
//!   A skipped tick loses nothing: the next window starts k below the
//!   previous request's send time.

use crate::id::{Id, Layout};
use crate::policy::{CursorPolicy, compensated_since_id};
use std::collections::VecDeque;

/// Adaptive's k before any sample: RFC 6298 (2.1)'s initial RTO of 1 s.
pub const ADAPTIVE_K_INITIAL_MS: u64 = 1_000;
/// Adaptive's k stays within [`ADAPTIVE_K_MIN_MS`]..=[`ADAPTIVE_K_MAX_MS`]: above 1 s a
/// tick's duplicates cost more than the audits that catch what it misses.
pub const ADAPTIVE_K_MIN_MS: u64 = 100;
/// The upper end of adaptive's k (see [`ADAPTIVE_K_MIN_MS`]).
pub const ADAPTIVE_K_MAX_MS: u64 = 1_000;
/// When more than this share of new statuses is found only by the audits,
/// they audit every C instead of every 2C: the audit period is then the p99
/// of the detection delay (issue 15's goal is a p99 under 60 s), and every
/// status they wait for may be deleted before they come.
pub const ADAPTIVE_FIND_SHARE: f64 = 0.01;
/// The largest audit cover C: a federated status can arrive hours late, but
/// an audit 12 h deep at a few statuses a second is thousands of pages.
pub const ADAPTIVE_COVER_MAX_MS: u64 = 6 * 3600 * 1000;

/// At most `requests` requests in any `window_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// The most requests...
    pub requests: u32,
    /// ...in any window of this length.
    pub window_ms: u64,
}

/// Adaptive's budget: X's v1.1 `lists/statuses` limit, 900 requests per 15
/// minutes (<https://developer.x.com/en/docs/x-api/v1/rate-limits>).
pub const ADAPTIVE_BUDGET: Budget = Budget {
    requests: 900,
    window_ms: 15 * 60 * 1000,
};

/// The send times of the requests in the last window, oldest first.
#[derive(Clone, Debug, PartialEq)]
struct SendLog {
    budget: Budget,
    sent: VecDeque<i64>,
}

impl SendLog {
    /// Requests sent in `(now - window, now]`.
    fn in_window(&mut self, now_ms: i64) -> u32 {
        let horizon = now_ms.saturating_sub(self.budget.window_ms as i64);
        while self.sent.front().is_some_and(|t| *t <= horizon) {
            self.sent.pop_front();
        }
        self.sent.len() as u32
    }

    /// How many more requests may go at `now_ms`.
    fn room(&mut self, now_ms: i64) -> u32 {
        self.budget.requests.saturating_sub(self.in_window(now_ms))
    }

    /// Times only move forward: a clock that stepped back is read as standing still.
    fn record(&mut self, now_ms: i64) {
        let at = self.sent.back().map_or(now_ms, |last| now_ms.max(*last));
        self.sent.push_back(at);
    }

    /// The last request went later than recorded (a driver that waited after
    /// the decision): moving it later only keeps it counted longer.
    fn resend(&mut self, now_ms: i64) {
        if let Some(last) = self.sent.back_mut() {
            *last = (*last).max(now_ms);
        }
    }
}

/// Which part of a cycle a request belongs to.
///
/// ```
/// use since_id::PolicyState;
/// use since_id::strategy::{Phase, TickPlan};
/// let mut state = PolicyState::new("audit:k=1s,depth=2m,every=1m".parse().unwrap());
/// // A cycle that audited reports Phase::Audit; if it failed, the next tick audits again.
/// let t = 1_462_015_140_000;
/// state.at_tick(t, false);
/// assert!(matches!(state.at_tick(t + 60_000, false), TickPlan::Audit { .. }));
/// state.on_cycle_end(Phase::Audit, 1, false, t + 60_000);
/// assert!(matches!(state.at_tick(t + 61_000, false), TickPlan::Audit { .. }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The compensated window above the cursor.
    Tick,
    /// A deep request: the tick's window and `depth` below the tick.
    Audit,
}

/// What the policy decides at a tick ([`PolicyState::at_tick`]).
///
/// ```
/// use since_id::{CursorPolicy, PolicyState};
/// use since_id::strategy::TickPlan;
/// let mut naive = PolicyState::new(CursorPolicy::Naive);
/// assert_eq!(naive.at_tick(0, true), TickPlan::Tick); // naive never audits nor skips
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickPlan {
    /// No request this tick (paying back the budget).
    Skip,
    /// The ordinary window above the cursor.
    Tick,
    /// A deep request covering IDs from `floor_ms` (ID time) up.
    Audit {
        /// The lowest ID time covered, in ms since the Unix epoch.
        floor_ms: i64,
    },
}

/// One item of a page as the policy sees it (see [`PolicyState::on_page`] for a use).
///
/// ```
/// use since_id::{Id, Layout};
/// use since_id::strategy::Seen;
/// let twitter = Layout::twitter();
/// let id = twitter.min_id_at(1_462_015_105_796);
/// let seen = Seen { id, id_time_ms: twitter.ts_ms(id), late: false, below_cursor: false };
/// assert_eq!(seen.id_time_ms, 1_462_015_105_796);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The item's ID.
    pub id: Id,
    /// The ID's time, in ms since the Unix epoch.
    pub id_time_ms: i64,
    /// Returned for the first time, below the highest ID of earlier cycles.
    pub late: bool,
    /// Below the tick's compensated cursor: only an audit could return it.
    pub below_cursor: bool,
}

/// One page as the policy is told it (see [`PolicyState::on_page`] for a use).
///
/// ```
/// use since_id::strategy::{PageView, Phase};
/// let empty = PageView { phase: Phase::Tick, sent_at_ms: 0, items: &[] };
/// assert!(empty.items.is_empty());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct PageView<'a> {
    /// The part of the cycle the page belongs to.
    pub phase: Phase,
    /// The cycle's send time (its first request).
    pub sent_at_ms: i64,
    /// The page's items.
    pub items: &'a [Seen],
}

/// RFC 6298's smoothed estimate and variance, in ms.
///
/// ```
/// use since_id::strategy::Smoothed;
/// let mut s = Smoothed::default();
/// assert_eq!(s.bound_ms(), None);
/// s.update(100.0);
/// assert_eq!(s.bound_ms(), Some(300)); // 100 + 4 * 50
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Smoothed {
    srtt: f64,
    rttvar: f64,
    samples: u64,
}

impl Smoothed {
    /// RFC 6298 (2.2) for the first sample, (2.3) with alpha 1/8, beta 1/4 after.
    ///
    /// ```
    /// use since_id::strategy::Smoothed;
    /// let mut s = Smoothed::default();
    /// s.update(100.0);
    /// s.update(100.0); // variance 50 -> 37.5
    /// assert_eq!(s.bound_ms(), Some(250));
    /// ```
    pub fn update(&mut self, sample_ms: f64) {
        if self.samples == 0 {
            self.srtt = sample_ms;
            self.rttvar = sample_ms / 2.0;
        } else {
            self.rttvar = 0.75 * self.rttvar + 0.25 * (self.srtt - sample_ms).abs();
            self.srtt = 0.875 * self.srtt + 0.125 * sample_ms;
        }
        self.samples += 1;
    }

    /// `SRTT + 4 RTTVAR`, or `None` before any sample.
    ///
    /// ```
    /// use since_id::strategy::Smoothed;
    /// let mut s = Smoothed::default();
    /// s.update(40.0);
    /// assert_eq!(s.bound_ms(), Some(120));
    /// ```
    pub fn bound_ms(&self) -> Option<u64> {
        (self.samples > 0).then(|| (self.srtt + 4.0 * self.rttvar).max(0.0) as u64)
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Adaptive {
    floor_ms: u64,
    k: Smoothed,
    /// C: the lateness the audits surely cover.
    cover_ms: u64,
    cover: Smoothed,
    /// The current audit found an item later than C/2.
    found_deep: bool,
    /// Statuses the current audit returned, and how many of them were finds
    /// (new, below the ticks' cursor).
    audit_items: u64,
    audit_finds: u64,
    /// The smoothed share of new statuses that only the audits found.
    find_share: f64,
    /// Audits completed: the first one's finds are mostly the backlog below
    /// the baseline page, never returned because nothing was owed yet.
    audits_done: u64,
    /// C when the current audit began: one audit at most doubles it, so the
    /// poller's memory of returned IDs (six times C) still covers the next one.
    cover_at_start_ms: u64,
    /// Send time of the last complete audit (or of the baseline tick): what
    /// an audit finds below it was not visible then.
    last_audit_ms: Option<i64>,
    /// Every request sent within the last budget window.
    log: SendLog,
    /// Pages of the last complete audit (the reserve the ticks keep for the next).
    audit_pages: u32,
    /// The last tick inside the reserve was skipped.
    skipped_last: bool,
}

/// A policy's running state: what a [`crate::Poller`] consults at each tick and tells
/// after each page and cycle.
///
/// ```
/// use since_id::{CursorPolicy, PolicyState};
/// use since_id::strategy::TickPlan;
///
/// let mut audit = PolicyState::new("audit:k=1s,depth=2m,every=1m".parse().unwrap());
/// let t = 1_462_015_140_000; // a whole minute
/// assert_eq!(audit.at_tick(t, false), TickPlan::Tick); // the first tick is the baseline
/// assert_eq!(audit.at_tick(t + 60_000, false), TickPlan::Audit { floor_ms: t + 60_000 - 120_000 });
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyState {
    spec: CursorPolicy,
    k_ms: u64,
    /// The next audit's time (none before the first tick).
    next_audit_ms: Option<i64>,
    /// The last audit's time (or the baseline tick's).
    last_audit_ms: Option<i64>,
    adaptive: Option<Adaptive>,
    skipped: u64,
}

impl PolicyState {
    /// The state of a policy before its first tick.
    ///
    /// ```
    /// use since_id::{CursorPolicy, PolicyState};
    /// let state = PolicyState::new(CursorPolicy::Adaptive { floor_ms: 120_000 });
    /// assert_eq!(state.k_ms(), since_id::strategy::ADAPTIVE_K_INITIAL_MS);
    /// ```
    pub fn new(spec: CursorPolicy) -> PolicyState {
        let adaptive = match spec {
            CursorPolicy::Adaptive { floor_ms } => Some(Adaptive {
                floor_ms,
                k: Smoothed::default(),
                cover_ms: floor_ms,
                cover: Smoothed::default(),
                found_deep: false,
                audit_items: 0,
                audit_finds: 0,
                find_share: 0.0,
                audits_done: 0,
                cover_at_start_ms: floor_ms,
                last_audit_ms: None,
                log: SendLog {
                    budget: ADAPTIVE_BUDGET,
                    sent: VecDeque::new(),
                },
                audit_pages: 0,
                skipped_last: false,
            }),
            _ => None,
        };
        PolicyState {
            spec,
            k_ms: match spec {
                CursorPolicy::Adaptive { .. } => ADAPTIVE_K_INITIAL_MS,
                other => other.k_ms().unwrap_or(0),
            },
            next_audit_ms: None,
            last_audit_ms: None,
            adaptive,
            skipped: 0,
        }
    }

    /// The policy it runs.
    ///
    /// ```
    /// use since_id::{CursorPolicy, PolicyState};
    /// assert_eq!(PolicyState::new(CursorPolicy::Naive).spec(), CursorPolicy::Naive);
    /// ```
    pub fn spec(&self) -> CursorPolicy {
        self.spec
    }

    /// The ticks' current lag (0 for naive).
    ///
    /// ```
    /// use since_id::{CursorPolicy, PolicyState};
    /// assert_eq!(PolicyState::new(CursorPolicy::Naive).k_ms(), 0);
    /// assert_eq!(PolicyState::new(CursorPolicy::Compensated { k_ms: 1500 }).k_ms(), 1500);
    /// ```
    pub fn k_ms(&self) -> u64 {
        self.k_ms
    }

    /// The current audit depth and period, if the policy audits.
    ///
    /// ```
    /// use since_id::{CursorPolicy, PolicyState};
    /// let audit = PolicyState::new("audit:k=1s,depth=2m,every=1m".parse().unwrap());
    /// assert_eq!(audit.audit(), Some((120_000, 60_000)));
    /// assert_eq!(PolicyState::new(CursorPolicy::Naive).audit(), None);
    /// ```
    pub fn audit(&self) -> Option<(u64, u64)> {
        match (self.spec, &self.adaptive) {
            (
                CursorPolicy::Audit {
                    depth_ms, every_ms, ..
                },
                _,
            ) => Some((depth_ms, every_ms)),
            (_, Some(a)) => Some((3 * a.cover_ms, Self::period(a))),
            _ => None,
        }
    }

    /// Ticks skipped so far to stay within the budget.
    ///
    /// ```
    /// use since_id::{CursorPolicy, PolicyState};
    /// assert_eq!(PolicyState::new(CursorPolicy::Naive).skipped(), 0);
    /// ```
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// How far below a cycle's send time the poller must remember the IDs it
    /// returned, so that an audit's repeats are not counted as new.
    ///
    /// ```
    /// use since_id::{CursorPolicy, PolicyState};
    /// let audit = PolicyState::new("audit:k=1s,depth=2m,every=1m".parse().unwrap());
    /// assert_eq!(audit.memory_ms(), 120_000);
    /// ```
    pub fn memory_ms(&self) -> u64 {
        match &self.adaptive {
            // Twice the depth: the cover may double at the next audit.
            Some(a) => 6 * a.cover_ms,
            None => self.audit().map_or(0, |(depth, _)| depth),
        }
    }

    /// The since_id of the next tick: `latest` for naive, else the compensated
    /// formula with the current k ([`compensated_since_id`], unchanged).
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, PolicyState};
    /// let (twitter, t) = (Layout::twitter(), 1_462_015_105_796);
    /// let latest = twitter.min_id_at(t);
    /// let state = PolicyState::new(CursorPolicy::Compensated { k_ms: 1000 });
    /// assert_eq!(state.since_id(&twitter, latest, t), twitter.min_id_at(t - 1000).pred());
    /// ```
    pub fn since_id(&self, layout: &Layout, latest: Id, retrieved_at_ms: i64) -> Id {
        match self.spec {
            // An xmin poller reads by (xid, id), never by since_id.
            CursorPolicy::Naive | CursorPolicy::Xmin => latest,
            _ => compensated_since_id(layout, latest, retrieved_at_ms, self.k_ms),
        }
    }

    /// The budget (adaptive only).
    pub fn budget(&self) -> Option<Budget> {
        self.adaptive.as_ref().map(|a| a.log.budget)
    }

    /// The same policy with another budget (adaptive only; for tests and
    /// callers whose API allows another rate).
    pub fn with_budget(mut self, budget: Budget) -> PolicyState {
        if let Some(a) = &mut self.adaptive {
            a.log.budget = budget;
        }
        self
    }

    /// Adaptive's audit period: 2C while the audits find at most
    /// [`ADAPTIVE_FIND_SHARE`] of the new statuses, C when they find more.
    fn period(a: &Adaptive) -> u64 {
        if a.find_share > ADAPTIVE_FIND_SHARE {
            a.cover_ms
        } else {
            2 * a.cover_ms
        }
    }

    /// Requests the ticks leave free for the next audit: twice the last
    /// audit's pages (an audit may double its cover, and the final one reaches
    /// deeper), at least 2 and at most half the budget.
    fn reserve(a: &Adaptive) -> u32 {
        (2 * a.audit_pages)
            .max(2)
            .min((a.log.budget.requests / 2).max(1))
    }

    /// What the tick at `now_ms` does. `last` is the run's final cycle: an
    /// auditing policy audits then (what it has not audited yet would
    /// otherwise be left for an audit that never comes) and, but for the
    /// budget, never skips it. A request it plans counts against the budget.
    ///
    /// ```
    /// use since_id::{CursorPolicy, PolicyState};
    /// use since_id::strategy::TickPlan;
    /// let mut audit = PolicyState::new("audit:k=1s,depth=2m,every=1m".parse().unwrap());
    /// let t = 1_462_015_140_000;
    /// assert_eq!(audit.at_tick(t, false), TickPlan::Tick);
    /// assert_eq!(audit.at_tick(t + 1000, false), TickPlan::Tick);
    /// // The final cycle audits, 2 min below itself and as far again below the last audit.
    /// assert_eq!(audit.at_tick(t + 2000, true), TickPlan::Audit { floor_ms: t + 2000 - 120_000 - 2000 });
    /// ```
    pub fn at_tick(&mut self, now_ms: i64, last: bool) -> TickPlan {
        let plan = self.plan_tick(now_ms, last);
        if plan != TickPlan::Skip {
            self.on_send(now_ms);
        }
        plan
    }

    fn plan_tick(&mut self, now_ms: i64, last: bool) -> TickPlan {
        let Some((depth_ms, every_ms)) = self.audit() else {
            return TickPlan::Tick;
        };
        // The room the budget leaves now, and the reserve ticks keep for audits.
        let (room, reserve) = match &mut self.adaptive {
            Some(a) => (a.log.room(now_ms), Self::reserve(a)),
            None => (u32::MAX, 0),
        };
        if room == 0 {
            self.skipped += 1;
            return TickPlan::Skip;
        }
        let Some(next) = self.next_audit_ms else {
            // The first tick is the baseline: nothing below it is owed yet.
            self.next_audit_ms = Some(now_ms.saturating_add(every_ms as i64));
            self.last_audit_ms = Some(now_ms);
            if let Some(a) = &mut self.adaptive {
                a.last_audit_ms = Some(now_ms);
            }
            return TickPlan::Tick;
        };
        // An audit goes when due and its reserve is free (the final one with
        // whatever room is left); a tick only above the reserve.
        if last || (now_ms >= next && room >= reserve) {
            // The final cycle can come long after the last audit (the run's
            // final drain waits the largest k of all its pollers): it reaches
            // as deep below the last audit as an audit would have.
            let since_last = if last {
                self.last_audit_ms
                    .map_or(0, |a| now_ms.saturating_sub(a).max(0))
            } else {
                0
            };
            self.next_audit_ms = Some(now_ms.saturating_add(every_ms as i64));
            self.last_audit_ms = Some(now_ms);
            if let Some(a) = &mut self.adaptive {
                a.found_deep = false;
                a.audit_items = 0;
                a.audit_finds = 0;
                a.cover_at_start_ms = a.cover_ms;
            }
            return TickPlan::Audit {
                floor_ms: now_ms
                    .saturating_sub(depth_ms as i64)
                    .saturating_sub(since_last),
            };
        }
        if room <= reserve {
            // Inside the reserve: every other tick, so that paying back an
            // audit's pages never leaves a long gap (detection delay); the
            // window still drains, as the requests of a window ago leave it
            // faster than these come.
            if let Some(a) = &mut self.adaptive
                && !a.skipped_last
            {
                a.skipped_last = true;
                self.skipped += 1;
                return TickPlan::Skip;
            }
        }
        if let Some(a) = &mut self.adaptive {
            a.skipped_last = false;
        }
        TickPlan::Tick
    }

    /// A request goes at `now_ms` (page 0 or a back-page): counted against the budget.
    pub fn on_send(&mut self, now_ms: i64) {
        if let Some(a) = &mut self.adaptive {
            a.log.record(now_ms);
        }
    }

    /// The last request counted went at `now_ms`, later than counted.
    pub fn resend(&mut self, now_ms: i64) {
        if let Some(a) = &mut self.adaptive {
            a.log.resend(now_ms);
        }
    }

    /// Whether the budget lets a back-page go at `now_ms`; if so it is counted.
    pub fn may_page_back(&mut self, now_ms: i64) -> bool {
        let allowed = match &mut self.adaptive {
            Some(a) => a.log.room(now_ms) > 0,
            None => true,
        };
        if allowed {
            self.on_send(now_ms);
        }
        allowed
    }

    /// One successful page of the current cycle. Adaptive learns its k from the late
    /// arrivals of its ticks (RFC 6298's estimator); other policies learn nothing.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Id, PolicyState};
    /// use since_id::strategy::{PageView, Phase, Seen};
    /// let mut adaptive = PolicyState::new("adaptive".parse().unwrap());
    /// let t = 1_462_015_105_796;
    /// // A late arrival whose ID time is 40 ms before the request was sent.
    /// let late = Seen { id: Id(1), id_time_ms: t - 40, late: true, below_cursor: false };
    /// adaptive.on_page(&PageView { phase: Phase::Tick, sent_at_ms: t, items: &[late] });
    /// assert_eq!(adaptive.k_ms(), 120); // 40 + 4 * 20
    /// ```
    pub fn on_page(&mut self, page: &PageView<'_>) {
        let Some(a) = &mut self.adaptive else {
            return;
        };
        if page.phase == Phase::Audit {
            a.audit_items += page.items.len() as u64;
        }
        for item in page.items.iter().filter(|i| i.late) {
            if item.below_cursor {
                a.audit_finds += 1;
                // Found only because the audit reached below the ticks' window.
                // Its lateness is censored: it was not visible at the last
                // audit if that audit's window held it, and the ticks missed
                // it, so it was at least this late (a lower bound; the send
                // time would add the wait for this audit, up to its period).
                let since_last = a
                    .last_audit_ms
                    .map_or(0, |last| last.saturating_sub(item.id_time_ms).max(0) as u64);
                let sample = since_last.max(self.k_ms);
                a.cover.update(sample as f64);
                if sample > a.cover_ms / 2 {
                    a.found_deep = true;
                }
                if sample > a.cover_ms {
                    // Later than covered: back off at once (RFC 6298 5.5), at
                    // most doubling per audit.
                    a.cover_ms = (2 * a.cover_ms.max(sample))
                        .min(2 * a.cover_at_start_ms)
                        .min(ADAPTIVE_COVER_MAX_MS);
                }
            } else {
                let sample = page.sent_at_ms.saturating_sub(item.id_time_ms).max(0) as u64;
                a.k.update(sample as f64);
                if let Some(bound) = a.k.bound_ms() {
                    self.k_ms = bound.clamp(ADAPTIVE_K_MIN_MS, ADAPTIVE_K_MAX_MS);
                }
            }
        }
    }

    /// The cycle ended after `requests` requests; `ok` when all succeeded. A
    /// failed or cut audit is made again at the next tick; adaptive keeps
    /// twice an audit's pages free for the next one.
    ///
    /// ```
    /// use since_id::PolicyState;
    /// use since_id::strategy::{Phase, TickPlan};
    /// let mut audit = PolicyState::new("audit:k=1s,depth=2m,every=1m".parse().unwrap());
    /// let t = 1_462_015_140_000;
    /// audit.at_tick(t, false);
    /// assert!(matches!(audit.at_tick(t + 60_000, false), TickPlan::Audit { .. }));
    /// audit.on_cycle_end(Phase::Audit, 3, false, t + 60_000);
    /// assert!(matches!(audit.at_tick(t + 61_000, false), TickPlan::Audit { .. }));
    /// ```
    pub fn on_cycle_end(&mut self, phase: Phase, requests: u32, ok: bool, sent_at_ms: i64) {
        if phase == Phase::Audit && !ok {
            // The audit did not finish: audit again at the next tick.
            self.next_audit_ms = Some(sent_at_ms);
        }
        let Some(a) = &mut self.adaptive else {
            return;
        };
        if phase == Phase::Audit && !ok {
            // Cut (by the budget) or failed: the next one may need more pages.
            a.audit_pages = a.audit_pages.max(requests + 1);
        }
        if phase == Phase::Audit && ok {
            a.audit_pages = requests;
            // The share of the new statuses since the last audit that this one
            // found: its window holds `depth` of timeline, the finds belong
            // to the time since the last audit.
            if let Some(last) = a.last_audit_ms
                && a.audit_items > 0
                && a.audits_done > 0
            {
                let since_last = sent_at_ms.saturating_sub(last).max(1) as f64;
                let depth = 3.0 * a.cover_at_start_ms as f64;
                let new = a.audit_items as f64 * (since_last / depth).min(1.0);
                let share = (a.audit_finds as f64 / new).min(1.0);
                a.find_share += (share - a.find_share) / 8.0;
            }
            a.audits_done += 1;
            let estimate = a.cover.bound_ms().unwrap_or(0).min(ADAPTIVE_COVER_MAX_MS);
            a.last_audit_ms = Some(sent_at_ms);
            a.cover_ms = if a.found_deep {
                // Deep finds: rise to the estimate (never fall after one).
                a.cover_ms.max(estimate.min(2 * a.cover_at_start_ms))
            } else {
                // Shrink slowly: 1/64 of the cover per quiet audit.
                (a.cover_ms - a.cover_ms / 64).max(a.floor_ms)
            };
            // A period shortened by this audit counts from it (the next audit
            // was planned with the old one); a longer one waits for the next.
            let shortened = sent_at_ms.saturating_add(Self::period(a) as i64);
            self.next_audit_ms = self.next_audit_ms.map(|next| next.min(shortened));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn state(spec: &str) -> PolicyState {
        PolicyState::new(spec.parse().unwrap())
    }

    #[test]
    fn naive_and_compensated_never_audit_nor_skip() {
        for spec in ["naive", "compensated:k=1s"] {
            let mut s = state(spec);
            for t in 0..1000 {
                assert_eq!(s.at_tick(T0 + t * 1000, t == 999), TickPlan::Tick);
            }
            s.on_cycle_end(Phase::Tick, 5, true, T0);
            assert_eq!(s.at_tick(T0 + 1_000_000, false), TickPlan::Tick);
        }
    }

    #[test]
    fn audit_every_period_to_its_depth_and_at_the_end() {
        let mut s = state("audit:k=1s,depth=2m,every=1m");
        let plans: Vec<(i64, TickPlan)> = (0..=180)
            .map(|t| (t, s.at_tick(T0 + t * 1000, t == 180)))
            .collect();
        let audits: Vec<(i64, i64)> = plans
            .iter()
            .filter_map(|(t, p)| match p {
                TickPlan::Audit { floor_ms } => Some((*t, *floor_ms)),
                _ => None,
            })
            .collect();
        // The final one at 180 s: 60 s after the last audit, so 60 s deeper.
        assert_eq!(
            audits,
            vec![
                (60, T0 + 60_000 - 120_000),
                (120, T0),
                (180, T0 + 180_000 - 120_000 - 60_000)
            ]
        );
        // A failed audit is made again at the next tick.
        s.on_cycle_end(Phase::Audit, 1, false, T0 + 180_000);
        assert!(matches!(
            s.at_tick(T0 + 181_000, false),
            TickPlan::Audit { .. }
        ));
    }

    fn late(id_time_ms: i64, below_cursor: bool) -> Seen {
        Seen {
            id: Id(id_time_ms as u128),
            id_time_ms,
            late: true,
            below_cursor,
        }
    }

    /// Issue 15: adaptive grows when an audit finds an item later than it covered.
    #[test]
    fn adaptive_grows_when_an_audit_finds_a_later_item() {
        let mut s = state("adaptive:floor=30s");
        assert_eq!(s.audit(), Some((90_000, 60_000)));
        s.at_tick(T0, false);
        let at = T0 + 60_000;
        let plan = s.at_tick(at, false);
        assert_eq!(
            plan,
            TickPlan::Audit {
                floor_ms: at - 90_000
            }
        );
        // The audit finds an item below the baseline tick's time by 50 s: it
        // was not visible then, so it is at least 50 s late, beyond the 30 s
        // covered.
        let items = [late(T0 - 50_000, true)];
        s.on_page(&PageView {
            phase: Phase::Audit,
            sent_at_ms: at,
            items: &items,
        });
        s.on_cycle_end(Phase::Audit, 1, true, at);
        let (depth, every) = s.audit().unwrap();
        assert_eq!(every, 2 * 60_000, "cover doubled (at most, in one audit)");
        assert_eq!(2 * depth, 3 * every);
        // Quiet audits shrink it, slowly, never below the floor.
        let grown = every;
        let mut t = at;
        let mut covers = vec![grown];
        for _ in 0..300 {
            t += 2 * s.audit().unwrap().1 as i64;
            assert!(matches!(s.at_tick(t, false), TickPlan::Audit { .. }));
            s.on_cycle_end(Phase::Audit, 1, true, t);
            covers.push(s.audit().unwrap().1);
        }
        assert!(covers[1] < grown && covers[1] >= grown - grown / 64);
        assert!(covers.windows(2).all(|w| w[1] <= w[0]));
        assert_eq!(*covers.last().unwrap(), 60_000, "back to the floor");
    }

    /// Ticks a second from `from` until the policy audits; the audit's time.
    fn next_audit(s: &mut PolicyState, from: i64) -> i64 {
        (0..)
            .map(|i| from + i * 1000)
            .find(|t| matches!(s.at_tick(*t, false), TickPlan::Audit { .. }))
            .unwrap()
    }

    /// An audit at `at` returning `items` statuses of which `finds` are new,
    /// below the cursor and ID'd just after the previous audit (at
    /// `previous`, so no later than the cover: C does not grow).
    fn audit_with_finds(s: &mut PolicyState, at: i64, previous: i64, items: usize, finds: usize) {
        let page: Vec<Seen> = (0..items)
            .map(|i| {
                let id_time = previous + 1 + i as i64;
                if i < finds {
                    late(id_time, true)
                } else {
                    Seen {
                        late: false,
                        ..late(id_time, true)
                    }
                }
            })
            .collect();
        s.on_page(&PageView {
            phase: Phase::Audit,
            sent_at_ms: at,
            items: &page,
        });
        s.on_cycle_end(Phase::Audit, 1, true, at);
    }

    /// When many statuses wait for the audits (misskey's global timeline:
    /// remote notes ID'd at `published`, seconds late, found by audits), the
    /// audit period is their detection delay and the time in which a deleted
    /// one is lost: adaptive audits every C then, every 2C while the audits
    /// find at most 1 % of the new statuses. The first audit's finds (the
    /// backlog below the baseline page) do not count.
    #[test]
    fn adaptive_audits_every_cover_when_its_audits_find_many() {
        let cover = 120_000;
        for (finds, period) in [(400, cover), (2, 2 * cover)] {
            let mut s = state("adaptive");
            s.at_tick(T0, false);
            // The first audit finds only backlog: the period stays 2C.
            let first = next_audit(&mut s, T0 + 1000);
            assert_eq!(first, T0 + 2 * cover as i64);
            audit_with_finds(&mut s, first, T0 - 1000, 1000, 1000);
            assert_eq!(
                s.audit(),
                Some((3 * cover, 2 * cover)),
                "backlog is not a find"
            );
            let second = next_audit(&mut s, first + 1000);
            assert_eq!(second, first + 2 * cover as i64);
            // 2C of new statuses in a 3C window of 1,500: `finds` of them found here.
            audit_with_finds(&mut s, second, first, 1500, finds);
            assert_eq!(s.audit(), Some((3 * cover, period)), "{finds} finds");
            assert_eq!(next_audit(&mut s, second + 1000), second + period as i64);
        }
    }

    #[test]
    fn adaptive_k_follows_the_ticks_late_arrivals_within_bounds() {
        let mut s = state("adaptive");
        assert_eq!(s.k_ms(), ADAPTIVE_K_INITIAL_MS);
        for i in 0..50 {
            let sent = T0 + i * 1000;
            let items = [late(sent - 150, false)];
            s.on_page(&PageView {
                phase: Phase::Tick,
                sent_at_ms: sent,
                items: &items,
            });
        }
        assert!(
            s.k_ms() < 400 && s.k_ms() >= ADAPTIVE_K_MIN_MS,
            "{}",
            s.k_ms()
        );
    }

    /// The budget: ticks stop above the audits' reserve, an audit waits
    /// for its reserve, back-pages stop at the budget, the final cycle too.
    #[test]
    fn adaptive_keeps_within_its_budget_window() {
        let budget = Budget {
            requests: 10,
            window_ms: 20_000,
        };
        let mut s = state("adaptive:floor=2s").with_budget(budget);
        assert_eq!(s.budget(), Some(budget));
        let plans: Vec<TickPlan> = (0..12).map(|t| s.at_tick(T0 + t * 1000, false)).collect();
        // Baseline, then ticks until 2 of 10 are left for an audit (reserve
        // 2 before any audit); the audits due at 4 s and 8 s go at once;
        // inside the reserve every other tick goes, and none past the budget.
        let sent = plans.iter().filter(|p| **p != TickPlan::Skip).count();
        assert!(matches!(plans[4], TickPlan::Audit { .. }), "{plans:?}");
        assert!(matches!(plans[8], TickPlan::Audit { .. }), "{plans:?}");
        assert_eq!(
            &plans[9..],
            &[TickPlan::Skip, TickPlan::Tick, TickPlan::Skip],
            "{plans:?}"
        );
        assert_eq!(sent, 10, "{plans:?}");
        assert_eq!(s.skipped(), 2);
        // The budget is spent: no back-page either, until a request leaves the window.
        assert!(!s.may_page_back(T0 + 11_500));
        assert!(s.may_page_back(T0 + 20_000));
        s.on_cycle_end(Phase::Audit, 2, false, T0 + 4_000);
        // The final cycle waits for room like any other: none until the
        // next request of the window (the tick at 1 s) leaves it.
        assert_eq!(s.at_tick(T0 + 20_500, true), TickPlan::Skip);
        assert!(matches!(
            s.at_tick(T0 + 21_000, true),
            TickPlan::Audit { .. }
        ));
        // Naive and compensated have no budget.
        let mut c = state("compensated:k=1s");
        assert_eq!(c.budget(), None);
        assert!((0..2000).all(|_| c.may_page_back(T0)));
    }

    #[test]
    fn rfc6298_smoothing() {
        let mut s = Smoothed::default();
        assert_eq!(s.bound_ms(), None);
        s.update(1000.0);
        assert_eq!(s.bound_ms(), Some(3000));
        s.update(1000.0);
        // RTTVAR = 3/4 * 500, SRTT = 1000.
        assert_eq!(s.bound_ms(), Some(2500));
    }
}
