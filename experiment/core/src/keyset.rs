//! The keyset poller: the `xmin` policy as a state machine, beside the
//! since_id [`Poller`](crate::Poller). It reads rows in `(xid, id)` order
//! past a cursor, where `xid` is the writing transaction, and only rows whose
//! transaction lies below the oldest one still running (on PostgreSQL,
//! `xid < pg_snapshot_xmin(pg_current_snapshot())`, PostgreSQL manual
//! 9.27.1). Every transaction below that horizon has ended and every later
//! one gets a higher xid, so no row can appear behind the cursor: it cannot
//! leak; the price is delay.
//!
//! Pure, like the rest of the core: the driver asks [`KeysetPoller::tick`]
//! for a request, sends it, and feeds the rows back to
//! [`KeysetPoller::on_page`], which moves the cursor and says whether to read
//! on. The same driver and [`Schedule`](crate::Schedule) run it as every
//! other policy (cadence, backoff, Retry-After, the final cycle).

use std::cmp::Ordering;

/// The keyset cursor: the last `(xid, id)` read.
///
/// ```
/// use since_id::keyset::KeysetCursor;
/// let c = KeysetCursor { xid: 9, id: 4 };
/// assert!(c > KeysetCursor { xid: 8, id: 100 }, "ordered by xid first");
/// assert!(KeysetCursor::start() < KeysetCursor { xid: 0, id: 0 });
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeysetCursor {
    /// The writing transaction of the last row read.
    pub xid: i64,
    /// Its ID.
    pub id: i64,
}

impl KeysetCursor {
    /// The start: below every row.
    pub fn start() -> KeysetCursor {
        KeysetCursor {
            xid: 0,
            id: i64::MIN,
        }
    }
}

impl PartialOrd for KeysetCursor {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KeysetCursor {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.xid, self.id).cmp(&(other.xid, other.id))
    }
}

/// One row as a keyset read returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeysetRow {
    /// The row's ID.
    pub id: i64,
    /// The transaction that wrote it.
    pub xid: i64,
}

/// A keyset request: rows past `after`, below the horizon, in `(xid, id)`
/// order, at most `limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeysetRequest {
    /// Only rows past this `(xid, id)`.
    pub after: KeysetCursor,
    /// At most this many rows.
    pub limit: usize,
}

/// What a keyset poller learnt from one page ([`KeysetPoller::on_page`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeysetOutcome {
    /// The rows' IDs, in descending ID order (as every response is recorded).
    pub ids: Vec<i64>,
    /// The page was not in descending ID order (keyset order is by xid first).
    pub reordered: bool,
    /// IDs below the highest ID returned in earlier cycles.
    pub late_arrivals: usize,
    /// The request to send next within this cycle, if any.
    pub next: Option<KeysetRequest>,
}

/// One keyset poller.
///
/// ```
/// use since_id::keyset::{KeysetCursor, KeysetPoller, KeysetRow};
/// let mut p = KeysetPoller::new("xmin", 2, 10);
/// let first = p.tick(false);
/// assert_eq!(first.after, KeysetCursor::start());
/// // A full page: read on from its last row.
/// let out = p.on_page(&[KeysetRow { id: 50, xid: 7 }, KeysetRow { id: 10, xid: 8 }]);
/// assert_eq!(out.next.unwrap().after, KeysetCursor { xid: 8, id: 10 });
/// assert_eq!(out.ids, vec![50, 10]);
/// // A short page ends the cycle.
/// assert!(p.on_page(&[]).next.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct KeysetPoller {
    name: String,
    limit: usize,
    /// Pages a cycle may read after its first, except the final cycle.
    max_pages: u32,
    cursor: KeysetCursor,
    /// The highest ID returned, and its value when the cycle began.
    highest: Option<i64>,
    highest_before_cycle: Option<i64>,
    /// `(cycle, page)` of the request in flight; `None` before the first tick.
    position: Option<(u64, u32)>,
    /// The cycle in flight is the run's last: it reads to the end.
    last: bool,
}

impl KeysetPoller {
    /// A poller named `name` reading pages of `limit`, at most `max_pages`
    /// more pages a cycle (the final cycle reads to the end: the keyset
    /// cursor loses nothing by stopping, the next cycle goes on from it).
    pub fn new(name: impl Into<String>, limit: usize, max_pages: u32) -> KeysetPoller {
        KeysetPoller {
            name: name.into(),
            limit: limit.max(1),
            max_pages,
            cursor: KeysetCursor::start(),
            highest: None,
            highest_before_cycle: None,
            position: None,
            last: false,
        }
    }

    /// The poller's name (its `pollers` row).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cursor: the last `(xid, id)` read.
    pub fn cursor(&self) -> KeysetCursor {
        self.cursor
    }

    /// `(cycle, page)` of the request in flight (`(0, 0)` before the first tick).
    pub fn position(&self) -> (u64, u32) {
        self.position.unwrap_or((0, 0))
    }

