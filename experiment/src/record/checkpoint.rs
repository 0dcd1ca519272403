//! Folding the recorder's WAL back into the database on a thread of its own.
//!
//! A commit in WAL mode with `synchronous = NORMAL` is an append and no sync;
//! a checkpoint, which copies the WAL's frames into the database, syncs both
//! files (<https://www.sqlite.org/wal.html#ckpt>). Left to SQLite's automatic
//! checkpoint, it runs inside the writer's commit: on this machine its two
//! syncs took 130 to 150 ms, the queue filled behind it, and every client of
//! `experiment serve --record` waited (wrk's worst latency 153 ms against 9 ms
//! alone). So the writer's connection does not checkpoint, and this thread
//! folds the WAL once a second through a second connection with a passive
//! checkpoint, which never waits for the writer nor makes it wait. The
//! writer folds what is left when the run ends (`rundb::write::close`).

use rusqlite::Connection;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the WAL is folded back: the WAL holds about this much of the
/// run between folds.
pub const FOLD_EVERY: Duration = Duration::from_secs(1);

/// The thread that folds the WAL; stopped by [`Checkpointer::stop`] or when dropped.
pub struct Checkpointer {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl Checkpointer {
    /// Takes the checkpoints off `writer` (the recorder's connection to
    /// `path`) and starts folding the WAL every [`FOLD_EVERY`]. `None`, and
    /// the writer keeps checkpointing itself, if a second connection cannot
    /// be opened.
    pub fn start(writer: &Connection, path: &Path) -> Option<Checkpointer> {
        let conn = Connection::open(path).ok()?;
        let automatic: i64 = writer
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .ok()?;
        writer.pragma_update(None, "wal_autocheckpoint", 0).ok()?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("checkpointer".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(FOLD_EVERY) {
                    // A fold that fails (the disk, a lock) is tried again at
                    // the next; the end of the run folds what is left.
                    let _ = fold(&conn);
                }
            });
        match thread {
            Ok(thread) => Some(Checkpointer { stop, thread }),
            Err(_) => {
                let _ = writer.pragma_update(None, "wal_autocheckpoint", automatic);
                None
            }
        }
    }

    /// Stops folding, once the fold under way (if any) is done.
    pub fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}

/// One passive checkpoint of `conn`'s database: the WAL's frames copied into
/// it as far as no reader or writer stands in the way, without waiting for
/// either. Returns the frames in the WAL and those folded.
pub fn fold(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run database of `rows` committed rows in its WAL, none folded.
    fn written(path: &Path, rows: i64) -> Connection {
        let conn = rundb::write::open(path, "--db").unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        for _ in 0..rows {
            tx.execute("INSERT INTO t VALUES (zeroblob(1000))", [])
                .unwrap();
        }
        tx.commit().unwrap();
        conn
    }

    #[test]
    fn a_fold_copies_every_committed_frame_into_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.db");
        let _writer = written(&path, 2_000);
        let size = || std::fs::metadata(&path).unwrap().len();
        let before = size();
        let (frames, folded) = fold(&Connection::open(&path).unwrap()).unwrap();
        assert!(
            frames > 400,
            "2 MB of rows are hundreds of frames: {frames}"
        );
        assert_eq!(folded, frames, "nothing stood in the way: all folded");
        assert!(size() > before + 1_000_000, "the rows are in the file now");
    }

    #[test]
    fn the_writer_stops_checkpointing_and_stopping_the_thread_returns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.db");
        let writer = written(&path, 10);
        writer
            .pragma_update(None, "wal_autocheckpoint", 1000)
            .unwrap();
        let checkpointer = Checkpointer::start(&writer, &path).expect("a second connection");
        let automatic: i64 = writer
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .unwrap();
        assert_eq!(automatic, 0, "the writer's commits never checkpoint");
        checkpointer.stop();
    }
}
