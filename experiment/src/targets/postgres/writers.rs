//! The writers: `--writers N` connections posting at a target total rate, one
//! transaction per post, with durable commits (`synchronous_commit = on`, the
//! default) and real contention: the post, a second row (a mention, an outbox
//! delivery) and an update of a counter row that other posts update too.
//! Nothing sleeps unless a tail is injected (`--pg-tail 2%:3s`): then a seeded
//! share of transactions runs `pg_sleep` after the inserts, emulating slow
//! work done inside a transaction (media processing, lock waits).
//!
//! Truth per post: its ID, the ID's time, the transaction's start (`now()`,
//! PostgreSQL manual 9.9.5), when COMMIT returned to the writer, and later
//! (from [`commit_timestamps`]) the commit timestamp of its transaction.

use super::schema::{COUNTER_ROWS, Schema};
use crate::sim::sync::lock;
use crate::workload::WriterPace;
pub use crate::workload::{Output, Written};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use since_id::id::Layout;
use since_id::snowflake;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The injected tail: this share of transactions sleeps a uniform time up to `max_ms`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Tail {
    pub probability: f64,
    pub max_ms: u64,
}

impl std::str::FromStr for Tail {
    type Err = String;

    fn from_str(s: &str) -> Result<Tail, String> {
        let bad = |why: &str| format!("bad tail '{s}': {why}; expected P%:DURATION such as 2%:3s");
        let (p, d) = s.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let percent: f64 = p
            .strip_suffix('%')
            .ok_or_else(|| bad("the share needs a '%'"))?
            .parse()
            .map_err(|_| bad("the share is not a number"))?;
        if !(0.0..=100.0).contains(&percent) {
            return Err(bad("the share must be between 0% and 100%"));
        }
        let max_ms = since_id::time::parse_duration_ms(d).map_err(|e| bad(&e.to_string()))?;
        Ok(Tail {
            probability: percent / 100.0,
            max_ms,
        })
    }
}

impl std::fmt::Display for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}%:{}ms", self.probability * 100.0, self.max_ms)
    }
}

/// The workload of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Workload {
    pub schema: Schema,
    pub writers: u32,
    pub rate_per_s: f64,
    pub tail: Option<Tail>,
    /// Stored at the top of `runs.config` (`arrivals`), not here.
    #[serde(skip)]
    pub arrivals: crate::workload::Arrivals,
    pub seed: u64,
}

/// Runs the writers until `stop` turns true (or its sender drops); returns
/// when every writer's last transaction has ended.
pub async fn run_writers(
    config: tokio_postgres::Config,
    workload: Workload,
    output: Arc<Mutex<Output>>,
    stop: watch::Receiver<bool>,
) -> Result<(), String> {
    let mut tasks = Vec::new();
    for index in 0..workload.writers {
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| format!("writer {index} cannot connect: {}", super::db_error(&e)))?;
        tokio::spawn(connection);
        let (workload, output, stop) = (workload.clone(), output.clone(), stop.clone());
        tasks.push(tokio::spawn(writer(index, client, workload, output, stop)));
    }
    crate::workload::join_writers(tasks).await
}

async fn writer(
    index: u32,
    client: tokio_postgres::Client,
    w: Workload,
    output: Arc<Mutex<Output>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng =
        ChaCha8Rng::seed_from_u64(since_id::seed::stream(w.seed, 0x5752_4954_4552, index));
    let mut ids = snowflake::Generator::new(index);
    let mut pace = WriterPace::of_writer(
        w.arrivals,
        (index, w.writers),
        w.rate_per_s,
        crate::clock::now_ms(),
        w.seed,
    );
    let mut n = 0u64;
    let statements = match prepare(&client, w.schema).await {
        Ok(statements) => statements,
        Err(e) => {
            lock(&output).failed(e);
            return;
        }
    };
    while crate::workload::next_write(&mut pace, &mut stop).await {
        n += 1;
        let account = rng.random_range(1..=COUNTER_ROWS);
        let mentioned = rng.random_range(1..=COUNTER_ROWS);
        let sleep_ms = match w.tail {
            Some(t) if rng.random_bool(t.probability) => rng.random_range(1..=t.max_ms.max(1)),
            _ => 0,
        };
        let text = format!("post {n} by writer {index}");
        let this = Post {
            account,
            mentioned,
            text: &text,
            sleep_ms,
        };
        let result = post(&client, &statements, w.schema, &mut ids, this).await;
        let mut out = lock(&output);
        match result {
            Ok(written) => out.committed(written),
            Err(e) => {
                out.failed(e);
                if client.is_closed() {
                    // The server went away: this writer is done.
                    return;
                }
            }
        }
    }
}

