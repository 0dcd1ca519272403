//! PostgreSQL as a real leak source: a throwaway cluster, schemas whose IDs
//! are taken at transaction start but become visible at commit, writers that
//! load it, and pollers that read it over SQL.

pub mod cluster;
pub mod driver;
pub mod http;
pub mod own;
pub mod schema;
pub mod source;
pub mod writers;
pub mod xmin;

/// An SQL identifier, quoted (PostgreSQL manual 4.1.1: double quotes, doubled inside).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A database error in one line: the server's message when there is one.
pub fn db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}

/// What the tests on a real cluster share: the cluster and a runtime to talk to it.
#[cfg(test)]
pub(crate) mod testing {
    /// Starts a throwaway cluster (failing the test, never skipping it, without PostgreSQL).
    pub fn start() -> (super::cluster::Cluster, tokio::runtime::Runtime) {
        let cluster = super::cluster::Cluster::start()
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
        cluster: &super::cluster::Cluster,
        dbname: Option<&str>,
    ) -> tokio_postgres::Client {
        let mut config = cluster.config();
        if let Some(name) = dbname {
            config.dbname(name);
        }
        super::driver::connect(&config).await.unwrap()
    }
}
