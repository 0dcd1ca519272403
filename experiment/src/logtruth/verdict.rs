//! Each consumer's verdict from what a log run recorded in run.db: the lines
//! `experiment judge --log ...` and `experiment watch` print after their
//! own first line, and whether any consumer lost a row.

use std::path::{Path, PathBuf};

/// The consumers of run `run_id` of `db` judged (`analysis::consumers`).
pub struct Verdicts {
    /// Rows of the table committed while the run read the log.
    pub committed: usize,
    /// The lines after the command's own first line.
    pub lines: Vec<String>,
    pub any_invalid: bool,
}

/// Judges the consumers named by `delivered` on run `run_id` of `db`, with
/// what the run recorded of them in `runs.config` (`--expect-all`, the
/// promises, the faults injected).
pub fn read(db: &Path, run_id: i64, delivered: &[(String, PathBuf)]) -> Result<Verdicts, String> {
    let names: Vec<String> = delivered.iter().map(|(n, _)| n.clone()).collect();
    let judged = judge(db, run_id, &names)?;
    let mut lines = Vec::new();
    if names.is_empty() {
        lines.push("no --delivered consumer: the truth is recorded, nobody judged".into());
    }
    lines.extend(
        analysis::consumers::render(&judged)
            .lines()
            .map(str::to_string),
    );
    lines.push(format!(
        "the full report: analyze {} --run {run_id}",
        db.display()
    ));
    Ok(Verdicts {
        committed: judged.committed,
        lines,
        any_invalid: judged.any_invalid(),
    })
}

/// The consumers `names` of run `run_id` of `db` judged on what the run
/// recorded so far (`experiment watch` judges a run still recording).
pub fn judge(
    db: &Path,
    run_id: i64,
    names: &[String],
) -> Result<analysis::consumers::Judged, String> {
    let conn = rundb::read::open(db)?;
    let run = rundb::read::run(&conn, run_id)?
        .ok_or_else(|| format!("{} holds no run {run_id}", db.display()))?;
    // A watch run folded its settled rows: its stored checker judges it.
    if let Some(checker) = analysis::settle::stored::watch_checker(&conn, run_id)? {
        return Ok(checker.judged());
    }
    let truth = rundb::read::side_rows::<rundb::LogTruthRow>(&conn, run_id)?;
    let deliveries = rundb::read::side_rows::<rundb::DeliveryRow>(&conn, run_id)?;
    drop(conn);
    let config: serde_json::Value = serde_json::from_str(&run.config)
        .map_err(|e| format!("run {run_id}: unreadable config: {e}"))?;
    let setting = analysis::consumers::Setting::from_config(&config)?;
    Ok(analysis::consumers::judge(
        &truth,
        &deliveries,
        names,
        &setting,
    ))
}

/// What a judge found: one line a client (or consumer), and whether any lost one.
pub struct Judgement {
    pub lines: Vec<String>,
    pub any_invalid: bool,
}
