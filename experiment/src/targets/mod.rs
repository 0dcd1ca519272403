//! The targets, peers side by side, and a run from the command line. Each
//! target is one folder: its `options.rs` parses and checks its own flags
//! (`options::Target`) into its options, which run against what it is and
//! return a [`RunSummary`]. A target imports the shared lower modules
//! (options, session, drive, record, api, sim, servers), never another
//! target nor a command (`tests/architecture.rs` checks it).
//!
//! This module lists them (`TARGETS`) and is the run's entry point, below
//! the commands that start runs (`experiment [OPTIONS]`, `experiment sweep`):
//! [`RunArgs`] (the shared flags and every target's own group), [`resolve`],
//! [`run_experiment`], [`run_in_memory`] and [`dry_run`]. Likewise for
//! `experiment serve` and `judge`: [`ServeArgs`] and [`serve`], which starts
//! the target whose server face `--backend` names; `judge --log NAME` reads
//! the line of [`LOGS`] of that name ([`parse_log`]), and `experiment sweep`
//! runs what [`sweep_of`] says of the target.

pub mod api;
pub mod mariadb;
pub mod misskey_ftt;
pub mod postgres;
pub mod simulator;

/// The databases whose log `judge --log NAME` and `watch --target
/// NAME:URL` read (`logtruth::source::LogSource`), one line each, keyed by
/// the log's name (`LogSource::name`): the one place the commands learn of
/// them.
pub const LOGS: [&dyn LogSource; 2] = [&postgres::log::Log, &mariadb::log::Log];

use crate::drive::Records;
use crate::logtruth::source::LogSource;
use crate::options::{self, Kind, Launch, SharedArgs, TargetOptions};
use crate::record::PollerRow;
use crate::serving::{Backend, ListenArgs};
use crate::session::{Common, RunSummary};
use clap::{ArgMatches, Args, Command, FromArgMatches};
use since_id::id::Layout;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;

/// Every target, in the order `--target` is offered to them: the API last,
/// since what no other claims is an API's `KIND:SPEC` (or a bad --target).
/// A new target is its `pub mod` line above and one line here.
const TARGETS: &[&dyn TargetOptions] = &[
    &simulator::options::Simulator,
    &postgres::options::Postgres,
    &misskey_ftt::options::MisskeyFtt,
    &mariadb::options::Mariadb,
    &api::options::Api,
];

/// The options of a run, as the command line gives them (`experiment
/// [OPTIONS]`): the shared flags, and the command line as clap read it, from
/// which each target reads its own group. [`resolve`] turns them into the
/// `Common` options and one target's.
#[derive(Debug, Clone)]
pub struct RunArgs {
    pub shared: SharedArgs,
    matches: ArgMatches,
}

impl FromArgMatches for RunArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<RunArgs, clap::Error> {
        Ok(RunArgs {
            shared: SharedArgs::from_arg_matches(matches)?,
            matches: matches.clone(),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = RunArgs::from_arg_matches(matches)?;
        Ok(())
    }
}

/// The shared flags, then each target's group: written by hand rather than
/// derived so that the list above is the only place that names the groups;
/// `--target`'s help from the applies-to table (`target_help`).
impl Args for RunArgs {
    fn augment_args(command: Command) -> Command {
        let command = TARGETS
            .iter()
            .fold(SharedArgs::augment_args(command), |c, t| t.augment(c));
        let help = target_help(&command);
        let forms: Vec<&str> = TARGETS
            .iter()
            .flat_map(|t| t.kinds().iter().map(|k| k.form()))
            .collect();
        let short = format!(
            "What to poll: {}, ... (--help: every form, with the flags each reads)",
            forms.join(", ")
        );
        // Each in place: `mut_arg` would move `--target` to the end.
        command.mut_args(|a| {
            if a.get_id() == "target" {
                a.help(short.clone()).long_help(help.clone())
            } else {
                a
            }
        })
    }

