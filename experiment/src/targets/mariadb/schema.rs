//! The two schemas the writers load (`--schema autoinc|snowflake`) and the
//! retention job's partition plan.
//!
//! Both are an event table `events` range-partitioned by its key
//! (`PARTITION BY RANGE (id)`, MariaDB KB "RANGE Partitioning Type"), a second
//! table each event writes a row to (`deliveries`), and counter rows that
//! events contend for (`streams`). `autoinc`: `id BIGINT AUTO_INCREMENT`,
//! whose values InnoDB hands out under the AUTO-INC lock or mutex, held to
//! the end of the statement, not of the transaction (MariaDB KB
//! "AUTO_INCREMENT Handling in InnoDB"): they commit out of order. `snowflake`:
//! IDs each writer makes from its own clock (twitter layout, worker = writer).
//!
//! The retention job keeps one bounded partition ahead of the writers and
//! a catch-all `pmax` (`VALUES LESS THAN MAXVALUE`): every `--partition-every`
//! it splits the next partition off the catch-all (`REORGANIZE PARTITION pmax
//! INTO (...)`) and drops the oldest beyond `--retain` (`DROP PARTITION`).
//! [`Partitions`] is that plan, pure: which SQL to send and which ID ranges
//! each drop removes.

use since_id::id::Layout;
use std::collections::VecDeque;

/// Which schema a run loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Schema {
    /// `id BIGINT AUTO_INCREMENT`: IDs carry no time.
    Autoinc,
    /// IDs made by the writers, twitter layout.
    Snowflake,
}

/// How many counter rows events pick from.
pub const COUNTER_ROWS: i32 = 16;

/// The table the pollers read.
pub const TABLE: &str = "events";

impl std::str::FromStr for Schema {
    type Err = String;

    fn from_str(s: &str) -> Result<Schema, String> {
        match s {
            "autoinc" => Ok(Schema::Autoinc),
            "snowflake" => Ok(Schema::Snowflake),
            _ => Err(format!(
                "unknown MariaDB schema '{s}': expected autoinc or snowflake"
            )),
        }
    }
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Schema::Autoinc => "autoinc",
            Schema::Snowflake => "snowflake",
        })
    }
}

impl Schema {
    /// The ID layout. AUTO_INCREMENT carries no time: its "layout" reads the
    /// number as ms since 1970, so its ID times mean nothing (the truth
    /// carries the transaction's start instead).
    pub fn layout(&self) -> Layout {
        match self {
            Schema::Autoinc => "custom:epoch=0,shift=0".parse().expect("custom layout"),
            Schema::Snowflake => Layout::twitter(),
        }
    }

    /// The DDL: the tables, with the event table's first partitions.
    pub fn ddl(&self, partitions: &Partitions) -> Vec<String> {
        let id = match self {
            Schema::Autoinc => "BIGINT NOT NULL AUTO_INCREMENT",
            Schema::Snowflake => "BIGINT NOT NULL",
        };
        vec![
            format!(
                "CREATE TABLE {TABLE} (
                     id {id},
                     stream INT NOT NULL,
                     payload VARCHAR(200) NOT NULL,
                     created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
                     PRIMARY KEY (id)
                 ) ENGINE=InnoDB
                 PARTITION BY RANGE (id) ({})",
                partitions.create_clause()
            ),
            "CREATE TABLE deliveries (
                 id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                 event_id BIGINT NOT NULL,
                 subscriber INT NOT NULL
             ) ENGINE=InnoDB"
                .to_string(),
            "CREATE TABLE streams (
                 id INT NOT NULL PRIMARY KEY,
                 events_count BIGINT NOT NULL DEFAULT 0
             ) ENGINE=InnoDB"
                .to_string(),
            format!(
                "INSERT INTO streams (id) VALUES {}",
                (1..=COUNTER_ROWS)
                    .map(|n| format!("({n})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ]
    }
}

/// One bounded partition: the IDs `lo <= id < hi`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Partition {
    pub name: String,
    pub lo: i64,
    pub hi: i64,
}

/// The retention job's plan: the bounded partitions, oldest first, then the
/// catch-all `pmax`. Pure: the driver sends the SQL and reports back.
#[derive(Clone, Debug)]
pub struct Partitions {
    bounded: VecDeque<Partition>,
    next_number: u32,
    retain: usize,
}

