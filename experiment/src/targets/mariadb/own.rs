//! `--target 'mariadb:mysql://USER@HOST/DB' --table NAME`: the user's own
//! MariaDB (or MySQL) table, polled read-only, as `--target postgres:URL`
//! polls a PostgreSQL one (`targets/postgres/own.rs`). Every connection is
//! set to read-only transactions (`SET SESSION TRANSACTION READ ONLY`,
//! MariaDB KB "SET TRANSACTION") and only SELECTs are sent. The password
//! comes from `MYSQL_PWD` (the variable MariaDB's own clients read) or
//! `--token-file`, never from the command line, and is never stored.
//!
//! No truth: nothing says when a row of your table became visible, so the run
//! records the requests and what they returned, and the pollers are
//! compared with each other (`analyze`).

use super::OwnMariaOpts;
use super::id_pollers::{DropLog, IdTarget};
use super::roster::Roster;
use super::source::MariaTarget;
use crate::api::Token;
use crate::record::Recorder;
use crate::session::{self, Common, RunRowParts, RunSummary, Shutdown, StoredConfig};
use crate::sim::sync::lock;
use mysql_async::prelude::Queryable;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the password comes from when `--token-file` is not given.
pub const PASSWORD_ENV: &str = "MYSQL_PWD";

/// The connection options of `url`, with the password from the environment
/// or the file, every connection read-only.
pub fn opts(url: &str, token_file: Option<&std::path::Path>) -> Result<mysql_async::Opts, String> {
    let parsed = mysql_async::Opts::from_url(url)
        .map_err(|e| format!("bad --target 'mariadb:{url}': {e}"))?;
    if parsed.pass().is_some() {
        return Err(format!(
            "bad --target: put the password in {PASSWORD_ENV} or a --token-file, not in the URL \
             (the command line is visible to every user of the machine)"
        ));
    }
    let mut builder = mysql_async::OptsBuilder::from_opts(parsed)
        .init(vec!["SET SESSION TRANSACTION READ ONLY"])
        .pool_opts(
            mysql_async::PoolOpts::default()
                .with_constraints(mysql_async::PoolConstraints::new(0, 16).expect("0 <= 16")),
        );
    if let Some(token) = Token::load(PASSWORD_ENV, token_file)? {
        builder = builder.pass(Some(token.secret().to_string()));
    }
    Ok(builder.into())
}

/// Everything stored about the run, as JSON in `runs.config`.
#[derive(serde::Serialize)]
struct OwnConfig<'a> {
    #[serde(flatten)]
    common: StoredConfig<'a>,
    table: &'a str,
    id_column: &'a str,
    /// As the server reports it (`VERSION()`).
    server_version: &'a str,
    /// `"<redacted>"` when a password was used; the password itself never.
    #[serde(skip_serializing_if = "Option::is_none")]
    password: Option<&'static str>,
}

/// Runs the experiment against your own table, read-only.
pub fn run(args: Common, opts: OwnMariaOpts) -> Result<RunSummary, String> {
    let server = self::opts(&opts.url, opts.token_file.as_deref())?;
    let runtime = session::runtime()?;
    let result = runtime.block_on(drive(&args, &opts, server));
    drop(runtime);
    result
}

/// Connects, checks the table and the column, and reads the server's version.
async fn check(
    server: &mysql_async::Opts,
    opts: &OwnMariaOpts,
    timeout_ms: u64,
) -> Result<String, String> {
    let e = |e: mysql_async::Error| super::db_error(&e);
    let conn = tokio::time::timeout(
        Duration::from_millis(timeout_ms.max(1)),
        mysql_async::Conn::new(server.clone()),
    )
    .await
    .map_err(|_| format!("cannot connect to MariaDB: no answer within {timeout_ms} ms"))?;
    let mut conn = conn.map_err(|err| format!("cannot connect to MariaDB: {}", e(err)))?;
    // The table, the column and the permission, checked before the run starts.
    let probe = format!(
        "SELECT {} FROM {} LIMIT 0",
        super::quote_ident(&opts.id_column),
        super::quote_ident(&opts.table)
    );
    conn.query_drop(probe).await.map_err(|err| {
        format!(
            "table {}, column {}: {}",
            opts.table,
            opts.id_column,
            e(err)
        )
    })?;
    let version: Option<String> = conn.query_first("SELECT VERSION()").await.map_err(e)?;
    let _ = conn.disconnect().await;
    Ok(version.unwrap_or_default())
}

async fn drive(
    args: &Common,
    opts: &OwnMariaOpts,
    server: mysql_async::Opts,
) -> Result<RunSummary, String> {
    let version = check(&server, opts, args.timeout_ms).await?;
    let layout = opts.layout.clone();
    let start_ms = crate::clock::now_ms();
    let limit = args.limit as usize;
    let mut roster = Roster::new(args, &opts.id_pollers, &layout);
    let stored = OwnConfig {
        common: StoredConfig::common(args, limit, roster.all_names.clone(), &layout),
        table: &opts.table,
        id_column: &opts.id_column,
        server_version: &version,
        password: server.pass().map(|_| "<redacted>"),
    };
    let run_info = session::run_row(args, RunRowParts::new(start_ms, &layout, limit, &stored))?;
    let recorder = Recorder::create(&args.db, &run_info, &roster.infos)?;
    let run_id = recorder.run_id;
    let pool = mysql_async::Pool::new(server.clone());
    let target = MariaTarget::on(pool.clone(), layout.clone(), &opts.table, &opts.id_column);
    let drops = Arc::new(Mutex::new(DropLog::default()));
    let id_plan = roster.id_plan(args, start_ms, None, &drops, &Arc::default());
    let shutdown = Shutdown::install("the pollers make their last cycle");
    let stop_rx = shutdown.requested.clone();
    tracing::info!(run = run_id, db = %args.db.display(), version = %version, table = %opts.table, "run started");
    let reason = roster
        .poll(
            args,
            target,
            id_plan,
            IdTarget::on(pool.clone(), &opts.table, &opts.id_column),
            recorder.sender(),
            stop_rx.clone(),
        )
        .await;
    pool.disconnect().await.ok();
    let reason = shutdown.end(reason);
    let progress = lock(&roster.progress).progress.clone();
    recorder.finish(crate::clock::now_ms(), true, reason)?;
    let mut notes = format!(
        "MariaDB {version}, your table {} (column {}), read-only; no truth: the pollers are \
         compared with each other\n",
        opts.table, opts.id_column
    );
    notes.push_str(&roster.id_notes());
    Ok(RunSummary::finished(args, run_id, reason, progress, notes))
}
