//! The command line below the targets (docs/layout.md): the flags every run
//! has and those several targets share, named for what they mean
//! ([`SharedArgs`] with [`WorkloadArgs`], [`RetentionArgs`] and
//! [`TableArgs`]); the table of which flag applies to which kind of target,
//! with the one loop that refuses a flag where it does nothing
//! ([`refuse_unread`]); and the two faces of a target: to the command line
//! ([`Target`], in the target's own `options.rs`) and to the run
//! ([`Launch`], its options resolved). `targets/mod.rs` lists the targets.

use crate::api::{Dialect, spec};
use crate::session::{ClockMode, Common, RunSummary};
use crate::workload::Arrivals;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use since_id::id::Layout;
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;
use since_id::time::parse_duration_ms;
use std::any::Any;
use std::borrow::Cow;
use std::path::PathBuf;

/// The options of a run that are no one target's own: those every run has
/// and those several targets read. Each target's own are in its `options.rs`.
#[derive(Args, Debug, Clone)]
pub struct SharedArgs {
    /// How long to poll (1h, 90s, 1500ms; at most 366 days).
    #[arg(long, default_value = "1h", value_parser = parse_run_duration)]
    pub duration: u64,
    // Its help lists every target and the flags each reads, from the
    // applies-to table (`targets/mod.rs`, `target_help`).
    #[arg(long, default_value = "simulator")]
    pub target: String,
    #[arg(long, help = spec::TIMELINE_HELP)]
    pub timeline: Option<String>,
    #[arg(long, help = spec::LAYOUT_HELP)]
    pub layout: Option<String>,
    #[arg(long, help = token_file_help())]
    pub token_file: Option<PathBuf>,
    /// Print the first request each poller would make (token redacted) and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// A poller's cursor policy (repeatable; default naive and compensated:k=1s): naive,
    /// compensated:k=1s, audit:k=1s,depth=2m,every=1m, adaptive, newest, newest:pages=3, or xmin
    /// (PostgreSQL only).
    #[arg(long = "poller", value_name = "SPEC", value_parser = parse_policy)]
    pub pollers: Vec<CursorPolicy>,
    /// Time between the pollers' ticks, aligned to multiples of it (1s: the start of each second).
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    pub interval: u64,
    /// Move each of the pollers' ticks later by a seeded uniform draw in [0, D) (the same for
    /// every poller of the run, so they still send together); default 0: on the interval's grid.
    #[arg(long, default_value = "0s", value_parser = parse_duration_ms, value_name = "D")]
    pub tick_jitter: u64,
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
    /// HTTP request timeout (at most 1h).
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    pub timeout: u64,
    /// No progress bar even on a terminal (set by callers that run many at
    /// once, such as `experiment sweep`; not a flag).
    #[arg(skip)]
    pub quiet: bool,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub retention: RetentionArgs,
    #[command(flatten)]
    pub table: TableArgs,
}

/// The writers that load a throwaway database (PostgreSQL's, MariaDB's).
/// Each is `None` unless given, so that one given where nothing writes is
/// refused rather than ignored; the defaults are the methods'.
#[derive(Args, Debug, Clone, Default)]
pub struct WorkloadArgs {
    /// The schema the writers load: PostgreSQL mastodon, outbox, snowflake, partitioned (BIGSERIAL),
    /// partitioned-snowflake (default mastodon); MariaDB autoinc, snowflake (default autoinc).
    #[arg(long)]
    pub schema: Option<String>,
    /// PostgreSQL and MariaDB targets: concurrent writer connections, 1 to 50 (default 8).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub writers: Option<u32>,
    /// PostgreSQL and MariaDB targets: posts per second, all writers together (default 300).
    #[arg(long, value_parser = parse_rate)]
    pub write_rate: Option<f64>,
    /// Database targets' writers: poisson (exponential gaps of the mean period, seeded by
    /// --seed and the writer; the default) or grid (each writer on an exact period).
    #[arg(long, value_parser = |s: &str| s.parse::<Arrivals>())]
    pub arrivals: Option<Arrivals>,
}

impl WorkloadArgs {
    pub fn writers(&self) -> u32 {
        self.writers.unwrap_or(8)
    }

    pub fn write_rate(&self) -> f64 {
        self.write_rate.unwrap_or(300.0)
    }

