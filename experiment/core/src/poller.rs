//! One poller as a state machine with no I/O (in the manner of quinn-proto):
//! "given the last response and the clock, what is the next request".
//!
//! A poller works in *cycles*, one per tick of the cadence. A cycle starts
//! with a request for everything above the cursor (`since`). When that page is
//! full, the window was cut: the poller pages back below the lowest item it
//! got, keeping the same `since`, until a page is not full (it reached the
//! cursor) or the bound on pages is hit (an *overflow*, recorded as such). Only
//! when the whole cycle succeeded does the cursor move: a failed request ends
//! the cycle with the cursor where it was, so a fault can cost duplicates but
//! never items. This keeps every miss attributable to the cursor policy alone,
//! or to a recorded overflow or error.
//!
//! Before its first non-empty successful cycle a poller has no cursor, and a
//! cycle without one never pages back: there is no since_id to page back to,
//! and the backlog of a timeline is unbounded. Every such cycle is the
//! poller's *baseline*: what lies below its (full) page was never the cursor
//! policy's to lose, and the analysis owes it to nobody (README, Definitions).
//!
//! Times are passed in (client ms since the Unix epoch), so the same poller runs
//! over real HTTP in real time and in-process in virtual time.

use crate::id::{Id, Layout};
use crate::policy::CursorPolicy;
use crate::strategy::{PageView, Phase, PolicyState, Seen, TickPlan};
use std::collections::HashSet;

/// The most back-pages of one audit (an audit's depth can hold many pages;
/// the adaptive policy counts each one against its budget).
pub const AUDIT_MAX_BACK_PAGES: u32 = 100;

/// How far an item's ID time may be ahead of the client clock before the item
/// is taken to be *from the future* (a server clock or generator far ahead, or
/// a hostile ID). A minute is far above NTP-synchronised skew and the
/// simulator's generator offsets (tens of ms, `experiment/sim/src/profile.rs`), and far below
/// what blinds a poller: one ID three years ahead would otherwise move the
/// cursor there and every later status would look like a leak.
pub const FUTURE_TOLERANCE_MS: i64 = 60_000;

/// A request in the API-neutral form: items with `since < id < before`, at most `limit`.
/// Dialects translate it (Twitter's `max_id` is inclusive: `max_id = before - 1`).
///
/// ```
/// use since_id::{Id, PageRequest};
/// let back_page = PageRequest { since: Some(Id(100)), before: Some(Id(500)), limit: 200 };
/// // Twitter's inclusive max_id:
/// assert_eq!(back_page.before.map(|b| b.pred()), Some(Id(499)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// Only items with a higher ID (`since_id`); `None`: no lower bound.
    pub since: Option<Id>,
    /// Only items with a lower ID (exclusive `max_id`); `None`: the newest.
    pub before: Option<Id>,
    /// At most this many items.
    pub limit: usize,
}

/// One item of a response, as the API gave it.
///
/// ```
/// use since_id::{Item, Layout};
/// let layout: Layout = "discord".parse().unwrap();
/// let id = layout.parse("175928847299117063").unwrap();
/// let item = Item { id, id_text: layout.format(id), created_at: None, author: Some("80351110224678912".into()) };
/// assert_eq!(item.id_text, "175928847299117063");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The ID, read with the target's [`Layout`].
    pub id: Id,
    /// The ID exactly as the API wrote it.
    pub id_text: String,
    /// The creation time as the API wrote it, if it gave one (recorded, never used for
    /// the cursor).
    pub created_at: Option<String>,
    /// The author's ID or name, if the API gave one.
    pub author: Option<String>,
}

/// What a poller learnt from one response ([`Poller::on_page`]).
///
/// ```
/// use since_id::{CursorPolicy, Id, Item, Layout, Poller};
/// let item = |n: u128| Item { id: Id(n << 22), id_text: (n << 22).to_string(), created_at: None, author: None };
/// let mut poller = Poller::new("naive", CursorPolicy::Naive, Layout::twitter(), 10, 0);
/// poller.tick(1_462_015_105_796, false);
/// let outcome = poller.on_page(vec![item(5), item(7)], 1_462_015_105_816);
/// assert!(outcome.reordered); // sorted into descending ID order
/// assert_eq!((outcome.new_items, outcome.next), (2, None));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The items in descending ID order (sorted if the response was not).
    pub items: Vec<Item>,
    /// The response was out of descending ID order and had to be sorted.
    pub reordered: bool,
    /// How many of the items this poller had never returned before.
    pub new_items: usize,
    /// New items whose ID is below the highest ID seen before this cycle.
    pub late_arrivals: Vec<Id>,
    /// The cycle stopped paging back at its bound before reaching `since`.
    pub overflow: bool,
    /// Items whose ID time is more than [`FUTURE_TOLERANCE_MS`] ahead of the
    /// cycle's send time: kept and returned, but they never move the cursor.
    pub future: Vec<Id>,
    /// The request to send next within this cycle, if any.
    pub next: Option<PageRequest>,
}

#[derive(Clone, Debug)]
struct Cycle {
    number: u64,
    page: u32,
    sent_at_ms: i64,
    highest: Option<Id>,
    /// The lowest ID this cycle returned (what a `newest` poller remembers down to).
    lowest: Option<Id>,
    /// The lower bound of this cycle's window (the cursor, or an audit's floor).
    since: Option<Id>,
    phase: Phase,
}

