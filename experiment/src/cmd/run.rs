//! `experiment [OPTIONS]`: one experiment, from the command line to a
//! recorded run. The options are parsed into [`RunArgs`] (clap), then
//! [`resolve`]d here, in one place, into the options every run has
//! (`Common`) and one target's own ([`Target`]): every "flag X does not
//! apply to target Y" refusal is in [`resolve`], and a target receives only
//! its own options. Adding a target is one module under `crate::targets` and
//! one variant of [`Target`] (docs/layout.md).

use crate::api::spec::{self, TargetOptions, TargetSpec};
use crate::drive::Records;
use crate::record::PollerRow;
use crate::session::{ClockMode, Common, RunSummary, default_pollers, poller_names};
use crate::sim::faults::FaultSpec;
use crate::targets::api::{self as api_target, ApiOpts};
use crate::targets::mariadb::{self, MariaOpts, OwnMariaOpts};
use crate::targets::misskey_ftt;
use crate::targets::postgres::schema::Schema;
use crate::targets::postgres::writers::Tail;
use crate::targets::postgres::{self, OwnDbOpts, PgOpts, Via};
use crate::targets::simulator::{self, SimOpts};
use clap::Args;
use since_id::id::Layout;
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;
use since_id::time::parse_duration_ms;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
/// The options of a run, as the command line gives them (`experiment [OPTIONS]`).
/// [`resolve`] turns them into the `Common` options and one target's.
pub struct RunArgs {
    /// How long to poll (1h, 90s, 1500ms; at most 366 days).
    #[arg(long, default_value = "1h", value_parser = parse_run_duration)]
    pub duration: u64,
    // The APIs' options are described where they are parsed (`api/spec.rs`).
    #[arg(long, default_value = "simulator", help = spec::target_help())]
    pub target: String,
    #[arg(long, help = spec::TIMELINE_HELP)]
    pub timeline: Option<String>,
    #[arg(long, help = spec::LIST_ID_HELP)]
    pub list_id: Option<String>,
    #[arg(long, help = spec::BASE_URL_HELP)]
    pub base_url: Option<String>,
    #[arg(long, help = spec::LAYOUT_HELP)]
    pub layout: Option<String>,
    #[arg(long, help = token_file_help())]
    pub token_file: Option<PathBuf>,
    /// Print the first request each poller would make (token redacted) and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Simulator profile: twitter, mastodon, misskey or discord.
    #[arg(long, default_value = "twitter")]
    pub profile: String,
    /// A TOML file of simulator parameters, applied over the profile.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// One simulator parameter, KEY=VALUE (repeatable; after --config).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// A poller's cursor policy (repeatable; default naive and compensated:k=1s): naive,
    /// compensated:k=1s, audit:k=1s,depth=2m,every=1m, adaptive, newest, newest:pages=3, or xmin
    /// (PostgreSQL only).
    #[arg(long = "poller", value_name = "SPEC", value_parser = parse_policy)]
    pub pollers: Vec<CursorPolicy>,
    /// Time between the pollers' ticks, aligned to multiples of it (1s: the start of each second).
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    pub interval: u64,
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000), help = spec::LIMIT_HELP)]
    pub limit: u32,
    /// How many pages a poller may page back within one tick before it gives up (overflow).
    #[arg(long, default_value_t = 10)]
    pub max_back_pages: u32,
    /// The run database; each invocation adds a run to it.
    #[arg(long, default_value = "data/run.db")]
    pub db: PathBuf,
    /// Seed of everything random.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// `real`: in real time (the simulator over HTTP on 127.0.0.1); `virtual`: the simulator
    /// in-process, in simulated time.
    #[arg(long, value_enum, default_value_t = ClockMode::Real)]
    pub clock: ClockMode,
    /// Start of a virtual run (RFC 3339 or ms); default 2026-01-01T00:00:00Z, so runs reproduce.
    #[arg(long, value_parser = since_id::time::parse_time)]
    pub start: Option<i64>,
    /// History the simulator holds when the run starts (default 5m; 0s: an empty timeline).
    #[arg(long, value_parser = parse_duration_ms)]
    pub backlog: Option<u64>,
    /// Faults the simulator injects, e.g. 5xx=2%,429=1%,timeout=1%,reset=0.5%,truncate=0.5%,reorder=1%,duplicate=1%,slow=2%:3s
    #[arg(long, value_parser = parse_faults)]
    pub faults: Option<FaultSpec>,
    /// HTTP request timeout (at most 1h).
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    pub timeout: u64,
    /// No progress bar even on a terminal (set by callers that run many at
    /// once, such as `experiment sweep`; not a flag).
    #[arg(skip)]
    pub quiet: bool,
    #[command(flatten)]
    pub pg: PgArgs,
    #[command(flatten)]
    pub ftt: FttArgs,
    #[command(flatten)]
    pub maria: MariaArgs,
}

fn parse_policy(text: &str) -> Result<CursorPolicy, String> {
    Ok(text.parse()?)
}

fn parse_faults(text: &str) -> Result<FaultSpec, String> {
    text.parse()
}

/// The longest run: a year and a day of leap. Beyond, `--duration` is refused.
pub const MAX_DURATION_MS: u64 = 366 * 24 * 3600 * 1000;

