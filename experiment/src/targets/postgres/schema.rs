//! The schemas the writers load
//! (`--schema mastodon|outbox|snowflake|partitioned|partitioned-snowflake`).
//! Each has a main table whose IDs are fixed before the row commits, a
//! second row per post (a mention, an outbox delivery) and counter rows that
//! posts contend for, and each row records its writing transaction
//! (`xid xid8 DEFAULT pg_current_xact_id()`, PostgreSQL manual 9.27.1) for
//! the `xmin` policy.

use since_id::id::Layout;

/// Which schema a run loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Schema {
    /// Mastodon's statuses: `id DEFAULT timestamp_id('statuses')`, taken at transaction start.
    Mastodon,
    /// An event table keyed by BIGSERIAL: IDs carry no time.
    Outbox,
    /// An event table whose IDs each writer makes at transaction start, twitter layout.
    Snowflake,
    /// The outbox's event table `PARTITION BY RANGE (id)`, with a retention
    /// job that adds the next partition and detaches and drops the oldest
    /// (the MariaDB target's plan, `since_id::partitions`).
    Partitioned,
    /// The snowflake schema's event table `PARTITION BY RANGE (id)`: each
    /// partition holds a period of ID time (`since_id::partitions::Timed`,
    /// as the MariaDB target's `--schema snowflake`), the same job.
    #[serde(rename = "partitioned-snowflake")]
    PartitionedSnowflake,
}

/// How many counter rows posts pick from (the accounts of a busy instance's hot posters).
pub const COUNTER_ROWS: i32 = 16;

impl std::str::FromStr for Schema {
    type Err = String;

    fn from_str(s: &str) -> Result<Schema, String> {
        match s {
            "mastodon" => Ok(Schema::Mastodon),
            "outbox" => Ok(Schema::Outbox),
            "snowflake" => Ok(Schema::Snowflake),
            "partitioned" => Ok(Schema::Partitioned),
            "partitioned-snowflake" => Ok(Schema::PartitionedSnowflake),
            _ => Err(format!(
                "unknown schema '{s}': expected one of mastodon, outbox, snowflake, partitioned, \
                 partitioned-snowflake"
            )),
        }
    }
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Schema::Mastodon => "mastodon",
            Schema::Outbox => "outbox",
            Schema::Snowflake => "snowflake",
            Schema::Partitioned => "partitioned",
            Schema::PartitionedSnowflake => "partitioned-snowflake",
        })
    }
}

/// The events schemas' side table, written in each event's transaction as
/// Mastodon's `mentions` is in a status's, and the index the xmin pollers
/// read the events by.
const DELIVERIES: &str = "CREATE TABLE deliveries (
                     id bigserial PRIMARY KEY,
                     event_id bigint NOT NULL,
                     subscriber integer NOT NULL
                 );
                 CREATE INDEX events_by_xid ON events (xid, id);";

