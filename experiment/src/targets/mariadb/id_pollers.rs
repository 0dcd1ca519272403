//! The ID pollers (`--id-poller incrementing|behind:n=N|gaps:timeout=D`) on
//! MariaDB: the core's [`IdPoller`] (`since_id::gaps`) as a
//! [`Machine`] of the one real-time poll loop, and its query as a
//! [`PollTarget`]. The query is the relay's own, `WHERE id > ? ORDER BY id
//! ASC LIMIT ?` (Kafka Connect JDBC's `incrementing` mode), with the gaps
//! re-read as Axon's JDBC event store re-reads them, `OR id IN (...)`, on a
//! cycle's first page.
//!
//! Each request is recorded as every other: its cursor as `since_id`, the
//! rows it returned (descending), the late arrivals it caught.

use crate::drive::{Exchange, Fetched, Machine, PollTarget, Records, Tally};
use crate::record::{RequestRecord, StatusRecord};
use mysql_async::prelude::Queryable;
use since_id::gaps::{GapStats, IdPoller, IdRequest};
use since_id::id::{Id, Layout};
use std::sync::{Arc, Mutex};

/// The event table read forward, over a pool of connections.
#[derive(Clone)]
pub struct IdTarget {
    pool: mysql_async::Pool,
}

impl IdTarget {
    pub fn new(pool: mysql_async::Pool) -> IdTarget {
        IdTarget { pool }
    }

    /// Runs the query for `req`: IDs ascending.
    pub async fn page(&self, req: &IdRequest) -> Result<Vec<i64>, String> {
        let e = |e: mysql_async::Error| super::db_error(&e);
        let mut conn = self.pool.get_conn().await.map_err(e)?;
        let after = req.after.unwrap_or(i64::MIN);
        let limit = req.limit as u64;
        if req.gaps.is_empty() {
            return conn
                .exec(
                    "SELECT id FROM events WHERE id > ? ORDER BY id ASC LIMIT ?",
                    (after, limit),
                )
                .await
                .map_err(e);
        }
        // The gaps are integers the poller made, never text from outside.
        let gaps: Vec<String> = req.gaps.iter().map(i64::to_string).collect();
        let sql = format!(
            "SELECT id FROM events WHERE id > ? OR id IN ({}) ORDER BY id ASC LIMIT ?",
            gaps.join(",")
        );
        conn.exec(sql, (after, limit)).await.map_err(e)
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

/// An [`IdPoller`] as the poll loop drives it; its gap statistics are
/// published to `stats` after every response, for the run's summary.
pub struct IdMachine {
    pub poller: IdPoller,
    /// Where its statistics go (slot `slot`).
    pub stats: Arc<Mutex<Vec<GapStats>>>,
    pub slot: usize,
}

impl Machine for IdMachine {
    type Request = IdRequest;
    type Row = i64;

    fn tick(&mut self, now_ms: i64, last: bool) -> Option<IdRequest> {
        Some(self.poller.tick(now_ms, last))
    }

    fn on_failure(&mut self) {
        self.poller.on_failure();
    }

    fn settle(
        &mut self,
        index: usize,
        layout: &Layout,
        exchange: Exchange<'_, IdRequest, i64>,
        recorder: &dyn Records,
        tally: &mut Tally,
    ) -> Option<IdRequest> {
        let (cycle, page) = self.poller.position();
        let Exchange {
            req,
            fetched,
            sent_at_ms,
            received_at_ms,
            wait_ms,
        } = exchange;
        let since = req.after.map(|a| Id(a.max(0) as u128));
        let mut row = RequestRecord {
            poller: index,
            request: rundb::RequestRow {
                cycle: cycle as i64,
                page: page as i64,
                sent_at_ms,
                received_at_ms,
                since_id: since.map(|s| s.0.to_string()),
                since_key: since.map(|s| s.sort_key()),
                page_limit: req.limit as i64,
                wait_ms: wait_ms as i64,
                ..Default::default()
            },
            items: Vec::new(),
        };
        tally.progress.requests += 1;
        let next = match fetched.result {
            Err(error) => {
                tally.progress.failed += 1;
                row.request.error = Some(error);
                self.poller.on_failure();
                None
            }
            Ok(ids) => {
                let outcome = self.poller.on_page(&ids);
                // Stored descending, as every response is.
                row.request.reordered = ids.len() > 1;
                row.request.new_items = outcome.ids.len() as i64;
                if let Some(late) = tally.progress.late_arrivals.get_mut(index) {
                    late.1 += outcome.late_arrivals as u64;
                }
                row.items = outcome
                    .ids
                    .iter()
                    .map(|&id| {
                        let id = Id(id.max(0) as u128);
                        StatusRecord {
                            first_sighting: tally.sighted(id),
                            status: rundb::StatusRow {
                                id: id.0.to_string(),
                                id_key: id.sort_key(),
                                id_time_ms: layout.ts_ms(id),
                                created_at: None,
                                author: None,
                            },
                        }
                    })
                    .collect();
                outcome.next
            }
        };
        recorder.request(row);
        if let Some(slot) = self
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(self.slot)
        {
            *slot = self.poller.stats();
        }
        next
    }
}
