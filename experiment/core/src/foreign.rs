//! A client the harness did not write, read from its requests: each request
//! it sent (its cursor parameters as sent, and the IDs it was served) is
//! placed in a cycle and a page, with the window `since < id < before` it
//! covered, so that the checker can judge it by the same definitions as the
//! harness's own pollers (README, "Definitions").
//!
//! The rules (one client's requests, in the order they arrived):
//! - a request that pages down from the previous page (its upper bound at or
//!   below the oldest ID that page served) continues that cycle;
//! - a forward page (Mastodon's `min_id`, Misskey's `sinceId` alone, Discord's
//!   `after`: the oldest items above the bound, ascending) that follows a
//!   full forward page, its lower bound at or above the newest ID that page
//!   served, continues the cycle upward (after a short one, the same request
//!   is the client's next poll: a new cycle);
//! - anything else starts a cycle: a request without an upper bound (the
//!   newest page), or a gap-filling one (`max_id` far below, "load more"),
//!   which is credited with what it fetched.
//!
//! A full forward page covers only up to the newest ID it served (the items
//! above it were left for the next page), so its window ends there:
//! `before` is that ID + 1. A full page going down covers down to its oldest
//! ID, which the next page's `before` says. Pure: no I/O, no clock.

use crate::id::Id;

/// One request of a foreign client, as the server saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForeignRequest {
    /// The exclusive lower bound sent (`since_id`, `min_id`, `sinceId`, `after`).
    pub lower: Option<Id>,
    /// The exclusive upper bound sent (`max_id`, `untilId`, `before`).
    pub upper: Option<Id>,
    /// The page asks for the oldest items above `lower` (ascending), not the
    /// newest below `upper`.
    pub forward: bool,
    /// The page size in effect (the API's default when the client sent none).
    pub limit: usize,
    /// The IDs served, in any order; empty for a failed request.
    pub served: Vec<Id>,
}

/// Where a request of a foreign client sits, as the checker reads a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The client's cycle: 0, 1, ...
    pub cycle: u64,
    /// 0 for the request that started the cycle, 1... for its continuations.
    pub page: u32,
    /// The window's exclusive lower bound.
    pub since: Option<Id>,
    /// The window's exclusive upper bound.
    pub before: Option<Id>,
}

/// What the placing remembers of the previous request: all it needs, so a
/// server can place requests as they come, in constant memory per client.
#[derive(Clone, Debug, Default)]
pub struct Cycles {
    last: Option<Last>,
}

#[derive(Clone, Copy, Debug)]
struct Last {
    placed: Placed,
    forward: bool,
    full: bool,
    oldest: Option<Id>,
    newest: Option<Id>,
}

impl Cycles {
    /// No request seen yet.
    pub fn new() -> Cycles {
        Cycles::default()
    }

