//! Truth for your own table: every row committed since the run started,
//! visible from its commit timestamp (`pg_xact_commit_timestamp(xmin)`,
//! PostgreSQL manual 9.27.1). One read at the end of the run.

use crate::record::TruthRow;
use since_id::id::{Id, Layout};

/// The truth rows of `table`'s rows committed from `start_ms` on.
pub async fn commit_ts_truth(
    client: &tokio_postgres::Client,
    table: &str,
    id_column: &str,
    layout: &Layout,
    start_ms: i64,
) -> Result<Vec<TruthRow>, String> {
    let sql = format!(
        "SELECT {id}::bigint, c FROM (SELECT {id}, floor(extract(epoch FROM \
         pg_xact_commit_timestamp(xmin)) * 1000)::bigint AS c FROM {t}) AS s WHERE c >= $1",
        id = super::quote_ident(id_column),
        t = super::quote_ident(table),
    );
    let rows = client
        .query(&sql, &[&start_ms])
        .await
        .map_err(|e| super::db_error(&e))?;
    Ok(rows
        .iter()
        .map(|r| {
            let (id, commit_ms): (i64, i64) = (r.get(0), r.get(1));
            let key = Id(id as u128);
            TruthRow {
                id: id.to_string(),
                id_key: key.sort_key(),
                id_time_ms: layout.ts_ms(key),
                posted_at_ms: commit_ms,
                visible_at_ms: commit_ms,
                deleted_at_ms: None,
                origin: "commit-ts".into(),
            }
        })
        .collect())
}