/// A polling loop's state: its policy, its cursor and what it has seen.
///
/// The caller sends the requests it is given and hands back the pages:
///
/// ```
/// use since_id::{Item, Layout, Poller};
///
/// let layout: Layout = "mastodon".parse().unwrap();
/// let id = |text: &str| layout.parse(text).unwrap();
/// let item = |text: &str| Item { id: id(text), id_text: text.into(), created_at: None, author: None };
/// // Pages of 2, at most 3 back-pages a cycle.
/// let mut poller = Poller::new("naive", "naive".parse().unwrap(), layout.clone(), 2, 3);
/// let t = 1_574_810_861_000; // client ms when the first request is sent
///
/// // First cycle: no cursor yet. A page that is not full ends the cycle, and
/// // only then does the cursor move (naive: to the highest ID seen).
/// assert_eq!(poller.begin_cycle(t).since, None);
/// assert!(poller.on_page(vec![item("103206804533200177")], t + 20).next.is_none());
/// assert_eq!(poller.since(), Some(id("103206804533200177")));
///
/// // Next tick: a full page may have cut the window, so the poller pages
/// // back below its lowest item with the same since_id...
/// let first = poller.begin_cycle(t + 1000);
/// let page = vec![item("103206804600000000"), item("103206804590000000")];
/// let back = poller.on_page(page, t + 1020).next.expect("a full page pages back");
/// assert_eq!((back.since, back.before), (first.since, Some(id("103206804590000000"))));
/// poller.next_page_sent();
/// // ...and the cursor moves once that cycle has reached it.
/// assert!(poller.on_page(vec![], t + 1040).next.is_none());
/// assert_eq!(poller.since(), Some(id("103206804600000000")));
/// ```
#[derive(Clone, Debug)]
pub struct Poller {
    name: String,
    policy: CursorPolicy,
    state: PolicyState,
    layout: Layout,
    limit: usize,
    max_back_pages: u32,
    /// The highest ID ever returned; never decreases, even when that item is deleted.
    latest: Option<Id>,
    /// The since_id of the next cycle (none before the first response).
    since: Option<Id>,
    /// The send time of the first request of the last successful cycle.
    retrieved_at_ms: Option<i64>,
    /// IDs returned and still above the cursor: only these can come back.
    seen: HashSet<Id>,
    cycles: u64,
    cycle: Option<Cycle>,
}

impl Poller {
    /// A poller named `name` (its label in a run) asking for pages of `limit` items
    /// (at least 1) and paging back at most `max_back_pages` times a cycle.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let poller = Poller::new("k=1s", "compensated:k=1s".parse().unwrap(), Layout::twitter(), 200, 10);
    /// assert_eq!((poller.name(), poller.since()), ("k=1s", None));
    /// ```
    pub fn new(
        name: impl Into<String>,
        policy: CursorPolicy,
        layout: Layout,
        limit: usize,
        max_back_pages: u32,
    ) -> Poller {
        Poller {
            name: name.into(),
            policy,
            state: PolicyState::new(policy),
            layout,
            limit: limit.max(1),
            max_back_pages,
            latest: None,
            since: None,
            retrieved_at_ms: None,
            seen: HashSet::new(),
            cycles: 0,
            cycle: None,
        }
    }

    /// The same poller with another request budget (adaptive only; see
    /// [`crate::strategy::Budget`]).
    pub fn with_budget(mut self, budget: crate::strategy::Budget) -> Poller {
        self.state = self.state.with_budget(budget);
        self
    }

    /// The name it was given.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("k=1s", CursorPolicy::Compensated { k_ms: 1000 }, Layout::twitter(), 200, 10);
    /// assert_eq!(poller.name(), "k=1s");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The policy it was given.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("k=1s", CursorPolicy::Compensated { k_ms: 1000 }, Layout::twitter(), 200, 10);
    /// assert_eq!(poller.policy().k_ms(), Some(1000));
    /// ```
    pub fn policy(&self) -> CursorPolicy {
        self.policy
    }

    /// The policy's running state (its current k, audits, skipped ticks).
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("k=1s", CursorPolicy::Compensated { k_ms: 1000 }, Layout::twitter(), 200, 10);
    /// assert_eq!(poller.state().k_ms(), 1000);
    /// ```
    pub fn state(&self) -> &PolicyState {
        &self.state
    }

    /// The highest ID ever returned; never lowered, even when that item is deleted.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Id, Item, Layout, Poller};
    /// let mut poller = Poller::new("naive", CursorPolicy::Naive, Layout::twitter(), 10, 0);
    /// assert_eq!(poller.latest(), None);
    /// poller.tick(1_462_015_105_796, false);
    /// poller.on_page(vec![Item { id: Id(42), id_text: "42".into(), created_at: None, author: None }], 1_462_015_105_816);
    /// assert_eq!(poller.latest(), Some(Id(42)));
    /// ```
    pub fn latest(&self) -> Option<Id> {
        self.latest
    }

    /// The cursor: the since_id of the next cycle (none before the first non-empty one).
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("k=1s", CursorPolicy::Compensated { k_ms: 1000 }, Layout::twitter(), 200, 10);
    /// assert_eq!(poller.since(), None);
    /// ```
    pub fn since(&self) -> Option<Id> {
        self.since
    }

    /// The client time the policy used for the current since_id.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("k=1s", CursorPolicy::Compensated { k_ms: 1000 }, Layout::twitter(), 200, 10);
    /// assert_eq!(poller.retrieved_at_ms(), None);
    /// ```
    pub fn retrieved_at_ms(&self) -> Option<i64> {
        self.retrieved_at_ms
    }

