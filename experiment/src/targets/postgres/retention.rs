//! The partitioned schemas' retention job: the pure plan shared with the
//! MariaDB target (`since_id::partitions`), run with PostgreSQL's SQL
//! (`partition_sql`) on the skeleton's schedule (`crate::workload`).
//! BIGSERIAL (`partitioned`) is a counter key: each round adds a partition
//! ahead of the writers sized by the IDs they took, and detaches and drops
//! the oldest beyond `--retain` once aged (`Counter`). Snowflake IDs
//! (`partitioned-snowflake`) carry their time: each partition holds a
//! period of ID time, the one added ends two periods ahead, and the count
//! alone ages them (`Timed`, as the MariaDB target's `--schema snowflake`).

use super::PgOpts;
use super::schema::partition_sql;
use crate::sim::sync::lock;
use crate::workload::{Retention, Rounds};
use since_id::partitions::{Counter, Partitions, Timed};
use std::sync::{Arc, Mutex};

/// How the job bounds its partitions: by the IDs the writers took, or by time.
enum Key {
    Counter(Counter),
    Timed(Timed),
}

/// The job's plan and, for a counter key, where the writers were.
pub(super) struct RetentionJob {
    pub plan: Partitions,
    pub every_ms: u64,
    key: Key,
}

impl RetentionJob {
    /// The first two partitions: each holds one `--partition-every` of rows
    /// (by the rate asked for BIGSERIAL, from the first round on by the rate
    /// reached; by ID time from `start_ms` for Snowflake IDs).
    pub fn new(opts: &PgOpts, start_ms: i64) -> RetentionJob {
        let every_ms = opts.partition_every_ms;
        if opts.schema.client_ids() {
            let timed = Timed::new(opts.schema.layout(), every_ms);
            RetentionJob {
                plan: timed.first_plan(start_ms, opts.retain),
                every_ms,
                key: Key::Timed(timed),
            }
        } else {
            RetentionJob {
                plan: Counter::first_plan(opts.write_rate, every_ms, opts.retain),
                every_ms,
                key: Key::Counter(Counter::new(opts.retain)),
            }
        }
    }

    /// The bound of the partition to add at a round at `now_ms` where the
    /// writers' highest ID is `max_id`, if one is needed.
    fn next_bound(&mut self, now_ms: i64, max_id: i64) -> Option<i64> {
        match &mut self.key {
            Key::Counter(counter) => counter.round(&self.plan, max_id),
            Key::Timed(timed) => timed.round(&self.plan, now_ms),
        }
    }

    /// Below it, a partition beyond `--retain` is old enough to drop: a
    /// time-bounded one whatever its bound.
    fn aged_below(&self) -> i64 {
        match &self.key {
            Key::Counter(counter) => counter.aged_below(),
            Key::Timed(_) => i64::MAX,
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
        let max_id: i64 = match job.key {
            Key::Counter(_) => client
                .query_one("SELECT COALESCE(MAX(id), 0) FROM events", &[])
                .await
                .map_err(e)?
                .get(0),
            Key::Timed(_) => 0,
        };
        if let Some(bound) = job.next_bound(crate::clock::now_ms(), max_id) {
            let part = job.plan.next_partition(bound);
            client
                .batch_execute(&partition_sql::split_default(&part))
                .await
                .map_err(e)?;
            job.plan.added(part);
            lock(out).added += 1;
        }
        while let Some(part) = job.plan.beyond_retain(job.aged_below()) {
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

#[cfg(test)]
mod database_tests {
    use super::*;
    use crate::targets::postgres::schema::Schema;
    use crate::targets::postgres::{Via, testing};

    /// Writers that passed the partition ahead before the job made it (their
    /// rows in the `DEFAULT` partition): the next round makes it all the same,
    /// moving those rows into it, and loses none.
    #[test]
    fn a_partition_the_writers_passed_is_made_out_of_the_default_one() {
        let (cluster, rt) = testing::start();
        rt.block_on(async {
            let opts = PgOpts {
                schema: Schema::Partitioned,
                writers: 1,
                write_rate: 50.0,
                tail: None,
                arrivals: Default::default(),
                via: Via::Sql,
                partition_every_ms: 500,
                retain: 3,
            };
            let job = RetentionJob::new(&opts, 0);
            let client = testing::connect(&cluster, None).await;
            client
                .batch_execute(&opts.schema.ddl("00ff"))
                .await
                .unwrap();
            for p in job.plan.bounded() {
                client
                    .batch_execute(&partition_sql::create(p))
                    .await
                    .unwrap();
            }
            let last_hi = job.plan.last_hi();
            let insert = "INSERT INTO events (stream, payload) \
                          SELECT 1, 'x' FROM generate_series(1, 80)";
            client.batch_execute(insert).await.unwrap();
            let count = |sql: &'static str| {
                let client = &client;
                async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
            };
            let beyond = count("SELECT count(*) FROM events_pmax").await;
            assert_eq!(
                beyond,
                80 - (last_hi - 1),
                "rows past {last_hi} in the default"
            );
            let mut rounds = job.connect(cluster.config()).await.unwrap();
            let out = Arc::new(Mutex::new(Retention::default()));
            rounds.round(&out).await.unwrap();
            assert_eq!(lock(&out).added, 1);
            assert_eq!(count("SELECT count(*) FROM events_pmax").await, 0);
            assert_eq!(count("SELECT count(*) FROM events_p2").await, beyond);
            assert_eq!(count("SELECT count(*) FROM events").await, 80);
            // The default is attached again, and the next rows go to the new partition.
            client.batch_execute(insert).await.unwrap();
            assert_eq!(count("SELECT count(*) FROM events_pmax").await, 0);
            assert_eq!(count("SELECT count(*) FROM events").await, 160);
        });
    }
}
