//! The `xmin` policy, for PostgreSQL targets only: read only rows whose
//! writing transaction is below the oldest transaction still running,
//! `xid < pg_snapshot_xmin(pg_current_snapshot())` (PostgreSQL manual 9.27.1),
//! with a keyset cursor on `(xid, id)`. Every transaction below that horizon
//! has ended and every later one gets a higher xid, so nothing can appear
//! behind the cursor: it cannot leak. The price is delay: a row waits until
//! every transaction that started before it, anywhere in the cluster, ends.
//! (The approach of Emmett's PostgreSQL event store and of Oskar Dudycz's
//! "How Postgres sequences issues can impact your messaging guarantees",
//! event-driven.io, 2022.)

use crate::drive::{Tally, align_up, following_tick};
use crate::record::{RecordSender, RequestRecord, StatusRecord};
use since_id::id::{Id, Layout};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The keyset cursor: the last `(xid, id)` read. Pure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XminCursor {
    pub xid: i64,
    pub id: i64,
}

impl XminCursor {
    /// The start: below every row.
    pub fn start() -> XminCursor {
        XminCursor {
            xid: 0,
            id: i64::MIN,
        }
    }

    /// Moves past a page read in `(xid, id)` order; true when the page was
    /// full (more may be waiting below the horizon).
    pub fn advance(&mut self, rows: &[(i64, i64)], limit: usize) -> bool {
        if let Some(&(id, xid)) = rows.last() {
            *self = (*self).max(XminCursor { xid, id });
        }
        rows.len() >= limit
    }
}

impl PartialOrd for XminCursor {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for XminCursor {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.xid, self.id).cmp(&(other.xid, other.id))
    }
}

/// The page query on `table.id_column`: rows past the cursor below the horizon.
pub fn query(table: &str, id_column: &str) -> String {
    let (t, id) = (super::quote_ident(table), super::quote_ident(id_column));
    format!(
        "SELECT {id}::bigint, xid::text::bigint FROM {t} \
         WHERE (xid, {id}) > ($1::text::xid8, $2) \
           AND xid < pg_snapshot_xmin(pg_current_snapshot()) \
         ORDER BY xid, {id} LIMIT $3"
    )
}

/// One xmin poller: its connection and prepared page query, its place in
/// the run, and the run's cadence.
pub struct XminPoller {
    pub client: Arc<tokio_postgres::Client>,
    pub statement: tokio_postgres::Statement,
    /// The poller's index in the run's `pollers` rows.
    pub index: usize,
    pub layout: Layout,
    pub limit: usize,
    pub max_pages: u32,
    pub interval_ms: u64,
    pub end_ms: i64,
}

/// What an xmin poller reports to and hears from the run.
pub struct XminChannels {
    pub recorder: RecordSender,
    pub progress: Arc<Mutex<Tally>>,
    /// Turns true at a signal.
    pub stop: watch::Receiver<bool>,
    /// Turns true once the writers are done (the last read then goes to the end).
    pub writers_done: watch::Receiver<bool>,
}

