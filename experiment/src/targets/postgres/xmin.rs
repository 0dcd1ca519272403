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

use crate::drive::{Fetched, PollTarget};
use since_id::keyset::{KeysetRequest, KeysetRow};
use std::sync::Arc;
use tokio::sync::watch;

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

/// The cluster read through the keyset query, as the one poll loop's target
/// for keyset pollers (`since_id::keyset`). Clones share the connection.
#[derive(Clone)]
pub struct XminTarget {
    pub client: Arc<tokio_postgres::Client>,
    /// [`query`], prepared.
    pub statement: tokio_postgres::Statement,
    /// Turns true once the writers are done: until then the final read waits,
    /// so that everything written is below the horizon when it looks.
    pub writers_done: watch::Receiver<bool>,
}

impl PollTarget<KeysetRequest, KeysetRow> for XminTarget {
    async fn pace(&self) -> u64 {
        0
    }

    async fn fetch(&self, req: &KeysetRequest) -> Fetched<KeysetRow> {
        let result = self
            .client
            .query(
                &self.statement,
                &[
                    &req.after.xid.to_string(),
                    &req.after.id,
                    &(req.limit as i64),
                ],
            )
            .await
            .map(|rows| {
                rows.iter()
                    .map(|r| KeysetRow {
                        id: r.get(0),
                        xid: r.get(1),
                    })
                    .collect()
            })
            .map_err(|e| super::db_error(&e));
        Fetched {
            http_status: None,
            bytes: None,
            result,
            retry_after_ms: None,
        }
    }

    async fn settled(&self) {
        let mut done = self.writers_done.clone();
        let _ = done.wait_for(|done| *done).await;
    }
}

#[cfg(test)]
mod database_tests {
    use super::*;
    use crate::drive::PollTarget;
    use crate::targets::postgres::schema::Schema;
    use since_id::keyset::KeysetCursor;

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
            let (tx, done) = tokio::sync::watch::channel(true);
            let target = XminTarget {
                client: std::sync::Arc::new(reader),
                statement,
                writers_done: done,
            };
            let read = |after: KeysetCursor| {
                let target = target.clone();
                async move {
                    target
                        .fetch(&KeysetRequest { after, limit: 100 })
                        .await
                        .result
                        .unwrap()
                }
            };
            let insert = "INSERT INTO statuses (account_id, text) VALUES (1, 'x') RETURNING id";
            slow.batch_execute("BEGIN").await.unwrap();
            let slow_id: i64 = slow.query_one(insert, &[]).await.unwrap().get(0);
            let fast_id: i64 = fast.query_one(insert, &[]).await.unwrap().get(0);
            // The fast row is committed and visible, but held back by the open transaction.
            let visible: i64 = target
                .client
                .query_one("SELECT count(*) FROM statuses", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(visible, 1);
            assert!(read(KeysetCursor::start()).await.is_empty());
            slow.batch_execute("COMMIT").await.unwrap();
            let rows = read(KeysetCursor::start()).await;
            assert_eq!(
                rows.iter().map(|r| r.id).collect::<Vec<_>>(),
                vec![slow_id, fast_id],
                "both, in transaction order"
            );
            let last = rows.last().unwrap();
            let cursor = KeysetCursor {
                xid: last.xid,
                id: last.id,
            };
            assert!(read(cursor).await.is_empty(), "nothing comes twice");
            target.settled().await;
            drop(tx);
        });
    }
}