    /// Starts a cycle (`last`: the run's final one) and gives its first request.
    pub fn tick(&mut self, last: bool) -> KeysetRequest {
        let cycle = self.position.map_or(0, |(c, _)| c + 1);
        self.position = Some((cycle, 0));
        self.last = last;
        self.highest_before_cycle = self.highest;
        KeysetRequest {
            after: self.cursor,
            limit: self.limit,
        }
    }

    /// A request failed: the cycle ends, the cursor stays where it was.
    pub fn on_failure(&mut self) {}

    /// Moves past a page read in `(xid, id)` order and says whether to read
    /// on: only after a full page, and within the page bound unless this is
    /// the final cycle. The cursor never moves back.
    pub fn on_page(&mut self, rows: &[KeysetRow]) -> KeysetOutcome {
        if let Some(last) = rows.last() {
            self.cursor = self.cursor.max(KeysetCursor {
                xid: last.xid,
                id: last.id,
            });
        }
        let mut ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let reordered = ids.windows(2).any(|w| w[0] < w[1]);
        ids.sort_unstable_by_key(|id| std::cmp::Reverse(*id));
        let before = self.highest_before_cycle;
        let late_arrivals = ids
            .iter()
            .filter(|&&id| before.is_some_and(|h| id < h))
            .count();
        self.highest = self.highest.max(ids.first().copied());
        let (cycle, page) = self.position();
        let full = rows.len() >= self.limit;
        let next = (full && (self.last || page < self.max_pages)).then(|| {
            self.position = Some((cycle, page + 1));
            KeysetRequest {
                after: self.cursor,
                limit: self.limit,
            }
        });
        KeysetOutcome {
            ids,
            reordered,
            late_arrivals,
            next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(id: i64, xid: i64) -> KeysetRow {
        KeysetRow { id, xid }
    }

    #[test]
    fn the_cursor_moves_to_the_last_row_and_never_back() {
        let mut p = KeysetPoller::new("xmin", 3, 10);
        p.tick(false);
        assert!(p.on_page(&[row(50, 7), row(10, 8)]).next.is_none());
        assert_eq!(p.cursor(), KeysetCursor { xid: 8, id: 10 });
        let mut p2 = KeysetPoller::new("xmin", 2, 10);
        p2.tick(false);
        let out = p2.on_page(&[row(3, 9), row(4, 9)]);
        assert!(out.next.is_some(), "a full page asks for more");
        assert_eq!(p2.cursor(), KeysetCursor { xid: 9, id: 4 });
        assert!(p2.on_page(&[]).next.is_none());
        assert_eq!(p2.cursor(), KeysetCursor { xid: 9, id: 4 });
    }

    #[test]
    fn the_page_bound_holds_except_in_the_final_cycle() {
        let full = [row(1, 1), row(2, 2)];
        let mut p = KeysetPoller::new("xmin", 2, 1);
        p.tick(false);
        assert!(p.on_page(&full).next.is_some(), "page 0 -> page 1");
        assert_eq!(p.position(), (0, 1));
        assert!(
            p.on_page(&[row(3, 3), row(4, 4)]).next.is_none(),
            "bound reached"
        );
        p.tick(true);
        assert_eq!(p.position(), (1, 0));
        for n in 0..5 {
            let out = p.on_page(&[row(10 + 2 * n, 10 + 2 * n), row(11 + 2 * n, 11 + 2 * n)]);
            assert!(out.next.is_some(), "the final cycle reads to the end");
        }
    }

    #[test]
    fn late_arrivals_are_below_the_highest_id_of_earlier_cycles() {
        let mut p = KeysetPoller::new("xmin", 10, 10);
        p.tick(false);
        assert_eq!(p.on_page(&[row(100, 5), row(90, 6)]).late_arrivals, 0);
        p.tick(false);
        let out = p.on_page(&[row(95, 7), row(120, 8)]);
        assert_eq!(out.late_arrivals, 1, "95 < 100, returned after it");
        assert_eq!(out.ids, vec![120, 95]);
        assert!(
            out.reordered,
            "keyset order (xid) was not descending ID order"
        );
        assert!(!p.on_page(&[row(200, 9), row(150, 10)]).reordered);
    }

    proptest! {
        /// Whatever the pages, the cursor never moves back and every request
        /// asks past the cursor as it was.
        #[test]
        fn the_cursor_never_moves_back(pages in proptest::collection::vec(
            proptest::collection::vec((0i64..1000, 0i64..1000), 0..6), 1..20)) {
            let mut p = KeysetPoller::new("xmin", 3, 2);
            let mut req = p.tick(false);
            for page in pages {
                let rows: Vec<KeysetRow> = page.iter().map(|&(id, xid)| row(id, xid)).collect();
                let before = p.cursor();
                prop_assert_eq!(req.after, before);
                let out = p.on_page(&rows);
                prop_assert!(p.cursor() >= before);
                req = match out.next {
                    Some(next) => next,
                    None => p.tick(false),
                };
            }
        }
    }
}
