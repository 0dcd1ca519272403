//! `--target postgres` and `--target postgres:URL` on the command line:
//! PostgreSQL's own flags, the shared ones each kind reads, the refusals in
//! PostgreSQL's words, and the options of the throwaway cluster or of your
//! own table.

use super::schema::Schema;
use super::writers::Tail;
use super::{OwnDbOpts, PgOpts, Via};
use crate::options::{self, DryRun, Kind, Launch, SharedArgs, Target};
use crate::session::{Common, RunSummary};
use clap::Args;
use since_id::policy::CursorPolicy;

/// PostgreSQL's own flags; `None` unless given, so that one given where it
/// does nothing is refused rather than ignored.
#[derive(Args, Debug, Clone, Default)]
pub struct PostgresArgs {
    /// PostgreSQL target: an injected tail, P%:MAX (that share of transactions
    /// sleeps up to MAX inside the transaction, uniformly). Off by default.
    #[arg(long, value_parser = |s: &str| s.parse::<Tail>())]
    pub pg_tail: Option<Tail>,
    /// PostgreSQL target: how the pollers read, `sql` (the table, the default) or `http`.
    #[arg(long, value_parser = |s: &str| s.parse::<Via>())]
    pub via: Option<Via>,
}

/// The simulator's and the real APIs' flags, which no PostgreSQL target reads.
const NOT_POSTGRES: (&[&str], &str) = (
    &options::concat::<7>(options::NOT_DATABASE_FLAGS, &["--timeline"]),
    "{flag} does not apply to a PostgreSQL target",
);

/// `--target postgres`: the throwaway cluster.
const CLUSTER: Kind = Kind {
    name: "postgres",
    about: "a throwaway PostgreSQL cluster",
    reads_own_group: true,
    // The partitioned schemas' retention job among them (checked against the schema).
    reads: &options::DATABASE_SERVER_FLAGS,
    refusals: &[
        NOT_POSTGRES,
        (
            &["--layout", "--token-file"],
            "--layout and --token-file are for your own database (--target postgres:URL)",
        ),
        (
            &["--table", "--id-column"],
            "{flag} is for your own database (--target postgres:URL)",
        ),
    ],
    ..Kind::PLAIN
};

/// `--target postgres:URL`: your own table, read-only.
const OWN: Kind = Kind {
    name: "postgres:URL",
    form: Some("postgres:postgresql://USER@HOST/DB"),
    about: "your own table, with --table",
    within: &["postgres", "api"],
    reads: &options::concat::<5>(options::OWN_TABLE_FLAGS, &["--via"]),
    refusals: &[
        NOT_POSTGRES,
        (
            &options::concat::<5>(options::WORKLOAD_FLAGS, &["--pg-tail"]),
            "{flag} shapes the throwaway cluster's writers; nothing writes to your own database",
        ),
    ],
    ..Kind::PLAIN
};

/// PostgreSQL on the command line.
pub struct Postgres;

impl Target for Postgres {
    type Flags = PostgresArgs;
    const KINDS: &'static [&'static Kind] = &[&CLUSTER, &OWN];

    fn resolve(
        &self,
        shared: &SharedArgs,
        own: PostgresArgs,
        given: &[String],
    ) -> Result<Box<dyn Launch>, String> {
        shared.real_time_only("PostgreSQL runs in real time")?;
        match shared.target.strip_prefix("postgres:") {
            Some(url) => own_table(shared, &own, url),
            None => cluster(shared, &own, given),
        }
    }
}

/// The throwaway cluster's options.
fn cluster(
    shared: &SharedArgs,
    own: &PostgresArgs,
    given: &[String],
) -> Result<Box<dyn Launch>, String> {
    let schema: Schema = shared
        .workload
        .schema
        .as_deref()
        .map_or(Ok(Schema::Mastodon), str::parse)?;
    if schema.sequence_ids() && shared.pollers.iter().any(|p| p.k_ms().is_some()) {
        return Err(format!(
            "the {schema} schema's BIGSERIAL IDs carry no time, so compensated pollers mean nothing \
             there; use naive and xmin"
        ));
    }
    // Read by the partitioned schemas only: a refusal that depends on a value, not on the kind.
    let retention = ["--partition-every", "--retain"];
    if !schema.partitioned()
        && let Some(flag) = given.iter().find(|g| retention.contains(&g.as_str()))
    {
        return Err(format!(
            "{flag} applies to --target mariadb and --target postgres --schema partitioned \
             or partitioned-snowflake only, not --schema {schema}"
        ));
    }
    let via = own.via.unwrap_or_default();
    if via == Via::Http && schema != Schema::Mastodon {
        return Err("--via http serves the Mastodon API: it needs --schema mastodon".into());
    }
    Ok(Box::new(PgOpts {
        schema,
        writers: shared.workload.writers(),
        write_rate: shared.workload.write_rate(),
        tail: own.pg_tail,
        arrivals: shared.workload.arrivals(),
        via,
        partition_every_ms: shared.retention.partition_every_ms(),
        retain: shared.retention.retain(),
    }))
}

/// Your own table's options.
fn own_table(
    shared: &SharedArgs,
    own: &PostgresArgs,
    url: &str,
) -> Result<Box<dyn Launch>, String> {
    if own.via == Some(Via::Http) {
        return Err(
            "--via http serves the throwaway cluster's statuses; your own table is read over SQL"
                .into(),
        );
    }
    let table = shared
        .table
        .table
        .clone()
        .ok_or("--target postgres:URL needs --table NAME (the table to poll)")?;
    Ok(Box::new(OwnDbOpts {
        url: url.to_string(),
        table,
        id_column: shared.table.id_column().to_string(),
        layout: shared.own_layout("mastodon or twitter")?,
        token_file: shared.token_file.clone(),
    }))
}

/// What `--dry-run` says of either kind.
fn no_dry_run() -> Result<DryRun, String> {
    Err(
        "--dry-run shows HTTP requests; a PostgreSQL target sends only the SELECTs \
         documented in docs/postgres.md"
            .into(),
    )
}

impl Launch for PgOpts {
    fn run(self: Box<Self>, common: Common) -> Result<RunSummary, String> {
        super::run(common, *self)
    }

    fn dry_run(&self) -> Result<DryRun, String> {
        no_dry_run()
    }

    /// On BIGSERIAL IDs, which carry no time, naive and xmin: a compensated
    /// poller means nothing there (and is refused when asked for).
    fn default_pollers(&self) -> Vec<CursorPolicy> {
        if self.schema.sequence_ids() {
            vec![CursorPolicy::Naive, CursorPolicy::Xmin]
        } else {
            crate::session::default_pollers()
        }
    }
}

impl Launch for OwnDbOpts {
    fn run(self: Box<Self>, common: Common) -> Result<RunSummary, String> {
        super::run_own(common, *self)
    }

    fn dry_run(&self) -> Result<DryRun, String> {
        no_dry_run()
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
