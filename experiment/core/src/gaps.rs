//! Pollers of an integer key read forward, as event-table relays read it:
//! `WHERE id > ? ORDER BY id ASC LIMIT n`, paging forward until a short page
//! (Kafka Connect JDBC's `incrementing` mode,
//! confluentinc/kafka-connect-jdbc `TimestampIncrementingCriteria.java`).
//! Four policies ([`IdPolicy`]):
//!
//! - `incrementing`: the cursor is the highest ID read. A row committed after
//!   a higher one was read is skipped for ever.
//! - `kafka-connect:poll=D,batch=N`: Kafka Connect JDBC's own loop in
//!   incrementing mode. Once `poll.interval.ms` (default 5000) has passed
//!   since its last query ended, one query without LIMIT, `WHERE id > ?
//!   ORDER BY id ASC`, read to its end in batches of `batch.max.rows`
//!   (default 100); the offset is the highest ID read (Confluent's "JDBC
//!   Source Connector Configuration Properties", `poll.interval.ms` and
//!   `batch.max.rows`; the loop: `JdbcSourceTask.poll` in
//!   confluentinc/kafka-connect-jdbc, which waits until the querier's
//!   `lastUpdate` plus the poll interval, reads at most `batch.max.rows`
//!   records a call and resets `lastUpdate` when the result is exhausted).
//!   Its cursor moves as `incrementing`'s does.
//! - `behind:n=N`: the cursor is held N IDs below the highest read, so each
//!   cycle re-reads the last N IDs (duplicates) and catches rows up to N IDs late.
//! - `gaps:timeout=D[,max=M]`: gap tracking, the approach of Axon Framework's
//!   JDBC event store (a `GapAwareTrackingToken`: the highest index read and
//!   the set of missing indices below it, each re-read by `globalIndex > ? OR
//!   globalIndex IN (gaps)` until it fills or is older than a timeout;
//!   AxonFramework `JdbcEventStorageEngine`, and Allard Buijze in
//!   prooph/pdo-event-store#189: "We solved it in Axon by keeping track of
//!   'gaps'"). A missing integer between two IDs read is a gap; gaps are
//!   re-read at every cycle until they fill or `timeout` passes since they
//!   were first missed; at most `max` are tracked (the lowest are given up
//!   first), so memory is bounded whatever the table does. (Axon bounds
//!   them by distance, `maxGapOffset` = 10,000 below the highest index, and
//!   times them out after `gapTimeout` = 60 s by default: AxonFramework
//!   `JpaEventStorageEngine`'s builder.)
//!
//! Pure, like the rest of the core: no I/O, no clock. The driver asks
//! [`IdPoller::tick`] for a request (passing the time), sends it, and feeds
//! the rows back to [`IdPoller::on_page`], which says what to send next.

use std::collections::BTreeMap;

/// The default bound on tracked gaps.
pub const DEFAULT_MAX_GAPS: usize = 10_000;

/// Kafka Connect JDBC's default `poll.interval.ms`.
pub const KAFKA_CONNECT_POLL_MS: u64 = 5_000;

/// Kafka Connect JDBC's default `batch.max.rows`.
pub const KAFKA_CONNECT_BATCH: usize = 100;

/// How an ID poller moves its cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdPolicy {
    /// The highest ID read (Kafka Connect JDBC's `incrementing` mode).
    Incrementing,
    /// Kafka Connect JDBC's loop in incrementing mode: one query without
    /// LIMIT once `poll_ms` has passed since the last one ended, read in
    /// batches of `batch` rows; the cursor as [`IdPolicy::Incrementing`]'s.
    KafkaConnect {
        /// `poll.interval.ms`.
        poll_ms: u64,
        /// `batch.max.rows`.
        batch: usize,
    },
    /// The highest ID read minus `n`.
    Behind {
        /// How many IDs behind.
        n: u64,
    },
    /// The highest ID read, and the missing IDs below it, re-read until they
    /// fill or `timeout_ms` passes.
    Gaps {
        /// How long a gap is re-read.
        timeout_ms: u64,
        /// At most this many gaps are tracked.
        max_gaps: usize,
    },
}

