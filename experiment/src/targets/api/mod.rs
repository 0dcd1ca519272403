//! `--target KIND:SPEC`: a real API (Mastodon, X, Twitter v1.1, Misskey,
//! Discord), polled in real time over HTTPS; no truth, so `analyze` compares
//! the pollers with each other. The API's facts live in its home under
//! `crate::api`; this module only runs the pollers against it.

pub mod options;

use crate::api::spec::Resolved;
use crate::api::{HttpTarget, Token, http_client};
use crate::drive::Tally;
use crate::record::Recorder;
use crate::session::{
    self, Bar, Common, RunRowParts, RunSummary, StoredConfig, build_pollers, plan_of, poller_infos,
};
use crate::sim::sync::lock;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A real API's options, resolved: its base URL, dialect and layout
/// (`crate::api::spec`), `--list-id` as given, and where its token comes from.
#[derive(Clone, Debug)]
pub struct ApiOpts {
    pub resolved: Resolved,
    pub list_id: Option<String>,
    pub token_file: Option<PathBuf>,
}

/// Reads the token (environment or `--token-file`) and prints the warnings about it.
pub fn load_token(opts: &ApiOpts) -> Result<Option<Token>, String> {
    let token = Token::load(
        opts.resolved.dialect.token_env(),
        opts.token_file.as_deref(),
    )?;
    for warning in token_warnings(
        &opts.resolved.base,
        opts.token_file.as_deref(),
        token.is_some(),
    ) {
        eprintln!("{warning}");
    }
    Ok(token)
}

/// Warnings (never refusals) about how a token is kept and where it goes: a
/// token file others can read, or a token sent in clear text off this machine.
pub fn token_warnings(base: &str, token_file: Option<&Path>, token: bool) -> Vec<String> {
    let mut out = Vec::new();
    #[cfg(unix)]
    if let Some(path) = token_file {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o044 != 0 {
                out.push(format!(
                    "warning: the token file {} is readable by other users (mode {mode:o}); chmod 600 it",
                    path.display()
                ));
            }
        }
    }
    if token && let Ok(url) = reqwest::Url::parse(base) {
        let host = url.host_str().unwrap_or_default();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = bare.eq_ignore_ascii_case("localhost")
            || bare
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if url.scheme() == "http" && !loopback {
            out.push(format!(
                "warning: the token is sent over plain http:// to {host}, readable by anyone on the way; use https://"
            ));
        }
    }
    out
}

/// Polls a real API in real time; no truth.
pub fn run(common: Common, opts: ApiOpts) -> Result<RunSummary, String> {
    let token = load_token(&opts)?;
    let resolved = opts.resolved;
    let runtime = session::runtime()?;
    let client = http_client(Duration::from_millis(common.timeout_ms))?;
    let layout = match resolved.layout.clone() {
        Some(layout) => layout,
        None => {
            let layout = runtime.block_on(resolved.dialect.detect_layout(
                &client,
                &resolved.base,
                token.as_ref(),
            ))?;
            tracing::info!(layout = %layout, "ID layout detected from the first notes");
            layout
        }
    };
    let dialect = resolved.dialect.clone();
    let limit = dialect.page_limit(common.limit as usize);
    let (pollers, names, final_wait_ms) = build_pollers(&common, &layout, limit);
    let start_ms = crate::clock::now_ms();
    let stored = StoredConfig {
        timeline: dialect.timeline(),
        base_url: Some(resolved.base.clone()),
        list_id: opts.list_id.as_deref(),
        token: token.as_ref().map(|_| "<redacted>"),
        ..StoredConfig::common(&common, limit, names, &layout)
    };
    let run_info = session::run_row(&common, RunRowParts::new(start_ms, &layout, limit, &stored))?;
    let recorder = Recorder::create(&common.db, &run_info, &poller_infos(&pollers))?;
    let run_id = recorder.run_id;
    let plan = plan_of(&common, &layout, pollers, final_wait_ms);
    let bar = Bar::new(common.duration_ms, 60_000);
    tracing::info!(run = run_id, db = %common.db.display(), target = %common.target, "run started");
    let progress = Arc::new(Mutex::new(Tally::new(&plan.pollers)));
    let target = HttpTarget::new(client, &resolved.base, dialect, layout, token);
    let live = session::Live {
        recorder: &recorder,
        progress: progress.clone(),
        bar: &bar,
        start_ms,
    };
    let reason = runtime.block_on(session::poll_in_real_time(plan, target, None, live));
    let progress = lock(&progress).progress.clone();
    bar.finish();
    let reason = session::end_reason(reason);
    recorder.finish(crate::clock::now_ms(), true, reason)?;
    let summary = RunSummary::finished(&common, run_id, reason, progress, String::new());
    Ok(summary)
}
