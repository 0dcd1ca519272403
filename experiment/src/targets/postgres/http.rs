//! The Mastodon API served from the PostgreSQL table: its public timeline,
//! read with the simulator's Mastodon paging and documents
//! (`experiment/sim/src/server/mastodon.rs`) and answered by the queries of Mastodon's
//! pagination (`id > since_id ORDER BY id DESC LIMIT n`, `id < max_id` for
//! back-pages, `id > min_id ORDER BY id ASC LIMIT n` reversed), so HTTP
//! pollers and any Mastodon client library read a real database-backed API.
//! Used by `--via http` and by `experiment serve --backend postgres`.

use crate::sim::server::mastodon::{self, Paging};
use crate::sim::sync::lock;
use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Clone)]
struct Db {
    client: Arc<tokio_postgres::Client>,
}

/// The router over the `statuses` table of the mastodon schema.
pub fn router(client: Arc<tokio_postgres::Client>) -> Router {
    mastodon::backend_routes(
        get(public),
        "snowleak on PostgreSQL",
        "statuses served from a PostgreSQL table",
        16,
    )
    .with_state(Db { client })
}

fn bad(message: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": message }))).into_response()
}

async fn public(
    State(db): State<Db>,
    headers: axum::http::HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let params = crate::sim::server::params(&raw);
    let paging = Paging::parse(&params, |name, v| {
        if v.is_empty() {
            return Ok(None);
        }
        v.parse::<i64>()
            .map(Some)
            .map_err(|_| format!("bad {name} '{v}'"))
    });
    let paging = match paging {
        Ok(paging) => paging,
        Err(e) => return bad(e),
    };
    let lower = paging.after.unwrap_or(i64::MIN);
    let upper = paging.before.unwrap_or(i64::MAX);
    let limit = paging.limit as i64;
    let sql = format!(
        "SELECT id, floor(extract(epoch FROM created_at) * 1000)::bigint, account_id, text
         FROM statuses WHERE id > $1 AND id < $2 ORDER BY id {} LIMIT $3",
        if paging.oldest_first { "ASC" } else { "DESC" }
    );
    let rows = match db.client.query(&sql, &[&lower, &upper, &limit]).await {
        Ok(rows) => rows,
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "error": super::db_error(&e) })),
            )
                .into_response();
        }
    };
    let mut statuses: Vec<Value> = rows
        .iter()
        .map(|r| {
            let (id, created_ms, account, text): (i64, i64, i32, String) =
                (r.get(0), r.get(1), r.get(2), r.get(3));
            mastodon::stored_status(&id.to_string(), created_ms, &account.to_string(), &text)
        })
        .collect();
    if paging.oldest_first {
        statuses.reverse();
    }
    let mut response = Json(&statuses).into_response();
    if let (Some(first), Some(last)) = (statuses.first(), statuses.last()) {
        let link = mastodon::link_header(
            &crate::sim::server::host(&headers),
            mastodon::PUBLIC_TIMELINE,
            &params,
            first["id"].as_str().unwrap_or_default(),
            last["id"].as_str().unwrap_or_default(),
        );
        response
            .headers_mut()
            .insert(axum::http::header::LINK, link);
    }
    response
}

/// The role a consumer reading the table directly logs in as: it may only
/// read (`SELECT` on the table, every transaction read-only).
pub const READER_ROLE: &str = "snowleak_reader";

/// `experiment serve --backend postgres`'s server: a throwaway cluster with
/// the mastodon schema, the default writers loading it, the Mastodon API over
/// it ([`Backend::router`]) and a read-only role for consumers that read the
/// table itself (`Backend::reader_url`). `Backend::stop` stops the
/// writers and removes the cluster.
pub struct Backend {
    client: Arc<tokio_postgres::Client>,
    stop_writers: tokio::sync::watch::Sender<bool>,
    writers: tokio::task::JoinHandle<Result<(), String>>,
    output: Arc<std::sync::Mutex<super::writers::Output>>,
    /// Whether the posts written are kept for [`Backend::take_truth`].
    keep_truth: bool,
    drain: Option<tokio::task::JoinHandle<()>>,
    /// Last: fields drop in order, and the connections go before the cluster.
    cluster: crate::servers::postgres::Cluster,
}

/// The writers of `serve --backend postgres`.
pub const WORKLOAD: (u32, f64) = (8, 300.0);