impl IdPolicy {
    /// Whether a poller's stored policy text (`pollers.policy`) names an
    /// integer-ID poller, which pages upward from its cursor; the text may
    /// carry the harness's `,pause=DURATION@AT` after the policy.
    ///
    /// ```
    /// use since_id::gaps::IdPolicy;
    /// assert!(IdPolicy::text_reads_forward("incrementing"));
    /// assert!(IdPolicy::text_reads_forward("gaps:timeout=1m,max=10000,pause=20m@15m"));
    /// assert!(!IdPolicy::text_reads_forward("naive"));
    /// ```
    pub fn text_reads_forward(text: &str) -> bool {
        let head = text.split_once(",pause=").map_or(text, |(head, _)| head);
        head.parse::<IdPolicy>().is_ok()
    }
}

impl std::str::FromStr for IdPolicy {
    type Err = String;

    /// ```
    /// use since_id::gaps::IdPolicy;
    /// assert_eq!("behind:n=50".parse::<IdPolicy>().unwrap(), IdPolicy::Behind { n: 50 });
    /// let g: IdPolicy = "gaps:timeout=10s".parse().unwrap();
    /// assert_eq!(g.to_string(), "gaps:timeout=10s,max=10000");
    /// assert!("gaps".parse::<IdPolicy>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<IdPolicy, String> {
        let bad = |why: &str| {
            format!(
                "bad ID poller '{s}': {why}; expected incrementing, kafka-connect[:poll=DURATION,batch=N], \
                 behind:n=N or gaps:timeout=DURATION[,max=N]"
            )
        };
        let (name, params) = s.split_once(':').unwrap_or((s, ""));
        let mut fields = BTreeMap::new();
        for pair in params.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad("a parameter needs '='"))?;
            if fields.insert(k, v).is_some() {
                return Err(bad(&format!("'{k}' given twice")));
            }
        }
        let take_u64 =
            |fields: &mut BTreeMap<&str, &str>, k: &str| -> Result<Option<u64>, String> {
                fields
                    .remove(k)
                    .map(|v| {
                        v.parse::<u64>()
                            .map_err(|_| bad(&format!("{k} is not a whole number")))
                    })
                    .transpose()
            };
        let policy = match name {
            "incrementing" => IdPolicy::Incrementing,
            "kafka-connect" => {
                let poll_ms = match fields.remove("poll") {
                    Some(d) => {
                        crate::time::parse_duration_ms(d).map_err(|e| bad(&e.to_string()))?
                    }
                    None => KAFKA_CONNECT_POLL_MS,
                };
                if poll_ms == 0 {
                    return Err(bad("poll must be at least 1ms"));
                }
                let batch = take_u64(&mut fields, "batch")?.unwrap_or(KAFKA_CONNECT_BATCH as u64);
                if batch == 0 || batch > 1_000_000 {
                    return Err(bad("batch must be between 1 and 1000000"));
                }
                IdPolicy::KafkaConnect {
                    poll_ms,
                    batch: batch as usize,
                }
            }
            "behind" => IdPolicy::Behind {
                n: take_u64(&mut fields, "n")?.ok_or_else(|| bad("behind needs n=N"))?,
            },
            "gaps" => {
                let timeout = fields
                    .remove("timeout")
                    .ok_or_else(|| bad("gaps needs timeout=DURATION"))?;
                let timeout_ms =
                    crate::time::parse_duration_ms(timeout).map_err(|e| bad(&e.to_string()))?;
                let max_gaps = take_u64(&mut fields, "max")?.unwrap_or(DEFAULT_MAX_GAPS as u64);
                if max_gaps == 0 || max_gaps > 10_000_000 {
                    return Err(bad("max must be between 1 and 10000000"));
                }
                IdPolicy::Gaps {
                    timeout_ms,
                    max_gaps: max_gaps as usize,
                }
            }
            _ => return Err(bad("unknown policy")),
        };
        match fields.keys().next() {
            Some(k) => Err(bad(&format!("unknown parameter '{k}'"))),
            None => Ok(policy),
        }
    }
}

