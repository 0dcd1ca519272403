//! `--target mariadb` and `--target mariadb:URL` on the command line:
//! MariaDB's own flags, the shared ones each kind reads, the refusals in
//! MariaDB's words, and the options of the throwaway server or of your own
//! table.

use super::id_pollers::IdPollerSpec;
use super::schema::Schema;
use super::server::LockMode;
use super::writers::{Injected, WriterLock, parse_share};
use super::{MariaOpts, OwnMariaOpts};
use crate::options::{self, DryRun, Kind, Launch, SharedArgs, Target};
use crate::session::{Common, RunSummary};
use clap::Args;
use since_id::policy::CursorPolicy;
use since_id::time::parse_duration_ms;

/// MariaDB's own flags; `None` unless given, so that one given elsewhere is refused.
#[derive(Args, Debug, Clone, Default)]
pub struct MariaArgs {
    /// MariaDB target: the server's innodb_autoinc_lock_mode, 0, 1 or 2 (default 1, MariaDB's).
    #[arg(long, value_parser = |s: &str| s.parse::<LockMode>())]
    pub autoinc_lock_mode: Option<LockMode>,
    /// MariaDB target, snowflake schema: the spread of the writers' clocks (default 0s), an assumption.
    #[arg(long, value_parser = parse_duration_ms)]
    pub clock_skew: Option<u64>,
    /// MariaDB target: after the run, bare single-row autocommit inserts on the same server for
    /// this long, from as many connections as --writers (the reference of the writers' rate).
    #[arg(long, value_parser = options::parse_interval)]
    pub bare_inserts: Option<u64>,
    /// MariaDB target: a poller reading the key forward (repeatable): incrementing (Kafka
    /// Connect JDBC's WHERE clause, paged by --limit), kafka-connect[:poll=5s,batch=100] (Kafka
    /// Connect JDBC's own loop: one query without LIMIT each poll interval), behind:n=N, or
    /// gaps:timeout=DURATION[,max=N] (Axon's gap tracking).
    /// `,pause=DURATION@AT` makes it lag (sends nothing for DURATION from AT after the start).
    #[arg(long = "id-poller", value_name = "SPEC", value_parser = |s: &str| s.parse::<IdPollerSpec>())]
    pub id_pollers: Vec<IdPollerSpec>,
    /// MariaDB target: serialise the writers' transactions, none (default) or get-lock (a named
    /// lock from before the insert until COMMIT returned: the eventsourcing library's cure).
    #[arg(long, value_parser = |s: &str| s.parse::<WriterLock>())]
    pub writer_lock: Option<WriterLock>,
    /// MariaDB target: the share of transactions (2% or 0.02, seeded) that hold their ID for
    /// --stall after their inserts before COMMIT, an injected assumption.
    #[arg(long, value_name = "S", value_parser = parse_share)]
    pub stall_share: Option<f64>,
    /// MariaDB target: how long a stalled transaction (--stall-share) holds its ID.
    #[arg(long, value_name = "D", value_parser = parse_duration_ms)]
    pub stall: Option<u64>,
    /// MariaDB target: the share of transactions (2% or 0.02, seeded) rolled back after their
    /// inserts: their IDs are taken and never committed, an injected assumption.
    #[arg(long, value_name = "S", value_parser = parse_share)]
    pub rollback_share: Option<f64>,
}

/// `--target mariadb`: the throwaway server.
const SERVER: Kind = Kind {
    name: "mariadb",
    about: "a throwaway MariaDB server",
    reads_own_group: true,
    reads: &options::DATABASE_SERVER_FLAGS,
    refusals: &[(
        &options::concat::<13>(
            options::NOT_DATABASE_FLAGS,
            &[
                "--timeline",
                "--layout",
                "--token-file",
                "--pg-tail",
                "--table",
                "--id-column",
                "--via",
            ],
        ),
        "{flag} does not apply to --target mariadb",
    )],
    ..Kind::PLAIN
};

/// `--target mariadb:URL`: your own table, read-only.
const OWN: Kind = Kind {
    name: "mariadb:URL",
    form: Some("mariadb:mysql://USER@HOST/DB"),
    about: "your own table, with --table",
    within: &["mariadb", "api"],
    reads: &options::concat::<5>(options::OWN_TABLE_FLAGS, &["--id-poller"]),
    refusals: &[
        (
            &[
                "--writer-lock",
                "--bare-inserts",
                "--autoinc-lock-mode",
                "--partition-every",
                "--retain",
                "--clock-skew",
            ],
            "{flag} shapes the throwaway server (--target mariadb); nothing writes to your own database",
        ),
        (
            &options::concat::<8>(
                options::WORKLOAD_FLAGS,
                &["--pg-tail", "--stall-share", "--stall", "--rollback-share"],
            ),
            "{flag} shapes the throwaway server's writers; nothing writes to your own database",
        ),
        (
            &options::concat::<8>(options::NOT_DATABASE_FLAGS, &["--timeline", "--via"]),
            "{flag} does not apply to a MariaDB target",
        ),
    ],
    ..Kind::PLAIN
};

/// MariaDB on the command line.
pub struct Mariadb;