/// The longest HTTP timeout: the final drain lasts at most a few of them.
pub const MAX_TIMEOUT_MS: u64 = 3600 * 1000;

/// A virtual run steps through every tick: at most this many, so it ends in minutes.
pub const MAX_VIRTUAL_TICKS: u64 = 10_000_000;

/// The simulator creates, between two looks at it (an interval, or the final
/// drain's k), at most this many statuses on average: its memory is bounded
/// per step, and a step ends.
pub const MAX_STATUSES_PER_STEP: f64 = 1_000_000.0;

fn parse_bounded(text: &str, what: &str, max_ms: u64, max_text: &str) -> Result<u64, String> {
    let ms = parse_duration_ms(text)?;
    if ms > max_ms {
        return Err(format!("bad {what} '{text}': at most {max_text}"));
    }
    Ok(ms)
}

fn parse_run_duration(text: &str) -> Result<u64, String> {
    parse_bounded(
        text,
        "duration",
        MAX_DURATION_MS,
        "366days (a run must end)",
    )
}

fn parse_timeout(text: &str) -> Result<u64, String> {
    parse_bounded(text, "timeout", MAX_TIMEOUT_MS, "1h")
}

/// The most `--poller` values a run takes (`analyze` reads at most as many).
pub const MAX_POLLERS: usize = 64;

fn parse_interval(text: &str) -> Result<u64, String> {
    match parse_duration_ms(text)? {
        0 => Err(format!("bad interval '{text}': must be at least 1ms")),
        ms => Ok(ms),
    }
}

/// The options of PostgreSQL targets. Each is `None` unless given, so that
/// one given where it does nothing is refused (`PgArgs::refuse`) rather
/// than silently ignored; the defaults are the methods' own.
#[derive(Args, Debug, Clone, Default)]
pub struct PgArgs {
    /// The schema the writers load: PostgreSQL mastodon, outbox, snowflake, partitioned (default mastodon);
    /// MariaDB autoinc, snowflake (default autoinc).
    #[arg(long)]
    pub schema: Option<String>,
    /// PostgreSQL target: concurrent writer connections, 1 to 50 (default 8).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub writers: Option<u32>,
    /// PostgreSQL target: posts per second, all writers together (default 300).
    #[arg(long, value_parser = parse_rate)]
    pub write_rate: Option<f64>,
    /// PostgreSQL target: an injected tail, P%:MAX (that share of transactions
    /// sleeps up to MAX inside the transaction, uniformly). Off by default.
    #[arg(long, value_parser = parse_tail)]
    pub pg_tail: Option<Tail>,
    /// Your own database (--target postgres:URL): the table to poll.
    #[arg(long)]
    pub table: Option<String>,
    /// Your own database: the table's ID column (default id).
    #[arg(long)]
    pub id_column: Option<String>,
    /// PostgreSQL target: how the pollers read, `sql` (the table, the default) or `http`.
    #[arg(long, value_parser = |s: &str| s.parse::<Via>())]
    pub via: Option<Via>,
}

impl PgArgs {
    fn schema(&self) -> Result<Schema, String> {
        self.schema
            .as_deref()
            .map_or(Ok(Schema::Mastodon), str::parse)
    }

    fn writers(&self) -> u32 {
        self.writers.unwrap_or(8)
    }

    fn write_rate(&self) -> f64 {
        self.write_rate.unwrap_or(300.0)
    }

    fn id_column(&self) -> &str {
        self.id_column.as_deref().unwrap_or("id")
    }

    fn via(&self) -> Via {
        self.via.unwrap_or_default()
    }

    /// An error naming the first of `flags` that was given: `why` says
    /// where it applies.
    fn refuse(&self, flags: &[&str], why: &str) -> Result<(), String> {
        let given = [
            ("--schema", self.schema.is_some()),
            ("--writers", self.writers.is_some()),
            ("--write-rate", self.write_rate.is_some()),
            ("--pg-tail", self.pg_tail.is_some()),
            ("--table", self.table.is_some()),
            ("--id-column", self.id_column.is_some()),
            ("--via", self.via.is_some()),
        ];
        match given.iter().find(|(f, g)| *g && flags.contains(f)) {
            Some((flag, _)) => Err(format!("{flag} {why}")),
            None => Ok(()),
        }
    }

    /// Every PostgreSQL flag: none applies to the simulator or an API.
    const ALL: [&'static str; 7] = [
        "--schema",
        "--writers",
        "--write-rate",
        "--pg-tail",
        "--table",
        "--id-column",
        "--via",
    ];
}