impl std::fmt::Display for IdPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdPolicy::Incrementing => f.write_str("incrementing"),
            IdPolicy::KafkaConnect { poll_ms, batch } => write!(
                f,
                "kafka-connect:poll={},batch={batch}",
                crate::time::format_duration_ms(*poll_ms)
            ),
            IdPolicy::Behind { n } => write!(f, "behind:n={n}"),
            IdPolicy::Gaps {
                timeout_ms,
                max_gaps,
            } => write!(
                f,
                "gaps:timeout={},max={max_gaps}",
                crate::time::format_duration_ms(*timeout_ms)
            ),
        }
    }
}

/// One request: rows with `id > after` (all rows without a cursor) or
/// whose ID is in `gaps`, ascending, at most `limit`; or, with `batch`, all
/// of them (no LIMIT), read in batches of that many.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdRequest {
    /// Rows past this ID; every row without one.
    pub after: Option<i64>,
    /// And the rows with these IDs (the gaps re-read).
    pub gaps: Vec<i64>,
    /// At most this many rows (unless `batch` is given).
    pub limit: usize,
    /// No LIMIT: the whole result, read in batches of this many rows
    /// (Kafka Connect's `batch.max.rows`).
    pub batch: Option<usize>,
}

impl IdRequest {
    /// The page size to record: the LIMIT, or 0 for a query without one.
    pub fn page_limit(&self) -> usize {
        if self.batch.is_some() { 0 } else { self.limit }
    }
}

/// What a poller learnt from one page ([`IdPoller::on_page`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdOutcome {
    /// The rows' IDs, descending (as every response is recorded).
    pub ids: Vec<i64>,
    /// Gaps this page filled.
    pub filled: usize,
    /// Gaps this page opened.
    pub opened: usize,
    /// IDs below the highest ID returned in earlier cycles.
    pub late_arrivals: usize,
    /// The request to send next within this cycle, if any.
    pub next: Option<IdRequest>,
    /// The page was full and the page bound ends the cycle: rows above it
    /// were left for the next cycle (an overflow, recorded as such, so that
    /// the checker does not owe them to this request).
    pub overflow: bool,
}

/// What a poller's gap tracking cost and gave up, over the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GapStats {
    /// Gaps opened (missing IDs below one read).
    pub opened: u64,
    /// Gaps that filled (the row arrived late and was read).
    pub filled: u64,
    /// Gaps given up after the timeout (a rolled-back ID, or a row later still).
    pub expired: u64,
    /// Gaps never tracked or dropped because `max` were tracked already.
    pub untracked: u64,
    /// Gap IDs asked for again, summed over requests: the re-reads.
    pub rereads: u64,
}

/// One ID poller.
///
/// ```
/// use since_id::gaps::{IdPoller, IdPolicy};
/// let mut p = IdPoller::new("g", "gaps:timeout=5s".parse().unwrap(), 100, 10);
/// let req = p.tick(0, false);
/// assert_eq!(req.after, None);
/// // IDs 1, 2 and 4 are visible; 3 is not (yet): a gap.
/// let out = p.on_page(&[1, 2, 4]);
/// assert_eq!(out.opened, 1);
/// let req = p.tick(1000, false);
/// assert_eq!((req.after, req.gaps.clone()), (Some(4), vec![3]));
/// let out = p.on_page(&[3, 5]);
/// assert_eq!(out.filled, 1);
/// assert!(p.tick(2000, false).gaps.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct IdPoller {
    name: String,
    policy: IdPolicy,
    limit: usize,
    max_pages: u32,
    /// The highest ID read.
    highest: Option<i64>,
    highest_before_cycle: Option<i64>,
    /// Missing IDs below `highest`, with when each was first missed.
    gaps: BTreeMap<i64, i64>,
    /// The time of the cycle in flight.
    now_ms: i64,
    position: Option<(u64, u32)>,
    /// The `after` of the page to send next in this cycle, if any.
    next_after: Option<i64>,
    /// The `after` of the cycle's first page: later pages never go below it.
    cycle_after: Option<i64>,
    last: bool,
    stats: GapStats,
    /// When its last query ended (Kafka Connect's `lastUpdate`).
    last_query_end_ms: Option<i64>,
}

