//! The ID pollers (`--id-poller incrementing|behind:n=N|gaps:timeout=D`) on
//! MariaDB: the core's [`IdPoller`] (`since_id::gaps`) as a
//! `Machine` of the one real-time poll loop, and its query as a
//! `PollTarget`. The query is the relay's own, `WHERE id > ? ORDER BY id
//! ASC LIMIT ?` (Kafka Connect JDBC's `incrementing` mode), with the gaps
//! re-read as Axon's JDBC event store re-reads them, `OR id IN (...)`, on a
//! cycle's first page (and the rest on the next if a page ends among them).
//! `kafka-connect` sends Kafka Connect JDBC's own query, without LIMIT, once
//! a poll interval has passed since its last one ended (a tick of the poll
//! loop that comes earlier sends nothing), and reads the result as a stream,
//! row by row from the connection, never the whole result set at once.
//!
//! Each request is recorded as every other: its cursor as `since_id`, the
//! rows it returned (descending), the late arrivals it caught.

use crate::drive::{Exchange, Fetched, Machine, PollTarget, Settling, counted, key_record};
use crate::sim::sync::lock;
use mysql_async::prelude::Queryable;
use since_id::gaps::IdPolicy;
use since_id::gaps::{GapStats, IdPoller, IdRequest};
use since_id::id::Id;
use since_id::time::{format_duration_ms, parse_duration_ms};
use std::sync::{Arc, Mutex};

/// An ID poller as `--id-poller` gives it: a policy, and perhaps a pause
/// (`,pause=DURATION@AT`: from AT after the run's start it sends nothing for
/// DURATION, as a relay that is down or stuck does; its final cycle is
/// never paused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdPollerSpec {
    pub policy: IdPolicy,
    /// `(at_ms, for_ms)` after the run's start.
    pub pause: Option<(u64, u64)>,
}

impl std::str::FromStr for IdPollerSpec {
    type Err = String;

    /// ```text
    /// incrementing,pause=5m@10m   gaps:timeout=30s   behind:n=100,pause=30s@1m
    /// ```
    fn from_str(s: &str) -> Result<IdPollerSpec, String> {
        let (head, pause) = match s.split_once(",pause=") {
            Some((head, pause)) => (head, Some(pause)),
            None => (s, None),
        };
        let policy: IdPolicy = head.parse()?;
        let pause = pause
            .map(|p| {
                let bad = |why: String| {
                    format!("bad pause '{p}' in '{s}': {why}; expected DURATION@AT such as 5m@10m")
                };
                let (d, at) = p.split_once('@').ok_or_else(|| bad("no '@'".into()))?;
                let d = parse_duration_ms(d).map_err(|e| bad(e.to_string()))?;
                let at = parse_duration_ms(at).map_err(|e| bad(e.to_string()))?;
                Ok::<_, String>((at, d))
            })
            .transpose()?;
        Ok(IdPollerSpec { policy, pause })
    }
}

impl std::fmt::Display for IdPollerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.policy)?;
        if let Some((at, d)) = self.pause {
            write!(
                f,
                ",pause={}@{}",
                format_duration_ms(d),
                format_duration_ms(at)
            )?;
        }
        Ok(())
    }
}

impl IdPollerSpec {
    /// Whether a tick at `elapsed_ms` after the start falls in the pause.
    pub fn paused_at(&self, elapsed_ms: i64) -> bool {
        self.pause
            .is_some_and(|(at, d)| elapsed_ms >= at as i64 && elapsed_ms < (at + d) as i64)
    }
}

/// The event table read forward, over a pool of connections.
#[derive(Clone)]
pub struct IdTarget {
    pool: mysql_async::Pool,
    /// The quoted table and ID column.
    table: String,
    column: String,
}

impl IdTarget {
    /// The run's own event table, `events (id)`.
    pub fn new(pool: mysql_async::Pool) -> IdTarget {
        IdTarget::on(pool, super::schema::TABLE, "id")
    }

    /// Any table and ID column (your own: `--target mariadb:URL --table T`).
    pub fn on(pool: mysql_async::Pool, table: &str, column: &str) -> IdTarget {
        IdTarget {
            pool,
            table: super::quote_ident(table),
            column: super::quote_ident(column),
        }
    }

    /// Runs the query for `req`: IDs ascending.
    pub async fn page(&self, req: &IdRequest) -> Result<Vec<i64>, String> {
        let e = |e: mysql_async::Error| super::db_error(&e);
        let mut conn = self.pool.get_conn().await.map_err(e)?;
        let after = req.after.unwrap_or(i64::MIN);
        let limit = req.limit as u64;
        let (t, c) = (&self.table, &self.column);
        if let Some(batch) = req.batch {
            // Kafka Connect's query: every row past the offset, one result,
            // its snapshot the statement's (InnoDB's consistent read).
            let sql = format!("SELECT {c} FROM {t} WHERE {c} > ? ORDER BY {c} ASC");
            let mut result = conn.exec_iter(sql, (after,)).await.map_err(e)?;
            return read_in_batches(&mut result, batch).await.map_err(e);
        }
        if req.gaps.is_empty() {
            return conn
                .exec(
                    format!("SELECT {c} FROM {t} WHERE {c} > ? ORDER BY {c} ASC LIMIT ?"),
                    (after, limit),
                )
                .await
                .map_err(e);
        }
        // The gaps are integers the poller made, never text from outside.
        let gaps: Vec<String> = req.gaps.iter().map(i64::to_string).collect();
        let sql = format!(
            "SELECT {c} FROM {t} WHERE {c} > ? OR {c} IN ({}) ORDER BY {c} ASC LIMIT ?",
            gaps.join(",")
        );
        conn.exec(sql, (after, limit)).await.map_err(e)
    }
}