impl Backend {
    /// Starts the cluster, the schema (seeded), the read-only role and the
    /// writers. With `keep_truth`, what they commit is kept until taken.
    pub async fn start(seed: u64, keep_truth: bool) -> Result<Backend, String> {
        use super::schema::Schema;
        use super::writers::{Output, Workload, run_writers};
        let cluster = crate::servers::postgres::Cluster::start()?;
        let config = cluster.config();
        let client = crate::servers::postgres::connect(&config).await?;
        let role = super::quote_ident(READER_ROLE);
        client
            .batch_execute(&format!(
                "{ddl};
                 CREATE ROLE {role} LOGIN;
                 ALTER ROLE {role} SET default_transaction_read_only = on;
                 GRANT SELECT ON statuses TO {role};",
                ddl = Schema::Mastodon.ddl(&format!("{seed:016x}"))
            ))
            .await
            .map_err(|e| super::db_error(&e))?;
        let workload = Workload {
            schema: Schema::Mastodon,
            writers: WORKLOAD.0,
            rate_per_s: WORKLOAD.1,
            tail: None,
            arrivals: Default::default(),
            seed,
        };
        let (stop_writers, stop) = tokio::sync::watch::channel(false);
        let output = Arc::new(std::sync::Mutex::new(Output::default()));
        let writers = tokio::spawn(run_writers(config, workload, output.clone(), stop));
        // Without a taker, only the counters are kept.
        let drain = (!keep_truth).then(|| {
            let output = output.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    lock(&output).written.clear();
                }
            })
        });
        Ok(Backend {
            cluster,
            client: Arc::new(client),
            stop_writers,
            writers,
            output,
            keep_truth,
            drain,
        })
    }

    /// The Mastodon API over the table.
    pub fn router(&self) -> Router {
        router(self.client.clone())
    }

    /// A libpq connection URI for [`READER_ROLE`] over the cluster's socket.
    pub fn reader_url(&self) -> String {
        let dir = self.cluster.dir().display().to_string();
        format!(
            "postgresql://{READER_ROLE}@/postgres?host={}",
            dir.replace('%', "%25").replace(' ', "%20")
        )
    }

    /// The ID layout of the table's IDs.
    pub fn layout(&self) -> since_id::id::Layout {
        super::schema::Schema::Mastodon.layout()
    }

    /// The truth of every post committed since the last call (nothing without `keep_truth`).
    pub fn take_truth(&self) -> Vec<rundb::TruthRow> {
        if !self.keep_truth {
            return Vec::new();
        }
        let layout = self.layout();
        let written = std::mem::take(&mut lock(&self.output).written);
        written
            .iter()
            .map(|w| super::writers::truth_row(&layout, w))
            .collect()
    }

    /// Stops the writers and removes the cluster; what they committed last
    /// stays for one more [`Backend::take_truth`] before the cluster goes.
    pub async fn stop_writers(&mut self) -> Result<(), String> {
        let _ = self.stop_writers.send(true);
        if let Some(drain) = self.drain.take() {
            drain.abort();
        }
        (&mut self.writers)
            .await
            .map_err(|e| format!("the writers failed: {e}"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::postgres::schema::Schema;
    use crate::targets::postgres::source::SqlTarget;
    use since_id::id::Id;
    use since_id::poller::PageRequest;

    #[test]
    fn the_api_reads_the_same_rows_as_the_sql_pollers() {
        let (cluster, rt) = crate::targets::postgres::testing::start();
        rt.block_on(async {
            let client = crate::targets::postgres::testing::connect(&cluster, None).await;
            client
                .batch_execute(&Schema::Mastodon.ddl("0123"))
                .await
                .unwrap();
            // 90 statuses over several transactions (several ms, so several ID times).
            for batch in 0..9 {
                client
                    .batch_execute(&format!(
                        "INSERT INTO statuses (account_id, text)
                         SELECT 1 + n % 16, 'post ' || n FROM generate_series({}, {}) n",
                        batch * 10,
                        batch * 10 + 9
                    ))
                    .await
                    .unwrap();
            }
            let client = Arc::new(client);
            let sql = SqlTarget::new(client.clone(), "statuses", "id", Schema::Mastodon.layout())
                .await
                .unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, router(client)).await });
            let all = sql
                .page(&PageRequest {
                    since: None,
                    before: None,
                    limit: 1000,
                })
                .await
                .unwrap();
            assert_eq!(all.len(), 90);
            let http = crate::api::http_client(std::time::Duration::from_secs(10)).unwrap();
            let get_json = |url: String| {
                let http = http.clone();
                async move {
                    let body: Value = http.get(url).send().await.unwrap().json().await.unwrap();
                    body
                }
            };
            let get = |query: String| {
                let body = get_json(format!("http://{addr}/api/v1/timelines/public?{query}"));
                async move {
                    body.await
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s["id"].as_str().unwrap().parse::<i64>().unwrap())
                        .collect::<Vec<i64>>()
                }
            };
            for (since, before) in [
                (None, None),
                (Some(all[60]), None),
                (Some(all[80]), Some(all[10])),
            ] {
                let req = PageRequest {
                    since: since.map(|id| Id(id as u128)),
                    before: before.map(|id| Id(id as u128)),
                    limit: 40,
                };
                let mut query = "limit=40".to_string();
                if let Some(s) = since {
                    query.push_str(&format!("&since_id={s}"));
                }
                if let Some(b) = before {
                    query.push_str(&format!("&max_id={b}"));
                }
                assert_eq!(get(query).await, sql.page(&req).await.unwrap());
            }
            // min_id: the oldest 5 above it, newest first (Mastodon's semantics).
            let above = get(format!("min_id={}&limit=5", all[50])).await;
            assert_eq!(above, all[45..50].to_vec());
            // NodeInfo, which clients read to tell the software (Mastodon.py does).
            let links = get_json(format!("http://{addr}/.well-known/nodeinfo")).await;
            let href = links["links"][0]["href"].as_str().unwrap().to_string();
            assert_eq!(href, format!("http://{addr}/nodeinfo/2.0"));
            let doc = get_json(href).await;
            assert_eq!(doc["software"]["name"], "mastodon");
        });
    }
}