impl Target for Mariadb {
    type Flags = MariaArgs;
    const KINDS: &'static [&'static Kind] = &[&SERVER, &OWN];

    fn resolve(
        &self,
        shared: &SharedArgs,
        own: MariaArgs,
        _given: &[String],
    ) -> Result<Box<dyn Launch>, String> {
        shared.real_time_only("MariaDB runs in real time")?;
        match shared.target.strip_prefix("mariadb:") {
            Some(url) => {
                shared.no_xmin("a MariaDB table")?;
                own_table(shared, own, url)
            }
            None => {
                shared.no_xmin("'mariadb'")?;
                server(shared, own)
            }
        }
    }
}

/// The throwaway server's options.
fn server(shared: &SharedArgs, own: MariaArgs) -> Result<Box<dyn Launch>, String> {
    let schema: Schema = shared
        .workload
        .schema
        .as_deref()
        .map_or(Ok(Schema::Autoinc), str::parse)?;
    if schema == Schema::Autoinc {
        if let Some(p) = shared.pollers.iter().find(|p| p.k_ms().is_some()) {
            return Err(format!(
                "--poller {p}: AUTO_INCREMENT IDs carry no time, so a compensated poller means \
                 nothing on the autoinc schema; use --schema snowflake"
            ));
        }
        if own.clock_skew.is_some() {
            return Err(
                "--clock-skew skews the Snowflake writers' clocks; AUTO_INCREMENT takes no clock \
                 (use --schema snowflake)"
                    .into(),
            );
        }
    }
    if schema == Schema::Snowflake
        && let Some(p) = own.id_pollers.iter().find(|p| {
            !matches!(
                p.policy,
                since_id::gaps::IdPolicy::Incrementing
                    | since_id::gaps::IdPolicy::KafkaConnect { .. }
            )
        })
    {
        return Err(format!(
            "--id-poller {p} counts IDs one by one; Snowflake IDs are not consecutive \
             (use --schema autoinc, or compensated:k=... on snowflake)"
        ));
    }
    let inject = injected(&own)?;
    Ok(Box::new(MariaOpts {
        schema,
        inject,
        lock_mode: own.autoinc_lock_mode.unwrap_or(LockMode::DEFAULT),
        writers: shared.workload.writers(),
        write_rate: shared.workload.write_rate(),
        arrivals: shared.workload.arrivals(),
        clock_skew_ms: own.clock_skew.unwrap_or(0),
        partition_every_ms: shared.retention.partition_every_ms(),
        retain: shared.retention.retain(),
        id_pollers: own.id_pollers,
        bare_inserts_ms: own.bare_inserts,
        writer_lock: own.writer_lock.unwrap_or_default(),
    }))
}

/// `--stall-share S --stall D` (each needs the other) and `--rollback-share S`.
fn injected(own: &MariaArgs) -> Result<Injected, String> {
    let stall_ms = match (own.stall_share, own.stall) {
        (Some(_), None) => {
            return Err(
                "--stall-share needs --stall D: how long those transactions hold their ID".into(),
            );
        }
        (None, Some(_)) => {
            return Err("--stall says how long stalled transactions hold their ID; give --stall-share S too".into());
        }
        (_, stall) => stall.unwrap_or(0),
    };
    Ok(Injected {
        stall_share: own.stall_share.unwrap_or(0.0),
        stall_ms,
        rollback_share: own.rollback_share.unwrap_or(0.0),
    })
}

/// Your own table's options.
fn own_table(shared: &SharedArgs, own: MariaArgs, url: &str) -> Result<Box<dyn Launch>, String> {
    let table = shared
        .table
        .table
        .clone()
        .ok_or("--target mariadb:URL needs --table NAME (the table to poll)")?;
    Ok(Box::new(OwnMariaOpts {
        url: url.to_string(),
        table,
        id_column: shared.table.id_column().to_string(),
        layout: shared.own_layout("twitter")?,
        token_file: shared.token_file.clone(),
        id_pollers: own.id_pollers,
    }))
}

/// What `--dry-run` says of either kind.
fn no_dry_run() -> Result<DryRun, String> {
    Err(
        "--dry-run shows HTTP requests; a MariaDB target sends only the SELECTs documented \
         in docs/mariadb.md"
            .into(),
    )
}

impl Launch for MariaOpts {
    fn run(self: Box<Self>, common: Common) -> Result<RunSummary, String> {
        super::run(common, *self)
    }

    fn dry_run(&self) -> Result<DryRun, String> {
        no_dry_run()
    }

    /// Only the ID pollers asked for: no since_id poller beside them; else
    /// on AUTO_INCREMENT IDs, which carry no time, the naive poller alone.
    fn default_pollers(&self) -> Vec<CursorPolicy> {
        if !self.id_pollers.is_empty() {
            Vec::new()
        } else if self.schema == Schema::Autoinc {
            vec![CursorPolicy::Naive]
        } else {
            crate::session::default_pollers()
        }
    }
}

impl Launch for OwnMariaOpts {
    fn run(self: Box<Self>, common: Common) -> Result<RunSummary, String> {
        super::run_own(common, *self)
    }

    fn dry_run(&self) -> Result<DryRun, String> {
        no_dry_run()
    }

    /// Only the ID pollers asked for: no since_id poller beside them.
    fn default_pollers(&self) -> Vec<CursorPolicy> {
        if self.id_pollers.is_empty() {
            crate::session::default_pollers()
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    /// `--token-file`'s help names the password variable `own.rs` reads.
    #[test]
    fn the_token_file_help_names_the_password_variable() {
        assert!(crate::options::token_file_help().contains(super::super::own::PASSWORD_ENV));
    }
}