    fn augment_args_for_update(command: Command) -> Command {
        RunArgs::augment_args(command)
    }
}

/// The flags of `command`, as `--name`, in the order it declares them.
fn longs(command: &Command) -> Vec<String> {
    command
        .get_arguments()
        .filter_map(|a| a.get_long().map(|long| format!("--{long}")))
        .collect()
}

/// The applies-to table of the run's command line: one row per flag some
/// kind reads (its target's group if it reads that, and its `reads`), in
/// the order the command line declares them.
fn applies_to(command: &Command) -> Vec<options::Row> {
    let mut kinds = Vec::new();
    for t in TARGETS {
        let group = longs(&t.augment(Command::new("group")));
        for kind in t.kinds() {
            let mut reads: Vec<String> = kind.reads.iter().map(|f| f.to_string()).collect();
            if kind.reads_own_group {
                reads.extend(group.iter().cloned());
            }
            kinds.push((*kind, reads));
        }
    }
    options::table(&longs(command), &kinds)
}

/// `--help` of `--target`: every kind of every target, each with the flags
/// it reads besides those every run has (the applies-to table's columns).
fn target_help(command: &Command) -> String {
    let table = applies_to(command);
    let mut help = String::from(
        "What to poll; each target reads the flags named after it besides those every run has, \
         and refuses the others':",
    );
    for t in TARGETS {
        for kind in t.kinds() {
            let reads: Vec<&str> = table
                .iter()
                .filter(|row| row.reads(kind))
                .map(|row| row.flag.as_str())
                .collect();
            help.push_str(&format!("\n- {}: {}", t.shown(kind), reads.join(", ")));
        }
    }
    help
}

/// The target `--target` names, and its kind.
fn claimed(target: &str) -> Result<(&'static dyn TargetOptions, &'static Kind), String> {
    for t in TARGETS {
        if let Some(kind) = t.kind(target)? {
            return Ok((*t, kind));
        }
    }
    Err(format!("bad --target '{target}'"))
}

/// The command line, resolved: the options every run has and one target's.
/// A flag given where it does nothing is refused by the table's one loop
/// (`options::refuse_unread`); the rest is the target's to check.
pub fn resolve(args: RunArgs) -> Result<(Common, Box<dyn Launch>), String> {
    let RunArgs { shared, matches } = args;
    shared.check()?;
    let (target, kind) = claimed(&shared.target)?;
    let command = run_command();
    let given = options::given(&command, &matches);
    options::refuse_unread(&applies_to(&command), kind, &given, &shared.target)?;
    let launch = target.resolve(&shared, &matches, &given)?;
    let pollers = if shared.workload.no_pollers {
        Vec::new()
    } else if shared.pollers.is_empty() {
        launch.default_pollers()
    } else {
        shared.pollers.clone()
    };
    Ok((shared.common(pollers), launch))
}

/// Runs the experiment described by `args`.
pub fn run_experiment(args: RunArgs) -> Result<RunSummary, String> {
    let (common, launch) = resolve(args)?;
    launch.run(common)
}

/// A virtual run against the embedded simulator that writes no database:
/// every record goes to the sink `make` builds from the run's layout and
/// pollers (`experiment sweep` judges each seed's run in memory).
pub fn run_in_memory<S: Records>(
    args: RunArgs,
    make: impl FnOnce(&Layout, &[PollerRow]) -> S,
) -> Result<S, String> {
    let (common, launch) = resolve(args)?;
    match launch.into_any().downcast::<simulator::SimOpts>() {
        Ok(opts) => simulator::run_virtual_to(&common, &opts, make),
        Err(_) => Err("a run in memory needs the embedded simulator".into()),
    }
}

/// `--dry-run`: the first request each poller would make, token redacted.
pub fn dry_run(args: RunArgs) -> Result<String, String> {
    let (common, launch) = resolve(args)?;
    Ok(launch.dry_run()?.describe(&common))
}

/// The options of one seed's virtual run (`experiment sweep`): `base` with
/// `--clock virtual --seed SEED`, checked by the experiment's own parser.
pub fn run_args(base: &[String], seed: u64) -> Result<RunArgs, String> {
    let mut argv = base.to_vec();
    argv.extend([
        "--clock".into(),
        "virtual".into(),
        "--seed".into(),
        seed.to_string(),
    ]);
    parse_run(&argv)
}

/// A run's options from its flags (`--interval 1s ...`), checked by the
/// experiment's own parser as the command line would be; quiet (no
/// progress bar), for a caller that starts many.
pub fn parse_run(flags: &[String]) -> Result<RunArgs, String> {
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        run: RunArgs,
    }
    let mut argv: Vec<String> = vec!["experiment".into()];
    argv.extend(flags.iter().cloned());
    let parsed = <Wrapper as clap::Parser>::try_parse_from(argv).map_err(|e| {
        let text = e.to_string();
        text.lines().next().unwrap_or("bad arguments").to_string()
    })?;
    let mut run = parsed.run;
    run.shared.quiet = true;
    Ok(run)
}

