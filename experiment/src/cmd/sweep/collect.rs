//! `experiment sweep merge DIR`: reads what the plan's tasks left in
//! `DIR/runs` (`files.rs` names it) and hands it to `merge.rs`. A file of
//! another plan, or one whose index is out of the plan's range, refuses the
//! whole merge (a runs directory holds one plan's runs); a finished run is
//! read, a campaign's judged from its database as `sweep` judges it on one
//! machine; failed indices and unfinished attempts are kept to be listed.

use super::files::{self, Entry};
use super::merge::{self, Collected, Merged};
use super::plan::{self, Plan};
use super::run::Failure;
use super::store;
use std::path::{Path, PathBuf};

/// Merges the runs of the plan in `dir`; exit status 0 when every run
/// finished, 1 when some are missing or failed (the summary still
/// printed, over those that finished). With `keep`, a campaign's finished
/// runs are also written there, with those the file kept before whose
/// databases are gone, and the summary is over them all (`report.rs`).
pub fn merge_command(dir: &Path, json: bool, keep: Option<&Path>) -> Result<u8, String> {
    let plan = files::read_plan(dir)?;
    let shown = dir.display().to_string();
    // The plan's runs read (and a campaign's judged), with an estimate, on a
    // terminal only (analysis::progress); cleared before the summary prints.
    let bar = analysis::progress::counted(plan.runs.len() as u64, "runs read");
    let merged: Merged = match plan.kind.as_str() {
        "virtual" => {
            let c = collect(dir, &plan, |_, _, result| {
                bar.inc(1);
                result.ok_or_else(|| "a virtual run without its result".to_string())
            })?;
            if keep.is_some() {
                return Err(
                    "--keep keeps a campaign's runs; a virtual sweep's are made again from its seeds"
                        .into(),
                );
            }
            merge::merge_virtual(&plan, &shown, &c)
        }
        _ => {
            let mut c = collect(dir, &plan, |path, run, _| {
                bar.inc(1);
                analysis::campaign::judge_run(path, &run.combination, run.seed)
            })?;
            if let Some(path) = keep {
                let carried = super::report::carried(path, &plan, &c)?;
                super::report::keep(path, &plan, dir, &c, carried.clone())?;
                // The summary is the kept file's: a run kept before counts
                // as finished, whatever a later attempt left.
                for r in carried {
                    c.failed.retain(|(index, _, _)| *index != r.index);
                    c.partial.retain(|(index, _)| *index != r.index);
                    c.done.push((r.index, r.record, r.result));
                }
            }
            merge::merge_campaign(&plan, &shown, &c)
        }
    };
    bar.finish_and_clear();
    if json {
        println!("{}", merged.json);
    } else {
        print!("{}", merged.text);
    }
    Ok(if merged.complete { 0 } else { 1 })
}

/// A runs directory that mixes plans: one line.
fn mixed(path: &Path, other: &str, plan: &Plan) -> String {
    format!(
        "{} belongs to plan {}, not to this plan {}: the runs directory mixes plans (a plan a directory); nothing merged",
        path.display(),
        plan::short(other),
        plan::short(&plan.id),
    )
}

/// Every entry of `runs/`, each finished run turned into its result by `result_of`.
fn collect<R>(
    dir: &Path,
    plan: &Plan,
    result_of: impl Fn(
        &Path,
        &plan::PlannedRun,
        Option<analysis::sweep::SeedResult>,
    ) -> Result<R, String>,
) -> Result<Collected<R>, String> {
    let runs = files::runs_dir(dir);
    let mut names: Vec<(String, PathBuf)> = match std::fs::read_dir(&runs) {
        Ok(entries) => entries
            .flatten()
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("{}: {e}", runs.display())),
    };
    names.sort();
    let mut c = Collected {
        done: Vec::new(),
        failed: Vec::new(),
        partial: Vec::new(),
        rerun_at: Some(dir.display().to_string()),
    };
    let out_of_range = |path: &Path, index: usize| {
        format!(
            "{}: index {index} is beyond this plan's {} run(s): the runs directory mixes plans; nothing merged",
            path.display(),
            plan.runs.len()
        )
    };
    let mut failures = Vec::new();
    for (name, path) in &names {
        match files::entry(name) {
            Entry::Done(index) => {
                let run = plan
                    .runs
                    .get(index)
                    .ok_or_else(|| out_of_range(path, index))?;
                match store::read(path) {
                    Ok(Some((record, result))) => {
                        if record.plan != plan.id || record.index != index {
                            return Err(mixed(path, &record.plan, plan));
                        }
                        match result_of(path, run, result) {
                            Ok(r) => c.done.push((index, record, r)),
                            Err(e) => c.failed.push((index, record.machine.node.clone(), e)),
                        }
                    }
                    // A finished run's file without its record, or not a database.
                    Ok(None) => c.failed.push((
                        index,
                        "?".into(),
                        format!("{name} is not a finished run of this plan (no sweep_run row)"),
                    )),
                    Err(e) => c.failed.push((index, "?".into(), e)),
                }
            }
            Entry::Failed(index) => {
                plan.runs
                    .get(index)
                    .ok_or_else(|| out_of_range(path, index))?;
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let f: Failure = serde_json::from_str(&text)
                    .map_err(|e| format!("{}: not a failed run's record: {e}", path.display()))?;
                if f.plan != plan.id {
                    return Err(mixed(path, &f.plan, plan));
                }
                failures.push((index, f.machine.node, f.error));
            }
            Entry::Partial { index, .. } => c.partial.push((index, name.clone())),
            Entry::Other => {}
        }
    }
    // A failure that a later attempt made good is history, not a failure.
    for f in failures {
        if !c.done.iter().any(|(i, _, _)| *i == f.0) && !c.failed.iter().any(|(i, _, _)| *i == f.0)
        {
            c.failed.push(f);
        }
    }
    c.partial
        .retain(|(i, _)| !c.done.iter().any(|(d, _, _)| d == i));
    Ok(c)
}