impl IdPoller {
    /// A poller named `name` reading pages of `limit`, at most `max_pages`
    /// more pages a cycle (the final cycle reads to the end).
    pub fn new(
        name: impl Into<String>,
        policy: IdPolicy,
        limit: usize,
        max_pages: u32,
    ) -> IdPoller {
        IdPoller {
            name: name.into(),
            policy,
            limit: limit.max(1),
            max_pages,
            highest: None,
            highest_before_cycle: None,
            gaps: BTreeMap::new(),
            now_ms: 0,
            position: None,
            next_after: None,
            cycle_after: None,
            last: false,
            stats: GapStats::default(),
            last_query_end_ms: None,
        }
    }

    /// The poller as if it had read up to `id` already: a table whose IDs
    /// start at `id + 1` (AUTO_INCREMENT's start at 1: `starting_after(0)`),
    /// so that rows missing below the first one read are gaps too. Without
    /// it, the first page's lowest row is the start.
    pub fn starting_after(mut self, id: i64) -> IdPoller {
        self.highest = Some(id);
        self
    }

    /// The poller's name (its `pollers` row).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How it moves its cursor.
    pub fn policy(&self) -> IdPolicy {
        self.policy
    }

    /// `(cycle, page)` of the request in flight (`(0, 0)` before the first tick).
    pub fn position(&self) -> (u64, u32) {
        self.position.unwrap_or((0, 0))
    }

    /// The highest ID read.
    pub fn highest(&self) -> Option<i64> {
        self.highest
    }