/// The run's command line, shared flags and every target's groups.
fn run_command() -> Command {
    RunArgs::augment_args(Command::new("experiment"))
}

/// Whether `--NAME` is a flag of a run, and if so whether it takes a value
/// (`experiment sweep --vary NAME=...`).
pub fn run_flag(name: &str) -> Option<bool> {
    run_command()
        .get_arguments()
        .find(|a| a.get_long() == Some(name))
        .map(|a| a.get_action().takes_values())
}

/// A run's flags as the command line gave them, not yet resolved: what
/// `experiment sweep` reruns with each seed, database and combination, so
/// it holds the flags themselves rather than a run's options. It parses as
/// [`RunArgs`] does (the same flags, the same errors).
#[derive(Debug, Clone)]
pub struct GivenRun {
    /// `--target`, or its default.
    pub target: String,
    /// The flags given (not their defaults), as (flag, value) pairs, in
    /// the order the flags are declared, a repeated flag's values in the
    /// order given.
    pub flags: Vec<(String, Option<String>)>,
}

impl FromArgMatches for GivenRun {
    fn from_arg_matches(matches: &ArgMatches) -> Result<GivenRun, clap::Error> {
        let run = RunArgs::from_arg_matches(matches)?;
        Ok(GivenRun {
            flags: given_flags(&run),
            target: run.shared.target,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = GivenRun::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for GivenRun {
    fn augment_args(command: Command) -> Command {
        RunArgs::augment_args(command)
    }

    fn augment_args_for_update(command: Command) -> Command {
        RunArgs::augment_args(command)
    }
}

/// The run flags given on the command line (not their defaults), as
/// (flag, value) pairs, in the order the flags are declared, a repeated
/// flag's values in the order given.
fn given_flags(args: &RunArgs) -> Vec<(String, Option<String>)> {
    use clap::parser::ValueSource;
    let mut out = Vec::new();
    for arg in run_command().get_arguments() {
        let (Some(long), id) = (arg.get_long(), arg.get_id().as_str()) else {
            continue;
        };
        if args.matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let flag = format!("--{long}");
        if !arg.get_action().takes_values() {
            out.push((flag, None));
            continue;
        }
        for value in args.matches.get_raw(id).into_iter().flatten() {
            out.push((flag.clone(), Some(value.to_string_lossy().into_owned())));
        }
    }
    out
}

/// One run of a campaign (`experiment sweep --target postgres ...`): `flags`
/// with `--seed SEED --db DB`, in real time, checked and run as
/// `experiment [OPTIONS]` would.
pub fn run_in_campaign(
    flags: &[String],
    seed: u64,
    db: &std::path::Path,
) -> Result<RunSummary, String> {
    let mut argv = flags.to_vec();
    argv.extend([
        "--seed".into(),
        seed.to_string(),
        "--db".into(),
        db.display().to_string(),
    ]);
    run_experiment(parse_run(&argv)?)
}

/// Checks a campaign run's `flags` as [`run_in_campaign`] would run them,
/// without running anything: the target's own refusals, before any run.
pub fn check_campaign_run(flags: &[String]) -> Result<(), String> {
    let mut argv = flags.to_vec();
    argv.extend(["--seed".into(), "1".into()]);
    resolve(parse_run(&argv)?).map(|_| ())
}

/// Run the leaky simulator as an HTTP server (Twitter v1.1, X API v2, Mastodon, Misskey and Discord dialects).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub listen: ListenArgs,
    /// What serves the timeline: `simulator`, `postgres` (a throwaway
    /// PostgreSQL cluster loaded by writers, served in the Mastodon dialect),
    /// or `misskey-ftt` (Misskey's Fanout Timeline on a throwaway Redis and
    /// PostgreSQL, served in the Misskey dialect). A table judged against a
    /// database's log is `judge --log NAME`.
    #[arg(long, default_value = "simulator", value_parser = parse_backend)]
    pub backend: Backend,
    #[command(flatten)]
    pub simulator: simulator::serve::SimServeArgs,
}

/// `--backend NAME`; the name of a database whose log is judged but which
/// serves no timeline is refused with the flag that judges it (`--log NAME`).
fn parse_backend(name: &str) -> Result<Backend, String> {
    name.parse().map_err(|e: String| match parse_log(name) {
        Ok(log) => format!(
            "{e}; a table judged against {} is `experiment judge --log {name} --table T -- \
             COMMAND` (docs/log-truth.md)",
            log.log()
        ),
        Err(_) => e,
    })
}

/// `judge --log NAME`: the line of [`LOGS`] of that name.
pub fn parse_log(name: &str) -> Result<&'static dyn LogSource, String> {
    LOGS.iter()
        .copied()
        .find(|log| log.name() == name)
        .ok_or_else(|| format!("unknown log '{name}': expected {}", log_names()))
}

/// The names of [`LOGS`], as a refusal lists them: "postgres or mariadb".
pub fn log_names() -> String {
    either(&LOGS.map(|log| log.name()))
}

/// Names as a refusal lists them: "a, b or c".
fn either(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// `--help` of `judge --log`: each line of [`LOGS`] and the log it reads.
pub fn log_help() -> String {
    let logs: Vec<String> = LOGS
        .iter()
        .map(|log| format!("`{}` ({})", log.name(), log.log()))
        .collect();
    format!(
        "Judge a table (--table) against this database's own log instead of serving a \
         timeline: {} (docs/log-truth.md)",
        logs.join(" or ")
    )
}

/// `judge` without `--log` serves the simulator to the command; another
/// `--backend` is refused, naming `--log NAME` where that database's log is
/// judged, else how its server face is judged (`serve --record`, `analyze`).
pub fn judge_serves(backend: Backend) -> Result<(), String> {
    if backend == Backend::Simulator {
        return Ok(());
    }
    let name = backend.name();
    let serve = format!(
        "run `experiment serve --backend {name} --record FILE.db` and `analyze FILE.db` \
         (docs/judging.md)"
    );
    Err(match parse_log(name) {
        Ok(log) => format!(
            "judge serves the simulator: a table judged against {} is `--log {name} --table T`; \
             for the timeline --backend {name} serves, {serve}",
            log.log()
        ),
        Err(_) => format!(
            "judge serves the simulator, or judges a table against a database's log (--log \
             {} --table T); for {name}, {serve}",
            LOGS.map(|log| log.name()).join("|")
        ),
    })
}

/// What `experiment sweep` does with a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// Many seeds of a virtual run, judged in memory (the simulator).
    Virtual,
    /// A campaign of real runs, one database each (docs/campaigns.md).
    Campaign,
}

/// The targets `experiment sweep` runs, one line each, by `--target`.
const SWEEPS: [(&str, Sweep); 4] = [
    ("simulator", Sweep::Virtual),
    ("postgres", Sweep::Campaign),
    ("mariadb", Sweep::Campaign),
    ("misskey-ftt", Sweep::Campaign),
];

/// What `experiment sweep --target TARGET` runs, if anything.
pub fn sweep_of(target: &str) -> Option<Sweep> {
    SWEEPS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, sweep)| *sweep)
}

