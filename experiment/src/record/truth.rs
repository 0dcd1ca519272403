//! Run databases written outside a run's recorder thread: the truth file of
//! `experiment serve --truth` (its `runs` row and every status's truth, on
//! a thread of its own), and the side tables a served backend hands over
//! once its recorder has finished (misskey-ftt's pushes, trims and
//! deletions). With [`writer`](super::writer), the only code that opens
//! run.db for writing.

use rundb::write::{self, OnConflict};
use rundb::{FttRows, RunRow, TruthRow};
use rusqlite::Connection;
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Writes truth batches to a truth file on its own thread (SQLite is
/// blocking), one transaction per batch.
pub struct TruthWriter {
    batches: mpsc::Sender<Vec<TruthRow>>,
    thread: JoinHandle<Result<(), String>>,
}

impl TruthWriter {
    /// Creates (or opens) the run database at `path` ([`rundb::write::open`]:
    /// refused if another program's or of a newer schema) and adds `run`.
    pub fn open(path: &Path, run: &RunRow) -> Result<TruthWriter, String> {
        let conn = write::open(path, "--truth")?;
        let (run_id, _) = write::add_run(&conn, run, &[])
            .map_err(|e| format!("truth database {}: {e}", path.display()))?;
        let path = path.display().to_string();
        let (batches, received) = mpsc::channel::<Vec<TruthRow>>();
        let thread = std::thread::spawn(move || -> Result<(), String> {
            let mut conn = conn;
            let mut first_error = None;
            for batch in received {
                if let Err(e) = write_truth(&mut conn, run_id, &batch) {
                    first_error.get_or_insert(format!("writing truth to {path}: {e}"));
                }
            }
            write::end_run(&conn, run_id, crate::clock::now_ms(), true, "stopped")
                .and_then(|()| write::close(conn))
                .map_err(|e| format!("closing the run in {path}: {e}"))?;
            first_error.map_or(Ok(()), Err)
        });
        Ok(TruthWriter { batches, thread })
    }

    pub fn send(&self, batch: Vec<TruthRow>) {
        if !batch.is_empty() {
            // A send fails only if the thread ended; finish() reports why.
            let _ = self.batches.send(batch);
        }
    }

    /// Writes what is queued, closes the run and the file.
    pub fn finish(self) -> Result<(), String> {
        drop(self.batches);
        self.thread
            .join()
            .map_err(|_| "truth writer panicked".to_string())?
    }
}

/// Inserts one batch of truth in one transaction; a status already there is
/// replaced (the latest batch knows the most).
fn write_truth(conn: &mut Connection, run_id: i64, rows: &[TruthRow]) -> Result<(), rundb::Error> {
    let tx = conn
        .transaction()
        .map_err(|e| rundb::Error(format!("cannot write the run database: {e}")))?;
    write::insert_truth(&tx, run_id, rows, OnConflict::Replace)?;
    tx.commit()
        .map_err(|e| rundb::Error(format!("cannot write the run database: {e}")))
}

/// Adds misskey-ftt's side tables (pushes, trims, deletions) to run
/// `run_id` of `db`, after the run's recorder has closed the file.
pub fn append_ftt(db: &Path, run_id: i64, rows: &FttRows) -> Result<(), String> {
    let mut conn =
        Connection::open(db).map_err(|e| format!("cannot open {}: {e}", db.display()))?;
    let e = |e: rusqlite::Error| format!("cannot write ftt_pushes: {e}");
    let tx = conn.transaction().map_err(e)?;
    write::insert_ftt(&tx, run_id, rows)
        .map_err(|err| format!("cannot write ftt_pushes: {err}"))?;
    tx.commit().map_err(e)
}