impl Schema {
    /// The table the pollers read.
    pub fn table(&self) -> &'static str {
        match self {
            Schema::Mastodon => "statuses",
            Schema::Outbox
            | Schema::Snowflake
            | Schema::Partitioned
            | Schema::PartitionedSnowflake => "events",
        }
    }

    /// Whether its event table is range-partitioned, with the retention job.
    pub fn partitioned(&self) -> bool {
        matches!(self, Schema::Partitioned | Schema::PartitionedSnowflake)
    }

    /// Whether its IDs carry no time (BIGSERIAL).
    pub fn sequence_ids(&self) -> bool {
        matches!(self, Schema::Outbox | Schema::Partitioned)
    }

    /// The ID layout of the main table. BIGSERIAL carries no time: its
    /// "layout" reads the sequence number as ms since 1970, so ID times of
    /// the outbox schema mean nothing (its truth carries the insert time).
    pub fn layout(&self) -> Layout {
        match self {
            Schema::Mastodon => "mastodon".parse().expect("built-in layout"),
            Schema::Outbox | Schema::Partitioned => {
                "custom:epoch=0,shift=0".parse().expect("custom layout")
            }
            Schema::Snowflake | Schema::PartitionedSnowflake => Layout::twitter(),
        }
    }

    /// Whether the writer makes the ID itself (Snowflake) rather than the database.
    pub fn client_ids(&self) -> bool {
        matches!(self, Schema::Snowflake | Schema::PartitionedSnowflake)
    }

    /// The DDL, with the per-installation secret of `timestamp_id` (a hex string).
    pub fn ddl(&self, secret: &str) -> String {
        let counters = format!(
            "CREATE TABLE accounts (id integer PRIMARY KEY, statuses_count bigint NOT NULL DEFAULT 0);
             INSERT INTO accounts (id) SELECT generate_series(1, {COUNTER_ROWS});"
        );
        match self {
            // timestamp_id, written from its description (see the module docs
            // of targets/postgres/mod.rs): the ms of now() above 16 low bits; the low bits
            // are a per-ms base taken from an MD5 of the table name, a secret
            // and the time, plus the table's sequence, modulo 2^16. now() is
            // the start of the transaction (PostgreSQL manual 9.9.5).
            Schema::Mastodon => format!(
                "CREATE SEQUENCE statuses_id_seq;
                 CREATE FUNCTION timestamp_id(table_name text) RETURNS bigint
                 LANGUAGE plpgsql VOLATILE AS $f$
                 DECLARE
                     millis bigint := floor(extract(epoch FROM now()) * 1000)::bigint;
                     base bigint;
                 BEGIN
                     base := ('x' || left(md5(table_name || '{secret}' || millis::text), 4))::bit(16)::bigint;
                     RETURN (millis << 16) | ((base + nextval(table_name || '_id_seq')) & 65535);
                 END $f$;
                 CREATE TABLE statuses (
                     id bigint PRIMARY KEY DEFAULT timestamp_id('statuses'),
                     account_id integer NOT NULL,
                     text text NOT NULL,
                     created_at timestamptz NOT NULL DEFAULT now(),
                     xid xid8 NOT NULL DEFAULT pg_current_xact_id()
                 );
                 CREATE TABLE mentions (
                     id bigserial PRIMARY KEY,
                     status_id bigint NOT NULL,
                     account_id integer NOT NULL
                 );
                 CREATE INDEX statuses_by_xid ON statuses (xid, id);
                 {counters}"
            ),
            // Its bounded partitions are the retention job's (`partition_sql`);
            // the DEFAULT one takes what lies beyond them, as MariaDB's
            // `pmax` does. A partitioned table's primary key must hold the
            // partition key (PostgreSQL manual 5.11.2.3): it is the key.
            Schema::Partitioned | Schema::PartitionedSnowflake => format!(
                "CREATE TABLE events (
                     id {},
                     stream integer NOT NULL,
                     payload text NOT NULL,
                     created_at timestamptz NOT NULL DEFAULT now(),
                     xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
                     PRIMARY KEY (id)
                 ) PARTITION BY RANGE (id);
                 CREATE TABLE events_pmax PARTITION OF events DEFAULT;
                 {DELIVERIES}
                 {counters}",
                self.id_type()
            ),
            Schema::Outbox | Schema::Snowflake => format!(
                "CREATE TABLE events (
                     id {} PRIMARY KEY,
                     stream integer NOT NULL,
                     payload text NOT NULL,
                     created_at timestamptz NOT NULL DEFAULT now(),
                     xid xid8 NOT NULL DEFAULT pg_current_xact_id()
                 );
                 {DELIVERIES}
                 {counters}",
                self.id_type()
            ),
        }
    }

    /// The event table's ID column: the writer's (Snowflake) or a sequence's.
    fn id_type(&self) -> &'static str {
        if self.client_ids() {
            "bigint"
        } else {
            "bigserial"
        }
    }

    /// The insert of one post; returns `id`, `xid` (text) and the
    /// transaction's start in ms. `$1` is the counter row (account or
    /// stream), `$2` the text, and for Snowflake `$3` the writer's ID.
    pub fn insert_sql(&self) -> &'static str {
        match self {
            Schema::Mastodon => {
                "INSERT INTO statuses (account_id, text) VALUES ($1, $2)
                 RETURNING id, xid::text, floor(extract(epoch FROM now()) * 1000)::bigint"
            }
            Schema::Outbox | Schema::Partitioned => {
                "INSERT INTO events (stream, payload) VALUES ($1, $2)
                 RETURNING id, xid::text, floor(extract(epoch FROM now()) * 1000)::bigint"
            }
            Schema::Snowflake | Schema::PartitionedSnowflake => {
                "INSERT INTO events (stream, payload, id) VALUES ($1, $2, $3)
                 RETURNING id, xid::text, floor(extract(epoch FROM now()) * 1000)::bigint"
            }
        }
    }

    /// The second row of a post: a mention, or an outbox delivery.
    pub fn side_sql(&self) -> &'static str {
        match self {
            Schema::Mastodon => "INSERT INTO mentions (status_id, account_id) VALUES ($1, $2)",
            Schema::Outbox
            | Schema::Snowflake
            | Schema::Partitioned
            | Schema::PartitionedSnowflake => {
                "INSERT INTO deliveries (event_id, subscriber) VALUES ($1, $2)"
            }
        }
    }
}

