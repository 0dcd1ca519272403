//! `--target simulator` (the default) on the command line: the simulator's
//! own flags (its profile and what overrides it, its backlog, its faults),
//! and its options from them.

use super::SimOpts;
use crate::options::{DryRun, Kind, Launch, SharedArgs, Target};
use crate::session::{Common, RunSummary};
use crate::sim::faults::FaultSpec;
use clap::Args;
use since_id::time::parse_duration_ms;
use std::path::PathBuf;

/// The simulator's own flags.
#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    /// Simulator profile: twitter, mastodon, misskey or discord.
    #[arg(long, default_value = "twitter")]
    pub profile: String,
    /// A TOML file of simulator parameters, applied over the profile.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// One simulator parameter, KEY=VALUE (repeatable; after --config).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// History the simulator holds when the run starts (default 5m; 0s: an empty timeline).
    #[arg(long, value_parser = parse_duration_ms)]
    pub backlog: Option<u64>,
    /// Faults the simulator injects, e.g. 5xx=2%,429=1%,timeout=1%,reset=0.5%,truncate=0.5%,reorder=1%,duplicate=1%,slow=2%:3s
    #[arg(long, value_parser = parse_faults)]
    pub faults: Option<FaultSpec>,
}

fn parse_faults(text: &str) -> Result<FaultSpec, String> {
    text.parse()
}

const SIMULATOR: Kind = Kind {
    name: "simulator",
    about: "the embedded leaky timeline, the default",
    named: Some("the simulator"),
    reads_own_group: true,
    reads: &["--timeline"],
    refusals: &[(
        &["--list-id", "--base-url", "--layout", "--token-file"],
        "{flag} applies to real targets only (the simulator is configured with --profile and --set)",
    )],
    ..Kind::PLAIN
};

/// The embedded simulator on the command line.
pub struct Simulator;

impl Target for Simulator {
    type Flags = SimArgs;
    const KINDS: &'static [&'static Kind] = &[&SIMULATOR];

    /// With its profiles, from the simulator's own list.
    fn shown(&self, kind: &Kind) -> String {
        let profiles = crate::sim::model::SimConfig::PROFILES.join("|");
        format!("`{}` ({}; profiles {profiles})", kind.form(), kind.about)
    }

    fn resolve(
        &self,
        shared: &SharedArgs,
        own: SimArgs,
        _given: &[String],
    ) -> Result<Box<dyn Launch>, String> {
        shared.no_xmin(&format!("'{}'", shared.target))?;
        let config_text = match &own.config {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            ),
            None => None,
        };
        let mut opts = SimOpts::new(
            &own.profile,
            config_text.as_deref(),
            &own.sets,
            shared.timeline.as_deref(),
        )?;
        opts.start_ms = shared.start;
        if let Some(backlog) = own.backlog {
            opts.backlog_ms = backlog;
        }
        opts.faults = own.faults;
        Ok(Box::new(opts))
    }
}

impl Launch for SimOpts {
    fn run(self: Box<Self>, common: Common) -> Result<RunSummary, String> {
        super::run(common, *self)
    }

    fn dry_run(&self) -> Result<DryRun, String> {
        let (layout, dialect) = super::dry_run_target(self);
        Ok(DryRun {
            base: "http://127.0.0.1:PORT".to_string(),
            dialect,
            layout: Some(layout),
            token: false,
        })
    }
}
