//! `experiment sweep run DIR [--index N]`: one planned run, as a job
//! array's task or an Indexed Job's pod runs it (docs/campaigns.md, "On a
//! cluster"). The index is `--index`, else `SLURM_ARRAY_TASK_ID`, else
//! `JOB_COMPLETION_INDEX`. The run is written aside and renamed to
//! `runs/INDEX.db` once finished (`files.rs`), with the machine it ran on;
//! an index already finished does nothing, so a requeued task or a pod
//! started twice loses no finished run; a failed attempt leaves
//! `INDEX.failed.json` in `runs` (with its error), which the next success removes.

use super::files::{self, Entry};
use super::machine::Machine;
use super::plan::{self, Plan, PlannedRun};
use super::store::{self, RunRecord};
use crate::clock::now_ms;
use crate::targets::run_in_campaign;
use std::path::Path;

/// A failed attempt, as `INDEX.failed.json` in `runs` keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Failure {
    pub plan: String,
    pub index: usize,
    pub error: String,
    pub machine: Machine,
    pub at_ms: i64,
}

/// Runs the plan's run `index` (or the scheduler's); the exit status: 0
/// when it finished now or before, 1 when it failed (recorded). Bad input
/// (no plan, another version, an index out of range, a runs directory of
/// another plan) is an error: one line, exit 2.
pub fn run_command(dir: &Path, index: Option<usize>) -> Result<u8, String> {
    let plan = files::read_plan(dir)?;
    let name = files::plan_path(dir).display().to_string();
    plan::check_runner(&plan, &name, env!("CARGO_PKG_VERSION"))?;
    let index = plan::index_of(
        index,
        std::env::var("SLURM_ARRAY_TASK_ID").ok().as_deref(),
        std::env::var("JOB_COMPLETION_INDEX").ok().as_deref(),
        plan.runs.len(),
    )?;
    let run = &plan.runs[index];
    let runs = files::runs_dir(dir);
    std::fs::create_dir_all(&runs).map_err(|e| format!("{}: {e}", runs.display()))?;
    let done = runs.join(format!("{index}.db"));
    let which = describe(run);
    if done.exists() {
        match store::read(&done) {
            Ok(Some((record, _))) if record.plan == plan.id && record.index == index => {
                eprintln!(
                    "run {index} ({which}) finished before, on {}: nothing to do ({})",
                    record.machine.node,
                    done.display()
                );
                return Ok(0);
            }
            Ok(Some((record, _))) => {
                return Err(format!(
                    "{} is run {} of plan {}, not of this plan ({}): the runs directory mixes plans (a plan a directory)",
                    done.display(),
                    record.index,
                    plan::short(&record.plan),
                    plan::short(&plan.id)
                ));
            }
            // Not a finished run: an earlier attempt's leftover, replaced below.
            Ok(None) | Err(_) => {}
        }
    }
    check_failed_marker(&runs, &plan, index)?;
    let machine = Machine::here();
    clear_dead_attempts(&runs, index, &machine.host);
    let aside = runs.join(files::partial_name(
        index,
        &machine.host,
        std::process::id(),
        "db",
    ));
    let started_at_ms = now_ms();
    let record = |ended_at_ms| RunRecord {
        plan: plan.id.clone(),
        index,
        combination: run.combination.clone(),
        seed: run.seed,
        experiment: env!("CARGO_PKG_VERSION").into(),
        machine: machine.clone(),
        started_at_ms,
        ended_at_ms,
        job: job_name(&machine.host),
    };
    let outcome = match plan.kind.as_str() {
        "virtual" => super::run_seed(&run.flags, run.seed)
            .and_then(|result| store::finish(&aside, &record(now_ms()), Some(&result))),
        _ => run_in_campaign(&run.flags, run.seed, &aside).and_then(|summary| {
            match summary.complete {
                true => store::finish(&aside, &record(now_ms()), None),
                false => Err("interrupted (a signal ended the run before its duration)".into()),
            }
        }),
    }
    .and_then(|()| files::publish(&aside, &done));
    let failed = runs.join(format!("{index}.failed.json"));
    match outcome {
        Ok(()) => {
            let _ = std::fs::remove_file(&failed);
            eprintln!(
                "run {index} ({which}) finished on {} in {:.1} s: {}",
                machine.node,
                (now_ms() - started_at_ms) as f64 / 1000.0,
                done.display()
            );
            Ok(0)
        }
        Err(error) => {
            files::remove_db(&aside);
            let failure = Failure {
                plan: plan.id.clone(),
                index,
                error: error.clone(),
                machine: machine.clone(),
                at_ms: now_ms(),
            };
            let text = serde_json::to_string_pretty(&failure).map_err(|e| e.to_string())?;
            files::write_atomically(&failed, text.as_bytes())?;
            eprintln!(
                "run {index} ({which}) failed on {}: {error} ({})",
                machine.node,
                failed.display()
            );
            Ok(1)
        }
    }
}

/// `seed 3` or `interval=1s seed 3`.
pub fn describe(run: &PlannedRun) -> String {
    match run.combination.is_empty() {
        true => format!("seed {}", run.seed),
        false => format!("{} seed {}", run.combination, run.seed),
    }
}

/// A failed attempt's record of another plan is a mixed directory too.
fn check_failed_marker(runs: &Path, plan: &Plan, index: usize) -> Result<(), String> {
    let path = runs.join(format!("{index}.failed.json"));
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    match serde_json::from_str::<Failure>(&text) {
        Ok(f) if f.plan != plan.id => Err(format!(
            "{} is of plan {}, not of this plan ({}): the runs directory mixes plans (a plan a directory)",
            path.display(),
            plan::short(&f.plan),
            plan::short(&plan.id)
        )),
        _ => Ok(()),
    }
}

/// Removes this index's aside files left on this host by attempts whose
/// process is gone (killed halfway). Another host's are left alone: this
/// host cannot tell whether they are still under way.
fn clear_dead_attempts(runs: &Path, index: usize, host: &str) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Entry::Partial {
            index: i,
            host: h,
            pid,
        } = files::entry(&name)
            && i == index
            && h == host
            && !files::alive(pid)
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The scheduler's name of this task: `JOBID_TASK` in a Slurm array, the
/// pod's host name in a Kubernetes Indexed Job.
fn job_name(host: &str) -> Option<String> {
    let var = |n: &str| std::env::var(n).ok();
    match (var("SLURM_ARRAY_JOB_ID"), var("SLURM_ARRAY_TASK_ID")) {
        (Some(job), Some(task)) => Some(format!("{job}_{task}")),
        _ => var("JOB_COMPLETION_INDEX").map(|_| host.to_string()),
    }
}