/// The partitioned schemas' SQL for the retention plan's partitions
/// (`since_id::partitions`, pure and shared with MariaDB): each
/// bounded partition is a table `events_<name>`.
pub mod partition_sql {
    use since_id::partitions::Partition;

    /// Creates a partition (`lo <= id < hi`).
    pub fn create(p: &Partition) -> String {
        format!(
            "CREATE TABLE events_{} PARTITION OF events FOR VALUES FROM ({}) TO ({})",
            p.name, p.lo, p.hi
        )
    }

    /// Creates it out of the `DEFAULT` partition, as MariaDB's `REORGANIZE
    /// PARTITION pmax` does. The writers may already have passed it (a late
    /// round, a burst), and a plain `CREATE` then fails, since the default
    /// must hold no row of the new partition (PostgreSQL manual, `CREATE
    /// TABLE`, "PARTITION OF"); a check before it would race the writers'
    /// next insert. So, always: the default detached, the partition created, its
    /// rows moved from the default into it, the default attached again, all
    /// in one transaction (a simple query's statements are one, PostgreSQL
    /// manual 55.2.2.1, "Multiple Statements in a Simple Query"), so a
    /// poller's query, which waits for the locks, sees the rows before or
    /// after, never neither. The moved rows keep their `xid` column but get
    /// a new `xmin`, so their commit timestamps are the move's.
    pub fn split_default(p: &Partition) -> String {
        format!(
            "ALTER TABLE events DETACH PARTITION events_pmax;
             {create};
             WITH moved AS (DELETE FROM events_pmax WHERE id >= {lo} AND id < {hi} RETURNING *)
             INSERT INTO events SELECT * FROM moved;
             ALTER TABLE events ATTACH PARTITION events_pmax DEFAULT",
            create = create(p),
            lo = p.lo,
            hi = p.hi
        )
    }

    /// Counts its rows.
    pub fn count(p: &Partition) -> String {
        format!("SELECT count(*) FROM events_{}", p.name)
    }

    /// Drops it: detached from the table, then dropped (PostgreSQL manual
    /// 5.11.2.2, "Partition Maintenance").
    pub fn drop(p: &Partition) -> String {
        format!(
            "ALTER TABLE events DETACH PARTITION events_{name}; DROP TABLE events_{name}",
            name = p.name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_sql_names_the_plans_partitions() {
        let mut plan = since_id::partitions::Partitions::new(100, 200, 2);
        let p = plan.next_partition(300);
        assert_eq!(
            partition_sql::create(&p),
            "CREATE TABLE events_p2 PARTITION OF events FOR VALUES FROM (200) TO (300)"
        );
        plan.added(p);
        let gone = plan.beyond_retain(i64::MAX).unwrap();
        assert_eq!(
            partition_sql::drop(&gone),
            "ALTER TABLE events DETACH PARTITION events_p0; DROP TABLE events_p0"
        );
    }

    #[test]
    fn names_parse_and_print() {
        for name in [
            "mastodon",
            "outbox",
            "snowflake",
            "partitioned",
            "partitioned-snowflake",
        ] {
            assert_eq!(name.parse::<Schema>().unwrap().to_string(), name);
        }
        let err = "oracle".parse::<Schema>().unwrap_err();
        assert!(err.starts_with("unknown schema 'oracle'"), "{err}");
        // runs.config stores the name as the flag takes it.
        let stored = serde_json::to_string(&Schema::PartitionedSnowflake).unwrap();
        assert_eq!(stored, "\"partitioned-snowflake\"");
    }
}