/// The options of the MariaDB target (`--target mariadb`); `None` unless
/// given, so that one given elsewhere is refused.
#[derive(Args, Debug, Clone, Default)]
pub struct MariaArgs {
    /// MariaDB target: the server's innodb_autoinc_lock_mode, 0, 1 or 2 (default 1, MariaDB's).
    #[arg(long, value_parser = |s: &str| s.parse::<crate::servers::mariadb::LockMode>())]
    pub autoinc_lock_mode: Option<crate::servers::mariadb::LockMode>,
    /// MariaDB target and PostgreSQL's partitioned schema: how often the retention job adds a
    /// partition and drops the oldest (default 10m).
    #[arg(long, value_parser = parse_interval)]
    pub partition_every: Option<u64>,
    /// MariaDB target and PostgreSQL's partitioned schema: how many partitions the retention job
    /// keeps, at least 2 (default 6).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub retain: Option<u32>,
    /// MariaDB target, snowflake schema: the spread of the writers' clocks (default 0s), an assumption.
    #[arg(long, value_parser = parse_duration_ms)]
    pub clock_skew: Option<u64>,
    /// MariaDB target: after the run, bare single-row autocommit inserts on the same server for
    /// this long, from as many connections as --writers (the reference of the writers' rate).
    #[arg(long, value_parser = parse_interval)]
    pub bare_inserts: Option<u64>,
    /// MariaDB target: a poller reading the key forward (repeatable): incrementing (Kafka
    /// Connect JDBC's), behind:n=N, or gaps:timeout=DURATION[,max=N] (Axon's gap tracking).
    /// `,pause=DURATION@AT` makes it lag (sends nothing for DURATION from AT after the start).
    #[arg(long = "id-poller", value_name = "SPEC", value_parser = |s: &str| s.parse::<mariadb::id_pollers::IdPollerSpec>())]
    pub id_pollers: Vec<mariadb::id_pollers::IdPollerSpec>,
    /// MariaDB target: serialise the writers' transactions, none (default) or get-lock (a named
    /// lock from before the insert until COMMIT returned: the eventsourcing library's cure).
    #[arg(long, value_parser = |s: &str| s.parse::<mariadb::writers::WriterLock>())]
    pub writer_lock: Option<mariadb::writers::WriterLock>,
}

impl MariaArgs {
    /// Every MariaDB flag with whether it was given.
    fn given(&self) -> [(&'static str, bool); 7] {
        [
            ("--writer-lock", self.writer_lock.is_some()),
            ("--bare-inserts", self.bare_inserts.is_some()),
            ("--id-poller", !self.id_pollers.is_empty()),
            ("--autoinc-lock-mode", self.autoinc_lock_mode.is_some()),
            ("--partition-every", self.partition_every.is_some()),
            ("--retain", self.retain.is_some()),
            ("--clock-skew", self.clock_skew.is_some()),
        ]
    }
}

fn parse_tail(s: &str) -> Result<Tail, String> {
    s.parse()
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!("bad rate '{s}': expected posts per second above 0")),
    }
}

/// The options of `--target misskey-ftt` (docs/misskey-ftt.md). Each is
/// `None` unless given, so that one given elsewhere is refused.
#[derive(Args, Debug, Clone, Default)]
pub struct FttArgs {
    /// misskey-ftt: concurrent note creators, each a Misskey process with its own aidx node ID (default 4).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub creators: Option<u32>,
    /// misskey-ftt: local notes per second, all creators together (default 5).
    #[arg(long, value_parser = parse_rate)]
    pub note_rate: Option<f64>,
    /// misskey-ftt: remote notes per second arriving by federation (default 2).
    #[arg(long, value_parser = parse_nonnegative_rate)]
    pub remote_rate: Option<f64>,
    /// misskey-ftt: mean federation delay, published to arrival (default 2s).
    #[arg(long, value_parser = parse_duration_ms)]
    pub federation_delay: Option<u64>,
    /// misskey-ftt: share of remote notes arriving over 3 minutes late, 0 to 1 (default 0.02).
    #[arg(long, value_parser = parse_share)]
    pub late_share: Option<f64>,
    /// misskey-ftt: share of notes their authors delete, 0 to 1 (default 0: none).
    #[arg(long, value_parser = parse_share)]
    pub delete_share: Option<f64>,
    /// misskey-ftt: mean time from a note's commit to its deletion, exponential (default 1m).
    #[arg(long, value_parser = parse_duration_ms)]
    pub delete_after: Option<u64>,
    /// misskey-ftt: local users, remote users and how many each local user follows (default 50,50,20).
    #[arg(long, value_parser = parse_users)]
    pub users: Option<(u32, u32, u32)>,
    /// misskey-ftt: Misskey's enableFanoutTimelineDbFallback switched off.
    #[arg(long)]
    pub no_db_fallback: bool,
    /// misskey-ftt: Misskey's enableFanoutTimeline switched off (every read from PostgreSQL).
    #[arg(long)]
    pub no_fanout_timeline: bool,
    /// misskey-ftt: enableFanoutTimeline off from FROM until TO into the run, then on again,
    /// e.g. 2m..4m (repeatable, in order; misskey-dev/misskey#17547).
    #[arg(long = "ftt-off", value_name = "FROM..TO", value_parser = parse_window)]
    pub ftt_off: Vec<(u64, u64)>,
    /// misskey-ftt: stop Redis this long into the run and start it again empty (repeatable).
    #[arg(long = "redis-restart-at", value_name = "DURATION", value_parser = parse_duration_ms)]
    pub redis_restart_at: Vec<u64>,
}

