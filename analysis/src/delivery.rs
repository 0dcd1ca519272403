//! How long a poller took to deliver what the database committed: from each
//! row's commit timestamp (`writer_brackets.commit_ts_ms`, a PostgreSQL run's
//! writer brackets) to the first response of the poller that returned it.
//! The PostgreSQL target prints it for its xmin pollers.

use std::path::Path;

/// The delays of `poller` in run `run_id` of the database at `db`, ms,
/// ascending: one per row it returned that has a commit timestamp.
pub fn after_commit_ms(db: &Path, run_id: i64, poller: &str) -> Result<Vec<i64>, String> {
    let conn = rundb::read::open(db).map_err(|e| e.to_string())?;
    rundb::read::delays_after_commit(&conn, run_id, poller)
        .map_err(|e| format!("cannot read {}: {e}", db.display()))
}

/// The summary line of `poller`'s delays ([`after_commit_ms`]): p50, p99
/// and max (nearest rank), or that it delivered nothing.
pub fn after_commit_line(db: &Path, run_id: i64, poller: &str) -> Result<String, String> {
    let delays = after_commit_ms(db, run_id, poller)?;
    Ok(line(poller, &delays))
}

/// The line of ascending `delays`.
fn line(poller: &str, delays: &[i64]) -> String {
    if delays.is_empty() {
        return format!("{poller}: delivered nothing\n");
    }
    let q = |f: f64| delays[((delays.len() - 1) as f64 * f).round() as usize];
    format!(
        "{poller}: delivery after commit p50 {} ms, p99 {} ms, max {} ms ({} rows)\n",
        q(0.5),
        q(0.99),
        q(1.0),
        delays.len()
    )
}

#[cfg(test)]
mod tests {
    use super::line;

    #[test]
    fn the_line_takes_the_nearest_rank() {
        assert_eq!(line("xmin", &[]), "xmin: delivered nothing\n");
        let delays: Vec<i64> = (1..=101).collect();
        assert_eq!(
            line("xmin", &delays),
            "xmin: delivery after commit p50 51 ms, p99 100 ms, max 101 ms (101 rows)\n"
        );
    }
}
