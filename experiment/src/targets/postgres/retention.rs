//! The partitioned schema's retention job: the pure plan shared with the
//! MariaDB target (`since_id::partitions`), run with PostgreSQL's SQL
//! (`partition_sql`) on the skeleton's schedule (`crate::workload`).
//! BIGSERIAL is a counter key: each round adds a partition ahead of the
//! writers sized by the IDs they took, and detaches and drops the oldest
//! beyond `--retain` once aged (`Counter`).

use super::PgOpts;
use super::schema::partition_sql;
use crate::sim::sync::lock;
use crate::workload::{Retention, Rounds};
use since_id::partitions::{Counter, Partitions};
use std::sync::{Arc, Mutex};

/// The job's plan and where the writers were.
pub(super) struct RetentionJob {
    pub plan: Partitions,
    pub every_ms: u64,
    counter: Counter,
}

impl RetentionJob {
    pub fn new(opts: &PgOpts) -> RetentionJob {
        RetentionJob {
            plan: Counter::first_plan(opts.write_rate, opts.partition_every_ms, opts.retain),
            every_ms: opts.partition_every_ms,
            counter: Counter::new(opts.retain),
        }
    }

    /// The job's rounds on a connection of their own.
    pub async fn connect(self, config: tokio_postgres::Config) -> Result<PgRounds, String> {
        Ok(PgRounds {
            client: crate::servers::postgres::connect(&config).await?,
            job: self,
        })
    }
}

/// The job on its connection.
pub(super) struct PgRounds {
    client: tokio_postgres::Client,
    job: RetentionJob,
}

impl Rounds for PgRounds {
    type Dropped = rundb::PartitionDropRow;

    /// One round: add the next partition if one is needed, detach and drop
    /// the oldest beyond `--retain` once aged.
    async fn round(&mut self, out: &Arc<Mutex<Retention<Self::Dropped>>>) -> Result<(), String> {
        let (client, job) = (&self.client, &mut self.job);
        let e = |e: tokio_postgres::Error| super::db_error(&e);
        let max_id: i64 = client
            .query_one("SELECT COALESCE(MAX(id), 0) FROM events", &[])
            .await
            .map_err(e)?
            .get(0);
        if let Some(bound) = job.counter.round(&job.plan, max_id) {
            let part = job.plan.next_partition(bound);
            client
                .batch_execute(&partition_sql::create(&part))
                .await
                .map_err(e)?;
            job.plan.added(part);
            lock(out).added += 1;
        }
        while let Some(part) = job.plan.beyond_retain(job.counter.aged_below()) {
            let rows: i64 = client
                .query_one(&partition_sql::count(&part), &[])
                .await
                .map_err(e)?
                .get(0);
            let sent_at_ms = crate::clock::now_ms();
            client
                .batch_execute(&partition_sql::drop(&part))
                .await
                .map_err(e)?;
            let returned_at_ms = crate::clock::now_ms();
            job.plan.dropped();
            tracing::info!(partition = %part.name, lo = part.lo, hi = part.hi, "partition dropped");
            lock(out).dropped.push(rundb::PartitionDropRow {
                partition: part.name.clone(),
                lo_id: part.lo,
                hi_id: part.hi,
                sent_at_ms,
                returned_at_ms,
                rows,
            });
        }
        Ok(())
    }

    async fn close(self) {}
}
