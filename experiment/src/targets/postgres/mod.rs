//! `--target postgres` and `--target postgres:URL`: PostgreSQL as a real
//! leak source. A throwaway cluster (`crate::servers::postgres`), schemas
//! whose IDs are taken at transaction start but become visible at commit,
//! writers that load it, and pollers that read it over SQL or over the
//! Mastodon API served from it; or your own table, read-only.

pub mod decode;
pub mod driver;
pub mod http;
mod judge;
pub mod log;
pub mod options;
pub mod own;
mod retention;
pub mod schema;
pub mod serve;
pub mod slot;
pub mod source;
mod truth;
mod watch;
pub mod writers;
pub mod xmin;

pub use driver::run;
pub use own::run as run_own;

use schema::Schema;
use std::path::PathBuf;
use writers::Tail;

/// How the pollers read the throwaway cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Via {
    /// The table, over SQL.
    #[default]
    Sql,
    /// The Mastodon API served from the table.
    Http,
}

impl Via {
    /// `sql` or `http`, as `--via` takes it and `runs.config` stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Sql => "sql",
            Via::Http => "http",
        }
    }
}

impl std::str::FromStr for Via {
    type Err = String;

    fn from_str(s: &str) -> Result<Via, String> {
        match s {
            "sql" => Ok(Via::Sql),
            "http" => Ok(Via::Http),
            _ => Err(format!("unknown --via '{s}': expected sql or http")),
        }
    }
}

/// The throwaway cluster's options, resolved (`options.rs` refuses the rest).
#[derive(Clone, Debug)]
pub struct PgOpts {
    pub schema: Schema,
    pub writers: u32,
    pub write_rate: f64,
    pub tail: Option<Tail>,
    /// How the writers' transactions are spaced (`--arrivals`).
    pub arrivals: crate::workload::Arrivals,
    pub via: Via,
    /// The partitioned schemas' retention job: how often it adds a
    /// partition and drops the oldest (`--partition-every`), and how many
    /// bounded partitions it keeps (`--retain`).
    pub partition_every_ms: u64,
    pub retain: u32,
}

/// Your own database's options, resolved.
#[derive(Clone, Debug)]
pub struct OwnDbOpts {
    /// The connection URL, without a password.
    pub url: String,
    pub table: String,
    pub id_column: String,
    /// `--layout`, or the plain-integer layout of a sequence.
    pub layout: since_id::id::Layout,
    /// The password's file (`--token-file`); else `PGPASSWORD`.
    pub token_file: Option<PathBuf>,
}

/// An SQL identifier, quoted (PostgreSQL manual 4.1.1: double quotes, doubled inside).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

pub use crate::servers::postgres::db_error;

/// What the tests on a real cluster share: the cluster and a runtime to talk to it.
#[cfg(test)]
pub(crate) mod testing {
    /// Starts a throwaway cluster (failing the test, never skipping it, without PostgreSQL).
    pub fn start() -> (crate::servers::postgres::Cluster, tokio::runtime::Runtime) {
        let cluster = crate::servers::postgres::Cluster::start()
            .expect("PostgreSQL must start for this test (initdb and pg_ctl)");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        (cluster, runtime)
    }

    /// A connection to the cluster's `postgres` database, or to `dbname`.
    pub async fn connect(
        cluster: &crate::servers::postgres::Cluster,
        dbname: Option<&str>,
    ) -> tokio_postgres::Client {
        let mut config = cluster.config();
        if let Some(name) = dbname {
            config.dbname(name);
        }
        crate::servers::postgres::connect(&config).await.unwrap()
    }
}