    pub fn arrivals(&self) -> Arrivals {
        self.arrivals.unwrap_or_default()
    }
}

/// The retention job of a range-partitioned table (MariaDB's, PostgreSQL's
/// partitioned schemas): `None` unless given.
#[derive(Args, Debug, Clone, Default)]
pub struct RetentionArgs {
    /// MariaDB target and PostgreSQL's partitioned schemas: how often the retention job adds a
    /// partition and drops the oldest (default 10m).
    #[arg(long, value_parser = parse_interval)]
    pub partition_every: Option<u64>,
    /// MariaDB target and PostgreSQL's partitioned schemas: how many partitions the retention job
    /// keeps, at least 2 (default 6).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub retain: Option<u32>,
}

impl RetentionArgs {
    pub fn partition_every_ms(&self) -> u64 {
        self.partition_every.unwrap_or(10 * 60 * 1000)
    }

    pub fn retain(&self) -> u32 {
        self.retain.unwrap_or(6)
    }
}

/// Your own table, polled read-only (`--target postgres:URL`, `mariadb:URL`).
#[derive(Args, Debug, Clone, Default)]
pub struct TableArgs {
    /// Your own database (--target postgres:URL or mariadb:URL): the table to poll.
    #[arg(long)]
    pub table: Option<String>,
    /// Your own database: the table's ID column (default id).
    #[arg(long)]
    pub id_column: Option<String>,
}

impl TableArgs {
    pub fn id_column(&self) -> &str {
        self.id_column.as_deref().unwrap_or("id")
    }
}

impl SharedArgs {
    /// The checks that hold whatever the target.
    pub fn check(&self) -> Result<(), String> {
        if self.pollers.len() > MAX_POLLERS {
            return Err(format!(
                "{} --poller values: at most {MAX_POLLERS} per run",
                self.pollers.len()
            ));
        }
        if self.clock == ClockMode::Real && self.start.is_some() {
            return Err(
                "--start sets a virtual run's clock; a real-time run starts now (add --clock virtual)"
                    .into(),
            );
        }
        Ok(())
    }

    /// The options every run has, with the pollers it runs.
    pub fn common(self, pollers: Vec<CursorPolicy>) -> Common {
        Common {
            target: self.target,
            duration_ms: self.duration,
            interval_ms: self.interval,
            limit: self.limit,
            max_back_pages: self.max_back_pages,
            db: self.db,
            seed: self.seed,
            clock: self.clock,
            timeout_ms: self.timeout,
            pollers,
            quiet: self.quiet,
            tick_jitter_ms: self.tick_jitter,
        }
    }

    /// `--layout` for your own table: the IDs' layout, or without it the
    /// plain integers of a sequence (refused with compensated pollers, which
    /// need the IDs' time; `example` names layouts to try).
    pub fn own_layout(&self, example: &str) -> Result<Layout, String> {
        match &self.layout {
            Some(name) => name
                .parse()
                .map_err(|e: since_id::id::IdError| e.to_string()),
            None if self.pollers.iter().any(|p| p.k_ms().is_some()) => Err(format!(
                "compensated pollers need the IDs' --layout (for example {example})"
            )),
            None => Ok(SEQUENCE_LAYOUT.parse().expect("custom layout")),
        }
    }

    /// Refuses `--clock virtual` on a target that runs in real time; `why`
    /// says so.
    pub fn real_time_only(&self, why: &str) -> Result<(), String> {
        match self.clock {
            ClockMode::Virtual => Err(format!("--clock virtual runs the simulator only; {why}")),
            ClockMode::Real => Ok(()),
        }
    }

    /// Refuses the xmin policy on a target other than PostgreSQL, named `which`.
    pub fn no_xmin(&self, which: &str) -> Result<(), String> {
        if self.pollers.contains(&CursorPolicy::Xmin) {
            return Err(format!(
                "the xmin policy reads PostgreSQL's transaction horizon; it applies to --target postgres only, not {which}"
            ));
        }
        Ok(())
    }
}

/// The plain-integer layout of a sequence, for your own table without `--layout`.
pub const SEQUENCE_LAYOUT: &str = "custom:epoch=0,shift=0";

/// The longest run: a year and a day of leap. Beyond, `--duration` is refused.
pub const MAX_DURATION_MS: u64 = 366 * 24 * 3600 * 1000;