    /// Places the next request of the client.
    ///
    /// ```
    /// use since_id::Id;
    /// use since_id::foreign::{Cycles, ForeignRequest};
    /// let mut cycles = Cycles::new();
    /// // The newest page, full: 30, 20.
    /// let first = ForeignRequest { limit: 2, served: vec![Id(30), Id(20)], ..Default::default() };
    /// let p0 = cycles.place(&first);
    /// assert_eq!((p0.cycle, p0.page, p0.since, p0.before), (0, 0, None, None));
    /// // It pages down below 20: the same cycle, page 1.
    /// let down = ForeignRequest { upper: Some(Id(20)), limit: 2, served: vec![Id(10)], ..Default::default() };
    /// let p1 = cycles.place(&down);
    /// assert_eq!((p1.cycle, p1.page, p1.before), (0, 1, Some(Id(20))));
    /// // since_id = 30: a new cycle.
    /// let next = ForeignRequest { lower: Some(Id(30)), limit: 2, ..Default::default() };
    /// assert_eq!(cycles.place(&next).cycle, 1);
    /// ```
    pub fn place(&mut self, req: &ForeignRequest) -> Placed {
        let oldest = req.served.iter().copied().min();
        let newest = req.served.iter().copied().max();
        let full = req.served.len() >= req.limit.max(1);
        let continued = self.last.and_then(|last| {
            let down = !req.forward
                && req.upper.is_some()
                && last
                    .oldest
                    .is_some_and(|o| req.upper.is_some_and(|u| u <= o));
            // A forward loop re-polls from its newest ID each tick: only after
            // a full page is that the same cycle's next page.
            let up = req.forward
                && last.forward
                && last.full
                && last
                    .newest
                    .is_some_and(|n| req.lower.is_some_and(|l| l >= n));
            (down || up).then_some(last.placed)
        });
        let (cycle, page) = match (continued, self.last) {
            (Some(prev), _) => (prev.cycle, prev.page + 1),
            (None, Some(last)) => (last.placed.cycle + 1, 0),
            (None, None) => (0, 0),
        };
        // A full forward page covered up to its newest ID only.
        let before = match (req.forward, full, newest) {
            (true, true, Some(n)) => Some(Id(n.0.saturating_add(1))),
            _ => req.upper,
        };
        let placed = Placed {
            cycle,
            page,
            since: req.lower,
            before,
        };
        self.last = Some(Last {
            placed,
            forward: req.forward,
            full,
            oldest,
            newest,
        });
        placed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn req(
        lower: Option<u128>,
        upper: Option<u128>,
        forward: bool,
        served: &[u128],
    ) -> ForeignRequest {
        ForeignRequest {
            lower: lower.map(Id),
            upper: upper.map(Id),
            forward,
            limit: 2,
            served: served.iter().copied().map(Id).collect(),
        }
    }

    #[test]
    fn a_naive_since_id_loop_is_one_cycle_a_request() {
        let mut c = Cycles::new();
        let a = c.place(&req(None, None, false, &[5, 4]));
        let b = c.place(&req(Some(5), None, false, &[7]));
        let d = c.place(&req(Some(7), None, false, &[]));
        assert_eq!([a.cycle, b.cycle, d.cycle], [0, 1, 2]);
        assert!([a.page, b.page, d.page].iter().all(|p| *p == 0));
        assert_eq!(b.since, Some(Id(5)));
        assert_eq!(b.before, None);
    }

    #[test]
    fn paging_down_continues_the_cycle_and_load_more_elsewhere_starts_one() {
        let mut c = Cycles::new();
        c.place(&req(Some(10), None, false, &[30, 20]));
        let down = c.place(&req(Some(10), Some(20), false, &[15, 12]));
        assert_eq!((down.cycle, down.page), (0, 1));
        assert_eq!((down.since, down.before), (Some(Id(10)), Some(Id(20))));
        // A gap fill from far above what was last served: its own cycle.
        let gap = c.place(&req(None, Some(100), false, &[99]));
        assert_eq!((gap.cycle, gap.page, gap.before), (1, 0, Some(Id(100))));
    }

    #[test]
    fn forward_pages_continue_upward_and_a_full_one_covers_up_to_its_newest() {
        let mut c = Cycles::new();
        let p0 = c.place(&req(Some(10), None, true, &[11, 12]));
        assert_eq!((p0.since, p0.before), (Some(Id(10)), Some(Id(13))));
        let p1 = c.place(&req(Some(12), None, true, &[14]));
        assert_eq!((p1.cycle, p1.page), (0, 1));
        assert_eq!(
            (p1.since, p1.before),
            (Some(Id(12)), None),
            "short: open above"
        );
        let again = c.place(&req(Some(14), None, true, &[]));
        assert_eq!(
            (again.cycle, again.page),
            (1, 0),
            "after a short page, a new cycle"
        );
    }

    proptest! {
        /// Cycles never go back, pages count up within a cycle from 0, and the
        /// window's lower bound is the one the client sent.
        #[test]
        fn placing_is_monotone(reqs in proptest::collection::vec(
            (proptest::option::of(0u128..100), proptest::option::of(0u128..100), any::<bool>(),
             proptest::collection::vec(0u128..100, 0..4)), 1..40)) {
            let mut c = Cycles::new();
            let mut prev: Option<Placed> = None;
            for (lower, upper, forward, served) in reqs {
                let r = ForeignRequest {
                    lower: lower.map(Id),
                    upper: upper.map(Id),
                    forward,
                    limit: 3,
                    served: served.into_iter().map(Id).collect(),
                };
                let p = c.place(&r);
                match prev {
                    None => prop_assert_eq!((p.cycle, p.page), (0, 0)),
                    Some(q) if p.cycle == q.cycle => prop_assert_eq!(p.page, q.page + 1),
                    Some(q) => {
                        prop_assert_eq!(p.cycle, q.cycle + 1);
                        prop_assert_eq!(p.page, 0);
                    }
                }
                prop_assert_eq!(p.since, r.lower);
                prev = Some(p);
            }
        }
    }
}
