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
//! The plan is pure and shared with PostgreSQL's partitioned schema
//! (`since_id::partitions`); [`MariaSql`] is its MariaDB SQL.

use since_id::id::Layout;

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

pub use since_id::partitions::{Partition, Partitions};

/// The plan's MariaDB SQL: the catch-all `pmax` beyond the bounded partitions.
pub trait MariaSql {
    /// The `PARTITION BY RANGE (id) (...)` list of the table's creation.
    fn create_clause(&self) -> String;
    /// Splits the next partition, up to `hi`, off the catch-all: the SQL to
    /// send. Call [`Partitions::added`] once it succeeded.
    fn add_sql(&self, hi: i64) -> (Partition, String);
    /// The oldest partition beyond the retained ones if aged
    /// ([`Partitions::beyond_retain`]), and the SQL that drops it.
    fn next_drop(&self, aged_below: i64) -> Option<(Partition, String)>;
}

impl MariaSql for Partitions {
    fn create_clause(&self) -> String {
        let mut parts: Vec<String> = self
            .bounded()
            .map(|p| format!("PARTITION {} VALUES LESS THAN ({})", p.name, p.hi))
            .collect();
        parts.push("PARTITION pmax VALUES LESS THAN MAXVALUE".into());
        parts.join(", ")
    }

    fn add_sql(&self, hi: i64) -> (Partition, String) {
        let part = self.next_partition(hi);
        let sql = format!(
            "ALTER TABLE {TABLE} REORGANIZE PARTITION pmax INTO \
             (PARTITION {} VALUES LESS THAN ({}), PARTITION pmax VALUES LESS THAN MAXVALUE)",
            part.name, part.hi
        );
        (part, sql)
    }

    fn next_drop(&self, aged_below: i64) -> Option<(Partition, String)> {
        self.beyond_retain(aged_below).map(|p| {
            let sql = format!("ALTER TABLE {TABLE} DROP PARTITION {}", p.name);
            (p, sql)
        })
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
        assert!(p.next_drop(i64::MAX).is_none());
        let (part, sql) = p.add_sql(300);
        assert_eq!((part.lo, part.hi, part.name.as_str()), (200, 300, "p2"));
        assert!(
            sql.contains("REORGANIZE PARTITION pmax INTO (PARTITION p2 VALUES LESS THAN (300)")
        );
        p.added(part);
        assert!(p.next_drop(i64::MAX).is_none(), "three kept");
        // A bound below the last one is raised: partitions never overlap.
        let (part, _) = p.add_sql(250);
        assert_eq!((part.lo, part.hi), (300, 301));
        p.added(part);
        let (gone, sql) = p.next_drop(i64::MAX).unwrap();
        assert_eq!((gone.lo, gone.hi, gone.name.as_str()), (0, 100, "p0"));
        assert_eq!(sql, "ALTER TABLE events DROP PARTITION p0");
        p.dropped();
        assert!(p.next_drop(i64::MAX).is_none());
        assert_eq!(p.oldest_lo(), 100);
        let names: Vec<&str> = p.bounded().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["p1", "p2", "p3"]);
    }
}
