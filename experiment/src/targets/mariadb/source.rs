//! Pollers over SQL on MariaDB, answered as [`Fetched`] pages so that the
//! one real-time poll loop (`crate::drive::run_real`) runs them as it runs
//! every other target's.
//!
//! The since_id policies (`naive`, `compensated:k=...`) run the core's
//! [`since_id::Poller`]: `WHERE id > ? ORDER BY id DESC LIMIT ?`, back-pages
//! adding `id < ?`. Within one cycle that reads the same rows as Kafka
//! Connect JDBC's `incrementing` mode (`WHERE id > ? ORDER BY id ASC`,
//! confluentinc/kafka-connect-jdbc `TimestampIncrementingCriteria.java`),
//! paging forward: every row above the cursor visible when the pages run.

use crate::drive::{Fetched, PollTarget};
use mysql_async::prelude::Queryable;
use since_id::id::{Id, Layout};
use since_id::poller::PageRequest;

/// The event table, polled over a pool of connections (one per request in flight).
#[derive(Clone)]
pub struct MariaTarget {
    pool: mysql_async::Pool,
    layout: Layout,
}

/// The largest ID a BIGINT column holds.
fn to_bigint(id: Id) -> i64 {
    id.0.min(i64::MAX as u128) as i64
}

impl MariaTarget {
    pub fn new(pool: mysql_async::Pool, layout: Layout) -> MariaTarget {
        MariaTarget { pool, layout }
    }

    /// Runs the page query for `req`: IDs newest first.
    pub async fn page(&self, req: &PageRequest) -> Result<Vec<i64>, String> {
        let e = |e: mysql_async::Error| super::db_error(&e);
        let mut conn = self.pool.get_conn().await.map_err(e)?;
        // No cursor yet: everything, newest first (IDs are never negative here).
        let since = req.since.map_or(i64::MIN, to_bigint);
        let limit = req.limit as u64;
        match req.before {
            None => conn
                .exec(
                    "SELECT id FROM events WHERE id > ? ORDER BY id DESC LIMIT ?",
                    (since, limit),
                )
                .await
                .map_err(e),
            Some(before) => conn
                .exec(
                    "SELECT id FROM events WHERE id > ? AND id < ? ORDER BY id DESC LIMIT ?",
                    (since, to_bigint(before), limit),
                )
                .await
                .map_err(e),
        }
    }
}

impl PollTarget for MariaTarget {
    async fn pace(&self) -> u64 {
        0
    }

    async fn fetch(&self, req: &PageRequest) -> Fetched {
        Fetched::from_sql_ids(&self.layout, self.page(req).await)
    }
}