impl FttArgs {
    /// The first misskey-ftt flag given, if any.
    fn first_given(&self) -> Option<&'static str> {
        [
            ("--creators", self.creators.is_some()),
            ("--note-rate", self.note_rate.is_some()),
            ("--remote-rate", self.remote_rate.is_some()),
            ("--federation-delay", self.federation_delay.is_some()),
            ("--late-share", self.late_share.is_some()),
            ("--delete-share", self.delete_share.is_some()),
            ("--delete-after", self.delete_after.is_some()),
            ("--users", self.users.is_some()),
            ("--no-db-fallback", self.no_db_fallback),
            ("--no-fanout-timeline", self.no_fanout_timeline),
            ("--ftt-off", !self.ftt_off.is_empty()),
            ("--redis-restart-at", !self.redis_restart_at.is_empty()),
        ]
        .into_iter()
        .find(|(_, given)| *given)
        .map(|(flag, _)| flag)
    }
}

/// `FROM..TO`, two durations from the run's start, FROM before TO.
fn parse_window(s: &str) -> Result<(u64, u64), String> {
    let bad = |why: &str| format!("bad --ftt-off '{s}': {why}");
    let (from, to) = s
        .split_once("..")
        .ok_or_else(|| bad("expected FROM..TO such as 2m..4m"))?;
    let from = parse_duration_ms(from.trim()).map_err(|e| bad(&e.to_string()))?;
    let to = parse_duration_ms(to.trim()).map_err(|e| bad(&e.to_string()))?;
    if from >= to {
        return Err(bad("FROM must come before TO"));
    }
    Ok((from, to))
}

/// The `--ftt-off` windows, each inside a run of `duration_ms`, given in
/// order and not overlapping.
fn ftt_off_windows(
    given: &[(u64, u64)],
    duration_ms: u64,
) -> Result<Vec<misskey_ftt::read::Window>, String> {
    let show = |ms| since_id::time::format_duration_ms(ms).replace(' ', "");
    let mut previous_to = 0;
    given
        .iter()
        .map(|&(from_ms, to_ms)| {
            let text = format!("{}..{}", show(from_ms), show(to_ms));
            if to_ms > duration_ms {
                return Err(format!(
                    "--ftt-off {text} ends after the run (--duration {})",
                    show(duration_ms)
                ));
            }
            if from_ms < previous_to {
                return Err(format!(
                    "--ftt-off {text} starts before the previous window ends: give them in order, not overlapping"
                ));
            }
            previous_to = to_ms;
            Ok(misskey_ftt::read::Window { from_ms, to_ms })
        })
        .collect()
}

/// The `--redis-restart-at` times, each inside the run, ascending.
fn redis_restarts(given: &[u64], duration_ms: u64) -> Result<Vec<u64>, String> {
    let show = |ms| since_id::time::format_duration_ms(ms).replace(' ', "");
    let mut previous = None;
    for &at in given {
        if at == 0 || at >= duration_ms {
            return Err(format!(
                "--redis-restart-at {} is not inside the run (after 0s, before --duration {})",
                show(at),
                show(duration_ms)
            ));
        }
        if previous.is_some_and(|p| at <= p) {
            return Err(format!(
                "--redis-restart-at {} comes after a later one: give them in ascending order",
                show(at)
            ));
        }
        previous = Some(at);
    }
    Ok(given.to_vec())
}

fn parse_nonnegative_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r >= 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!(
            "bad rate '{s}': expected notes per second, 0 or more"
        )),
    }
}

fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("bad share '{s}': expected a number from 0 to 1")),
    }
}