    /// The number of the current (or next) cycle and the page within it.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("k=1s", CursorPolicy::Compensated { k_ms: 1000 }, Layout::twitter(), 200, 10);
    /// assert_eq!(poller.position(), (0, 0));
    /// poller.tick(1_462_015_105_796, false);
    /// assert_eq!(poller.position(), (0, 0));
    /// poller.on_failure();
    /// assert_eq!(poller.position(), (1, 0));
    /// ```
    pub fn position(&self) -> (u64, u32) {
        match &self.cycle {
            Some(c) => (c.number, c.page),
            None => (self.cycles, 0),
        }
    }

    /// A tick at `now_ms` (`last`: the run's final cycle): the cycle's first
    /// request, to be sent at `now_ms` (or later: see [`Poller::sending`]), or
    /// `None` when the policy skips this tick (its request budget). A cycle
    /// still in progress is abandoned with the cursor unchanged.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("k=1s", CursorPolicy::Compensated { k_ms: 1000 }, Layout::twitter(), 200, 10);
    /// let first = poller.tick(1_462_015_105_796, false).unwrap();
    /// assert_eq!((first.since, first.before, first.limit), (None, None, 200));
    /// ```
    pub fn tick(&mut self, now_ms: i64, last: bool) -> Option<PageRequest> {
        let plan = self.state.at_tick(now_ms, last);
        self.start(now_ms, plan)
    }

    /// Starts a cycle at `now_ms` as [`Poller::tick`] does, but never skips,
    /// even past the budget (for a dry run and tests: drivers use `tick`).
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("k=1s", CursorPolicy::Compensated { k_ms: 1000 }, Layout::twitter(), 200, 10);
    /// assert_eq!(poller.begin_cycle(1_462_015_105_796).since, None);
    /// ```
    pub fn begin_cycle(&mut self, now_ms: i64) -> PageRequest {
        match self.tick(now_ms, false) {
            Some(req) => req,
            None => {
                self.state.on_send(now_ms);
                self.start(now_ms, TickPlan::Tick)
                    .expect("a tick is never skipped")
            }
        }
    }

    fn start(&mut self, now_ms: i64, plan: TickPlan) -> Option<PageRequest> {
        if let Some(unfinished) = self.cycle.take() {
            self.state.on_cycle_end(
                unfinished.phase,
                unfinished.page + 1,
                false,
                unfinished.sent_at_ms,
            );
        }
        let (since, phase) = match plan {
            TickPlan::Skip => return None,
            // `newest` has no cursor: every cycle asks for the newest page.
            TickPlan::Tick if matches!(self.policy, CursorPolicy::Newest { .. }) => {
                (None, Phase::Tick)
            }
            TickPlan::Tick => (self.since, Phase::Tick),
            TickPlan::Audit { floor_ms } => {
                let floor = self.layout.min_id_at(floor_ms).pred();
                (self.since.map(|s| s.min(floor)), Phase::Audit)
            }
        };
        self.cycle = Some(Cycle {
            number: self.cycles,
            page: 0,
            sent_at_ms: now_ms,
            highest: None,
            lowest: None,
            since,
            phase,
        });
        self.cycles += 1;
        Some(PageRequest {
            since,
            before: None,
            limit: self.limit,
        })
    }

    /// Notes that the back-page request the last [`Outcome::next`] gave is being sent.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Id, Item, Layout, Poller};
    /// let item = |n: u128| Item { id: Id(n), id_text: n.to_string(), created_at: None, author: None };
    /// let mut poller = Poller::new("naive", CursorPolicy::Naive, Layout::twitter(), 1, 5);
    /// poller.tick(1_462_015_105_796, false);
    /// assert!(poller.on_page(vec![item(3)], 1_462_015_105_816).next.is_none()); // full, but no cursor yet
    /// poller.tick(1_462_015_106_796, false);
    /// let back = poller.on_page(vec![item(9)], 1_462_015_106_816).next.unwrap(); // full, with a cursor
    /// assert_eq!((back.since, back.before), (Some(Id(3)), Some(Id(9))));
    /// poller.next_page_sent();
    /// assert_eq!(poller.position(), (1, 1));
    /// ```
    pub fn next_page_sent(&mut self) {
        if let Some(c) = &mut self.cycle {
            c.page += 1;
        }
    }

    /// A request of the current cycle failed: the cycle ends, the cursor stays.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Layout, Poller};
    /// let mut poller = Poller::new("naive", CursorPolicy::Naive, Layout::twitter(), 10, 0);
    /// poller.tick(1_462_015_105_796, false);
    /// poller.on_failure();
    /// assert_eq!(poller.since(), None);
    /// assert!(poller.on_page(vec![], 1_462_015_107_000).items.is_empty()); // no cycle in progress
    /// ```
    pub fn on_failure(&mut self) {
        if let Some(c) = self.cycle.take() {
            self.state
                .on_cycle_end(c.phase, c.page + 1, false, c.sent_at_ms);
        }
    }