    /// The gaps tracked now, lowest first.
    pub fn gaps(&self) -> impl Iterator<Item = i64> + '_ {
        self.gaps.keys().copied()
    }

    /// What its gap tracking cost and gave up so far.
    pub fn stats(&self) -> GapStats {
        self.stats
    }

    /// Every ID this poller may still return lies above it: its cursor, or
    /// below the lowest gap it still re-reads. `None` before its first row.
    pub fn floor(&self) -> Option<i64> {
        let below_gaps = self.gaps.keys().next().map(|g| g.saturating_sub(1));
        [self.cursor(), below_gaps, self.next_after]
            .into_iter()
            .flatten()
            .min()
    }

    /// The cursor a cycle starts from.
    fn cursor(&self) -> Option<i64> {
        match self.policy {
            IdPolicy::Behind { n } => self
                .highest
                .map(|h| h.saturating_sub(n.min(i64::MAX as u64) as i64)),
            _ => self.highest,
        }
    }

    /// Whether a cycle may start at `now_ms`: always, but for Kafka Connect's
    /// loop only once its poll interval has passed since the last query ended
    /// ([`IdPoller::query_ended`]).
    ///
    /// ```
    /// use since_id::gaps::IdPoller;
    /// let mut p = IdPoller::new("k", "kafka-connect:poll=5s".parse().unwrap(), 200, 10);
    /// assert!(p.due(0));
    /// p.tick(0, false);
    /// p.on_page(&[1, 2, 3]);
    /// p.query_ended(40);
    /// assert!(!p.due(5_039));
    /// assert!(p.due(5_040));
    /// ```
    pub fn due(&self, now_ms: i64) -> bool {
        match (self.policy, self.last_query_end_ms) {
            (IdPolicy::KafkaConnect { poll_ms, .. }, Some(end)) => {
                now_ms >= end.saturating_add(poll_ms as i64)
            }
            _ => true,
        }
    }

    /// Its query ended at `at_ms` (read to the end, or failed): Kafka
    /// Connect's next query waits a poll interval from then.
    pub fn query_ended(&mut self, at_ms: i64) {
        self.last_query_end_ms = Some(at_ms);
    }

    /// Starts a cycle at `now_ms` (`last`: the run's final one): gaps older
    /// than the timeout are given up, and the first request asks for rows past
    /// the cursor and for every gap still tracked.
    pub fn tick(&mut self, now_ms: i64, last: bool) -> IdRequest {
        let cycle = self.position.map_or(0, |(c, _)| c + 1);
        self.position = Some((cycle, 0));
        self.last = last;
        self.now_ms = now_ms;
        self.highest_before_cycle = self.highest;
        if let IdPolicy::Gaps { timeout_ms, .. } = self.policy {
            let before = self.gaps.len();
            self.gaps
                .retain(|_, missed_at| now_ms.saturating_sub(*missed_at) <= timeout_ms as i64);
            self.stats.expired += (before - self.gaps.len()) as u64;
        }
        let gaps: Vec<i64> = self.gaps.keys().copied().collect();
        self.stats.rereads += gaps.len() as u64;
        self.cycle_after = self.cursor();
        IdRequest {
            after: self.cycle_after,
            gaps,
            limit: self.limit,
            batch: match self.policy {
                IdPolicy::KafkaConnect { batch, .. } => Some(batch),
                _ => None,
            },
        }
    }

    /// A request failed: the cycle ends, the cursor and the gaps stay.
    pub fn on_failure(&mut self) {}

    /// Applies one page (`ids` as the query returns them, ascending) and says
    /// whether to read on: only after a full page, within the page bound
    /// unless this is the final cycle. Later pages ask for rows past the
    /// page's last row and, if it ended among the gaps below the cursor, for
    /// the gaps above it: never for rows it read already.
    pub fn on_page(&mut self, ids: &[i64]) -> IdOutcome {
        let mut sorted: Vec<i64> = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut filled = 0;
        let mut opened = 0;
        for &id in &sorted {
            if self.gaps.remove(&id).is_some() {
                filled += 1;
                continue;
            }
            match self.highest {
                Some(h) if id <= h => {}
                Some(h) => {
                    if let IdPolicy::Gaps { max_gaps, .. } = self.policy {
                        opened += self.open_gaps(h, id, max_gaps);
                    }
                    self.highest = Some(id);
                }
                None => self.highest = Some(id),
            }
        }
        self.stats.filled += filled as u64;
        let before = self.highest_before_cycle;
        let late_arrivals = sorted
            .iter()
            .filter(|&&id| before.is_some_and(|h| id < h))
            .count();
        let (cycle, page) = self.position();
        // A query without LIMIT read its whole result: never a full page.
        let unbounded = matches!(self.policy, IdPolicy::KafkaConnect { .. });
        let full = !unbounded && ids.len() >= self.limit;
        let next = (full && (self.last || page < self.max_pages)).then(|| {
            self.position = Some((cycle, page + 1));
            let last_row = sorted.last().copied();
            let gaps: Vec<i64> = match last_row {
                Some(l) if self.cycle_after.is_some_and(|c| l < c) => {
                    self.gaps.range(l + 1..).map(|(id, _)| *id).collect()
                }
                _ => Vec::new(),
            };
            self.stats.rereads += gaps.len() as u64;
            IdRequest {
                after: last_row.max(self.cycle_after),
                gaps,
                limit: self.limit,
                batch: None,
            }
        });
        self.next_after = next.as_ref().and_then(|n| n.after);
        let overflow = full && next.is_none();
        sorted.reverse();
        IdOutcome {
            ids: sorted,
            filled,
            opened,
            late_arrivals,
            next,
            overflow,
        }
    }

    /// Opens a gap for every ID strictly between `from` and `to`, the highest
    /// first, keeping at most `max` (the lowest are given up). Returns how
    /// many it opened.
    fn open_gaps(&mut self, from: i64, to: i64, max: usize) -> usize {
        let missing = (to - from - 1).max(0) as u64;
        let tracked = missing.min(max as u64);
        self.stats.untracked += missing - tracked;
        for id in (to - tracked as i64)..to {
            self.gaps.insert(id, self.now_ms);
        }
        while self.gaps.len() > max {
            self.gaps.pop_first();
            self.stats.untracked += 1;
        }
        self.stats.opened += tracked;
        tracked as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn policies_parse_and_print() {
        for text in ["incrementing", "behind:n=100", "gaps:timeout=5s,max=20"] {
            assert_eq!(text.parse::<IdPolicy>().unwrap().to_string(), text);
        }
        for bad in [
            "gaps",
            "gaps:timeout=soon",
            "behind",
            "behind:n=-1",
            "gaps:timeout=1s,max=0",
            "gaps:timeout=1s,depth=2",
            "naive",
        ] {
            let err = bad.parse::<IdPolicy>().unwrap_err();
            assert!(err.starts_with(&format!("bad ID poller '{bad}'")), "{err}");
        }
    }

    #[test]
    fn kafka_connect_parses_with_its_defaults_and_prints() {
        let k: IdPolicy = "kafka-connect".parse().unwrap();
        assert_eq!(
            k,
            IdPolicy::KafkaConnect {
                poll_ms: 5000,
                batch: 100
            }
        );
        assert_eq!(k.to_string(), "kafka-connect:poll=5s,batch=100");
        let k: IdPolicy = "kafka-connect:poll=1s,batch=7".parse().unwrap();
        assert_eq!(k.to_string().parse::<IdPolicy>().unwrap(), k);
        assert!(IdPolicy::text_reads_forward(
            "kafka-connect:poll=5s,batch=100"
        ));
        for bad in [
            "kafka-connect:poll=0s",
            "kafka-connect:batch=0",
            "kafka-connect:limit=5",
        ] {
            assert!(bad.parse::<IdPolicy>().is_err(), "{bad}");
        }
    }

    /// One query a poll interval, from the end of the last one; no LIMIT,
    /// so however many rows come back the cycle ends there; the cursor is
    /// the highest ID read, as `incrementing`'s.
    #[test]
    fn kafka_connect_reads_one_unbounded_query_per_poll_interval() {
        let policy = IdPolicy::KafkaConnect {
            poll_ms: 5000,
            batch: 2,
        };
        let mut p = IdPoller::new("k", policy, 3, 5).starting_after(0);
        assert!(p.due(0));
        let req = p.tick(0, false);
        assert_eq!(
            (req.after, req.batch, req.page_limit()),
            (Some(0), Some(2), 0)
        );
        let out = p.on_page(&[1, 2, 4, 5, 6]);
        assert!(
            out.next.is_none() && !out.overflow,
            "no LIMIT: no next page"
        );
        p.query_ended(30);
        assert!(!p.due(1000) && !p.due(5029));
        assert!(p.due(5030));
        let req = p.tick(5030, false);
        assert_eq!(req.after, Some(6), "3 committed late is skipped");
        assert!(req.gaps.is_empty());
    }

    #[test]
    fn incrementing_skips_what_commits_behind_its_cursor() {
        let mut p = IdPoller::new("i", IdPolicy::Incrementing, 10, 5);
        p.tick(0, false);
        p.on_page(&[1, 2, 4]);
        let req = p.tick(1000, false);
        assert_eq!((req.after, req.gaps.len()), (Some(4), 0));
    }

    #[test]
    fn behind_holds_the_cursor_n_below_the_highest() {
        let mut p = IdPoller::new("b", IdPolicy::Behind { n: 3 }, 10, 5);
        p.tick(0, false);
        p.on_page(&[1, 2, 10]);
        assert_eq!(p.tick(1000, false).after, Some(7));
        // A late row is read, below the highest: a late arrival.
        let out = p.on_page(&[8, 9, 10]);
        assert_eq!(out.late_arrivals, 2);
    }

    /// A gap tracker named `g` with pages of `limit`, 5 more pages a cycle.
    fn gap_poller(timeout_ms: u64, max_gaps: usize, limit: usize) -> IdPoller {
        let policy = IdPolicy::Gaps {
            timeout_ms,
            max_gaps,
        };
        IdPoller::new("g", policy, limit, 5)
    }

    #[test]
    fn a_gap_is_re_read_until_the_timeout_then_given_up() {
        let mut p = gap_poller(2000, 100, 10);
        p.tick(0, false);
        p.on_page(&[1, 3]);
        assert_eq!(p.tick(1000, false).gaps, vec![2]);
        p.on_page(&[]);
        assert_eq!(
            p.tick(2000, false).gaps,
            vec![2],
            "exactly the timeout: still tracked"
        );
        p.on_page(&[]);
        assert!(
            p.tick(2001, false).gaps.is_empty(),
            "past the timeout: given up"
        );
        let s = p.stats();
        assert_eq!((s.opened, s.filled, s.expired, s.rereads), (1, 0, 1, 2));
    }

    #[test]
    fn gaps_are_bounded_and_the_lowest_given_up_first() {
        let mut p = gap_poller(10_000, 3, 10);
        p.tick(0, false);
        p.on_page(&[1, 100]);
        assert_eq!(p.gaps().collect::<Vec<_>>(), vec![97, 98, 99]);
        assert_eq!(p.stats().untracked, 95);
        p.tick(1, false);
        p.on_page(&[102]);
        assert_eq!(p.gaps().collect::<Vec<_>>(), vec![98, 99, 101]);
        assert_eq!(p.stats().untracked, 96);
    }

    #[test]
    fn a_full_page_reads_on_past_its_last_row_without_the_gaps() {
        let mut p = gap_poller(10_000, 100, 3);
        p.tick(0, false);
        p.on_page(&[1, 3]);
        let first = p.tick(1, false);
        assert_eq!(first.gaps, vec![2]);
        let out = p.on_page(&[2, 4, 5]);
        assert_eq!(out.ids, vec![5, 4, 2], "recorded descending");
        let next = out.next.unwrap();
        assert_eq!((next.after, next.gaps.len()), (Some(5), 0));
        assert_eq!(p.position(), (1, 1));
        assert!(
            p.on_page(&[6]).next.is_none(),
            "a short page ends the cycle"
        );
    }

    /// A table whose IDs 1..=n become visible in any order, each within
    /// `delay` cycles of the next ID's: every ID each poller reads, in order.
    fn replay(p: &mut IdPoller, visible_at: &[u32], cycles: u32) -> Vec<i64> {
        let mut read = Vec::new();
        // The highest floor said so far: no later page may return an ID at
        // or below it (the claim of `IdPoller::floor`).
        let mut floor: Option<i64> = None;
        for cycle in 0..cycles {
            let mut req = p.tick(cycle as i64 * 1000, cycle + 1 == cycles);
            loop {
                let mut rows: Vec<i64> = visible_at
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v <= cycle)
                    .map(|(i, _)| i as i64 + 1)
                    .filter(|id| req.after.is_none_or(|a| *id > a) || req.gaps.contains(id))
                    .collect();
                rows.truncate(req.limit);
                read.extend(rows.iter().copied());
                if let (Some(f), Some(low)) = (floor, rows.iter().min()) {
                    assert!(
                        *low > f,
                        "{} returned {low} at or below its floor {f}",
                        p.name()
                    );
                }
                let outcome = p.on_page(&rows);
                floor = floor.max(p.floor());
                match outcome.next {
                    Some(next) => req = next,
                    None => break,
                }
            }
        }
        read
    }

    #[test]
    fn a_page_full_of_filled_gaps_reads_on_from_the_cursor_not_below_it() {
        let mut p = gap_poller(10_000, 100, 2);
        p.tick(0, false);
        assert_eq!(p.on_page(&[1, 5]).opened, 3);
        let req = p.tick(1000, false);
        assert_eq!((req.after, req.gaps), (Some(5), vec![2, 3, 4]));
        // 2 and 3 fill the page: the next one asks for the gap above them and
        // for rows past the cursor, not for 5 again.
        let next = p.on_page(&[2, 3]).next.unwrap();
        assert_eq!((next.after, next.gaps), (Some(5), vec![4]));
        let next = p.on_page(&[4, 6]).next.unwrap();
        assert_eq!((next.after, next.gaps), (Some(6), vec![]));
        assert_eq!(p.on_page(&[7]).next, None);
        assert_eq!(p.stats().filled, 3);
        assert_eq!(p.stats().rereads, 4, "3 on the first page, 1 on the second");
    }

    #[test]
    fn a_full_page_at_the_page_bound_is_an_overflow() {
        let mut p = IdPoller::new("i", IdPolicy::Incrementing, 2, 1);
        p.tick(0, false);
        let first = p.on_page(&[1, 2]);
        assert!(
            first.next.is_some() && !first.overflow,
            "page 1 of 2: read on"
        );
        let second = p.on_page(&[3, 4]);
        assert!(
            second.next.is_none() && second.overflow,
            "full at the bound: cut"
        );
        p.tick(1000, false);
        assert!(
            !p.on_page(&[5]).overflow,
            "a short page ends the cycle cleanly"
        );
        p.tick(2000, true);
        p.on_page(&[6, 7]);
        assert!(
            !p.on_page(&[8, 9]).overflow,
            "the final cycle reads on past the bound"
        );
    }

    #[test]
    fn the_floor_lies_below_every_gap_still_re_read() {
        let mut p = gap_poller(10_000, 10, 10);
        assert_eq!(p.floor(), None);
        p.tick(0, false);
        p.on_page(&[1, 4, 7]);
        assert_eq!(p.floor(), Some(1), "gaps 2, 3, 5, 6: below 2");
        p.tick(1000, false);
        p.on_page(&[2, 3]);
        assert_eq!(p.floor(), Some(4), "gaps 5, 6 left");
        let mut b = IdPoller::new("b", IdPolicy::Behind { n: 3 }, 10, 5);
        b.tick(0, false);
        b.on_page(&[1, 2, 10]);
        assert_eq!(b.floor(), Some(7), "behind: its cursor");
    }

    proptest! {
        /// No poller returns an ID at or below a floor it said before.
        #[test]
        fn no_id_comes_back_at_or_below_a_floor_said_before(
            visible_at in proptest::collection::vec(0u32..8, 1..300),
            limit in 1usize..50,
            max_gaps in 1usize..20,
        ) {
            for policy in [
                IdPolicy::Incrementing,
                IdPolicy::Behind { n: 5 },
                IdPolicy::Gaps { timeout_ms: 3_000, max_gaps },
            ] {
                let mut p = IdPoller::new("p", policy, limit, 1000).starting_after(0);
                replay(&mut p, &visible_at, 12);
            }
        }

        /// Gap tracking with a timeout longer than any row's lateness reads
        /// every row once, whatever the commit order; its gaps stay bounded.
        #[test]
        fn gap_tracking_loses_nothing_within_its_timeout(
            visible_at in proptest::collection::vec(0u32..8, 1..300),
            limit in 1usize..50,
        ) {
            let policy = IdPolicy::Gaps { timeout_ms: 9_000, max_gaps: 1000 };
            let mut p = IdPoller::new("g", policy, limit, 1000).starting_after(0);
            let read = replay(&mut p, &visible_at, 12);
            let distinct: std::collections::BTreeSet<i64> = read.iter().copied().collect();
            prop_assert_eq!(distinct.len(), visible_at.len());
            prop_assert_eq!(read.len(), distinct.len(), "each row read once");
            prop_assert!(p.gaps().count() <= 1000);
        }

        /// Incrementing loses exactly the rows that became visible after a
        /// higher one had been read (a lower bound check: never more).
        #[test]
        fn incrementing_loses_only_rows_behind_a_higher_read(
            visible_at in proptest::collection::vec(0u32..8, 1..300),
        ) {
            let mut p = IdPoller::new("i", IdPolicy::Incrementing, 10_000, 10).starting_after(0);
            let read = replay(&mut p, &visible_at, 12);
            for (i, v) in visible_at.iter().enumerate() {
                let id = i as i64 + 1;
                if !read.contains(&id) {
                    let passed = visible_at[i + 1..].iter().any(|w| w < v);
                    prop_assert!(passed, "row {} lost though no higher row was visible before it", id);
                }
            }
        }

        /// Tracked gaps never exceed the bound.
        #[test]
        fn gaps_stay_bounded(
            jumps in proptest::collection::vec(1i64..500, 1..50),
            max in 1usize..64,
        ) {
            let policy = IdPolicy::Gaps { timeout_ms: u64::MAX / 4, max_gaps: max };
            let mut p = IdPoller::new("g", policy, 1000, 10);
            let mut id = 0;
            for (n, j) in jumps.iter().enumerate() {
                id += j;
                p.tick(n as i64, false);
                p.on_page(&[id]);
                prop_assert!(p.gaps().count() <= max);
            }
        }
    }
}