/// One xmin poller's loop: the same aligned cadence as the other pollers;
/// at the end it waits until the writers are done, then reads to the end.
pub async fn poll_loop(poller: XminPoller, channels: XminChannels) {
    let XminPoller {
        client,
        statement,
        index,
        layout,
        limit,
        max_pages,
        interval_ms,
        end_ms,
    } = poller;
    let XminChannels {
        recorder,
        progress,
        mut stop,
        mut writers_done,
    } = channels;
    let mut cursor = XminCursor::start();
    let mut highest: Option<i64> = None;
    let mut next_tick = align_up(crate::clock::now_ms(), interval_ms);
    let mut cycle = 0u64;
    loop {
        if recorder.failed() {
            return;
        }
        let last = *stop.borrow() || next_tick >= end_ms;
        if last {
            // Everything written must be below the horizon before the last read.
            let _ = writers_done.wait_for(|done| *done).await;
        } else {
            let delay = (next_tick - crate::clock::now_ms()).max(0) as u64;
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(delay)) => {}
                _ = stop.changed() => continue,
            }
        }
        let highest_before = highest;
        let mut page = 0u32;
        loop {
            let sent = crate::clock::now_ms();
            let result = client
                .query(
                    &statement,
                    &[&cursor.xid.to_string(), &cursor.id, &(limit as i64)],
                )
                .await;
            let received = crate::clock::now_ms();
            let mut row = RequestRecord {
                poller: index,
                request: rundb::RequestRow {
                    cycle: cycle as i64,
                    page: page as i64,
                    sent_at_ms: sent,
                    received_at_ms: received,
                    page_limit: limit as i64,
                    ..Default::default()
                },
                items: Vec::new(),
            };
            let more = match result {
                Err(e) => {
                    row.request.error = Some(super::db_error(&e));
                    let mut p = progress.lock().unwrap_or_else(|e| e.into_inner());
                    p.progress.requests += 1;
                    p.progress.failed += 1;
                    false
                }
                Ok(rows) => {
                    let rows: Vec<(i64, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
                    let more = cursor.advance(&rows, limit);
                    let mut p = progress.lock().unwrap_or_else(|e| e.into_inner());
                    p.progress.requests += 1;
                    // Recorded in descending ID order, as every response is.
                    let mut ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
                    ids.sort_unstable_by_key(|id| std::cmp::Reverse(*id));
                    row.request.reordered = rows.windows(2).any(|w| w[0].0 < w[1].0);
                    row.request.new_items = ids.len() as i64;
                    let late = ids
                        .iter()
                        .filter(|&&id| highest_before.is_some_and(|h| id < h))
                        .count();
                    p.progress.late_arrivals[index].1 += late as u64;
                    row.items = ids
                        .iter()
                        .map(|&id| {
                            let id_ = Id(id as u128);
                            StatusRecord {
                                first_sighting: p.sighted(id_),
                                status: rundb::StatusRow {
                                    id: id.to_string(),
                                    id_key: id_.sort_key(),
                                    id_time_ms: layout.ts_ms(id_),
                                    created_at: None,
                                    author: None,
                                },
                            }
                        })
                        .collect();
                    highest = highest.max(ids.first().copied());
                    more
                }
            };
            recorder.request(row);
            // The last read goes to the end; others stop at the page bound (the
            // keyset cursor loses nothing: the next cycle goes on from it).
            if !more || (!last && page >= max_pages) {
                break;
            }
            page += 1;
        }
        if last {
            return;
        }
        cycle += 1;
        next_tick = following_tick(next_tick, interval_ms, crate::clock::now_ms());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_moves_to_the_last_row_and_never_back() {
        let mut c = XminCursor::start();
        assert!(!c.advance(&[(50, 7), (10, 8)], 3));
        assert_eq!(c, XminCursor { xid: 8, id: 10 });
        assert!(c.advance(&[(3, 9), (4, 9)], 2), "a full page asks for more");
        assert_eq!(c, XminCursor { xid: 9, id: 4 });
        assert!(!c.advance(&[], 2));
        assert_eq!(c, XminCursor { xid: 9, id: 4 });
    }
}

#[cfg(test)]
mod database_tests {
    use super::*;
    use crate::targets::postgres::schema::Schema;

    /// The horizon on a real cluster: an open transaction anywhere holds back
    /// every row committed after it started; once it ends, both come, in xid order.
    #[test]
    fn an_open_transaction_holds_back_later_commits() {
        let (cluster, rt) = crate::targets::postgres::testing::start();
        rt.block_on(async {
            let connect = || crate::targets::postgres::testing::connect(&cluster, None);
            let (slow, fast, reader) = (connect().await, connect().await, connect().await);
            slow.batch_execute(&Schema::Mastodon.ddl("ab"))
                .await
                .unwrap();
            let statement = reader.prepare(&query("statuses", "id")).await.unwrap();
            let read = |cursor: XminCursor| {
                let (reader, statement) = (&reader, &statement);
                async move {
                    reader
                        .query(statement, &[&cursor.xid.to_string(), &cursor.id, &100i64])
                        .await
                        .unwrap()
                        .iter()
                        .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1)))
                        .collect::<Vec<(i64, i64)>>()
                }
            };
            let insert = "INSERT INTO statuses (account_id, text) VALUES (1, 'x') RETURNING id";
            slow.batch_execute("BEGIN").await.unwrap();
            let slow_id: i64 = slow.query_one(insert, &[]).await.unwrap().get(0);
            let fast_id: i64 = fast.query_one(insert, &[]).await.unwrap().get(0);
            // The fast row is committed and visible, but held back by the open transaction.
            let visible: i64 = reader
                .query_one("SELECT count(*) FROM statuses", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(visible, 1);
            assert!(read(XminCursor::start()).await.is_empty());
            slow.batch_execute("COMMIT").await.unwrap();
            let rows = read(XminCursor::start()).await;
            assert_eq!(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                vec![slow_id, fast_id],
                "both, in transaction order"
            );
            let mut cursor = XminCursor::start();
            cursor.advance(&rows, 100);
            assert!(read(cursor).await.is_empty(), "nothing comes twice");
        });
    }
}
