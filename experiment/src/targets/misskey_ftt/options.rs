//! `--target misskey-ftt` on the command line (docs/misskey-ftt.md): the
//! target's own flags (its load, Misskey's switches, the outages it
//! injects), their checks, and its options.

use super::creators::{Deletes, Load};
use super::federation::{DelayDist, LATE_MAX_DEFAULT_MS};
use super::read::{Switches, Window};
use super::{FttOpts, Timeline};
use crate::options::{self, DryRun, Kind, Launch, SharedArgs, Target};
use crate::session::{Common, RunSummary};
use clap::Args;
use since_id::time::parse_duration_ms;

/// The target's own flags. Each is `None` unless given, so that one given
/// elsewhere is refused.
#[derive(Args, Debug, Clone, Default)]
pub struct FttArgs {
    /// misskey-ftt: concurrent note creators, each a Misskey process with its own aidx node ID (default 4).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub creators: Option<u32>,
    /// misskey-ftt: local notes per second, all creators together (default 5).
    #[arg(long, value_parser = options::parse_rate)]
    pub note_rate: Option<f64>,
    /// misskey-ftt: remote notes per second arriving by federation (default 2).
    #[arg(long, value_parser = parse_nonnegative_rate)]
    pub remote_rate: Option<f64>,
    /// misskey-ftt: mean federation delay, published to arrival (default 2s).
    #[arg(long, value_parser = parse_duration_ms)]
    pub federation_delay: Option<u64>,
    /// misskey-ftt: the federation delay's shape, exponential or lognormal (sigma 1, same mean;
    /// default exponential).
    #[arg(long, value_name = "DIST", value_parser = clap::value_parser!(DelayDist))]
    pub federation_delay_dist: Option<DelayDist>,
    /// misskey-ftt: share of remote notes arriving late, from 181 s up to --late-max, 0 to 1
    /// (default 0.02).
    #[arg(long, value_parser = parse_share)]
    pub late_share: Option<f64>,
    /// misskey-ftt: the late notes' ceiling (default 9m); their floor is 181 s, or half the
    /// ceiling below 362 s.
    #[arg(long, value_name = "DURATION", value_parser = parse_late_max)]
    pub late_max: Option<u64>,
    /// misskey-ftt: seed of the follow graph alone (default: --seed), so that seeds vary timing only.
    #[arg(long, value_name = "N")]
    pub graph_seed: Option<u64>,
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

const FTT: Kind = Kind {
    name: "misskey-ftt",
    about: "Misskey's Fanout Timeline on Redis and PostgreSQL",
    reads_own_group: true,
    reads: &["--timeline", "--arrivals"],
    refusals: &[(
        &options::concat::<8>(options::NOT_DATABASE_FLAGS, &["--layout", "--token-file"]),
        "{flag} does not apply to --target misskey-ftt",
    )],
    ..Kind::PLAIN
};

/// Misskey's Fanout Timeline on the command line.
pub struct MisskeyFtt;

impl Target for MisskeyFtt {
    type Flags = FttArgs;
    const KINDS: &'static [&'static Kind] = &[&FTT];

    fn resolve(
        &self,
        shared: &SharedArgs,
        f: FttArgs,
        _given: &[String],
    ) -> Result<Box<dyn Launch>, String> {
        shared.no_xmin("'misskey-ftt'")?;
        shared.real_time_only("misskey-ftt runs in real time")?;
        if f.no_fanout_timeline && !f.ftt_off.is_empty() {
            return Err(
                "--ftt-off switches FTT off for a while; with --no-fanout-timeline it is off for the whole run".into(),
            );
        }
        if f.delete_after.is_some() && f.delete_share.unwrap_or(0.0) == 0.0 {
            return Err(
                "--delete-after says when deleted notes go; give --delete-share above 0 too".into(),
            );
        }
        let (local_users, remote_users, follows_per_user) = f.users.unwrap_or((50, 50, 20));
        let timeline = match &shared.timeline {
            Some(t) => t.parse()?,
            None => Timeline::default(),
        };
        Ok(Box::new(FttOpts {
            load: Load {
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
                federation_delay_dist: f.federation_delay_dist.unwrap_or_default(),
                late_share: f.late_share.unwrap_or(0.02),
                late_max_ms: f.late_max.unwrap_or(LATE_MAX_DEFAULT_MS),
                deletes: Deletes {
                    share: f.delete_share.unwrap_or(0.0),
                    after_ms: f.delete_after.unwrap_or(60_000),
                },
                caps: Default::default(),
                arrivals: shared.workload.arrivals(),
                seed: shared.seed,
                graph_seed: f.graph_seed.unwrap_or(shared.seed),
            },
            timeline,
            switches: Switches {
                fanout_timeline: !f.no_fanout_timeline,
                db_fallback: !f.no_db_fallback,
            },
            ftt_off: ftt_off_windows(&f.ftt_off, shared.duration)?,
            redis_restarts_ms: redis_restarts(&f.redis_restart_at, shared.duration)?,
        }))
    }
}

impl Launch for FttOpts {
    fn run(self: Box<Self>, common: Common) -> Result<RunSummary, String> {
        super::run(common, *self)
    }

    fn dry_run(&self) -> Result<DryRun, String> {
        Err(
            "--dry-run shows a real API's requests; misskey-ftt serves its own on loopback \
             (docs/misskey-ftt.md)"
                .into(),
        )
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
fn ftt_off_windows(given: &[(u64, u64)], duration_ms: u64) -> Result<Vec<Window>, String> {
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
            Ok(Window { from_ms, to_ms })
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

/// `--late-max`: a duration of at least a second (late notes are drawn
/// from half of it up, at the least).
fn parse_late_max(s: &str) -> Result<u64, String> {
    match parse_duration_ms(s) {
        Ok(ms) if ms >= 1_000 => Ok(ms),
        _ => Err(format!(
            "bad --late-max '{s}': expected a duration of at least 1s, such as 9m"
        )),
    }
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
