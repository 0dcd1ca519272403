//! `--target KIND:SPEC` on the command line: a real API's own flags, and
//! its options from them (the spec itself is parsed by `crate::api::spec`).

use super::ApiOpts;
use crate::api::spec::{self, TargetSpec};
use crate::options::{DryRun, Kind, Launch, SharedArgs, Target};
use crate::session::{Common, RunSummary};
use clap::Args;

/// A real API's own flags.
#[derive(Args, Debug, Clone)]
pub struct ApiArgs {
    #[arg(long, help = spec::LIST_ID_HELP)]
    pub list_id: Option<String>,
    #[arg(long, help = spec::BASE_URL_HELP)]
    pub base_url: Option<String>,
}

const API: Kind = Kind {
    name: "api",
    form: Some("mastodon:https://HOST"),
    about: "a real API",
    named: Some("real targets"),
    reads_own_group: true,
    reads: &["--timeline", "--layout", "--token-file"],
    refusals: &[
        (
            &["--config", "--set"],
            "--config and --set configure the simulator; they do not apply to a real target",
        ),
        (
            &["--backlog"],
            "{flag} is the simulator's history; it does not apply to a real target",
        ),
        (
            &["--faults"],
            "{flag} are injected by the simulator; they do not apply to a real target",
        ),
    ],
    ..Kind::PLAIN
};

/// A real API on the command line.
pub struct Api;

impl Target for Api {
    type Flags = ApiArgs;
    const KINDS: &'static [&'static Kind] = &[&API];

    /// Any `KIND:SPEC` of an API; a bad one is refused here, before any flag.
    fn kind(&self, target: &str) -> Result<Option<&'static Kind>, String> {
        Ok(match target.parse::<TargetSpec>()? {
            TargetSpec::Simulator => None,
            _ => Some(&API),
        })
    }

    /// Every API's forms (`api/spec.rs` parses them).
    fn shown(&self, kind: &Kind) -> String {
        let forms: Vec<String> = crate::api::Api::all()
            .into_iter()
            .flat_map(|api| api.specs)
            .map(|form| format!("`{form}`"))
            .collect();
        format!("{} ({})", forms.join(", "), kind.about)
    }

    fn resolve(
        &self,
        shared: &SharedArgs,
        own: ApiArgs,
        _given: &[String],
    ) -> Result<Box<dyn Launch>, String> {
        shared.no_xmin(&format!("'{}'", shared.target))?;
        shared.real_time_only("real targets are polled in real time")?;
        let spec: TargetSpec = shared.target.parse()?;
        let given = spec::TargetOptions {
            timeline: shared.timeline.clone(),
            list_id: own.list_id.clone(),
            base_url: own.base_url,
            layout: shared.layout.clone(),
        };
        Ok(Box::new(ApiOpts {
            resolved: spec.resolve(&given)?,
            list_id: own.list_id,
            token_file: shared.token_file.clone(),
        }))
    }
}

impl Launch for ApiOpts {
    fn run(self: Box<Self>, common: Common) -> Result<RunSummary, String> {
        super::run(common, *self)
    }

    fn dry_run(&self) -> Result<DryRun, String> {
        let token = super::load_token(self)?;
        let r = &self.resolved;
        Ok(DryRun {
            base: r.base.clone(),
            dialect: r.dialect.clone(),
            layout: r.layout.clone(),
            token: token.is_some(),
        })
    }
}
