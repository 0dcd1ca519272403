//! A planned run's file, `runs/INDEX.db`: for a campaign the run's own
//! database (docs/rundb.md), for a virtual sweep a database of its own; in
//! either, one row of `sweep_run` written last, in one transaction with a
//! virtual run's result: which plan and index it is, where it ran
//! ([`Machine`]), when, and (virtual) the seed's judged rows. A file
//! without that row is not a finished run. The table is declared in rundb
//! ([`SweepRunRow`]), which alone writes SQL to a run's file; this file
//! turns a run's record into its row and back.

use super::machine::Machine;
use analysis::sweep::{SeedResult, SeedRow};
use rundb::SweepRunRow;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What a finished run records of itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub plan: String,
    pub index: usize,
    pub combination: String,
    pub seed: u64,
    /// The `experiment` that made it.
    pub experiment: String,
    pub machine: Machine,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    /// The scheduler's name of the task (`SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID`,
    /// or the Kubernetes pod's host name), if any.
    pub job: Option<String>,
}

/// A virtual run's judged result, as stored (the fields of
/// [`SeedResult`], its rows as [`SeedRow`]s: every value an integer, so it
/// reads back exactly).
#[derive(Serialize, Deserialize)]
struct Stored {
    rows: Vec<SeedRow>,
    statuses: u64,
    lateness_ms: Vec<i64>,
}

/// Marks the database at `path` a finished run: its `sweep_run` row (and a
/// virtual run's result) in one transaction, the journal folded back so
/// that the file alone is the run ([`rundb::write::sweep_run`]).
pub fn finish(path: &Path, record: &RunRecord, result: Option<&SeedResult>) -> Result<(), String> {
    let result = result
        .map(|r| {
            serde_json::to_string(&Stored {
                rows: r.rows.clone(),
                statuses: r.statuses,
                lateness_ms: r.lateness_ms.clone(),
            })
        })
        .transpose()
        .map_err(|err| err.to_string())?;
    let machine = serde_json::to_string(&record.machine).map_err(|err| err.to_string())?;
    let row = SweepRunRow {
        plan: record.plan.clone(),
        index: record.index as i64,
        combination: record.combination.clone(),
        seed: record.seed as i64,
        experiment: record.experiment.clone(),
        machine,
        started_at_ms: record.started_at_ms,
        ended_at_ms: record.ended_at_ms,
        job: record.job.clone(),
        result,
    };
    Ok(rundb::write::sweep_run(path, &row)?)
}

/// A finished run's record and (virtual) result, read from `path`; `None`
/// for a file that is not a finished run (no `sweep_run` row).
pub fn read(path: &Path) -> Result<Option<(RunRecord, Option<SeedResult>)>, String> {
    let Some(row) = rundb::read::sweep_run(path)? else {
        return Ok(None);
    };
    let bad = |what: &str, err: serde_json::Error| {
        format!("{}: its sweep_run {what} is damaged: {err}", path.display())
    };
    let machine: Machine = serde_json::from_str(&row.machine).map_err(|err| bad("machine", err))?;
    let result = row
        .result
        .map(|text| serde_json::from_str::<Stored>(&text))
        .transpose()
        .map_err(|err| bad("result", err))?
        .map(|s| SeedResult {
            rows: s.rows,
            statuses: s.statuses,
            lateness_ms: s.lateness_ms,
        });
    Ok(Some((
        RunRecord {
            plan: row.plan,
            index: row.index as usize,
            combination: row.combination,
            seed: row.seed as u64,
            experiment: row.experiment,
            machine,
            started_at_ms: row.started_at_ms,
            ended_at_ms: row.ended_at_ms,
            job: row.job,
        },
        result,
    )))
}