/// The longest HTTP timeout: the final drain lasts at most a few of them.
pub const MAX_TIMEOUT_MS: u64 = 3600 * 1000;

/// The most `--poller` values a run takes (`analyze` reads at most as many).
pub const MAX_POLLERS: usize = 64;

fn parse_policy(text: &str) -> Result<CursorPolicy, String> {
    Ok(text.parse()?)
}

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

/// A duration of at least 1 ms (an interval, a period).
pub fn parse_interval(text: &str) -> Result<u64, String> {
    match parse_duration_ms(text)? {
        0 => Err(format!("bad interval '{text}': must be at least 1ms")),
        ms => Ok(ms),
    }
}

/// Posts (or notes) per second, above 0.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!("bad rate '{s}': expected posts per second above 0")),
    }
}

/// `--help` of `--token-file`: every API's token variable, and the
/// databases' password variables (`PASSWORD_ENV` of `targets/postgres/own.rs`
/// and `targets/mariadb/own.rs`, whose tests check these names).
pub fn token_file_help() -> String {
    format!(
        "Read the API token from this file instead of the environment ({}; for --target postgres:URL, the password instead of PGPASSWORD; for --target mariadb:URL, instead of MYSQL_PWD)",
        spec::token_vars().join(", ")
    )
}

/// The flags of a throwaway database's writers ([`WorkloadArgs`]).
pub const WORKLOAD_FLAGS: &[&str] = &["--schema", "--writers", "--write-rate", "--arrivals"];

/// The flags a throwaway database server reads: its writers' and its
/// retention job's ([`RetentionArgs`]).
pub const DATABASE_SERVER_FLAGS: [&str; 6] =
    concat(WORKLOAD_FLAGS, &["--partition-every", "--retain"]);

/// The flags your own table is read with ([`TableArgs`], its IDs' layout,
/// its password's file), besides its target's own.
pub const OWN_TABLE_FLAGS: &[&str] = &["--table", "--id-column", "--layout", "--token-file"];

/// The simulator's flags and a real API's, which no database target reads.
pub const NOT_DATABASE_FLAGS: &[&str] = &[
    "--config",
    "--set",
    "--faults",
    "--backlog",
    "--list-id",
    "--base-url",
];

/// `a` then `b`, as one list of `N` flags: a kind's list built from the
/// shared groups above (a wrong `N` fails the build).
pub const fn concat<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    assert!(a.len() + b.len() == N, "N is not the flags' count");
    let mut out = [""; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    while i < N {
        out[i] = b[i - a.len()];
        i += 1;
    }
    out
}

/// A kind of target as the refusals see it. A target has one or two: the
/// throwaway server (`postgres`) and your own table (`postgres:URL`). Its
/// `reads` are its rows of the applies-to table ([`table`]): a flag is
/// defined once, by clap, and declared here by the kinds that read it.
#[derive(Debug)]
pub struct Kind {
    /// Its name in the table. `--target` claims it by that name, or, for a
    /// name ending in `:URL`, by the prefix before `URL` (`postgres:`).
    pub name: &'static str,
    /// How `--help` writes it and a test passes it to `--target`, where
    /// that is not its name ([`Kind::form`]).
    pub form: Option<&'static str>,
    /// What it is, in `--help`.
    pub about: &'static str,
    /// How a refusal names it ("real targets"), where that is not
    /// `--target NAME` ([`Kind::named`]).
    pub named: Option<&'static str>,
    /// The kinds whose `named` covers it too: a refusal that names one of
    /// them does not name it again (`postgres:URL` is "--target postgres").
    pub within: &'static [&'static str],
    /// Whether it reads every flag of its target's own group (the
    /// target's `Flags`), which it then need not name in `reads`.
    pub reads_own_group: bool,
    /// The flags it reads besides (the shared ones, or some of its
    /// target's group); every other one given is refused.
    pub reads: &'static [&'static str],
    /// Its own wording for some flags it refuses (`{flag}` and `{target}`
    /// filled in); any other is refused in the table's ([`Row::refusal`]).
    pub refusals: &'static [(&'static [&'static str], &'static str)],
}

impl Kind {
    /// What a kind's literal leaves out: its form is its name, a refusal
    /// names it `--target NAME`, no other kind covers it, and it reads no
    /// flag and words no refusal of its own.
    pub const PLAIN: Kind = Kind {
        name: "",
        form: None,
        about: "",
        named: None,
        within: &[],
        reads_own_group: false,
        reads: &[],
        refusals: &[],
    };