fn parse_users(s: &str) -> Result<(u32, u32, u32), String> {
    let bad = || {
        format!(
            "bad --users '{s}': expected LOCAL,REMOTE,FOLLOWS such as 50,50,20 (LOCAL at least 1, at most 100000 in all)"
        )
    };
    let parts: Vec<u32> = s
        .split(',')
        .map(|p| p.trim().parse::<u32>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    match parts[..] {
        [local, remote, follows] if local >= 1 && local as u64 + remote as u64 <= 100_000 => {
            Ok((local, remote, follows))
        }
        _ => Err(bad()),
    }
}

/// `--help` of `--token-file`: every API's token variable, and PostgreSQL's password.
fn token_file_help() -> String {
    format!(
        "Read the API token from this file instead of the environment ({}; for --target postgres:URL, the password instead of {}; for --target mariadb:URL, instead of {})",
        spec::token_vars().join(", "),
        postgres::own::PASSWORD_ENV,
        mariadb::own::PASSWORD_ENV
    )
}

/// One target's own options, resolved and checked. A new target is one
/// variant here and one arm in [`resolve`] and [`run_experiment`].
#[derive(Clone, Debug)]
pub enum Target {
    /// The embedded simulator (the default); boxed, being the largest.
    Simulator(Box<SimOpts>),
    /// A real API.
    Api(ApiOpts),
    /// A throwaway PostgreSQL cluster.
    Postgres(PgOpts),
    /// A throwaway MariaDB server.
    Mariadb(MariaOpts),
    /// Your own PostgreSQL table, read-only.
    OwnDb(OwnDbOpts),
    /// Your own MariaDB table, read-only.
    OwnMaria(OwnMariaOpts),
    /// Misskey's Fanout Timeline on a throwaway Redis and PostgreSQL.
    MisskeyFtt(misskey_ftt::FttOpts),
}

/// Which kind of target `--target` names, before its options are checked.
enum Kind {
    Simulator,
    Api(TargetSpec),
    Postgres,
    OwnDb(String),
    MisskeyFtt,
    Mariadb,
    OwnMaria(String),
}

impl Kind {
    fn of(target: &str) -> Result<Kind, String> {
        if target == "postgres" {
            return Ok(Kind::Postgres);
        }
        if target == "misskey-ftt" {
            return Ok(Kind::MisskeyFtt);
        }
        if target == "mariadb" {
            return Ok(Kind::Mariadb);
        }
        if let Some(url) = target.strip_prefix("postgres:") {
            return Ok(Kind::OwnDb(url.to_string()));
        }
        if let Some(url) = target.strip_prefix("mariadb:") {
            return Ok(Kind::OwnMaria(url.to_string()));
        }
        match target.parse::<TargetSpec>()? {
            TargetSpec::Simulator => Ok(Kind::Simulator),
            spec => Ok(Kind::Api(spec)),
        }
    }
}

/// The first flag of `flags` that was given, as an error saying `why`.
fn refuse_given(flags: &[(&str, bool)], why: impl Fn(&str) -> String) -> Result<(), String> {
    match flags.iter().find(|(_, given)| *given) {
        Some((flag, _)) => Err(why(flag)),
        None => Ok(()),
    }
}

/// The simulator's and the real APIs' flags, which a target that starts its
/// own servers (PostgreSQL, MariaDB, misskey-ftt) has no use for: each such
/// target refuses these and the few others it names.
fn foreign_flags(args: &RunArgs) -> [(&'static str, bool); 6] {
    [
        ("--config", args.config.is_some()),
        ("--set", !args.sets.is_empty()),
        ("--faults", args.faults.is_some()),
        ("--backlog", args.backlog.is_some()),
        ("--list-id", args.list_id.is_some()),
        ("--base-url", args.base_url.is_some()),
    ]
}

/// The command line, resolved: the options every run has and one target's.
/// Every refusal of a flag where it does nothing is here.
pub fn resolve(args: RunArgs) -> Result<(Common, Target), String> {
    if args.pollers.len() > MAX_POLLERS {
        return Err(format!(
            "{} --poller values: at most {MAX_POLLERS} per run",
            args.pollers.len()
        ));
    }
    if args.clock == ClockMode::Real && args.start.is_some() {
        return Err(
            "--start sets a virtual run's clock; a real-time run starts now (add --clock virtual)"
                .into(),
        );
    }
    let kind = Kind::of(&args.target)?;
    let pg = &args.pg;
    if matches!(kind, Kind::OwnMaria(_)) {
        // Your own table: only the pollers; the rest shapes the throwaway server.
        refuse_given(
            &args
                .maria
                .given()
                .into_iter()
                .filter(|(flag, _)| *flag != "--id-poller")
                .collect::<Vec<_>>(),
            |flag| {
                format!(
                    "{flag} shapes the throwaway server (--target mariadb); nothing writes to your own database"
                )
            },
        )?;
    } else if matches!(kind, Kind::Postgres) {
        // The retention job's flags serve the partitioned schema too (checked below).
        refuse_given(
            &args
                .maria
                .given()
                .into_iter()
                .filter(|(flag, _)| !matches!(*flag, "--partition-every" | "--retain"))
                .collect::<Vec<_>>(),
            |flag| format!("{flag} applies to --target mariadb only, not 'postgres'"),
        )?;
    } else if !matches!(kind, Kind::Mariadb) {
        refuse_given(&args.maria.given(), |flag| {
            format!(
                "{flag} applies to --target mariadb only, not '{}'",
                args.target
            )
        })?;
    }
    let postgres_kind = matches!(kind, Kind::Postgres | Kind::OwnDb(_));
    if matches!(kind, Kind::Mariadb | Kind::OwnMaria(_)) {
        if args.clock == ClockMode::Virtual {
            return Err(
                "--clock virtual runs the simulator only; MariaDB runs in real time".into(),
            );
        }
        if args.pollers.contains(&CursorPolicy::Xmin) {
            let which = match kind {
                Kind::OwnMaria(_) => "a MariaDB table",
                _ => "'mariadb'",
            };
            return Err(format!(
                "the xmin policy reads PostgreSQL's transaction horizon; it applies to --target postgres only, not {which}"
            ));
        }
    }
    if let Kind::OwnMaria(_) = kind {
        refuse_given(
            &[
                foreign_flags(&args).as_slice(),
                &[("--timeline", args.timeline.is_some())],
            ]
            .concat(),
            |flag| format!("{flag} does not apply to a MariaDB target"),
        )?;
        pg.refuse(
            &["--schema", "--writers", "--write-rate", "--pg-tail"],
            "shapes the throwaway server's writers; nothing writes to your own database",
        )?;
        pg.refuse(&["--via"], "does not apply to a MariaDB target")?;
    } else if matches!(kind, Kind::Mariadb) {
        refuse_given(
            &[
                foreign_flags(&args).as_slice(),
                &[
                    ("--timeline", args.timeline.is_some()),
                    ("--layout", args.layout.is_some()),
                    ("--token-file", args.token_file.is_some()),
                ],
            ]
            .concat(),
            |flag| format!("{flag} does not apply to --target mariadb"),
        )?;
        pg.refuse(
            &["--pg-tail", "--table", "--id-column", "--via"],
            "does not apply to --target mariadb",
        )?;
    } else if postgres_kind {
        if args.clock == ClockMode::Virtual {
            return Err(
                "--clock virtual runs the simulator only; PostgreSQL runs in real time".into(),
            );
        }
        refuse_given(
            &[
                foreign_flags(&args).as_slice(),
                &[("--timeline", args.timeline.is_some())],
            ]
            .concat(),
            |flag| format!("{flag} does not apply to a PostgreSQL target"),
        )?;
    } else {
        if args.pollers.contains(&CursorPolicy::Xmin) {
            return Err(format!(
                "the xmin policy reads PostgreSQL's transaction horizon; it applies to --target postgres only, not '{}'",
                args.target
            ));
        }
        pg.refuse(
            &PgArgs::ALL,
            &format!("applies to --target postgres only, not '{}'", args.target),
        )?;
    }
    if !matches!(kind, Kind::MisskeyFtt)
        && let Some(flag) = args.ftt.first_given()
    {
        return Err(format!(
            "{flag} applies to --target misskey-ftt only, not '{}'",
            args.target
        ));
    }
    let target = match kind {
        Kind::MisskeyFtt => {
            if args.clock == ClockMode::Virtual {
                return Err(
                    "--clock virtual runs the simulator only; misskey-ftt runs in real time".into(),
                );
            }
            refuse_given(
                &[
                    foreign_flags(&args).as_slice(),
                    &[
                        ("--layout", args.layout.is_some()),
                        ("--token-file", args.token_file.is_some()),
                    ],
                ]
                .concat(),
                |flag| format!("{flag} does not apply to --target misskey-ftt"),
            )?;
            let f = &args.ftt;
            if f.no_fanout_timeline && !f.ftt_off.is_empty() {
                return Err(
                    "--ftt-off switches FTT off for a while; with --no-fanout-timeline it is off for the whole run".into(),
                );
            }
            if f.delete_after.is_some() && f.delete_share.unwrap_or(0.0) == 0.0 {
                return Err(
                    "--delete-after says when deleted notes go; give --delete-share above 0 too"
                        .into(),
                );
            }
            let (local_users, remote_users, follows_per_user) = f.users.unwrap_or((50, 50, 20));
            let timeline = match &args.timeline {
                Some(t) => t.parse()?,
                None => misskey_ftt::Timeline::default(),
            };
            Target::MisskeyFtt(misskey_ftt::FttOpts {
                load: misskey_ftt::creators::Load {
                    creators: f.creators.unwrap_or(4),
                    local_users,
                    remote_users,
                    follows_per_user,
                    local_rate_per_s: f.note_rate.unwrap_or(5.0),
                    remote_rate_per_s: if remote_users == 0 {
                        0.0
                    } else {
                        f.remote_rate.unwrap_or(2.0)
                    },
                    federation_delay_ms: f.federation_delay.unwrap_or(2_000),
                    late_share: f.late_share.unwrap_or(0.02),
                    deletes: misskey_ftt::creators::Deletes {
                        share: f.delete_share.unwrap_or(0.0),
                        after_ms: f.delete_after.unwrap_or(60_000),
                    },
                    caps: Default::default(),
                    seed: args.seed,
                },
                timeline,
                switches: misskey_ftt::read::Switches {
                    fanout_timeline: !f.no_fanout_timeline,
                    db_fallback: !f.no_db_fallback,
                },
                ftt_off: ftt_off_windows(&f.ftt_off, args.duration)?,
                redis_restarts_ms: redis_restarts(&f.redis_restart_at, args.duration)?,
            })
        }
        Kind::Simulator => {
            refuse_given(
                &[
                    ("--list-id", args.list_id.is_some()),
                    ("--base-url", args.base_url.is_some()),
                    ("--layout", args.layout.is_some()),
                    ("--token-file", args.token_file.is_some()),
                ],
                |flag| {
                    format!(
                        "{flag} applies to real targets only (the simulator is configured with --profile and --set)"
                    )
                },
            )?;
            let config_text = match &args.config {
                Some(path) => Some(
                    std::fs::read_to_string(path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
                ),
                None => None,
            };
            let mut opts = SimOpts::new(
                &args.profile,
                config_text.as_deref(),
                &args.sets,
                args.timeline.as_deref(),
            )?;
            opts.start_ms = args.start;
            if let Some(backlog) = args.backlog {
                opts.backlog_ms = backlog;
            }
            opts.faults = args.faults.clone();
            Target::Simulator(Box::new(opts))
        }
        Kind::Api(spec) => {
            if args.clock == ClockMode::Virtual {
                return Err(
                    "--clock virtual runs the simulator only; real targets are polled in real time"
                        .into(),
                );
            }
            if args.config.is_some() || !args.sets.is_empty() {
                return Err(
                    "--config and --set configure the simulator; they do not apply to a real target"
                        .into(),
                );
            }
            if args.backlog.is_some() {
                return Err(
                    "--backlog is the simulator's history; it does not apply to a real target"
                        .into(),
                );
            }
            if args.faults.is_some() {
                return Err(
                    "--faults are injected by the simulator; they do not apply to a real target"
                        .into(),
                );
            }
            let options = TargetOptions {
                timeline: args.timeline.clone(),
                list_id: args.list_id.clone(),
                base_url: args.base_url.clone(),
                layout: args.layout.clone(),
            };
            Target::Api(ApiOpts {
                resolved: spec.resolve(&options)?,
                list_id: args.list_id.clone(),
                token_file: args.token_file.clone(),
            })
        }
        Kind::Postgres => {
            if args.layout.is_some() || args.token_file.is_some() {
                return Err(
                    "--layout and --token-file are for your own database (--target postgres:URL)"
                        .into(),
                );
            }
            pg.refuse(
                &["--table", "--id-column"],
                "is for your own database (--target postgres:URL)",
            )?;
            let schema = pg.schema()?;
            if schema.sequence_ids() && args.pollers.iter().any(|p| p.k_ms().is_some()) {
                return Err(format!(
                    "the {schema} schema's BIGSERIAL IDs carry no time, so compensated pollers mean nothing \
                     there; use naive and xmin"
                ));
            }
            let m = &args.maria;
            if schema != Schema::Partitioned {
                refuse_given(
                    &[
                        ("--partition-every", m.partition_every.is_some()),
                        ("--retain", m.retain.is_some()),
                    ],
                    |flag| {
                        format!(
                            "{flag} applies to --target mariadb and --target postgres --schema partitioned only, \
                             not --schema {schema}"
                        )
                    },
                )?;
            }
            if pg.via() == Via::Http && schema != Schema::Mastodon {
                return Err(
                    "--via http serves the Mastodon API: it needs --schema mastodon".into(),
                );
            }
            Target::Postgres(PgOpts {
                schema,
                writers: pg.writers(),
                write_rate: pg.write_rate(),
                tail: pg.pg_tail,
                via: pg.via(),
                partition_every_ms: m.partition_every.unwrap_or(10 * 60 * 1000),
                retain: m.retain.unwrap_or(6),
            })
        }
        Kind::Mariadb => {
            let schema: mariadb::schema::Schema = pg
                .schema
                .as_deref()
                .map_or(Ok(mariadb::schema::Schema::Autoinc), str::parse)?;
            let m = &args.maria;
            if schema == mariadb::schema::Schema::Autoinc {
                if let Some(p) = args.pollers.iter().find(|p| p.k_ms().is_some()) {
                    return Err(format!(
                        "--poller {p}: AUTO_INCREMENT IDs carry no time, so a compensated poller means \
                         nothing on the autoinc schema; use --schema snowflake"
                    ));
                }
                if m.clock_skew.is_some() {
                    return Err(
                        "--clock-skew skews the Snowflake writers' clocks; AUTO_INCREMENT takes no clock \
                         (use --schema snowflake)"
                            .into(),
                    );
                }
            }
            if schema == mariadb::schema::Schema::Snowflake
                && let Some(p) = m
                    .id_pollers
                    .iter()
                    .find(|p| !matches!(p.policy, since_id::gaps::IdPolicy::Incrementing))
            {
                return Err(format!(
                    "--id-poller {p} counts IDs one by one; Snowflake IDs are not consecutive \
                     (use --schema autoinc, or compensated:k=... on snowflake)"
                ));
            }
            Target::Mariadb(MariaOpts {
                schema,
                lock_mode: m
                    .autoinc_lock_mode
                    .unwrap_or(crate::servers::mariadb::LockMode::DEFAULT),
                writers: pg.writers(),
                write_rate: pg.write_rate(),
                clock_skew_ms: m.clock_skew.unwrap_or(0),
                partition_every_ms: m.partition_every.unwrap_or(10 * 60 * 1000),
                retain: m.retain.unwrap_or(6),
                id_pollers: m.id_pollers.clone(),
                bare_inserts_ms: m.bare_inserts,
                writer_lock: m.writer_lock.unwrap_or_default(),
            })
        }
        Kind::OwnMaria(url) => {
            let table = pg
                .table
                .clone()
                .ok_or("--target mariadb:URL needs --table NAME (the table to poll)")?;
            let layout: Layout = match &args.layout {
                Some(name) => name
                    .parse()
                    .map_err(|e: since_id::id::IdError| e.to_string())?,
                None if args.pollers.iter().any(|p| p.k_ms().is_some()) => {
                    return Err(
                        "compensated pollers need the IDs' --layout (for example twitter)".into(),
                    );
                }
                None => postgres::own::sequence_layout(),
            };
            Target::OwnMaria(OwnMariaOpts {
                url,
                table,
                id_column: pg.id_column().to_string(),
                layout,
                token_file: args.token_file.clone(),
                id_pollers: args.maria.id_pollers.clone(),
            })
        }
        Kind::OwnDb(url) => {
            pg.refuse(
                &["--schema", "--writers", "--write-rate"],
                "shapes the throwaway cluster's writers; nothing writes to your own database",
            )?;
            if pg.via() == Via::Http {
                return Err(
                    "--via http serves the throwaway cluster's statuses; your own table is read over SQL"
                        .into(),
                );
            }
            if pg.pg_tail.is_some() {
                return Err(
                    "--pg-tail shapes the throwaway cluster's writers; nothing writes to your own database"
                        .into(),
                );
            }
            let table = pg
                .table
                .clone()
                .ok_or("--target postgres:URL needs --table NAME (the table to poll)")?;
            let layout: Layout = match &args.layout {
                Some(name) => name
                    .parse()
                    .map_err(|e: since_id::id::IdError| e.to_string())?,
                None if args.pollers.iter().any(|p| p.k_ms().is_some()) => {
                    return Err(
                        "compensated pollers need the IDs' --layout (for example mastodon or twitter)"
                            .into(),
                    );
                }
                None => postgres::own::sequence_layout(),
            };
            Target::OwnDb(OwnDbOpts {
                url,
                table,
                id_column: pg.id_column().to_string(),
                layout,
                token_file: args.token_file.clone(),
            })
        }
    };
    let mariadb_id_only = match &target {
        Target::Mariadb(o) => !o.id_pollers.is_empty(),
        Target::OwnMaria(o) => !o.id_pollers.is_empty(),
        _ => false,
    };
    let pollers = if args.pollers.is_empty() && mariadb_id_only {
        // Only the ID pollers asked for: no since_id poller beside them.
        Vec::new()
    } else if args.pollers.is_empty()
        && matches!(&target, Target::Mariadb(o) if o.schema == mariadb::schema::Schema::Autoinc)
    {
        // AUTO_INCREMENT IDs carry no time: the default is the naive poller alone.
        vec![CursorPolicy::Naive]
    } else if args.pollers.is_empty() {
        default_pollers()
    } else {
        args.pollers
    };
    let common = Common {
        target: args.target,
        duration_ms: args.duration,
        interval_ms: args.interval,
        limit: args.limit,
        max_back_pages: args.max_back_pages,
        db: args.db,
        seed: args.seed,
        clock: args.clock,
        timeout_ms: args.timeout,
        pollers,
        quiet: args.quiet,
    };
    Ok((common, target))
}

/// Runs the experiment described by `args`.
pub fn run_experiment(args: RunArgs) -> Result<RunSummary, String> {
    let (common, target) = resolve(args)?;
    match target {
        Target::Simulator(opts) => simulator::run(common, *opts),
        Target::Api(opts) => api_target::run(common, opts),
        Target::Postgres(opts) => postgres::run(common, opts),
        Target::OwnDb(opts) => postgres::run_own(common, opts),
        Target::MisskeyFtt(opts) => misskey_ftt::run(common, opts),
        Target::Mariadb(opts) => mariadb::run(common, opts),
        Target::OwnMaria(opts) => mariadb::run_own(common, opts),
    }
}

/// A virtual run against the embedded simulator that writes no database:
/// every record goes to the sink `make` builds from the run's layout and
/// pollers (`experiment sweep` judges each seed's run in memory).
pub fn run_in_memory<S: Records>(
    args: RunArgs,
    make: impl FnOnce(&Layout, &[PollerRow]) -> S,
) -> Result<S, String> {
    match resolve(args)? {
        (common, Target::Simulator(opts)) => simulator::run_virtual_to(&common, &opts, make),
        _ => Err("a run in memory needs the embedded simulator".into()),
    }
}

/// `--dry-run`: the first request each poller would make, token redacted.
pub fn dry_run(args: RunArgs) -> Result<String, String> {
    let (common, target) = resolve(args)?;
    let (base, dialect, layout, token) = match &target {
        Target::Simulator(opts) => {
            let (layout, dialect) = simulator::dry_run_target(opts);
            (
                "http://127.0.0.1:PORT".to_string(),
                dialect,
                Some(layout),
                false,
            )
        }
        Target::Api(opts) => {
            let token = api_target::load_token(opts)?;
            let r = &opts.resolved;
            (
                r.base.clone(),
                r.dialect.clone(),
                r.layout.clone(),
                token.is_some(),
            )
        }
        Target::MisskeyFtt(_) => {
            return Err(
                "--dry-run shows a real API's requests; misskey-ftt serves its own on loopback \
                 (docs/misskey-ftt.md)"
                    .into(),
            );
        }
        Target::Mariadb(_) | Target::OwnMaria(_) => {
            return Err(
                "--dry-run shows HTTP requests; a MariaDB target sends only the SELECTs documented \
                 in docs/mariadb.md"
                    .into(),
            );
        }
        Target::Postgres(_) | Target::OwnDb(_) => {
            return Err(
                "--dry-run shows HTTP requests; a PostgreSQL target sends only the SELECTs \
                 documented in docs/postgres.md"
                    .into(),
            );
        }
    };
    let mut out = format!("target {} (dry run: nothing is sent)\n", common.target);
    let Some(layout) = layout else {
        // No layout yet: the run starts with one probe to see the IDs.
        out.push_str(&format!(
            "layout probe: {}\n(the pollers' requests depend on the layout detected; pass --layout to see them)\n",
            dialect.describe_layout_probe(&base, token)
        ));
        return Ok(out);
    };
    let limit = dialect.page_limit(common.limit as usize);
    let now = crate::clock::now_ms();
    for (name, policy) in poller_names(&common.pollers).iter().zip(&common.pollers) {
        let mut poller = Poller::new(
            name.clone(),
            *policy,
            layout.clone(),
            limit,
            common.max_back_pages,
        );
        let req = poller.begin_cycle(now);
        out.push_str(&format!(
            "{name}: {}\n",
            dialect.describe(&base, &layout, &req, token)
        ));
    }
    Ok(out)
}