impl Partitions {
    /// The first two partitions: IDs below `first_hi`, then below `second_hi`.
    /// `retain` (at least 2) bounded partitions are kept.
    pub fn new(first_hi: i64, second_hi: i64, retain: u32) -> Partitions {
        assert!(second_hi > first_hi, "partition bounds increase");
        let bounded = VecDeque::from([
            Partition {
                name: "p0".into(),
                lo: 0,
                hi: first_hi,
            },
            Partition {
                name: "p1".into(),
                lo: first_hi,
                hi: second_hi,
            },
        ]);
        Partitions {
            bounded,
            next_number: 2,
            retain: retain.max(2) as usize,
        }
    }

    /// The `PARTITION BY RANGE (id) (...)` list of the table's creation.
    fn create_clause(&self) -> String {
        let mut parts: Vec<String> = self
            .bounded
            .iter()
            .map(|p| format!("PARTITION {} VALUES LESS THAN ({})", p.name, p.hi))
            .collect();
        parts.push("PARTITION pmax VALUES LESS THAN MAXVALUE".into());
        parts.join(", ")
    }

    /// The upper bound of the newest bounded partition.
    pub fn last_hi(&self) -> i64 {
        self.bounded.back().map_or(0, |p| p.hi)
    }

    /// The bounded partitions, oldest first.
    pub fn bounded(&self) -> impl Iterator<Item = &Partition> {
        self.bounded.iter()
    }

    /// The lowest ID still kept (the oldest partition's lower bound).
    pub fn oldest_lo(&self) -> i64 {
        self.bounded.front().map_or(0, |p| p.lo)
    }

    /// Splits a partition up to `hi` off the catch-all (raised past the last
    /// bound if needed): the SQL to send. Call [`Partitions::added`] once it
    /// succeeded.
    pub fn add_sql(&self, hi: i64) -> (Partition, String) {
        let Partition { name, hi, .. } = self.next_partition(hi);
        let lo = self.last_hi();
        let sql = format!(
            "ALTER TABLE {TABLE} REORGANIZE PARTITION pmax INTO \
             (PARTITION {name} VALUES LESS THAN ({hi}), PARTITION pmax VALUES LESS THAN MAXVALUE)"
        );
        (Partition { name, lo, hi }, sql)
    }

    /// The next partition, up to `hi` (raised past the last bound if
    /// needed), whatever the SQL that makes it (MariaDB's [`Partitions::add_sql`],
    /// PostgreSQL's `targets/postgres/schema.rs`).
    pub fn next_partition(&self, hi: i64) -> Partition {
        let lo = self.last_hi();
        Partition {
            name: format!("p{}", self.next_number),
            lo,
            hi: hi.max(lo + 1),
        }
    }

    /// The partition of [`Partitions::add_sql`] exists now.
    pub fn added(&mut self, p: Partition) {
        debug_assert_eq!(p.lo, self.last_hi());
        self.next_number += 1;
        self.bounded.push_back(p);
    }

    /// The oldest partition beyond the retained ones, and the SQL that drops it.
    pub fn next_drop(&self) -> Option<(Partition, String)> {
        (self.bounded.len() > self.retain).then(|| {
            let p = self.bounded.front().expect("more than retain").clone();
            let sql = format!("ALTER TABLE {TABLE} DROP PARTITION {}", p.name);
            (p, sql)
        })
    }

    /// The oldest partition is gone.
    pub fn dropped(&mut self) {
        self.bounded.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print() {
        for name in ["autoinc", "snowflake"] {
            assert_eq!(name.parse::<Schema>().unwrap().to_string(), name);
        }
        let err = "uuid".parse::<Schema>().unwrap_err();
        assert!(err.starts_with("unknown MariaDB schema 'uuid'"), "{err}");
    }

    #[test]
    fn the_plan_adds_ahead_and_drops_the_oldest_beyond_retain() {
        let mut p = Partitions::new(100, 200, 3);
        assert!(p.next_drop().is_none());
        let (part, sql) = p.add_sql(300);
        assert_eq!((part.lo, part.hi, part.name.as_str()), (200, 300, "p2"));
        assert!(
            sql.contains("REORGANIZE PARTITION pmax INTO (PARTITION p2 VALUES LESS THAN (300)")
        );
        p.added(part);
        assert!(p.next_drop().is_none(), "three kept");
        // A bound below the last one is raised: partitions never overlap.
        let (part, _) = p.add_sql(250);
        assert_eq!((part.lo, part.hi), (300, 301));
        p.added(part);
        let (gone, sql) = p.next_drop().unwrap();
        assert_eq!((gone.lo, gone.hi, gone.name.as_str()), (0, 100, "p0"));
        assert_eq!(sql, "ALTER TABLE events DROP PARTITION p0");
        p.dropped();
        assert!(p.next_drop().is_none());
        assert_eq!(p.oldest_lo(), 100);
        let names: Vec<&str> = p.bounded().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["p1", "p2", "p3"]);
    }
}