    /// How `--help` writes it and a test passes it to `--target`.
    pub fn form(&self) -> &'static str {
        self.form.unwrap_or(self.name)
    }

    /// How a refusal names it: "--target postgres", "real targets".
    pub fn named(&self) -> Cow<'static, str> {
        match self.named {
            Some(named) => Cow::Borrowed(named),
            None => Cow::Owned(format!("--target {}", self.name)),
        }
    }

    /// Whether `--target TEXT` names this kind (by its name, or a `:URL`
    /// kind by its prefix).
    pub fn claims(&self, target: &str) -> bool {
        match self.name.strip_suffix("URL") {
            Some(prefix) => target.starts_with(prefix),
            None => target == self.name,
        }
    }
}

/// The flags whose refusal is worded otherwise than "applies to ... only";
/// a unit test checks each names every kind that reads it.
const SHAPES: &[(&str, &str)] = &[(
    "--arrivals",
    "{flag} paces the writers of a database target (postgres, mariadb, misskey-ftt), not '{target}'",
)];

/// A row of the applies-to table: a flag and the kinds that read it.
#[derive(Debug)]
pub struct Row {
    pub flag: String,
    pub applies_to: Vec<&'static Kind>,
}

impl Row {
    /// Whether `kind` reads the flag.
    pub fn reads(&self, kind: &Kind) -> bool {
        self.applies_to.iter().any(|k| k.name == kind.name)
    }

    /// Its refusal where it does not apply, `{target}` left to fill in:
    /// "--schema applies to --target postgres and --target mariadb only,
    /// not '{target}'", each kind that reads it named once.
    pub fn refusal(&self) -> String {
        if let Some((_, shape)) = SHAPES.iter().find(|(flag, _)| *flag == self.flag) {
            return shape.replace("{flag}", &self.flag);
        }
        let mut named: Vec<Cow<str>> = Vec::new();
        for kind in &self.applies_to {
            let covered = kind
                .within
                .iter()
                .any(|w| self.applies_to.iter().any(|k| k.name == *w));
            if !covered && !named.contains(&kind.named()) {
                named.push(kind.named());
            }
        }
        let list = match named.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => "no target".to_string(),
        };
        format!("{} applies to {list} only, not '{{target}}'", self.flag)
    }
}

