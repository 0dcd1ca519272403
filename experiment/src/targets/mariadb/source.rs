//! Pollers over SQL on MariaDB, answered as `Fetched` pages so that the
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
    /// The page query, and the back-page query.
    sql: (String, String),
}

/// The largest ID a BIGINT column holds.
fn to_bigint(id: Id) -> i64 {
    id.0.min(i64::MAX as u128) as i64
}

impl MariaTarget {
    /// The run's own event table, `events (id)`.
    pub fn new(pool: mysql_async::Pool, layout: Layout) -> MariaTarget {
        MariaTarget::on(pool, layout, super::schema::TABLE, "id")
    }

    /// Any table and ID column (your own: `--target mariadb:URL --table T`).
    pub fn on(pool: mysql_async::Pool, layout: Layout, table: &str, column: &str) -> MariaTarget {
        let (t, c) = (super::quote_ident(table), super::quote_ident(column));
        let sql = (
            format!("SELECT {c} FROM {t} WHERE {c} > ? ORDER BY {c} DESC LIMIT ?"),
            format!("SELECT {c} FROM {t} WHERE {c} > ? AND {c} < ? ORDER BY {c} DESC LIMIT ?"),
        );
        MariaTarget { pool, layout, sql }
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
                .exec(self.sql.0.as_str(), (since, limit))
                .await
                .map_err(e),
            Some(before) => conn
                .exec(self.sql.1.as_str(), (since, to_bigint(before), limit))
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