    /// A request of the current cycle succeeded with these items (in any
    /// order), received at `now_ms` (client time): a back-page it asks for
    /// goes at `now_ms` or later, and counts against the policy's budget.
    ///
    /// ```
    /// use since_id::{CursorPolicy, Id, Item, Layout, Poller};
    /// let item = |n: u128| Item { id: Id(n << 22), id_text: (n << 22).to_string(), created_at: None, author: None };
    /// let mut poller = Poller::new("naive", CursorPolicy::Naive, Layout::twitter(), 10, 0);
    /// poller.tick(1_462_015_105_796, false);
    /// poller.on_page(vec![item(7)], 1_462_015_105_816);
    /// poller.tick(1_462_015_106_796, false);
    /// // ID 5 is below the cursor the naive poller asked with: a late arrival.
    /// assert_eq!(poller.on_page(vec![item(8), item(5)], 1_462_015_106_816).late_arrivals, vec![Id(5 << 22)]);
    /// ```
    pub fn on_page(&mut self, mut items: Vec<Item>, now_ms: i64) -> Outcome {
        let Some(mut cycle) = self.cycle.take() else {
            return Outcome::default();
        };
        let reordered = items.windows(2).any(|w| w[0].id < w[1].id);
        if reordered {
            items.sort_by_key(|item| std::cmp::Reverse(item.id));
        }
        let full = items.len() >= self.limit;
        let previous_latest = self.latest;
        let mut new_items = 0;
        let mut late_arrivals = Vec::new();
        // The cursor never moves past now + tolerance: an item from the future
        // is recorded and flagged, not followed. It stays out of `seen` too, so a
        // server inventing future IDs cannot grow the poller's memory.
        let horizon_ms = cycle.sent_at_ms.saturating_add(FUTURE_TOLERANCE_MS);
        let (present, future): (Vec<&Item>, Vec<&Item>) = items
            .iter()
            .partition(|item| self.layout.ts_ms(item.id) <= horizon_ms);
        let future: Vec<Id> = future.into_iter().map(|item| item.id).collect();
        let mut seen_items = Vec::with_capacity(present.len());
        for item in &present {
            let mut late = false;
            if self.seen.insert(item.id) {
                new_items += 1;
                if previous_latest.is_some_and(|latest| item.id < latest) {
                    late_arrivals.push(item.id);
                    late = true;
                }
            }
            seen_items.push(Seen {
                id: item.id,
                id_time_ms: self.layout.ts_ms(item.id),
                late,
                below_cursor: self.since.is_some_and(|since| item.id <= since),
            });
        }
        self.state.on_page(&PageView {
            phase: cycle.phase,
            sent_at_ms: cycle.sent_at_ms,
            items: &seen_items,
        });
        if let Some(top) = present.first() {
            cycle.highest = cycle.highest.max(Some(top.id));
        }
        if let Some(bottom) = present.last() {
            cycle.lowest = Some(cycle.lowest.map_or(bottom.id, |l| l.min(bottom.id)));
        }
        let lowest = items.last().map(|item| item.id);
        // A full page above a cursor means the window was cut: page back to the
        // cursor. Without a cursor the page is the baseline (module docs).
        let must_page_back =
            full && cycle.since.is_some() && lowest.is_some_and(|low| Some(low) > cycle.since);
        let max_back_pages = match cycle.phase {
            Phase::Tick => self.max_back_pages,
            Phase::Audit => self.max_back_pages.max(AUDIT_MAX_BACK_PAGES),
        };
        // `newest:pages=N`: below a full page, the next page down, up to N in
        // all; reaching N is the policy's reach, not an overflow.
        if let CursorPolicy::Newest { pages } = self.policy
            && full
            && cycle.page + 1 < pages
            && let Some(low) = lowest
        {
            self.cycle = Some(cycle);
            return Outcome {
                items,
                reordered,
                new_items,
                late_arrivals,
                future,
                overflow: false,
                next: Some(PageRequest {
                    since: None,
                    before: Some(low),
                    limit: self.limit,
                }),
            };
        }
        let mut outcome = Outcome {
            items,
            reordered,
            new_items,
            late_arrivals,
            future,
            ..Outcome::default()
        };
        if must_page_back && cycle.page < max_back_pages {
            if !self.state.may_page_back(now_ms) {
                // The budget is spent: the cycle is cut (an overflow) and the
                // cursor stays, so the next cycle fetches the window again.
                outcome.overflow = true;
                self.state
                    .on_cycle_end(cycle.phase, cycle.page + 1, false, cycle.sent_at_ms);
                return outcome;
            }
            outcome.next = Some(PageRequest {
                since: cycle.since,
                before: lowest,
                limit: self.limit,
            });
            self.cycle = Some(cycle);
            return outcome;
        }
        outcome.overflow = must_page_back;
        self.finish_cycle(&cycle);
        outcome
    }

    /// The request last given (page 0 or a back-page) is being sent at
    /// `now_ms`, later than the poller was told: a driver that waits before
    /// sending (the shared rate-limit pacing) says so, so that the budget
    /// counts the request at its real send time.
    pub fn sending(&mut self, now_ms: i64) {
        self.state.resend(now_ms);
    }