/// The applies-to table: one row per flag some kind reads, in the order
/// `flags` lists them (the command line's), each with the kinds that read
/// it. `kinds` are each kind with every flag it reads (its `reads`, and its
/// target's group if it reads that).
pub fn table(flags: &[String], kinds: &[(&'static Kind, Vec<String>)]) -> Vec<Row> {
    flags
        .iter()
        .map(|flag| Row {
            flag: flag.clone(),
            applies_to: kinds
                .iter()
                .filter(|(_, reads)| reads.contains(flag))
                .map(|(kind, _)| *kind)
                .collect(),
        })
        .filter(|row| !row.applies_to.is_empty())
        .collect()
}

/// The one loop of the "flag X does not apply here" refusals: the first
/// flag `given` (as `--name`) that `kind` does not read, in `kind`'s words
/// if it has its own for that flag, else in the table's. `target` is
/// `--target` as given.
pub fn refuse_unread(
    table: &[Row],
    kind: &Kind,
    given: &[String],
    target: &str,
) -> Result<(), String> {
    let Some(row) = table
        .iter()
        .find(|row| given.contains(&row.flag) && !row.reads(kind))
    else {
        return Ok(());
    };
    let wording = match kind
        .refusals
        .iter()
        .find(|(f, _)| f.contains(&row.flag.as_str()))
    {
        Some((_, own)) => own.replace("{flag}", &row.flag),
        None => row.refusal(),
    };
    Err(wording.replace("{target}", target))
}

/// The flags given on the command line, as `--name`, in the order `command`
/// declares them: clap's own record of where each value came from
/// (`ArgMatches::value_source`), not a default.
pub fn given(command: &Command, matches: &ArgMatches) -> Vec<String> {
    command
        .get_arguments()
        .filter(|a| {
            matches.value_source(a.get_id().as_str())
                == Some(clap::parser::ValueSource::CommandLine)
        })
        .filter_map(|a| a.get_long().map(|long| format!("--{long}")))
        .collect()
}

/// A flag group `A` with the flags of it given on the command line (as
/// `--name`, from clap's [`given`]): for a command whose group applies in
/// one case only (`judge`'s log flags), so that one given elsewhere is
/// refused without a hand-written "was it given" row per flag.
#[derive(Debug, Clone)]
pub struct Given<A> {
    pub args: A,
    pub given: Vec<String>,
}

impl<A: Args + FromArgMatches> FromArgMatches for Given<A> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Given<A>, clap::Error> {
        Ok(Given {
            args: A::from_arg_matches(matches)?,
            given: given(&A::augment_args(Command::new("group")), matches),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Given::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<A: Args> Args for Given<A> {
    fn augment_args(command: Command) -> Command {
        A::augment_args(command)
    }

    fn augment_args_for_update(command: Command) -> Command {
        A::augment_args_for_update(command)
    }
}

/// A target's face to the command line: its own flag group, its kinds, and
/// its options from them. Each target's `options.rs` implements it;
/// `targets/mod.rs` lists them (as [`TargetOptions`]).
pub trait Target: Sync {
    /// Its own flag group.
    type Flags: Args + FromArgMatches;
    /// Every kind it has (the table's kinds).
    const KINDS: &'static [&'static Kind];

    /// The kind `--target TEXT` names if it is this target's; an error if
    /// TEXT is meant for it but malformed.
    fn kind(&self, target: &str) -> Result<Option<&'static Kind>, String> {
        Ok(Self::KINDS.iter().copied().find(|k| k.claims(target)))
    }

    /// How `--help` shows `kind`: its form and what it is.
    fn shown(&self, kind: &Kind) -> String {
        format!("`{}` ({})", kind.form(), kind.about)
    }

    /// Its options, checked, or a one-line refusal; every flag its kind
    /// does not read is refused before ([`refuse_unread`]). `given` are
    /// the flags given, as `--name`.
    fn resolve(
        &self,
        shared: &SharedArgs,
        own: Self::Flags,
        given: &[String],
    ) -> Result<Box<dyn Launch>, String>;
}

/// [`Target`] as `targets/mod.rs` lists them, side by side.
pub trait TargetOptions: Sync {
    /// Adds its own flag group.
    fn augment(&self, command: Command) -> Command;
    /// Every kind it has.
    fn kinds(&self) -> &'static [&'static Kind];
    /// See [`Target::kind`].
    fn kind(&self, target: &str) -> Result<Option<&'static Kind>, String>;
    /// See [`Target::shown`].
    fn shown(&self, kind: &Kind) -> String;
    /// Its own group read from `matches`, then [`Target::resolve`].
    fn resolve(
        &self,
        shared: &SharedArgs,
        matches: &ArgMatches,
        given: &[String],
    ) -> Result<Box<dyn Launch>, String>;
}

impl<T: Target> TargetOptions for T {
    fn augment(&self, command: Command) -> Command {
        T::Flags::augment_args(command)
    }

    fn kinds(&self) -> &'static [&'static Kind] {
        T::KINDS
    }

    fn kind(&self, target: &str) -> Result<Option<&'static Kind>, String> {
        Target::kind(self, target)
    }

    fn shown(&self, kind: &Kind) -> String {
        Target::shown(self, kind)
    }

    fn resolve(
        &self,
        shared: &SharedArgs,
        matches: &ArgMatches,
        given: &[String],
    ) -> Result<Box<dyn Launch>, String> {
        Target::resolve(self, shared, group(matches)?, given)
    }
}

/// A target's own flag group, read from the command line clap parsed.
fn group<A: FromArgMatches>(matches: &ArgMatches) -> Result<A, String> {
    A::from_arg_matches(matches).map_err(|e| {
        let text = e.to_string();
        text.lines().next().unwrap_or("bad arguments").to_string()
    })
}

