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
//!
//! A passive checkpoint alone does not bound the WAL: SQLite starts the WAL
//! over only when a writer begins a transaction after every frame was
//! folded, and a writer that never pauses (a virtual-time run writes as
//! fast as it can) has always begun its next transaction before the fold
//! (<https://www.sqlite.org/wal.html#avoiding_excessively_large_wal_files>).
//! A virtual day at 3,000/s ended with a WAL of 84 GB beside its 84 GB
//! database (docs/benchmarks.md). Nor can this thread empty the WAL itself:
//! a truncating checkpoint needs the writer's lock, which a writer that never
//! pauses takes back within microseconds of each commit. So the fold only
//! says when the WAL holds more than [`WAL_LIMIT`], and the writer empties it
//! between two of its transactions ([`Checkpointer::empty_wal_if_over`]),
//! folding only the frames this thread has not (about a second's). A writer
//! that pauses never reaches the limit and is never held.

use rusqlite::Connection;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the WAL is folded back: the WAL holds about this much of the
/// run between folds.
pub const FOLD_EVERY: Duration = Duration::from_secs(1);

/// The most WAL left in place: beyond it, the writer empties the WAL
/// after its next commit. The WAL stays under this plus what the writer
/// appends in about two [`FOLD_EVERY`].
pub const WAL_LIMIT: u64 = 256 << 20;

/// The thread that folds the WAL; stopped by [`Checkpointer::stop`] or when dropped.
pub struct Checkpointer {
    stop: Sender<()>,
    thread: JoinHandle<()>,
    /// The last fold found more than [`WAL_LIMIT`] in the WAL.
    over_limit: Arc<AtomicBool>,
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
        let page: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).ok()?;
        let over_limit = Arc::new(AtomicBool::new(false));
        let flag = over_limit.clone();
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("checkpointer".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(FOLD_EVERY) {
                    // A fold that fails (the disk, a lock) is tried again at
                    // the next; the end of the run folds what is left.
                    if let Ok((frames, _)) = fold(&conn) {
                        flag.store(past_limit(frames, page, WAL_LIMIT), Ordering::Relaxed);
                    }
                }
            });
        match thread {
            Ok(thread) => Some(Checkpointer {
                stop,
                thread,
                over_limit,
            }),
            Err(_) => {
                let _ = writer.pragma_update(None, "wal_autocheckpoint", automatic);
                None
            }
        }
    }

    /// Empties the WAL through `writer` if the last fold found it past
    /// [`WAL_LIMIT`]; called by the writer between two transactions. One
    /// that cannot be emptied now (a reader in the way past its busy
    /// timeout, an error) is tried again after the next commit.
    pub fn empty_wal_if_over(&self, writer: &Connection) {
        if self.over_limit.load(Ordering::Relaxed) && empty_wal(writer).unwrap_or(false) {
            self.over_limit.store(false, Ordering::Relaxed);
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

/// Whether a WAL of `frames` pages of `page` bytes holds more than `limit`.
fn past_limit(frames: i64, page: i64, limit: u64) -> bool {
    frames.max(0) as u64 * page.max(0) as u64 > limit
}

/// A truncating checkpoint: every frame folded and the WAL emptied, if
/// nothing stands in the way now. It does not wait: a reader of the run
/// (`analyze --follow`), another run writing the same file, or the
/// checkpointer's fold under way would hold the writer for its busy
/// timeout at every commit, and the pollers behind it; then the WAL is
/// emptied after a later commit. Whether it was emptied; `conn`'s busy
/// timeout is as it was.
pub fn empty_wal(conn: &Connection) -> rusqlite::Result<bool> {
    let waits_ms: i64 = conn.query_row("PRAGMA busy_timeout", [], |r| r.get(0))?;
    conn.busy_timeout(Duration::ZERO)?;
    let emptied = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0).map(|busy| busy == 0)
        })
        .or_else(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy) => Ok(false),
            _ => Err(e),
        });
    conn.busy_timeout(Duration::from_millis(waits_ms.max(0) as u64))?;
    emptied
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

    /// The case a passive fold cannot end: a reader's snapshot stopped it
    /// short (as a writer that never pauses does), and the writer went on.
    /// The fold says the WAL is past a limit under its size, and the
    /// writer's truncating checkpoint empties it, losing nothing.
    #[test]
    fn a_wal_past_the_limit_is_emptied_by_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.db");
        let writer = written(&path, 500);
        let wal = path.with_extension("db-wal");
        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        for _ in 0..500 {
            writer
                .execute("INSERT INTO t VALUES (zeroblob(1000))", [])
                .unwrap();
        }
        let (frames, folded) = fold(&Connection::open(&path).unwrap()).unwrap();
        assert!(folded < frames, "the reader stood in the way");
        let size = std::fs::metadata(&wal).unwrap().len();
        assert!(past_limit(frames, 4096, size / 2));
        assert!(!past_limit(frames, 4096, size), "the frames fit the file");
        reader.execute_batch("COMMIT").unwrap();
        assert!(empty_wal(&writer).unwrap(), "nothing stood in the way now");
        assert_eq!(
            std::fs::metadata(&wal).unwrap().len(),
            0,
            "the WAL is empty"
        );
        let rows: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1000, "nothing committed is lost");
    }

    /// With a reader in the way, the writer is not held: its busy handler
    /// is never called, the WAL stays for a later commit, and its busy
    /// timeout is as it was.
    #[test]
    fn a_reader_in_the_way_does_not_hold_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.db");
        let mut writer = written(&path, 100);
        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        writer
            .execute("INSERT INTO t VALUES (zeroblob(1000))", [])
            .unwrap();
        static CALLED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        fn count(_: i32) -> bool {
            CALLED.fetch_add(1, Ordering::Relaxed);
            false
        }
        writer.busy_timeout(Duration::from_secs(10)).unwrap();
        assert!(!empty_wal(&writer).unwrap(), "the reader stands in the way");
        let waits: i64 = writer
            .query_row("PRAGMA busy_timeout", [], |r| r.get(0))
            .unwrap();
        assert_eq!(waits, 10_000, "the writer's busy timeout is as it was");
        writer.busy_handler(Some(count)).unwrap();
        assert!(!empty_wal(&writer).unwrap());
        assert_eq!(CALLED.load(Ordering::Relaxed), 0, "it never waited");
        assert!(
            std::fs::metadata(path.with_extension("db-wal"))
                .unwrap()
                .len()
                > 0
        );
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
