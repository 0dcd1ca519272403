//! `--target postgres:postgresql://USER@HOST/DB --table NAME`: the user's own
//! database, polled read-only. The session is set to read-only transactions
//! (`SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY`, PostgreSQL manual,
//! SET TRANSACTION) and only SELECTs are sent: nothing there is created,
//! altered or written. The password comes from `PGPASSWORD` or
//! `--token-file`, never from the command line, and is never stored.

use super::OwnDbOpts;
use super::driver::{Setup, drive};
use crate::api::Token;
use crate::servers::postgres::connect;
use crate::session::{self, Common, RunSummary};
use since_id::id::Layout;
use std::sync::Arc;
use std::time::Duration;

/// Where the password comes from when `--token-file` is not given.
pub const PASSWORD_ENV: &str = "PGPASSWORD";

/// The sequence layout: IDs read as plain integers (no time in them).
const SEQUENCE_LAYOUT: &str = "custom:epoch=0,shift=0";

/// Reads the connection URL and the options that go with it.
pub fn config(
    url: &str,
    token_file: Option<&std::path::Path>,
    timeout_ms: u64,
) -> Result<tokio_postgres::Config, String> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| format!("bad --target 'postgres:{url}': {e}"))?;
    if config.get_password().is_some() {
        return Err(format!(
            "bad --target: put the password in {PASSWORD_ENV} or a --token-file, not in the URL \
             (the command line is visible to every user of the machine)"
        ));
    }
    if let Some(token) = Token::load(PASSWORD_ENV, token_file)? {
        config.password(token.secret());
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_millis(timeout_ms));
    }
    config.application_name("snowleak");
    Ok(config)
}

/// The plain-integer layout of a sequence, for a table without `--layout`.
pub fn sequence_layout() -> Layout {
    SEQUENCE_LAYOUT.parse().expect("custom layout")
}

/// Runs the experiment against your own table, read-only.
pub fn run(args: Common, opts: OwnDbOpts) -> Result<RunSummary, String> {
    let OwnDbOpts {
        url,
        table,
        id_column,
        layout,
        token_file,
    } = opts;
    let config = config(&url, token_file.as_deref(), args.timeout_ms)?;
    let runtime = session::runtime()?;
    let (admin, commit_ts_truth) = runtime.block_on(async {
        let client = connect(&config).await?;
        client
            .batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            .await
            .map_err(|e| super::db_error(&e))?;
        // The table, the column and the permission, checked before the run starts.
        let probe = format!(
            "SELECT {}::bigint FROM {} LIMIT 0",
            super::quote_ident(&id_column),
            super::quote_ident(&table)
        );
        client
            .query(&probe, &[])
            .await
            .map_err(|e| format!("table {table}, column {id_column}: {}", super::db_error(&e)))?;
        if args.pollers.contains(&since_id::policy::CursorPolicy::Xmin) {
            let xid = format!(
                "SELECT xid < pg_snapshot_xmin(pg_current_snapshot()) FROM {} LIMIT 0",
                super::quote_ident(&table)
            );
            client.query(&xid, &[]).await.map_err(|e| {
                format!("the xmin poller needs an xid8 column 'xid' in {table}: {}", super::db_error(&e))
            })?;
        }
        let track: String = client
            .query_one("SHOW track_commit_timestamp", &[])
            .await
            .map_err(|e| super::db_error(&e))?
            .get(0);
        if track != "on" {
            tracing::warn!(
                "track_commit_timestamp is off on this server: no truth; the pollers are compared with each other"
            );
        }
        Ok::<_, String>((Arc::new(client), track == "on"))
    })?;
    let setup = Setup {
        config,
        admin,
        workload: None,
        layout,
        table,
        id_column,
        commit_ts_truth,
        via: super::Via::Sql,
        retention: None,
    };
    runtime.block_on(drive(&args, setup))
}