/// A target's options, resolved, as `dyn Any`: `into_any` for every
/// `'static` type, written once.
pub trait IntoAny {
    /// The options themselves, for a caller that needs one target's.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Any> IntoAny for T {
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// A target's options, resolved: what runs, and what `--dry-run` shows;
/// `into_any` (from [`IntoAny`]) for a caller that needs one target's (a
/// run in memory needs the simulator's).
pub trait Launch: std::fmt::Debug + IntoAny {
    /// Runs the experiment.
    fn run(self: Box<Self>, common: Common) -> Result<RunSummary, String>;
    /// Where the pollers' first requests would go, or why this target has
    /// none to show.
    fn dry_run(&self) -> Result<DryRun, String>;
    /// The pollers of a run without `--poller`.
    fn default_pollers(&self) -> Vec<CursorPolicy> {
        crate::session::default_pollers()
    }
}

/// What `--dry-run` shows of a target: where its pollers' requests go.
pub struct DryRun {
    pub base: String,
    pub dialect: Dialect,
    /// `None`: the run starts with a probe to see the IDs.
    pub layout: Option<Layout>,
    /// Whether a token is sent (shown redacted).
    pub token: bool,
}

impl DryRun {
    /// The first request each poller would make, token redacted.
    pub fn describe(&self, common: &Common) -> String {
        let mut out = format!("target {} (dry run: nothing is sent)\n", common.target);
        let Some(layout) = &self.layout else {
            // No layout yet: the run starts with one probe to see the IDs.
            out.push_str(&format!(
                "layout probe: {}\n(the pollers' requests depend on the layout detected; pass --layout to see them)\n",
                self.dialect.describe_layout_probe(&self.base, self.token)
            ));
            return out;
        };
        let limit = self.dialect.page_limit(common.limit as usize);
        let now = crate::clock::now_ms();
        let names = crate::session::poller_names(&common.pollers);
        for (name, policy) in names.iter().zip(&common.pollers) {
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
                self.dialect.describe(&self.base, layout, &req, self.token)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: Kind = Kind {
        name: "own:URL",
        about: "yours",
        within: &["cluster"],
        reads: &["--table", "--via"],
        refusals: &[(&["--writers"], "{flag} writes nothing to '{target}'")],
        ..Kind::PLAIN
    };
    const CLUSTER: Kind = Kind {
        name: "cluster",
        about: "ours",
        reads: &["--writers", "--via", "--schema"],
        ..Kind::PLAIN
    };
    const OTHER: Kind = Kind {
        name: "other",
        about: "theirs",
        reads: &["--schema"],
        ..Kind::PLAIN
    };

    fn rows() -> Vec<Row> {
        let flags = ["--writers", "--table", "--via", "--schema", "--unread"].map(String::from);
        let kinds: Vec<(&'static Kind, Vec<String>)> = [&OWN, &CLUSTER, &OTHER]
            .into_iter()
            .map(|k| (k, k.reads.iter().map(|f| f.to_string()).collect()))
            .collect();
        table(&flags, &kinds)
    }

    #[test]
    fn the_table_gathers_the_kinds_each_flag_applies_to_and_words_its_refusal() {
        let t = rows();
        let names = |r: &Row| r.applies_to.iter().map(|k| k.name).collect::<Vec<_>>();
        assert_eq!(t.len(), 4, "a flag no kind reads is no row");
        assert_eq!(names(&t[0]), ["cluster"]);
        assert_eq!(names(&t[1]), ["own:URL"]);
        assert_eq!(
            t[1].refusal(),
            "--table applies to --target own:URL only, not '{target}'"
        );
        // own:URL is within cluster: named once, as cluster.
        assert_eq!(
            t[2].refusal(),
            "--via applies to --target cluster only, not '{target}'"
        );
        assert_eq!(
            t[3].refusal(),
            "--schema applies to --target cluster and --target other only, not '{target}'"
        );
        assert!(OWN.claims("own:x") && !OWN.claims("own") && CLUSTER.claims("cluster"));
    }

    #[test]
    fn a_flag_given_where_it_does_not_apply_is_refused_in_the_kinds_words_or_the_tables() {
        let given = |f: &str| vec![f.to_string()];
        assert_eq!(
            refuse_unread(&rows(), &OWN, &given("--writers"), "own:x").unwrap_err(),
            "--writers writes nothing to 'own:x'"
        );
        assert_eq!(
            refuse_unread(&rows(), &CLUSTER, &given("--table"), "cluster").unwrap_err(),
            "--table applies to --target own:URL only, not 'cluster'"
        );
        assert!(refuse_unread(&rows(), &CLUSTER, &given("--writers"), "cluster").is_ok());
        assert!(refuse_unread(&rows(), &OWN, &[], "own:x").is_ok());
    }
}