/// The rows of `result`, read from the connection as they come, `batch`
/// rows at a time as Kafka Connect's task hands them on
/// (`batch.max.rows`): the client holds one batch of undecoded rows at
/// most, and the IDs read so far (each is recorded as an observation).
async fn read_in_batches(
    result: &mut mysql_async::QueryResult<'_, 'static, mysql_async::BinaryProtocol>,
    batch: usize,
) -> Result<Vec<i64>, mysql_async::Error> {
    let mut ids = Vec::new();
    let mut rows = Vec::with_capacity(batch.min(10_000));
    loop {
        let next = result.next().await?;
        let end = next.is_none();
        if let Some(row) = next {
            rows.push(row);
        }
        if rows.len() >= batch || (end && !rows.is_empty()) {
            for row in rows.drain(..) {
                ids.push(mysql_async::from_row_opt::<i64>(row).map_err(|e| {
                    mysql_async::Error::Other(format!("an ID that is not an integer: {e}").into())
                })?);
            }
        }
        if end {
            return Ok(ids);
        }
    }
}

impl PollTarget<IdRequest, i64> for IdTarget {
    async fn pace(&self) -> u64 {
        0
    }

    async fn fetch(&self, req: &IdRequest) -> Fetched<i64> {
        Fetched {
            http_status: None,
            bytes: None,
            result: self.page(req).await,
            retry_after_ms: None,
        }
    }
}

/// What an ID poller's run came to, for the summary.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdReport {
    pub gaps: GapStats,
    /// Requests whose cursor lay below the oldest ID the retention job kept:
    /// IDs between the cursor and that one were dropped before this poller
    /// read them, and `id > cursor` silently returned the next partition's rows.
    pub expired_cursor: u64,
    /// When the first such request was sent.
    pub first_expired_at_ms: Option<i64>,
}

/// The retention job's drops as the pollers judge their cursors by them:
/// the upper bound of each dropped range and when its `DROP PARTITION` was
/// sent. Pure: the driver records each drop here, under one lock, at the
/// moment it reads the clock for the drop's `sent_at_ms`, before it sends
/// the SQL; a poller settles a request after it was sent, so every drop sent
/// in an earlier ms is already here, and the flag follows from the stored
/// times alone (`partition_drops.sent_at_ms < requests.sent_at_ms`), as our
/// own SQL recomputes it (experiment/tests/mariadb.rs).
#[derive(Clone, Debug, Default)]
pub struct DropLog {
    /// `(hi, sent_at_ms)` of each drop, in the order they were sent.
    drops: Vec<(i64, i64)>,
}

impl DropLog {
    /// A drop of the IDs below `hi`, sent at `sent_at_ms`.
    pub fn dropping(&mut self, hi: i64, sent_at_ms: i64) {
        self.drops.push((hi, sent_at_ms));
    }

    /// The drop sent at `sent_at_ms` failed: it is forgotten.
    pub fn failed(&mut self, hi: i64, sent_at_ms: i64) {
        self.drops.retain(|&d| d != (hi, sent_at_ms));
    }

    /// The lowest ID kept for a request sent at `at_ms`: the bound of the
    /// last drop sent in an earlier ms; `None` before any drop, when nothing
    /// is gone (a cursor below the table's first ID, as `behind:n=N` holds at
    /// the start, lost nothing).
    pub fn oldest_kept_before(&self, at_ms: i64) -> Option<i64> {
        self.drops
            .iter()
            .filter(|&&(_, sent)| sent < at_ms)
            .map(|&(hi, _)| hi)
            .max()
    }
}

/// Whether a request reading `id > after` lies below the oldest ID kept:
/// the IDs from `after + 1` up to `oldest_kept` are gone.
pub fn cursor_below(after: Option<i64>, oldest_kept: i64) -> bool {
    after.is_some_and(|a| a.saturating_add(1) < oldest_kept)
}

/// An [`IdPoller`] as the poll loop drives it; its report is published to
/// `stats` after every response, for the run's summary.
pub struct IdMachine {
    pub poller: IdPoller,
    pub spec: IdPollerSpec,
    /// The run's start, for the pause.
    pub start_ms: i64,
    /// Where its report goes (slot `slot`).
    pub stats: Arc<Mutex<Vec<IdReport>>>,
    pub slot: usize,
    /// The retention job's drops, to judge each request's cursor by.
    pub drops: Arc<Mutex<DropLog>>,
    /// Where the flagged requests go (`cursor_flags` at the end of the run).
    pub flags: Arc<Mutex<Vec<rundb::CursorFlagRow>>>,
}

