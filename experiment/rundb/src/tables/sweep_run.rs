//! `sweep_run`: a planned run's record of itself, the one row of its file
//! `runs/INDEX.db` (`experiment sweep`, `campaign`; docs/campaigns.md).

use super::SideTable;
use rusqlite::{Row, Statement, params};

/// The row of `sweep_run`: which plan and index a finished run is, where it
/// ran, when, and (a virtual run) its judged result. The experiment fills
/// the JSON columns (`machine`, `result`) with its own types.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepRunRow {
    pub plan: String,
    /// The run's index in the plan (`idx`).
    pub index: i64,
    pub combination: String,
    /// The seed's bit pattern, as `runs.seed` stores it.
    pub seed: i64,
    /// The `experiment` that made it.
    pub experiment: String,
    /// Where it ran, as JSON.
    pub machine: String,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    /// The scheduler's name of the task, if any.
    pub job: Option<String>,
    /// A virtual run's judged result, as JSON.
    pub result: Option<String>,
}

/// One row per file, written last ([`crate::write::sweep_run`]): a file
/// without it is not a finished run. Its rows name no run.
impl SideTable for SweepRunRow {
    const NAME: &'static str = "sweep_run";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS sweep_run (
    plan TEXT NOT NULL, idx INTEGER NOT NULL, combination TEXT NOT NULL, seed INTEGER NOT NULL,
    experiment TEXT NOT NULL, machine TEXT NOT NULL, started_at_ms INTEGER NOT NULL,
    ended_at_ms INTEGER NOT NULL, job TEXT, result TEXT)";
    const INSERT: &'static str =
        "INSERT INTO sweep_run VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
    const COLUMNS: &'static str = "plan, idx, combination, seed, experiment, machine, \
         started_at_ms, ended_at_ms, job, result";
    const FILTER: &'static str = "";

    fn insert(&self, st: &mut Statement<'_>, _run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            self.plan,
            self.index,
            self.combination,
            self.seed,
            self.experiment,
            self.machine,
            self.started_at_ms,
            self.ended_at_ms,
            self.job,
            self.result
        ])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(SweepRunRow {
            plan: r.get(0)?,
            index: r.get(1)?,
            combination: r.get(2)?,
            seed: r.get(3)?,
            experiment: r.get(4)?,
            machine: r.get(5)?,
            started_at_ms: r.get(6)?,
            ended_at_ms: r.get(7)?,
            job: r.get(8)?,
            result: r.get(9)?,
        })
    }
}