    /// The whole cycle succeeded: move the cursor.
    fn finish_cycle(&mut self, cycle: &Cycle) {
        self.latest = self.latest.max(cycle.highest);
        if matches!(self.policy, CursorPolicy::Newest { .. }) {
            // No cursor to move. The next newest page reaches down about as
            // far as this one did: what lies below it cannot come back (but
            // for deletions), so it is forgotten, and the memory stays a page.
            self.retrieved_at_ms = Some(cycle.sent_at_ms);
            self.state
                .on_cycle_end(cycle.phase, cycle.page + 1, true, cycle.sent_at_ms);
            if let Some(lowest) = cycle.lowest {
                self.seen.retain(|id| *id >= lowest);
            }
            return;
        }
        if let Some(latest) = self.latest {
            let since = self.state.since_id(&self.layout, latest, cycle.sent_at_ms);
            self.since = Some(since);
            self.retrieved_at_ms = Some(cycle.sent_at_ms);
            self.state
                .on_cycle_end(cycle.phase, cycle.page + 1, true, cycle.sent_at_ms);
            // Nothing at or below the cursor can be returned again, but by an
            // audit, which reaches `memory_ms` below the tick at most.
            let memory = self
                .layout
                .min_id_before(cycle.sent_at_ms, self.state.memory_ms())
                .pred()
                .min(since);
            self.seen.retain(|id| *id > memory);
        } else {
            self.state
                .on_cycle_end(cycle.phase, cycle.page + 1, true, cycle.sent_at_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn item(layout: &Layout, id_time_ms: i64, seq: u128) -> Item {
        let id = Id(layout.min_id_at(id_time_ms).0 + seq);
        Item {
            id,
            id_text: layout.format(id),
            created_at: None,
            author: None,
        }
    }

    fn poller(policy: &str, limit: usize) -> Poller {
        Poller::new(policy, policy.parse().unwrap(), Layout::twitter(), limit, 5)
    }

    #[test]
    fn newest_with_pages_pages_down_without_a_lower_bound_and_stops_at_its_reach() {
        let l = Layout::twitter();
        let timeline: Vec<Item> = (0..10).map(|i| item(&l, T0 + i * 100, 0)).collect();
        let mut p = Poller::new("n", "newest:pages=3".parse().unwrap(), l.clone(), 2, 0);
        let (reqs, ids, overflow) = whole_cycle(&mut p, &timeline, T0 + 2000).unwrap();
        assert_eq!(reqs.len(), 3, "{reqs:?}");
        assert!(reqs.iter().all(|r| r.since.is_none()));
        assert_eq!(reqs[1].before, Some(timeline[8].id));
        assert_eq!(reqs[2].before, Some(timeline[6].id));
        assert_eq!(ids.len(), 6);
        assert!(!overflow, "its reach is the policy's, not a cut window");
        // A page that is not full ends the cycle early.
        let (reqs, _, _) = whole_cycle(&mut p, &timeline[..3], T0 + 3000).unwrap();
        assert_eq!(reqs.len(), 2);
    }

    #[test]
    fn naive_skips_a_late_item_that_compensation_catches() {
        let l = Layout::twitter();
        let (a, late) = (item(&l, T0 - 100, 0), item(&l, T0 - 300, 0));
        let mut naive = poller("naive", 200);
        let mut comp = poller("compensated:k=1s", 200);
        for p in [&mut naive, &mut comp] {
            assert_eq!(p.begin_cycle(T0).since, None);
            p.on_page(vec![a.clone()], T0);
        }
        // The late item became visible after the first request, below `a`.
        assert_eq!(naive.begin_cycle(T0 + 1000).since, Some(a.id));
        let req = comp.begin_cycle(T0 + 1000);
        assert_eq!(req.since, Some(l.min_id_at(T0 - 1000).pred()));
        assert!(
            req.since.unwrap() < late.id,
            "compensated window includes the late item"
        );
        let out = comp.on_page(vec![a.clone(), late.clone()], T0);
        assert_eq!(out.new_items, 1, "a is a duplicate");
        assert_eq!(out.late_arrivals, vec![late.id]);
    }

    #[test]
    fn failure_leaves_the_cursor() {
        let l = Layout::twitter();
        let mut p = poller("naive", 200);
        p.begin_cycle(T0);
        p.on_page(vec![item(&l, T0 - 10, 0)], T0);
        let before = (p.since(), p.latest(), p.retrieved_at_ms());
        p.begin_cycle(T0 + 1000);
        p.on_failure();
        assert_eq!((p.since(), p.latest(), p.retrieved_at_ms()), before);
        assert_eq!(p.begin_cycle(T0 + 2000).since, before.0);
    }

    #[test]
    fn full_page_pages_back_to_the_cursor() {
        let l = Layout::twitter();
        let mut p = poller("naive", 2);
        p.begin_cycle(T0);
        p.on_page(vec![item(&l, T0 - 1000, 0)], T0);
        let cursor = p.since();
        let req = p.begin_cycle(T0 + 1000);
        assert_eq!(req.before, None);
        let page: Vec<Item> = (0..2).map(|i| item(&l, T0 - 10 * i, 0)).collect();
        let out = p.on_page(page.clone(), T0);
        let next = out.next.expect("full page above the cursor pages back");
        assert_eq!(
            next,
            PageRequest {
                since: cursor,
                before: Some(page[1].id),
                limit: 2
            }
        );
        assert_eq!(
            p.since(),
            cursor,
            "the cursor waits for the cycle to finish"
        );
        p.next_page_sent();
        let out = p.on_page(vec![item(&l, T0 - 500, 0)], T0);
        assert!(out.next.is_none() && !out.overflow);
        assert_eq!(p.since(), Some(page[0].id));
        assert_eq!(p.position(), (2, 0));
    }

    #[test]
    fn a_busy_start_is_baseline_without_back_paging() {
        // An empty first page sets no cursor; the next page is full and has no
        // since_id either: it ends its cycle and sets the cursor at its top.
        let l = Layout::twitter();
        let mut p = poller("naive", 2);
        assert_eq!(p.begin_cycle(T0).since, None);
        let out = p.on_page(vec![], T0);
        assert!(out.next.is_none() && p.since().is_none());
        assert_eq!(p.begin_cycle(T0 + 1000).since, None);
        let page: Vec<Item> = (0..2).map(|i| item(&l, T0 + 900 - 10 * i, 0)).collect();
        let out = p.on_page(page.clone(), T0);
        assert!(
            out.next.is_none() && !out.overflow,
            "no back-paging without a cursor"
        );
        assert_eq!(p.since(), Some(page[0].id));
    }

    #[test]
    fn back_paging_is_bounded_and_reports_overflow() {
        let l = Layout::twitter();
        let mut p = Poller::new("naive", CursorPolicy::Naive, l.clone(), 1, 2);
        p.begin_cycle(T0);
        p.on_page(vec![item(&l, T0 - 10_000, 0)], T0);
        p.begin_cycle(T0 + 1000);
        let mut pages = 0;
        loop {
            let out = p.on_page(vec![item(&l, T0 - pages * 10, 0)], T0);
            if out.next.is_none() {
                assert!(out.overflow);
                break;
            }
            p.next_page_sent();
            pages += 1;
        }
        assert_eq!(pages, 2);
    }

    #[test]
    fn out_of_order_responses_are_sorted() {
        let l = Layout::twitter();
        let mut p = poller("naive", 200);
        p.begin_cycle(T0);
        let (lo, hi) = (item(&l, T0 - 50, 0), item(&l, T0 - 10, 0));
        let out = p.on_page(vec![lo.clone(), hi.clone()], T0);
        assert!(out.reordered);
        assert_eq!(out.items, vec![hi.clone(), lo]);
        assert_eq!(p.latest(), Some(hi.id));
    }

    #[test]
    fn latest_never_decreases_when_the_top_item_is_deleted() {
        let l = Layout::twitter();
        let mut p = poller("naive", 200);
        let (a, b) = (item(&l, T0 - 50, 0), item(&l, T0 - 10, 0));
        p.begin_cycle(T0);
        p.on_page(vec![b.clone(), a.clone()], T0);
        p.begin_cycle(T0 + 1000);
        p.on_page(vec![], T0);
        assert_eq!(p.latest(), Some(b.id));
        assert_eq!(p.since(), Some(b.id));
    }

    /// Issue 11.4: one ID three years ahead does not blind the poller: it is
    /// flagged, the cursor stays within now + tolerance, and what comes later
    /// is returned as new.
    #[test]
    fn an_id_from_the_future_is_flagged_and_never_moves_the_cursor() {
        let l = Layout::twitter();
        let three_years = 3 * 365 * 24 * 3600 * 1000;
        let future = item(&l, T0 + three_years, 0);
        let near = item(&l, T0 + FUTURE_TOLERANCE_MS, 0);
        for policy in ["naive", "compensated:k=1s"] {
            let mut p = poller(policy, 200);
            p.begin_cycle(T0);
            let a = item(&l, T0 - 100, 0);
            let out = p.on_page(vec![future.clone(), a.clone()], T0);
            assert_eq!(out.future, vec![future.id], "{policy}");
            assert_eq!(
                out.new_items, 1,
                "{policy}: the future item is not counted new"
            );
            let bound = l.min_id_at(T0 + FUTURE_TOLERANCE_MS + 1);
            assert!(p.since().unwrap() <= bound, "{policy}");
            assert_eq!(p.latest(), Some(a.id), "{policy}");
            // A status posted later, below the future ID, is still returned as new.
            let b = item(&l, T0 + 500, 0);
            let req = p.begin_cycle(T0 + 1000);
            assert!(req.since.unwrap() < b.id, "{policy}: b is in the window");
            let out = p.on_page(vec![future.clone(), b.clone()], T0);
            assert_eq!(out.new_items, 1, "{policy}");
            assert_eq!(out.future, vec![future.id]);
            // And once the clock reaches it, the once-future ID counts.
            p.begin_cycle(T0 + three_years);
            let out = p.on_page(vec![future.clone()], T0);
            assert!(out.future.is_empty());
            assert_eq!(p.latest(), Some(future.id));
        }
        // Within the tolerance an ID is an ordinary one (clocks disagree a little).
        let mut p = poller("naive", 200);
        p.begin_cycle(T0);
        assert!(p.on_page(vec![near.clone()], T0).future.is_empty());
        assert_eq!(p.since(), Some(near.id));
    }

    /// A timeline server in miniature: the newest `limit` items in the window.
    fn serve(timeline: &[Item], req: &PageRequest) -> Vec<Item> {
        let mut page: Vec<Item> = timeline
            .iter()
            .filter(|i| req.since.is_none_or(|s| i.id > s) && req.before.is_none_or(|b| i.id < b))
            .cloned()
            .collect();
        page.sort_by_key(|i| std::cmp::Reverse(i.id));
        page.truncate(req.limit);
        page
    }

    /// One whole cycle at `now` against `timeline` (items visible at once):
    /// its requests and every ID returned.
    fn whole_cycle(
        p: &mut Poller,
        timeline: &[Item],
        now: i64,
    ) -> Option<(Vec<PageRequest>, Vec<Id>, bool)> {
        let mut req = p.tick(now, false)?;
        let (mut reqs, mut ids) = (Vec::new(), Vec::new());
        loop {
            let out = p.on_page(serve(timeline, &req), now);
            reqs.push(req.clone());
            ids.extend(out.items.iter().map(|i| i.id));
            match out.next {
                Some(next) => {
                    p.next_page_sent();
                    req = next;
                }
                None => return Some((reqs, ids, out.overflow)),
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// `newest`: every cycle is one request with no since_id and no upper
        /// bound, never paged down; a status counts new exactly when the
        /// poller never returned it; and each status it never returns lay
        /// below a full page at every tick it was visible at (what the
        /// checker calls its leak).
        #[test]
        fn newest_reads_one_unbounded_page_and_keeps_what_it_had_not_seen(
            limit in 1usize..8,
            arrivals in proptest::collection::vec((0i64..20_000, 0i64..6_000), 1..60),
        ) {
            let l = Layout::twitter();
            // (item, visible from): IDs from their time, visible after a delay.
            let statuses: Vec<(Item, i64)> = arrivals
                .iter()
                .enumerate()
                .map(|(i, (t, d))| (item(&l, T0 + t, i as u128), T0 + t + d))
                .collect();
            let mut p = Poller::new("n", CursorPolicy::Newest { pages: 1 }, l.clone(), limit, 3);
            let mut returned: HashSet<Id> = HashSet::new();
            // Per status: whether some tick it was visible at had it in window.
            let mut in_window: HashSet<Id> = HashSet::new();
            for tick in (0..30_000).step_by(700) {
                let now = T0 + tick;
                let visible: Vec<Item> = statuses
                    .iter()
                    .filter(|(_, v)| *v <= now)
                    .map(|(i, _)| i.clone())
                    .collect();
                let req = p.tick(now, false).unwrap();
                proptest::prop_assert_eq!(
                    &req,
                    &PageRequest { since: None, before: None, limit }
                );
                let page = serve(&visible, &req);
                let full = page.len() >= limit;
                let low = page.last().map(|i| i.id);
                let fresh = page.iter().filter(|i| !returned.contains(&i.id)).count();
                let out = p.on_page(page.clone(), now);
                proptest::prop_assert!(out.next.is_none() && !out.overflow);
                proptest::prop_assert_eq!(out.new_items, fresh);
                proptest::prop_assert_eq!(p.since(), None);
                returned.extend(page.iter().map(|i| i.id));
                for i in &visible {
                    if !full || low.is_some_and(|low| i.id >= low) {
                        in_window.insert(i.id);
                    }
                }
            }
            for (i, visible_from) in &statuses {
                if *visible_from <= T0 + 29_400 {
                    proptest::prop_assert_eq!(
                        returned.contains(&i.id),
                        in_window.contains(&i.id),
                        "{:?}", i.id
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]
        /// Issue 15: an audit's windows cover what they claim: every status
        /// whose ID time lies within depth below the audit's tick is returned
        /// by that audit (through as many back-pages as it takes), every
        /// `every`; the ticks in between keep the compensated window; and an
        /// audit's repeats are never counted as new.
        #[test]
        fn audit_windows_cover_what_they_claim(
            k in 0u64..3000,
            depth_s in 1u64..200,
            every_s in 1u64..90,
            limit in 3usize..40,
            spacing in 100i64..2000,
        ) {
            let l = Layout::twitter();
            let spec = format!("audit:k={k}ms,depth={depth_s}s,every={every_s}s");
            let mut p = Poller::new("a", spec.parse().unwrap(), l.clone(), limit, 3);
            let depth = depth_s as i64 * 1000;
            let end = 200_000;
            // Statuses every `spacing` ms from well before the start.
            let timeline: Vec<Item> = (0..)
                .map(|i| T0 - 400_000 + i * spacing)
                .take_while(|t| *t < T0 + end)
                .map(|t| item(&l, t, 0))
                .collect();
            let mut audits = 0;
            let mut last_audit: Option<i64> = None;
            for tick in (0..end).step_by(1000) {
                let now = T0 + tick;
                let visible: Vec<Item> = timeline.iter().filter(|i| l.ts_ms(i.id) <= now).cloned().collect();
                let cursor = p.since();
                let (reqs, ids, overflow) = whole_cycle(&mut p, &visible, now).unwrap();
                let first = &reqs[0];
                let floor = l.min_id_at(now - depth).pred();
                let is_audit = tick > 0 && tick % (every_s as i64 * 1000) == 0;
                if is_audit {
                    proptest::prop_assert!(first.since <= cursor);
                    audits += 1;
                    proptest::prop_assert!(first.since <= Some(floor));
                    proptest::prop_assert!(reqs.iter().all(|r| r.since == first.since));
                    if overflow {
                        // Cut at the audit's back-page bound, and said so.
                        proptest::prop_assert_eq!(reqs.len(), AUDIT_MAX_BACK_PAGES as usize + 1);
                        continue;
                    }
                    for i in visible.iter().filter(|i| i.id > floor) {
                        proptest::prop_assert!(ids.contains(&i.id), "audit at {tick} missed {:?}", i.id);
                    }
                    if let Some(prev) = last_audit {
                        proptest::prop_assert_eq!(now - prev, every_s as i64 * 1000);
                    }
                    last_audit = Some(now);
                } else {
                    proptest::prop_assert_eq!(first.since, cursor);
                }
            }
            proptest::prop_assert_eq!(audits, ((end - 1000) / 1000) / every_s as i64);
            // Each status counted new once, audits or not.
            let distinct: HashSet<Id> = timeline.iter().filter(|i| l.ts_ms(i.id) < T0 + end).map(|i| i.id).collect();
            proptest::prop_assert!(p.seen.len() <= distinct.len());
        }
    }

    #[test]
    fn an_audits_repeats_are_not_new_and_its_finds_are_late() {
        let l = Layout::twitter();
        let mut p = poller("audit:k=1s,depth=1m,every=30s", 200);
        let a = item(&l, T0 - 100, 0);
        let mut timeline = vec![a.clone()];
        whole_cycle(&mut p, &timeline, T0).unwrap();
        // A status 20 s late appears below the compensated window.
        let late = item(&l, T0 + 5_000, 0);
        let b = item(&l, T0 + 24_900, 0);
        timeline.push(b.clone());
        for t in 1..25 {
            whole_cycle(&mut p, &timeline, T0 + t * 1000).unwrap();
        }
        timeline.push(late.clone());
        let mut new_total = 0;
        let mut found_at = None;
        for t in 25..=30 {
            let now = T0 + t * 1000;
            let mut req = p.tick(now, false).unwrap();
            loop {
                let out = p.on_page(serve(&timeline, &req), now);
                new_total += out.new_items;
                if out.late_arrivals.contains(&late.id) {
                    found_at = Some(t);
                }
                match out.next {
                    Some(n) => req = n,
                    None => break,
                }
            }
        }
        assert_eq!(found_at, Some(30), "the audit at 30 s finds it");
        assert_eq!(new_total, 1, "the audit's repeats of a and b are not new");
    }

    /// The most send times within any `window_ms` (`[t, t + window)`), sorted input.
    fn most_in_window(sent: &[i64], window_ms: i64) -> usize {
        let mut lo = 0;
        (0..sent.len())
            .map(|hi| {
                while sent[hi] - sent[lo] >= window_ms {
                    lo += 1;
                }
                hi - lo + 1
            })
            .max()
            .unwrap_or(0)
    }

    /// A small deterministic generator for adversarial pages (splitmix64).
    struct Adversary(u64);

    impl Adversary {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            if n == 0 { 0 } else { self.next() % n }
        }

        /// A page for `req` at `now`: mostly full (so the poller pages back),
        /// its IDs anywhere in the window, many far below the cursor (late
        /// finds that grow adaptive's cover and deepen its audits).
        fn page(&mut self, l: &Layout, req: &PageRequest, now: i64) -> Vec<Item> {
            let lo = req
                .since
                .map_or(l.min_id_at(now - 3_600_000).0, |s| s.0 + 1);
            let hi = req.before.map_or(l.min_id_at(now + 1).0, |b| b.0);
            if lo >= hi {
                return Vec::new();
            }
            let n = if self.below(10) < 7 {
                req.limit
            } else {
                self.below(req.limit as u64) as usize
            };
            let span = (hi - lo).min(u64::MAX as u128) as u64;
            let mut ids: Vec<u128> = (0..n).map(|_| lo + self.below(span) as u128).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.into_iter()
                .map(|k| Item {
                    id: Id(k),
                    id_text: l.format(Id(k)),
                    created_at: None,
                    author: None,
                })
                .collect()
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Issue 15: adaptive's budget is a hard bound. Driven tick by tick by
        /// pages chosen to cost it the most (full pages, late finds far below
        /// the cursor, failures), with its final cycle, no window of the
        /// budget's length ever holds more requests than the budget: page 0s,
        /// back-pages, audits and failed requests all counted, each at the
        /// time it was sent.
        #[test]
        fn adaptive_never_exceeds_its_budget(
            seed in proptest::prelude::any::<u64>(),
            requests in 2u32..60,
            window_s in 2u64..300,
            limit in 1usize..8,
            ticks in 20i64..600,
            floor_s in 1u64..40,
            fail_per_mille in 0u64..100,
            default_budget in proptest::prelude::any::<bool>(),
        ) {
            let l = Layout::twitter();
            let spec = format!("adaptive:floor={floor_s}s");
            let budget = if default_budget {
                crate::strategy::ADAPTIVE_BUDGET
            } else {
                crate::strategy::Budget { requests, window_ms: window_s * 1000 }
            };
            // The default budget needs more than its 15 minutes of ticks to bind.
            let ticks = if default_budget { 4 * ticks } else { ticks };
            let mut p = Poller::new("a", spec.parse().unwrap(), l.clone(), limit, 10).with_budget(budget);
            let mut adversary = Adversary(seed);
            let mut sent = Vec::new();
            for t in 0..ticks {
                let now = T0 + t * 1000;
                let Some(mut req) = p.tick(now, t == ticks - 1) else { continue };
                let mut at = now;
                sent.push(at);
                loop {
                    at += 20;
                    if adversary.below(1000) < fail_per_mille {
                        p.on_failure();
                        break;
                    }
                    let page = adversary.page(&l, &req, now);
                    let out = p.on_page(page, at);
                    match out.next {
                        Some(next) => {
                            p.next_page_sent();
                            sent.push(at);
                            req = next;
                        }
                        None => break,
                    }
                }
            }
            let most = most_in_window(&sent, budget.window_ms as i64);
            proptest::prop_assert!(most <= budget.requests as usize, "{} requests in one window, budget {:?}", most, budget);
        }
    }
}