impl Machine for IdMachine {
    type Request = IdRequest;
    type Row = i64;

    fn tick(&mut self, now_ms: i64, last: bool) -> Option<IdRequest> {
        if !last && self.spec.paused_at(now_ms - self.start_ms) {
            return None;
        }
        // Kafka Connect's loop: not before a poll interval since the last
        // query ended (the final cycle always reads).
        if !last && !self.poller.due(now_ms) {
            return None;
        }
        Some(self.poller.tick(now_ms, last))
    }

    fn on_failure(&mut self) {
        self.poller.on_failure();
    }

    fn position(&self) -> (u64, u32) {
        self.poller.position()
    }

    fn settle(
        &mut self,
        exchange: Exchange<'_, IdRequest, i64>,
        run: Settling<'_>,
    ) -> Option<IdRequest> {
        let (cycle, page) = self.poller.position();
        let mut row = exchange.record(run.index, (cycle, page), exchange.req.page_limit());
        let Exchange {
            req,
            fetched,
            sent_at_ms,
            received_at_ms,
            ..
        } = exchange;
        let since = req.after.map(|a| Id(a.max(0) as u128));
        // Below the oldest partition kept when it was sent: the IDs in
        // between were dropped unread (only this check can tell; the query
        // answers as ever).
        let oldest_kept = lock(&self.drops).oldest_kept_before(sent_at_ms);
        let expired = oldest_kept.filter(|&kept| cursor_below(req.after, kept));
        if let Some(oldest_kept) = expired {
            lock(&self.flags).push(rundb::CursorFlagRow {
                poller: self.poller.name().to_string(),
                cycle: cycle as i64,
                page: page as i64,
                sent_at_ms,
                cursor: req.after.unwrap_or(0),
                oldest_kept,
            });
        }
        row.request.since_id = since.map(|s| s.0.to_string());
        row.request.since_key = since.map(|s| s.sort_key());
        self.poller.query_ended(received_at_ms);
        let next = match counted(run.tally, &mut row, fetched.result) {
            None => {
                self.poller.on_failure();
                None
            }
            Some(ids) => {
                let outcome = self.poller.on_page(&ids);
                // Stored descending, as every response is.
                row.request.reordered = ids.len() > 1;
                row.request.overflow = outcome.overflow;
                row.request.new_items = outcome.ids.len() as i64;
                if let Some(late) = run.tally.progress.late_arrivals.get_mut(run.index) {
                    late.1 += outcome.late_arrivals as u64;
                }
                row.items = outcome
                    .ids
                    .iter()
                    .map(|&id| {
                        let id = Id(id.max(0) as u128);
                        key_record(run.tally, run.layout, id, id.0.to_string())
                    })
                    .collect();
                let floor = self.poller.floor().map(|f| Id(f.max(0) as u128));
                run.tally.passed(run.index, floor);
                outcome.next
            }
        };
        run.recorder.request(row);
        if let Some(slot) = lock(&self.stats).get_mut(self.slot) {
            slot.gaps = self.poller.stats();
            if expired.is_some() {
                slot.expired_cursor += 1;
                slot.first_expired_at_ms.get_or_insert(sent_at_ms);
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_kept_is_the_last_drop_sent_in_an_earlier_ms() {
        let mut log = DropLog::default();
        assert_eq!(
            log.oldest_kept_before(100),
            None,
            "nothing dropped, nothing gone"
        );
        log.dropping(50, 100);
        assert_eq!(
            log.oldest_kept_before(100),
            None,
            "a drop of the same ms is not yet counted"
        );
        assert_eq!(log.oldest_kept_before(101), Some(50));
        log.dropping(80, 200);
        log.failed(80, 200);
        assert_eq!(
            log.oldest_kept_before(500),
            Some(50),
            "a failed drop is forgotten"
        );
        log.dropping(90, 300);
        assert_eq!(log.oldest_kept_before(301), Some(90));
        assert!(cursor_below(Some(10), 50));
        assert!(
            !cursor_below(Some(49), 50),
            "the next ID read is the oldest kept"
        );
        assert!(!cursor_below(None, 50));
        assert!(!cursor_below(Some(i64::MAX), 50));
    }

    #[test]
    fn specs_with_a_pause_parse_print_and_pause() {
        let s: IdPollerSpec = "incrementing,pause=5m@10m".parse().unwrap();
        assert_eq!(s.pause, Some((600_000, 300_000)));
        assert_eq!(s.to_string(), "incrementing,pause=5m@10m");
        assert!(!s.paused_at(599_999));
        assert!(s.paused_at(600_000));
        assert!(!s.paused_at(900_000));
        let g: IdPollerSpec = "gaps:timeout=30s".parse().unwrap();
        assert_eq!(g.pause, None);
        assert!(!g.paused_at(0));
        for bad in [
            "incrementing,pause=5m",
            "incrementing,pause=x@1m",
            "naive,pause=1s@1s",
        ] {
            assert!(bad.parse::<IdPollerSpec>().is_err(), "{bad}");
        }
    }
}
