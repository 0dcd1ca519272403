//! A planned run's file, `runs/INDEX.db`: for a campaign the run's own
//! database (docs/rundb.md), for a virtual sweep a database of its own; in
//! either, one row of `sweep_run` written last, in one transaction with a
//! virtual run's result: which plan and index it is, where it ran
//! ([`Machine`]), when, and (virtual) the seed's judged rows. A file
//! without that row is not a finished run.

use super::machine::Machine;
use analysis::sweep::{SeedResult, SeedRow};
use rusqlite::{Connection, OptionalExtension, params};
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
/// [`SeedResult`] and [`SeedRow`]: every value an integer, so it reads back
/// exactly).
#[derive(Serialize, Deserialize)]
struct Stored {
    rows: Vec<StoredRow>,
    statuses: u64,
    lateness_ms: Vec<i64>,
}

#[derive(Serialize, Deserialize)]
struct StoredRow {
    seed: u64,
    poller: String,
    requests: u64,
    seen: u64,
    duplicates: u64,
    leaks: u64,
    missed: u64,
    max_requests_15min: u64,
    detection_p50_ms: Option<i64>,
    detection_p99_ms: Option<i64>,
    detection_max_ms: Option<i64>,
    oracle_duplicates: Option<u64>,
    oracle_new: Option<u64>,
    duration_ms: u64,
}

impl From<&SeedRow> for StoredRow {
    fn from(r: &SeedRow) -> StoredRow {
        StoredRow {
            seed: r.seed,
            poller: r.poller.clone(),
            requests: r.requests,
            seen: r.seen,
            duplicates: r.duplicates,
            leaks: r.leaks,
            missed: r.missed,
            max_requests_15min: r.max_requests_15min,
            detection_p50_ms: r.detection_p50_ms,
            detection_p99_ms: r.detection_p99_ms,
            detection_max_ms: r.detection_max_ms,
            oracle_duplicates: r.oracle_duplicates,
            oracle_new: r.oracle_new,
            duration_ms: r.duration_ms,
        }
    }
}

impl From<StoredRow> for SeedRow {
    fn from(r: StoredRow) -> SeedRow {
        SeedRow {
            seed: r.seed,
            poller: r.poller,
            requests: r.requests,
            seen: r.seen,
            duplicates: r.duplicates,
            leaks: r.leaks,
            missed: r.missed,
            max_requests_15min: r.max_requests_15min,
            detection_p50_ms: r.detection_p50_ms,
            detection_p99_ms: r.detection_p99_ms,
            detection_max_ms: r.detection_max_ms,
            oracle_duplicates: r.oracle_duplicates,
            oracle_new: r.oracle_new,
            duration_ms: r.duration_ms,
        }
    }
}

const TABLE: &str = "CREATE TABLE IF NOT EXISTS sweep_run (
    plan TEXT NOT NULL, idx INTEGER NOT NULL, combination TEXT NOT NULL, seed INTEGER NOT NULL,
    experiment TEXT NOT NULL, machine TEXT NOT NULL, started_at_ms INTEGER NOT NULL,
    ended_at_ms INTEGER NOT NULL, job TEXT, result TEXT)";

/// Marks the database at `path` a finished run: its `sweep_run` row (and a
/// virtual run's result) in one transaction, the journal folded back so
/// that the file alone is the run.
pub fn finish(path: &Path, record: &RunRecord, result: Option<&SeedResult>) -> Result<(), String> {
    let e = |e: rusqlite::Error| format!("{}: {e}", path.display());
    let mut conn = Connection::open(path).map_err(e)?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(e)?;
    // One file: a WAL folded back and gone (a run database is in WAL mode).
    let _: String = conn
        .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
        .map_err(e)?;
    let result = result
        .map(|r| {
            serde_json::to_string(&Stored {
                rows: r.rows.iter().map(StoredRow::from).collect(),
                statuses: r.statuses,
                lateness_ms: r.lateness_ms.clone(),
            })
        })
        .transpose()
        .map_err(|err| err.to_string())?;
    let machine = serde_json::to_string(&record.machine).map_err(|err| err.to_string())?;
    let tx = conn.transaction().map_err(e)?;
    tx.execute_batch(TABLE).map_err(e)?;
    tx.execute("DELETE FROM sweep_run", []).map_err(e)?;
    tx.execute(
        "INSERT INTO sweep_run VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            record.plan,
            record.index as i64,
            record.combination,
            record.seed as i64,
            record.experiment,
            machine,
            record.started_at_ms,
            record.ended_at_ms,
            record.job,
            result,
        ],
    )
    .map_err(e)?;
    tx.commit().map_err(e)
}

/// A finished run's record and (virtual) result, read from `path`; `None`
/// for a file that is not a finished run (no `sweep_run` row).
pub fn read(path: &Path) -> Result<Option<(RunRecord, Option<SeedResult>)>, String> {
    let e = |e: rusqlite::Error| format!("{}: {e}", path.display());
    let conn =
        Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(e)?;
    let has_table: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sweep_run'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(e)?
        > 0;
    if !has_table {
        return Ok(None);
    }
    let row = conn
        .query_row(
            "SELECT plan, idx, combination, seed, experiment, machine, started_at_ms, ended_at_ms, job, result FROM sweep_run",
            [],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, i64>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, Option<String>>(8)?,
                    r.get::<_, Option<String>>(9)?,
                ))
            },
        )
        .optional()
        .map_err(e)?;
    let Some((plan, index, combination, seed, experiment, machine, started, ended, job, result)) =
        row
    else {
        return Ok(None);
    };
    let bad = |what: &str, err: serde_json::Error| {
        format!("{}: its sweep_run {what} is damaged: {err}", path.display())
    };
    let machine: Machine = serde_json::from_str(&machine).map_err(|err| bad("machine", err))?;
    let result = result
        .map(|text| serde_json::from_str::<Stored>(&text))
        .transpose()
        .map_err(|err| bad("result", err))?
        .map(|s| SeedResult {
            rows: s.rows.into_iter().map(SeedRow::from).collect(),
            statuses: s.statuses,
            lateness_ms: s.lateness_ms,
        });
    Ok(Some((
        RunRecord {
            plan,
            index: index as usize,
            combination,
            seed: seed as u64,
            experiment,
            machine,
            started_at_ms: started,
            ended_at_ms: ended,
            job,
        },
        result,
    )))
}
