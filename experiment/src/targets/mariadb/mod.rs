//! `--target mariadb`: MariaDB event tables as a real leak source. A
//! throwaway server (`server.rs`), an event table keyed by
//! AUTO_INCREMENT or by Snowflake IDs its writers make, range-partitioned by
//! the key with a retention job that adds and drops partitions
//! (`schema.rs`), writers shaped like an application's (`writers.rs`), and
//! pollers over SQL (`source.rs`), run by the one real-time poll loop.
//! The mechanism and the figures: docs/mariadb.md.

pub mod binlog;
pub mod ddl;
pub mod driver;
pub mod dump;
pub mod id_pollers;
mod judge;
pub mod log;
pub mod options;
pub mod own;
mod retention;
pub mod roster;
pub mod schema;
pub mod server;
pub mod source;
mod watch;
pub mod writers;

pub use driver::run;
pub use own::run as run_own;

use schema::Schema;
use server::LockMode;

/// The throwaway server's options, resolved (`options.rs` refuses the rest).
#[derive(Clone, Debug, serde::Serialize)]
pub struct MariaOpts {
    pub schema: Schema,
    pub lock_mode: LockMode,
    pub writers: u32,
    pub write_rate: f64,
    /// How the writers' transactions are spaced (`--arrivals`).
    pub arrivals: crate::workload::Arrivals,
    /// The spread of the Snowflake writers' clocks, ms (an assumption; 0: one clock).
    pub clock_skew_ms: u64,
    /// How often the retention job adds a partition and drops the oldest.
    pub partition_every_ms: u64,
    /// How many bounded partitions the job keeps (the newest; at least 2).
    pub retain: u32,
    /// After the run, bare single-row autocommit inserts for this long on the
    /// same server (`--bare-inserts`): the reference of the writers' rate.
    pub bare_inserts_ms: Option<u64>,
    /// How the writers serialise their transactions (`--writer-lock`).
    pub writer_lock: writers::WriterLock,
    /// Stalled and rolled-back transactions (`--stall-share`, `--stall`, `--rollback-share`).
    pub inject: writers::Injected,
    /// The ID pollers (`--id-poller`), beside the since_id ones (`--poller`).
    #[serde(skip)]
    pub id_pollers: Vec<id_pollers::IdPollerSpec>,
}

/// Your own table's options (`--target mariadb:URL --table T`), resolved.
#[derive(Clone, Debug)]
pub struct OwnMariaOpts {
    /// The connection URL (`mysql://USER@HOST/DB`), without a password.
    pub url: String,
    pub table: String,
    pub id_column: String,
    /// `--layout`, or the plain-integer layout of a sequence.
    pub layout: since_id::id::Layout,
    /// The password's file (`--token-file`); else `MYSQL_PWD`.
    pub token_file: Option<std::path::PathBuf>,
    /// The ID pollers (`--id-poller`), beside the since_id ones (`--poller`).
    pub id_pollers: Vec<id_pollers::IdPollerSpec>,
}

/// An SQL identifier, quoted (MariaDB KB "Identifier Names": backticks,
/// doubled inside).
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A MariaDB error in one line (one home, with the server: `server.rs`).
pub use server::db_error;
