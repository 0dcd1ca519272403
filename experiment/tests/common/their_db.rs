//! "Their" database for the tests of `experiment watch`: a throwaway cluster
//! with logical decoding on, played as the user's own PostgreSQL, and
//! sessions on it.

/// A cluster with `wal_level = logical`, and a runtime for its sessions.
pub struct TheirDb {
    pub cluster: snowleak::servers::postgres::Cluster,
    pub runtime: tokio::runtime::Runtime,
}

impl TheirDb {
    pub fn start() -> TheirDb {
        let cluster = snowleak::servers::postgres::Cluster::start_with(&[
            ("wal_level", "logical"),
            ("max_replication_slots", "8"),
            ("max_wal_senders", "8"),
        ])
        .expect("these tests need PostgreSQL (initdb, pg_ctl)");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        TheirDb { cluster, runtime }
    }

    /// A new session (each writer and relay has its own).
    pub fn session(&self) -> tokio_postgres::Client {
        self.runtime.block_on(async {
            let (client, conn) = self
                .cluster
                .config()
                .connect(tokio_postgres::NoTls)
                .await
                .expect("a session on the cluster");
            tokio::spawn(conn);
            client
        })
    }

    /// Runs `sql` on `client`; a failure fails the test with the server's message.
    pub fn exec(&self, client: &tokio_postgres::Client, sql: &str) {
        self.runtime
            .block_on(client.batch_execute(sql))
            .unwrap_or_else(|e| {
                panic!(
                    "{sql}: {}",
                    e.as_db_error()
                        .map_or(e.to_string(), |d| d.message().into())
                )
            });
    }

    /// watch's `--target` for it.
    pub fn target(&self) -> String {
        format!(
            "postgres:postgresql://postgres@/postgres?host={}&port=5432",
            self.cluster.dir().display()
        )
    }

    /// Its replication slots, by name, and whether each is in use.
    pub fn slots(&self, client: &tokio_postgres::Client) -> Vec<(String, bool)> {
        self.runtime
            .block_on(client.query(
                "SELECT slot_name::text, active FROM pg_replication_slots ORDER BY 1",
                &[],
            ))
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    /// The names of its replication slots, in order.
    pub fn slot_names(&self, client: &tokio_postgres::Client) -> Vec<String> {
        self.slots(client).into_iter().map(|(n, _)| n).collect()
    }
}