/// A writer's prepared statements: the post, its side row, the counter update.
struct Statements {
    insert: tokio_postgres::Statement,
    side: tokio_postgres::Statement,
    update: tokio_postgres::Statement,
}

/// What one post writes.
struct Post<'a> {
    account: i32,
    mentioned: i32,
    text: &'a str,
    /// The injected tail: how long the transaction sleeps before its last statement.
    sleep_ms: u64,
}

async fn prepare(client: &tokio_postgres::Client, schema: Schema) -> Result<Statements, String> {
    let prep = |sql: &'static str| async move {
        client
            .prepare(sql)
            .await
            .map_err(|e| format!("cannot prepare the writers' statements: {e}"))
    };
    Ok(Statements {
        insert: prep(schema.insert_sql()).await?,
        side: prep(schema.side_sql()).await?,
        update: prep("UPDATE accounts SET statuses_count = statuses_count + 1 WHERE id = $1")
            .await?,
    })
}

/// One post: one transaction.
async fn post(
    client: &tokio_postgres::Client,
    statements: &Statements,
    schema: Schema,
    ids: &mut snowflake::Generator,
    post: Post<'_>,
) -> Result<Written, String> {
    let Statements {
        insert,
        side,
        update,
    } = statements;
    let Post {
        account,
        mentioned,
        text,
        sleep_ms,
    } = post;
    let e = |e: tokio_postgres::Error| e.to_string();
    client.batch_execute("BEGIN").await.map_err(e)?;
    let outcome = async {
        let row = if schema.client_ids() {
            // The writer's ID, taken at transaction start from its own clock.
            let id = ids.next(crate::clock::now_ms());
            client.query_one(insert, &[&account, &text, &id]).await
        } else {
            client.query_one(insert, &[&account, &text]).await
        }
        .map_err(e)?;
        let (id, xid, xact_start_ms): (i64, String, i64) = (row.get(0), row.get(1), row.get(2));
        client.execute(side, &[&id, &mentioned]).await.map_err(e)?;
        if sleep_ms > 0 {
            client
                .execute("SELECT pg_sleep($1)", &[&(sleep_ms as f64 / 1000.0)])
                .await
                .map_err(e)?;
        }
        client.execute(update, &[&account]).await.map_err(e)?;
        client.batch_execute("COMMIT").await.map_err(e)?;
        Ok::<_, String>(Written {
            id,
            xid,
            xact_start_ms,
            commit_returned_ms: crate::clock::now_ms(),
            sleep_ms,
        })
    }
    .await;
    if outcome.is_err() && !client.is_closed() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    outcome
}

