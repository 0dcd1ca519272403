//! The retention job of the partitioned event table: the pure plan shared
//! with the PostgreSQL target (`since_id::partitions`), run with MariaDB's
//! SQL (`schema.rs`) on the skeleton's schedule (`crate::workload`). Each
//! drop is logged for the ID pollers as it is sent (`id_pollers::DropLog`).

use super::MariaOpts;
use super::id_pollers::DropLog;
use super::schema::{MariaSql, Partition, Partitions, Schema};
use crate::sim::sync::lock;
use crate::workload::{self, Rounds};
use mysql_async::prelude::Queryable;
use since_id::id::Layout;
use since_id::partitions::Counter;
use std::sync::{Arc, Mutex};

/// What the retention job keeps between rounds: its plan and, for
/// AUTO_INCREMENT, where the writers were (`since_id::partitions::Counter`).
pub struct Job {
    pub plan: Partitions,
    /// `--partition-every`: a round's period.
    pub every_ms: u64,
    counter: Option<Counter>,
}

impl Job {
    /// The first two partitions: each holds one `--partition-every` of events
    /// (by ID time for Snowflake IDs, by the rate asked for AUTO_INCREMENT:
    /// from the first round on, by the rate reached).
    pub fn new(opts: &MariaOpts, start_ms: i64) -> Job {
        let every = opts.partition_every_ms as i64;
        match opts.schema {
            Schema::Snowflake => {
                let at = |ms: i64| Layout::twitter().min_id_at(ms).0 as i64;
                Job {
                    plan: Partitions::new(
                        at(start_ms + every),
                        at(start_ms + 2 * every),
                        opts.retain,
                    ),
                    every_ms: opts.partition_every_ms,
                    counter: None,
                }
            }
            Schema::Autoinc => Job {
                plan: Counter::first_plan(opts.write_rate, opts.partition_every_ms, opts.retain),
                every_ms: opts.partition_every_ms,
                counter: Some(Counter::new(opts.retain)),
            },
        }
    }

    /// The bound of the partition to add at a round where the writers' highest
    /// ID is `max_id`, if one is needed: a Snowflake one ends two periods
    /// ahead by ID time; an AUTO_INCREMENT one as `Counter::round` says.
    fn next_bound(&mut self, now_ms: i64, max_id: i64) -> Option<i64> {
        match &mut self.counter {
            None => Some(
                Layout::twitter()
                    .min_id_at(now_ms + 2 * self.every_ms as i64)
                    .0 as i64,
            ),
            Some(counter) => counter.round(&self.plan, max_id),
        }
    }

    /// Below it, a partition beyond `--retain` is old enough to drop: a
    /// Snowflake partition's bound is a time, so the count alone ages it.
    fn aged_below(&self) -> i64 {
        self.counter.as_ref().map_or(i64::MAX, Counter::aged_below)
    }
}

/// One partition the job dropped.
#[derive(Clone, Debug)]
pub struct Dropped {
    pub partition: Partition,
    pub sent_at_ms: i64,
    pub returned_at_ms: i64,
    pub rows: i64,
}

/// What the retention job did and what went wrong.
pub type Retention = workload::Retention<Dropped>;

/// One round of the retention job: add the next partition if one is needed,
/// drop the oldest beyond `retain` once aged, each drop recorded in `out`,
/// and in `log` as it is sent.
pub async fn retention_round(
    conn: &mut mysql_async::Conn,
    job: &mut Job,
    out: &Arc<Mutex<Retention>>,
    log: &Arc<Mutex<DropLog>>,
) -> Result<(), String> {
    let e = |e: mysql_async::Error| super::db_error(&e);
    let max_id: Option<i64> = conn
        .query_first("SELECT COALESCE(MAX(id), 0) FROM events")
        .await
        .map_err(e)?;
    if let Some(bound) = job.next_bound(crate::clock::now_ms(), max_id.unwrap_or(0)) {
        let (part, sql) = job.plan.add_sql(bound);
        conn.query_drop(sql).await.map_err(e)?;
        job.plan.added(part);
        lock(out).added += 1;
    }
    while let Some((part, sql)) = job.plan.next_drop(job.aged_below()) {
        let rows: Option<i64> = conn
            .query_first(format!(
                "SELECT COUNT(*) FROM events PARTITION ({})",
                part.name
            ))
            .await
            .map_err(e)?;
        // The clock is read under the log's lock, and the drop logged before
        // it is sent: a poller that settles a request sent in a later ms
        // finds it there (id_pollers::DropLog).
        let sent_at_ms = {
            let mut log = lock(log);
            let at = crate::clock::now_ms();
            log.dropping(part.hi, at);
            at
        };
        if let Err(err) = conn.query_drop(sql).await {
            lock(log).failed(part.hi, sent_at_ms);
            return Err(e(err));
        }
        let returned_at_ms = crate::clock::now_ms();
        job.plan.dropped();
        tracing::info!(partition = %part.name, lo = part.lo, hi = part.hi, "partition dropped");
        lock(out).dropped.push(Dropped {
            partition: part,
            sent_at_ms,
            returned_at_ms,
            rows: rows.unwrap_or(0),
        });
    }
    Ok(())
}

/// The job on its connection, logging each drop for the ID pollers.
pub struct MariaRounds {
    conn: mysql_async::Conn,
    job: Job,
    log: Arc<Mutex<DropLog>>,
}

impl MariaRounds {
    /// The job's rounds on a connection of their own.
    pub async fn connect(
        opts: mysql_async::Opts,
        job: Job,
        log: Arc<Mutex<DropLog>>,
    ) -> Result<MariaRounds, String> {
        let conn = mysql_async::Conn::new(opts)
            .await
            .map_err(|e| super::db_error(&e))?;
        Ok(MariaRounds { conn, job, log })
    }
}

impl Rounds for MariaRounds {
    type Dropped = Dropped;

    async fn round(&mut self, out: &Arc<Mutex<Retention>>) -> Result<(), String> {
        retention_round(&mut self.conn, &mut self.job, out, &self.log).await
    }

    async fn close(self) {
        let _ = self.conn.disconnect().await;
    }
}

impl Dropped {
    /// Its row of `partition_drops`.
    pub fn row(&self) -> rundb::PartitionDropRow {
        rundb::PartitionDropRow {
            partition: self.partition.name.clone(),
            lo_id: self.partition.lo,
            hi_id: self.partition.hi,
            sent_at_ms: self.sent_at_ms,
            returned_at_ms: self.returned_at_ms,
            rows: self.rows,
        }
    }
}
