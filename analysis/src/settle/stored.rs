//! The checker an `experiment watch` run stored in run.db (`watch_state`),
//! read through rundb: the I/O beside the pure [`super::Checker`].

use rusqlite::Connection;

/// The incremental checker an `experiment watch` run stored (`watch_state`,
/// docs/rundb.md), if the run stored one: its verdicts are the run's.
pub fn watch_checker(conn: &Connection, run_id: i64) -> Result<Option<super::Checker>, String> {
    let rows =
        rundb::read::side_rows::<rundb::WatchStateRow>(conn, run_id).map_err(|e| e.to_string())?;
    let Some(row) = rows.into_iter().next() else {
        return Ok(None);
    };
    let mut state: serde_json::Value = serde_json::from_str(&row.state)
        .map_err(|e| format!("run {run_id}: unreadable watch_state: {e}"))?;
    super::Checker::from_value(state["checker"].take()).map(Some)
}