/// The commit timestamps of rows of `table`, by ID (`pg_xact_commit_timestamp(xmin)`,
/// PostgreSQL manual 9.27.1; needs `track_commit_timestamp = on`).
pub async fn commit_timestamps(
    client: &tokio_postgres::Client,
    table: &str,
    id_column: &str,
    ids: &[i64],
) -> Result<Vec<(i64, Option<i64>)>, String> {
    let sql = format!(
        "SELECT {id}, floor(extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000)::bigint \
         FROM {table} WHERE {id} = ANY($1)",
        id = super::quote_ident(id_column),
        table = super::quote_ident(table),
    );
    let rows = client
        .query(&sql, &[&ids])
        .await
        .map_err(|e| format!("cannot read commit timestamps: {e}"))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// A committed post's truth row: owed only to requests sent after its COMMIT
/// returned. The clocks read whole ms, and a request read at the same ms may
/// have left before the COMMIT returned (a real run showed it), so it is
/// visible from the next ms: the conservative end of the bracket.
pub fn truth_row(layout: &Layout, w: &Written) -> rundb::TruthRow {
    rundb::TruthRow {
        id: w.id.to_string(),
        id_key: since_id::id::Id(w.id as u128).sort_key(),
        id_time_ms: id_time_ms(layout, w),
        posted_at_ms: w.xact_start_ms,
        visible_at_ms: w.commit_returned_ms + 1,
        deleted_at_ms: None,
        origin: if w.sleep_ms > 0 {
            "injected-sleep".into()
        } else {
            "local".into()
        },
    }
}

/// The ID's time of a post: decoded from the ID, except for BIGSERIAL, whose
/// IDs carry no time (then the transaction's start, the insert time the writer saw).
pub fn id_time_ms(layout: &Layout, w: &Written) -> i64 {
    if layout.multiplier() == 1 && layout.epoch_ms() == 0 {
        // The outbox schema's sequence layout (Schema::layout).
        w.xact_start_ms
    } else {
        layout.ts_ms(since_id::id::Id(w.id as u128))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_specs_parse() {
        let t: Tail = "2%:3s".parse().unwrap();
        assert_eq!(
            t,
            Tail {
                probability: 0.02,
                max_ms: 3000
            }
        );
        for bad in ["2%", "2:3s", "x%:1s", "200%:1s", "5%:soon"] {
            let err = bad.parse::<Tail>().unwrap_err();
            assert!(err.starts_with(&format!("bad tail '{bad}'")), "{err}");
        }
    }
}

#[cfg(test)]
mod database_tests {
    use super::*;
    use since_id::id::Id;

    /// One post in each schema, on a real cluster: the ID's time is where each
    /// schema says it is.
    #[test]
    fn each_schema_ids_its_posts_at_transaction_start() {
        let (cluster, rt) = crate::targets::postgres::testing::start();
        for schema in [
            Schema::Mastodon,
            Schema::Outbox,
            Schema::Snowflake,
            Schema::Partitioned,
            Schema::PartitionedSnowflake,
        ] {
            rt.block_on(async {
                let db = format!("s_{}", schema.to_string().replace('-', "_"));
                crate::targets::postgres::testing::connect(&cluster, None)
                    .await
                    .batch_execute(&format!("CREATE DATABASE {db}"))
                    .await
                    .unwrap();
                let client = crate::targets::postgres::testing::connect(&cluster, Some(&db)).await;
                client.batch_execute(&schema.ddl("00ff")).await.unwrap();
                let statements = prepare(&client, schema).await.unwrap();
                let mut ids = snowflake::Generator::new(7);
                let layout = schema.layout();
                let mut previous: Option<Written> = None;
                for n in 0..3 {
                    let one = Post {
                        account: 1,
                        mentioned: 2,
                        text: "x",
                        sleep_ms: 0,
                    };
                    let w = post(&client, &statements, schema, &mut ids, one)
                        .await
                        .unwrap();
                    assert!(w.xact_start_ms <= w.commit_returned_ms);
                    let id_time = id_time_ms(&layout, &w);
                    match schema {
                        // timestamp_id: the ms of now() above the low 16 bits.
                        Schema::Mastodon => {
                            assert_eq!(layout.ts_ms(Id(w.id as u128)), w.xact_start_ms)
                        }
                        Schema::Outbox | Schema::Partitioned => {
                            assert_eq!(w.id, n + 1, "BIGSERIAL counts from 1");
                            assert_eq!(id_time, w.xact_start_ms);
                        }
                        // The writer's clock, read after BEGIN.
                        Schema::Snowflake | Schema::PartitionedSnowflake => {
                            assert!(id_time >= w.xact_start_ms && id_time <= w.commit_returned_ms);
                            assert_eq!((w.id >> 12) & 1023, 7);
                        }
                    }
                    if let Some(p) = &previous {
                        assert!(w.id > p.id);
                        assert_ne!(w.xid, p.xid, "one transaction per post");
                    }
                    previous = Some(w);
                }
                let stamps = commit_timestamps(
                    &client,
                    schema.table(),
                    "id",
                    &[previous.as_ref().unwrap().id],
                )
                .await
                .unwrap();
                let w = previous.unwrap();
                let commit = stamps[0].1.expect("track_commit_timestamp is on");
                assert!(w.xact_start_ms <= commit && commit <= w.commit_returned_ms);
                let count: i64 = client
                    .query_one("SELECT sum(statuses_count)::bigint FROM accounts", &[])
                    .await
                    .unwrap()
                    .get(0);
                assert_eq!(count, 3, "each post updated a counter row");
            });
        }
    }
}