/// The targets of `sweep` that run `kind`, as a refusal lists them:
/// "postgres, mariadb or misskey-ftt".
pub fn sweep_targets(kind: Sweep) -> String {
    let names: Vec<&str> = SWEEPS
        .iter()
        .filter(|(_, sweep)| *sweep == kind)
        .map(|(name, _)| *name)
        .collect();
    either(&names)
}

/// Serves the backend `--backend` names until `shutdown` resolves. `names`
/// are clients named beside `--client`'s, credential -> name (`experiment
/// judge` names the command it runs); the simulator sends the bound address
/// to `ready` once listening.
pub async fn serve(
    args: ServeArgs,
    names: HashMap<String, String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), String> {
    let ServeArgs {
        listen,
        backend,
        simulator,
    } = args;
    let face = format!("--backend {}", backend.name());
    match backend {
        Backend::Simulator => {
            simulator::serve::serve(listen, simulator, names, shutdown, ready).await
        }
        Backend::Postgres => {
            simulator.refuse_on(&face)?;
            postgres::serve::serve(listen, names, shutdown).await
        }
        Backend::MisskeyFtt => {
            simulator.refuse_on(&face)?;
            misskey_ftt::serve::serve(listen, names, shutdown).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of every target, in the order of `TARGETS`.
    fn kinds() -> Vec<&'static Kind> {
        TARGETS
            .iter()
            .flat_map(|t| t.kinds().iter().copied())
            .collect()
    }

    /// The run's applies-to table.
    fn rows() -> Vec<options::Row> {
        applies_to(&run_command())
    }

    #[test]
    fn bigserial_schemas_default_to_the_pollers_that_mean_something_there() {
        for (schema, expected) in [
            ("outbox", "naive xmin"),
            ("partitioned", "naive xmin"),
            ("partitioned-snowflake", "naive compensated:k=1s"),
            ("mastodon", "naive compensated:k=1s"),
        ] {
            let flags: Vec<String> = [
                "--target", "postgres", "--clock", "real", "--schema", schema,
            ]
            .map(String::from)
            .to_vec();
            let (common, _) = resolve(parse_run(&flags).unwrap()).unwrap();
            let names: Vec<String> = common.pollers.iter().map(|p| p.to_string()).collect();
            assert_eq!(names.join(" "), expected, "--schema {schema}");
        }
    }

    #[test]
    fn every_flag_a_kind_names_is_a_row_of_the_table_and_a_flag_of_the_command_line() {
        let rows = rows();
        for t in TARGETS {
            for kind in t.kinds() {
                let named = kind
                    .reads
                    .iter()
                    .chain(kind.refusals.iter().flat_map(|(flags, _)| flags.iter()));
                for flag in named {
                    assert!(
                        rows.iter().any(|r| r.flag == *flag),
                        "{} names {flag}, which is no flag of the command line",
                        kind.name
                    );
                }
            }
        }
    }

    #[test]
    fn the_flags_given_come_back_as_given_and_the_defaults_do_not() {
        let argv: Vec<String> = [
            "--set",
            "a=1",
            "--poller",
            "naive",
            "--interval",
            "2s",
            "--poller",
            "adaptive",
            "--dry-run",
        ]
        .map(String::from)
        .to_vec();
        let given = given_flags(&parse_run(&argv).unwrap());
        let pair = |f: &str, v: Option<&str>| (f.to_string(), v.map(String::from));
        assert_eq!(
            given,
            [
                pair("--dry-run", None),
                pair("--poller", Some("naive")),
                pair("--poller", Some("adaptive")),
                pair("--interval", Some("2s")),
                pair("--set", Some("a=1")),
            ]
        );
        // What the sweep holds: the same flags, and the target they name.
        let held = <GivenRun as FromArgMatches>::from_arg_matches(
            &GivenRun::augment_args(Command::new("experiment"))
                .try_get_matches_from(["experiment", "--target", "postgres", "--interval", "2s"])
                .unwrap(),
        )
        .unwrap();
        assert_eq!(held.target, "postgres");
        assert_eq!(
            held.flags,
            [
                pair("--target", Some("postgres")),
                pair("--interval", Some("2s"))
            ]
        );
        assert_eq!(run_flag("interval"), Some(true));
        assert_eq!(run_flag("autoinc-lock-mode"), Some(true));
        assert_eq!(run_flag("dry-run"), Some(false));
        assert_eq!(run_flag("no-such-flag"), None);
    }

    #[test]
    fn the_table_says_where_each_flag_applies() {
        let rows = rows();
        let applies = |name: &str| {
            rows.iter()
                .find(|r| r.flag == name)
                .map(|r| r.applies_to.iter().map(|k| k.name).collect::<Vec<_>>())
                .unwrap()
        };
        assert_eq!(applies("--schema"), ["postgres", "mariadb"]);
        assert_eq!(applies("--table"), ["postgres:URL", "mariadb:URL"]);
        assert_eq!(applies("--id-poller"), ["mariadb", "mariadb:URL"]);
        assert_eq!(applies("--via"), ["postgres", "postgres:URL"]);
        assert_eq!(applies("--timeline"), ["simulator", "misskey-ftt", "api"]);
        assert_eq!(applies("--creators"), ["misskey-ftt"]);
    }

    /// A value `flag` accepts, the first of a few that clap's parser of it
    /// takes (`None` for a flag that takes none).
    fn sample_value(flag: &str) -> Option<&'static str> {
        if run_flag(flag.trim_start_matches("--")) == Some(false) {
            return None;
        }
        let candidates = [
            "1",
            "2",
            "1s",
            "1%",
            "0.1",
            "1s..2s",
            "50,50,20",
            "1%:1s",
            "t",
            "poisson",
            "sql",
            "incrementing",
            "exponential",
            "none",
            "5xx=1%",
            "a=1",
        ];
        let parses = |v: &str| parse_run(&[flag.to_string(), v.to_string()]).is_ok();
        Some(*candidates.iter().find(|v| parses(v)).unwrap_or_else(|| {
            panic!("no sample value parses for {flag}");
        }))
    }

    /// Every flag of the table against every kind of target: given where
    /// the table says the kind reads it, it passes the refusals (given as
    /// clap saw it given); elsewhere the run is refused, in one line, with
    /// the kind's own words for it or else the table's sentence.
    #[test]
    fn every_flag_is_refused_exactly_where_the_table_says_no_kind_reads_it() {
        let rows = rows();
        let command = run_command();
        for row in &rows {
            let value = sample_value(&row.flag);
            for kind in kinds() {
                let mut argv = vec!["--target".to_string(), kind.form().to_string()];
                argv.push(row.flag.clone());
                argv.extend(value.map(String::from));
                let args = parse_run(&argv).unwrap();
                let given = options::given(&command, &args.matches);
                assert!(given.contains(&row.flag), "{argv:?}: {given:?}");
                let (_, claimed_kind) = claimed(kind.form()).unwrap();
                assert_eq!(claimed_kind.name, kind.name, "{argv:?}");
                let refused = options::refuse_unread(&rows, kind, &given, kind.form());
                if row.reads(kind) {
                    assert!(refused.is_ok(), "{argv:?}: {refused:?}");
                    continue;
                }
                let own = kind
                    .refusals
                    .iter()
                    .find(|(f, _)| f.contains(&row.flag.as_str()));
                let expected = match own {
                    Some((_, own)) => own.replace("{flag}", &row.flag),
                    None => row.refusal(),
                }
                .replace("{target}", kind.form());
                assert_eq!(refused.as_ref().unwrap_err(), &expected, "{argv:?}");
                let err = resolve(args).map(|_| ()).unwrap_err();
                assert_eq!(err, expected, "{argv:?}");
                assert_eq!(err.lines().count(), 1, "{argv:?}");
            }
        }
    }

    /// The sentences of the seven flags whose refusal used to name too
    /// few targets, as the table words them now.
    #[test]
    fn the_refusals_name_every_target_that_reads_the_flag() {
        let rows = rows();
        let refusal = |flag: &str| rows.iter().find(|r| r.flag == flag).unwrap().refusal();
        for flag in [
            "--schema",
            "--writers",
            "--write-rate",
            "--partition-every",
            "--retain",
        ] {
            assert_eq!(
                refusal(flag),
                format!(
                    "{flag} applies to --target postgres and --target mariadb only, not '{{target}}'"
                )
            );
        }
        for flag in ["--table", "--id-column"] {
            assert_eq!(
                refusal(flag),
                format!(
                    "{flag} applies to --target postgres:URL and --target mariadb:URL only, not '{{target}}'"
                )
            );
        }
        // The others as they were.
        assert_eq!(
            refusal("--via"),
            "--via applies to --target postgres only, not '{target}'"
        );
        assert_eq!(
            refusal("--id-poller"),
            "--id-poller applies to --target mariadb only, not '{target}'"
        );
        assert_eq!(
            refusal("--layout"),
            "--layout applies to real targets only, not '{target}'"
        );
        assert_eq!(
            refusal("--set"),
            "--set applies to the simulator only, not '{target}'"
        );
        // A sentence of its own shape names every kind that reads its flag.
        let arrivals = rows.iter().find(|r| r.flag == "--arrivals").unwrap();
        for kind in &arrivals.applies_to {
            assert!(arrivals.refusal().contains(kind.name), "{}", kind.name);
        }
    }

    /// `--target`'s help names every kind of every target, each form
    /// `resolve` accepts, with the flags each reads.
    #[test]
    fn the_target_help_names_every_target_and_what_it_reads() {
        let mut command = run_command();
        let help = command.render_long_help().to_string();
        for kind in kinds() {
            assert!(
                help.contains(&format!("`{}`", kind.form())),
                "{}: {help}",
                kind.form()
            );
            claimed(kind.form()).unwrap();
        }
        for api in crate::api::Api::all() {
            for form in api.specs {
                assert!(help.contains(&format!("`{form}`")), "{form}");
            }
        }
        assert!(help.contains("`mariadb` (a throwaway MariaDB server): --schema, --writers"));
        assert!(help.contains(
            "profiles twitter|mastodon|misskey|discord): --timeline, --profile, --config"
        ));
    }
}
