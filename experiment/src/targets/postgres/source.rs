//! Pollers over SQL: the query Mastodon's since_id pagination runs
//! (`WHERE id > $since ORDER BY id DESC LIMIT $n`; back-pages add
//! `id < $before`), answered as a `Fetched` page so that the same poller
//! state machine, driver and recorder serve SQL and HTTP alike.

use crate::drive::Fetched;
use crate::drive::PollTarget;
use since_id::id::{Id, Layout};
use since_id::poller::PageRequest;
use std::sync::Arc;

/// A table polled over one shared connection (tokio-postgres pipelines
/// concurrent queries on it).
#[derive(Clone)]
pub struct SqlTarget {
    client: Arc<tokio_postgres::Client>,
    newer: Arc<tokio_postgres::Statement>,
    window: Arc<tokio_postgres::Statement>,
    layout: Layout,
}

/// The largest ID a bigint column holds, as an [`Id`].
fn to_bigint(id: Id) -> i64 {
    id.0.min(i64::MAX as u128) as i64
}

impl SqlTarget {
    /// Prepares the two queries on `table.id_column`; a missing table or
    /// column, or no permission, fails here (one line).
    pub async fn new(
        client: Arc<tokio_postgres::Client>,
        table: &str,
        id_column: &str,
        layout: Layout,
    ) -> Result<SqlTarget, String> {
        let (t, id) = (super::quote_ident(table), super::quote_ident(id_column));
        let prep = |sql: String| {
            let client = client.clone();
            async move {
                client
                    .prepare(&sql)
                    .await
                    .map(Arc::new)
                    .map_err(|e| super::db_error(&e))
            }
        };
        Ok(SqlTarget {
            newer: prep(format!(
                "SELECT {id}::bigint FROM {t} WHERE {id} > $1 ORDER BY {id} DESC LIMIT $2"
            ))
            .await?,
            window: prep(format!(
                "SELECT {id}::bigint FROM {t} WHERE {id} > $1 AND {id} < $2 ORDER BY {id} DESC LIMIT $3"
            ))
            .await?,
            client,
            layout,
        })
    }

    /// Runs the page query for `req`.
    pub async fn page(&self, req: &PageRequest) -> Result<Vec<i64>, String> {
        // No cursor yet: everything, newest first (IDs are never negative here).
        let since = req.since.map_or(i64::MIN, to_bigint);
        let limit = req.limit as i64;
        let rows = match req.before {
            None => self.client.query(&*self.newer, &[&since, &limit]).await,
            Some(before) => {
                self.client
                    .query(&*self.window, &[&since, &to_bigint(before), &limit])
                    .await
            }
        }
        .map_err(|e| super::db_error(&e))?;
        Ok(rows.iter().map(|r| r.get::<_, i64>(0)).collect())
    }
}

impl PollTarget for SqlTarget {
    async fn pace(&self) -> u64 {
        0
    }

    async fn fetch(&self, req: &PageRequest) -> Fetched {
        Fetched::from_sql_ids(&self.layout, self.page(req).await)
    }
}
