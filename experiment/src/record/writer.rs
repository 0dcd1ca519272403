//! The recorder: one thread that owns the SQLite connection and writes what
//! the pollers send it, in batched transactions.
//!
//! Pollers send records through a [`RecordSender`] over a bounded channel
//! ([`QUEUE_BOUND`] records), so a run's memory does not grow with its length:
//! the virtual-time driver waits for room (backpressure); the real-time driver
//! never waits on the disk and ends the run with a clear error if the queue is
//! ever full (the recorder cannot keep up). The writer inserts each record as
//! it arrives, inside a transaction it commits at least once a second of wall
//! time (WAL mode, `synchronous = NORMAL`), in either clock, so a killed
//! process loses at most the last second and leaves a database that opens; the
//! run row says `complete = 0` until [`Recorder::finish`] runs.

use super::checkpoint::Checkpointer;
use crate::sim::sync::lock;
use rundb::SideTable;
use rundb::write::{self, OnConflict};
use rusqlite::Connection;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The rows of `runs`, `pollers` and `truth` ([`rundb::rows`]), under the
/// names the recorder's users know.
pub use rundb::{PollerRow, RunRow, TruthRow};

/// An item of a response, as the recorder stores it: in `observations`
/// always, in `statuses` at its first sighting in the run.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusRecord {
    pub status: rundb::StatusRow,
    /// No poller of the run has returned it before: store it in `statuses`.
    pub first_sighting: bool,
}

/// One request with everything it returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestRecord {
    /// Index of the poller in the list given to [`Recorder::create`]; the
    /// writer fills `request.poller_id` and `request.items` from it and `items`.
    pub poller: usize,
    pub request: rundb::RequestRow,
    /// The items in response order (after sorting, if `request.reordered`).
    pub items: Vec<StatusRecord>,
}

enum Record {
    Request(Box<RequestRecord>),
    Truth(Vec<TruthRow>),
    /// Truth rows that replace what is there (`experiment serve`: the latest
    /// state of a status knows the most).
    LatestTruth(Vec<TruthRow>),
    /// A poller that joined the run while it runs: the next index.
    Poller(PollerRow),
    /// A foreign client's request, and what it asked for.
    ClientRequest(Box<RequestRecord>, rundb::ClientRequestRow),
    /// The page (poller index, cycle, page), already sent as a request, was
    /// the last of its cycle: the cycle was abandoned before the next page.
    Cut {
        poller: usize,
        cycle: i64,
        page: i64,
    },
    /// Rows of a side table ([`rundb::tables`]), in one batch.
    Side(Box<dyn SideBatch>),
    /// Rows of a side table that replace the run's rows of it.
    ReplaceSide(Box<dyn SideBatch>),
    /// `runs.config` again, with what only the run's end knows.
    Config(String),
    /// `runs.config`'s `machine_load` (JSON), set into the stored config.
    MachineLoad(String),
    /// Commit now, then say so on the channel: everything sent before is
    /// in the database ([`RecordSender::committed`]).
    Committed(SyncSender<()>),
    Finish {
        ended_at_ms: i64,
        complete: bool,
        reason: String,
    },
}

/// A batch of rows of any side table, which the writer writes as one
/// record: each table's rows go through [`write::side_rows`], so that the
/// recorder knows no table by name.
trait SideBatch: Send {
    fn write(&self, conn: &Connection, run_id: i64) -> Result<(), rundb::Error>;
    fn replace(&self, conn: &Connection, run_id: i64) -> Result<(), rundb::Error>;
}

impl<T: SideTable> SideBatch for Vec<T> {
    fn write(&self, conn: &Connection, run_id: i64) -> Result<(), rundb::Error> {
        write::side_rows(conn, run_id, self)
    }

    fn replace(&self, conn: &Connection, run_id: i64) -> Result<(), rundb::Error> {
        write::replace_side_rows(conn, run_id, self)
    }
}

/// What went wrong with the database.
pub type RecordError = String;

/// How many records may wait for the writer. A record is one request (at most
/// a page of items: 200 for Twitter, the largest page of the dialects) or at
/// most [`TRUTH_ROWS_PER_RECORD`] truth rows, a few hundred bytes each, so the
/// queue holds at most tens of MiB whatever the rate or the length of the run.
pub const QUEUE_BOUND: usize = 1024;

/// Truth rows per record: a busy second of truth is split, so that one record
/// stays about the size of a page.
pub const TRUTH_ROWS_PER_RECORD: usize = 256;

/// The queue's depth, counted by the senders and the writer, with its
/// high-water mark (for tests and the benchmark).
#[derive(Debug, Default)]
struct Gauge {
    /// Signed: the writer may count a record out just before its sender counts it in.
    depth: AtomicIsize,
    high: AtomicIsize,
}

/// The sending half: cheap to clone.
#[derive(Clone)]
pub struct RecordSender {
    channel: SyncSender<Record>,
    failed: Arc<AtomicBool>,
    gauge: Arc<Gauge>,
    /// Why the run had to stop on the senders' side (the queue was full).
    overrun: Arc<Mutex<Option<String>>>,
    /// Real time: never wait for the writer; a full queue ends the run.
    never_wait: bool,
}

impl RecordSender {
    pub fn request(&self, row: RequestRecord) {
        self.send(Record::Request(Box::new(row)));
    }

    /// Poller `poller`'s request at (`cycle`, `page`), sent before, asked for
    /// a next page that never went: the driver abandoned the cycle (the run's
    /// end or a stop came while the page waited for the shared rate limit),
    /// so its window was cut there, as by back-paging's bound, and the
    /// request is marked `overflow`. Without the mark the history would show
    /// a clean cycle whose full page was never followed, and `analyze` would
    /// call what lay below that page an unexplained miss.
    pub fn cycle_cut(&self, poller: usize, cycle: i64, page: i64) {
        self.send(Record::Cut {
            poller,
            cycle,
            page,
        });
    }

    /// Adds a poller to the run (a client `experiment serve --record` meets):
    /// its index is the number of pollers before it, in the order sent.
    pub fn poller(&self, row: PollerRow) {
        self.send(Record::Poller(row));
    }

    /// A foreign client's request (`experiment serve --record`) and what it asked for.
    pub fn client_request(&self, row: RequestRecord, asked: rundb::ClientRequestRow) {
        self.send(Record::ClientRequest(Box::new(row), asked));
    }

    /// Truth rows that replace those of the same statuses already written.
    pub fn latest_truth(&self, rows: Vec<TruthRow>) {
        for chunk in rows.chunks(TRUTH_ROWS_PER_RECORD) {
            self.send(Record::LatestTruth(chunk.to_vec()));
        }
    }

    pub fn truth(&self, rows: Vec<TruthRow>) {
        // Each record gets a vector of its own rows only: `split_off` left the
        // whole batch's capacity in every record it sent (and copied the rest
        // each time), so a batch of 900,000 rows (five minutes of backlog at
        // 3,000/s) held hundreds of MiB in the queue.
        let mut rows = rows.into_iter();
        loop {
            let record: Vec<TruthRow> = rows.by_ref().take(TRUTH_ROWS_PER_RECORD).collect();
            if record.is_empty() {
                break;
            }
            self.send(Record::Truth(record));
        }
    }

    /// Rows of side table `T` ([`rundb::tables`]: `writer_brackets`,
    /// `partition_drops`, `cursor_flags`, the FTT's, `log_truth`,
    /// `log_deliveries`, `truth_authors`...), written in the order sent,
    /// after every record sent before them: a row that marks the truth (a
    /// partition drop, an FTT deletion) or names a request (a cursor flag)
    /// is sent after what it marks or names. No rows still create the table
    /// where [`SideTable::CREATED_EMPTY`] says a run with it was checked.
    pub fn side<T: SideTable>(&self, rows: Vec<T>) {
        if rows.is_empty() && !T::CREATED_EMPTY {
            return;
        }
        for chunk in chunks(rows) {
            self.send(Record::Side(Box::new(chunk)));
        }
    }

    /// Replaces the run's rows of a side table with `rows`, in one record
    /// (one transaction): `experiment watch`'s open rows and state.
    pub fn replace_side<T: SideTable>(&self, rows: Vec<T>) {
        self.send(Record::ReplaceSide(Box::new(rows)));
    }

    /// A receiver that gets `()` once every record sent before this call is
    /// committed to the database: the writer commits at once when it reaches
    /// this record. A writer that failed first drops the sender instead, so
    /// the receiver reports it disconnected and never `()`.
    /// `experiment watch` advances its slot only past what a committed state
    /// holds.
    pub fn committed(&self) -> Receiver<()> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Record::Committed(tx));
        rx
    }

    /// Replaces the run's stored configuration (`runs.config`) with one that
    /// knows the run's end.
    pub fn run_config(&self, config: String) {
        self.send(Record::Config(config));
    }

    /// Whether `n` more records fit in the queue now (another sender may
    /// take the room before they are sent).
    pub fn has_room(&self, n: usize) -> bool {
        let depth = self.gauge.depth.load(Ordering::Relaxed).max(0) as usize;
        depth + n < QUEUE_BOUND
    }

    /// Sets `runs.config`'s `machine_load`: the machine's load while the
    /// run ran (`crate::load`), kept beside what the run was asked.
    pub fn machine_load(&self, load: analysis::machine::MachineLoad) {
        match serde_json::to_string(&load) {
            Ok(json) => self.send(Record::MachineLoad(json)),
            Err(e) => tracing::warn!("the machine's load is not recorded: {e}"),
        }
    }

    fn send(&self, record: Record) {
        let sent = if self.never_wait {
            match self.channel.try_send(record) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    let mut overrun = lock(&self.overrun);
                    overrun.get_or_insert_with(|| {
                        format!(
                            "the recorder cannot keep up: {QUEUE_BOUND} records are waiting for the disk; the run stopped (a faster disk, fewer pollers or a longer --interval)"
                        )
                    });
                    self.failed.store(true, Ordering::Relaxed);
                    false
                }
                Err(TrySendError::Disconnected(_)) => false,
            }
        } else {
            self.channel.send(record).is_ok()
        };
        if sent {
            // Counted once in the queue: the depth is at most QUEUE_BOUND plus the
            // one record the writer has taken and not yet counted out.
            let depth = self.gauge.depth.fetch_add(1, Ordering::Relaxed) + 1;
            self.gauge.high.fetch_max(depth, Ordering::Relaxed);
        }
    }

    /// A sender for the real-time driver, which must not wait on the disk: when
    /// the queue is full, the record is dropped, [`RecordSender::failed`] turns
    /// true and [`Recorder::finish`] reports that the recorder could not keep up.
    pub fn never_waiting(&self) -> RecordSender {
        RecordSender {
            never_wait: true,
            ..self.clone()
        }
    }

    /// The largest number of records that waited for the writer so far: at most
    /// [`QUEUE_BOUND`] + 1 (the record being taken).
    pub fn queue_high_water(&self) -> usize {
        self.gauge.high.load(Ordering::Relaxed).max(0) as usize
    }

    /// The writer could not write (disk full, database read-only), or could not
    /// keep up with a real-time run: the run must end. [`Recorder::finish`] says why.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }
}

/// `rows` in records of at most [`TRUTH_ROWS_PER_RECORD`]; one empty record
/// for none, so that the table is created.
fn chunks<T>(rows: Vec<T>) -> Vec<Vec<T>> {
    if rows.is_empty() {
        return vec![rows];
    }
    let mut rows = rows.into_iter().peekable();
    let mut out = Vec::new();
    while rows.peek().is_some() {
        out.push(rows.by_ref().take(TRUTH_ROWS_PER_RECORD).collect());
    }
    out
}

/// The recorder of one run.
pub struct Recorder {
    pub run_id: i64,
    sender: RecordSender,
    thread: JoinHandle<Result<WriterStats, RecordError>>,
}

/// Counts of what was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    pub requests: u64,
    pub observations: u64,
    pub truth: u64,
}

/// How long the writer waits for another writer mid-run (concurrent runs on one
/// database take turns committing; a virtual run's batch can take seconds):
/// giving up here would leave an incomplete run.
const WRITE_BUSY_TIMEOUT: Duration = Duration::from_secs(120);

/// Opens (creating if needed) a run database, with the schema and pragmas set
/// ([`rundb::write::open`]). Refuses a database of another program or of a
/// newer schema.
pub fn open_database(path: &Path) -> Result<Connection, RecordError> {
    Ok(write::open(path, "--db")?)
}

impl Recorder {
    /// Adds a new run (never touching earlier ones) and starts the writer thread.
    pub fn create(
        path: &Path,
        run: &RunRow,
        pollers: &[PollerRow],
    ) -> Result<Recorder, RecordError> {
        Recorder::start(open_database(path)?, path, run, pollers)
    }

    /// Adds the run through an open connection and starts the writer thread.
    fn start(
        conn: Connection,
        path: &Path,
        run: &RunRow,
        pollers: &[PollerRow],
    ) -> Result<Recorder, RecordError> {
        let (run_id, poller_ids) = write::add_run(&conn, run, pollers)?;
        conn.busy_timeout(WRITE_BUSY_TIMEOUT)
            .map_err(|e| format!("database {}: {e}", path.display()))?;
        let checkpointer = Checkpointer::start(&conn, path);
        let (tx, rx) = mpsc::sync_channel(QUEUE_BOUND);
        let failed = Arc::new(AtomicBool::new(false));
        let writer_failed = failed.clone();
        let gauge = Arc::new(Gauge::default());
        let writer_gauge = gauge.clone();
        let thread = std::thread::Builder::new()
            .name("recorder".into())
            .spawn(move || {
                let result = Writer {
                    conn,
                    run_id,
                    poller_ids,
                    stats: WriterStats::default(),
                    gauge: writer_gauge,
                    in_transaction: false,
                    checkpointer,
                }
                .run(rx);
                if result.is_err() {
                    writer_failed.store(true, Ordering::Relaxed);
                }
                result
            })
            .map_err(|e| format!("cannot start the recorder thread: {e}"))?;
        Ok(Recorder {
            run_id,
            sender: RecordSender {
                channel: tx,
                failed,
                gauge,
                overrun: Arc::new(Mutex::new(None)),
                never_wait: false,
            },
            thread,
        })
    }

    pub fn sender(&self) -> RecordSender {
        self.sender.clone()
    }

    /// Marks the run ended (complete or not), commits and closes the database.
    pub fn finish(
        self,
        ended_at_ms: i64,
        complete: bool,
        reason: &str,
    ) -> Result<WriterStats, RecordError> {
        let overrun = lock(&self.sender.overrun).clone();
        // A run whose records were dropped is not complete: the row stays
        // `complete = 0`, as after a kill, and the error says why.
        if overrun.is_none() {
            let _ = self.sender.channel.send(Record::Finish {
                ended_at_ms,
                complete,
                reason: reason.to_string(),
            });
        }
        drop(self.sender);
        let written = self
            .thread
            .join()
            .map_err(|_| "the recorder thread panicked".to_string())?;
        // Records dropped are the first cause: a side row that names a lost
        // request fails after them.
        match overrun {
            Some(error) => Err(error),
            None => written,
        }
    }
}

struct Writer {
    conn: Connection,
    run_id: i64,
    poller_ids: Vec<i64>,
    stats: WriterStats,
    gauge: Arc<Gauge>,
    /// A transaction is open (BEGIN issued, not yet committed).
    in_transaction: bool,
    /// Folds the WAL while the writer writes (`None`: the writer's own
    /// checkpoints do).
    checkpointer: Option<Checkpointer>,
}

/// Commit at least this often, so a kill loses at most this much.
const COMMIT_EVERY: Duration = Duration::from_secs(1);

/// How long the writer naps on an empty queue, and how many times in a row
/// before it parks until a sender wakes it (a record then waits at most a
/// nap; an idle run's writer wakes a few times, then sleeps).
const NAP: Duration = Duration::from_millis(2);
const NAPS_BEFORE_PARKING: u32 = 50;

impl Writer {
    /// Inserts each record as it arrives, in a transaction committed at least
    /// once a second of wall time, whatever the clock of the run: the writer
    /// holds one record at a time, never a backlog.
    fn run(mut self, rx: Receiver<Record>) -> Result<WriterStats, RecordError> {
        let mut last_commit = Instant::now();
        let mut naps = 0;
        loop {
            let wait = if self.in_transaction {
                COMMIT_EVERY.saturating_sub(last_commit.elapsed())
            } else {
                // Nothing uncommitted: wait for the next record as long as it takes.
                Duration::from_secs(3600)
            };
            // A sender wakes a parked writer with a system call and a thread
            // switch, which at thousands of records a second costs more than
            // writing them: so the writer, finding the queue empty, naps a
            // little before it parks, and a steady flow never wakes it.
            let next = match rx.try_recv() {
                Err(TryRecvError::Empty) if naps < NAPS_BEFORE_PARKING => {
                    naps += 1;
                    std::thread::sleep(NAP.min(wait));
                    Err(RecvTimeoutError::Timeout)
                }
                Err(TryRecvError::Empty) => rx.recv_timeout(wait),
                Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                Ok(record) => Ok(record),
            };
            if next.is_ok() {
                naps = 0;
            }
            match next {
                Ok(Record::Finish {
                    ended_at_ms,
                    complete,
                    reason,
                }) => {
                    self.commit()?;
                    return self.finish(ended_at_ms, complete, &reason);
                }
                Ok(record) => {
                    self.gauge.depth.fetch_sub(1, Ordering::Relaxed);
                    if !self.in_transaction {
                        self.begin()?;
                        last_commit = Instant::now();
                    }
                    self.write(record)?;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // Every sender is gone without a finish: keep what we have, run stays incomplete.
                    self.commit()?;
                    return Ok(self.stats);
                }
            }
            if self.in_transaction && last_commit.elapsed() >= COMMIT_EVERY {
                self.commit()?;
            }
        }
    }

    fn begin(&mut self) -> Result<(), RecordError> {
        self.conn
            .execute_batch("BEGIN")
            .map_err(|e| format!("cannot write the run database: {e}"))?;
        self.in_transaction = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), RecordError> {
        if !self.in_transaction {
            return Ok(());
        }
        self.in_transaction = false;
        self.conn
            .execute_batch("COMMIT")
            .map_err(|e| format!("cannot write the run database: {e}"))?;
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.empty_wal_if_over(&self.conn);
        }
        Ok(())
    }

    /// Inserts a request of one of the run's pollers, the statuses first
    /// seen in it and its observations as rows.
    fn insert_request(&mut self, mut r: RequestRecord) -> Result<(), RecordError> {
        r.request.items = r.items.len() as i64;
        let request_id = self.insert_request_row(&mut r)?;
        let ids: Vec<&str> = r.items.iter().map(|s| s.status.id.as_str()).collect();
        write::insert_observations(&self.conn, request_id, &ids)?;
        Ok(())
    }

    /// Inserts a foreign client's request: its page is already one value
    /// (`asked.served`, [`rundb::pages`]) and its `request.items` counted, and
    /// `items` holds only the statuses first seen in it (`ClientBook`).
    fn insert_client_request(
        &mut self,
        mut r: RequestRecord,
        mut asked: rundb::ClientRequestRow,
    ) -> Result<(), RecordError> {
        asked.request_id = self.insert_request_row(&mut r)?;
        write::side_rows(&self.conn, self.run_id, &[asked])?;
        Ok(())
    }

    /// The request's row and the rows of the statuses first seen in it;
    /// its id.
    fn insert_request_row(&mut self, r: &mut RequestRecord) -> Result<i64, RecordError> {
        r.request.poller_id = self.poller_ids.get(r.poller).copied().unwrap_or(-1);
        let request_id = write::insert_request(&self.conn, self.run_id, &r.request)?;
        let new: Vec<&rundb::StatusRow> = r
            .items
            .iter()
            .filter(|s| s.first_sighting)
            .map(|s| &s.status)
            .collect();
        write::insert_statuses(&self.conn, self.run_id, &new)?;
        self.stats.requests += 1;
        self.stats.observations += r.request.items as u64;
        Ok(request_id)
    }

    fn write(&mut self, record: Record) -> Result<(), RecordError> {
        match record {
            Record::Request(r) => self.insert_request(*r)?,
            // A client may ask for thousands of pages a second: its page is
            // one value, not a row per status (rundb::pages).
            Record::ClientRequest(r, asked) => self.insert_client_request(*r, asked)?,
            Record::Truth(rows) => {
                write::insert_truth(&self.conn, self.run_id, &rows, OnConflict::Ignore)?;
                self.stats.truth += rows.len() as u64;
            }
            Record::LatestTruth(rows) => {
                write::insert_truth(&self.conn, self.run_id, &rows, OnConflict::Replace)?;
                self.stats.truth += rows.len() as u64;
            }
            Record::Poller(row) => {
                let id = write::add_poller(&self.conn, self.run_id, &row)?;
                self.poller_ids.push(id);
            }
            Record::Cut {
                poller,
                cycle,
                page,
            } => {
                let poller_id = self.poller_ids.get(poller).copied().unwrap_or(-1);
                write::mark_cut(&self.conn, self.run_id, poller_id, cycle, page)?;
            }
            Record::Side(rows) => rows.write(&self.conn, self.run_id)?,
            Record::ReplaceSide(rows) => rows.replace(&self.conn, self.run_id)?,
            Record::Config(config) => write::set_config(&self.conn, self.run_id, &config)?,
            Record::MachineLoad(json) => write::set_config_key(
                &self.conn,
                self.run_id,
                analysis::machine::CONFIG_KEY,
                &json,
            )?,
            Record::Committed(tx) => {
                self.commit()?;
                let _ = tx.send(());
            }
            Record::Finish { .. } => {}
        }
        Ok(())
    }

    fn finish(
        self,
        ended_at_ms: i64,
        complete: bool,
        reason: &str,
    ) -> Result<WriterStats, RecordError> {
        write::end_run(&self.conn, self.run_id, ended_at_ms, complete, reason)?;
        if let Some(checkpointer) = self.checkpointer {
            checkpointer.stop();
        }
        write::close(self.conn)?;
        Ok(self.stats)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rundb::schema::{APPLICATION_ID, CREATE, SCHEMA_VERSION};

    /// A database path in a fresh directory, removed (with the database) when dropped.
    pub(crate) struct TempDb {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
    }

    impl std::ops::Deref for TempDb {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.path
        }
    }

    impl AsRef<std::path::Path> for TempDb {
        fn as_ref(&self) -> &std::path::Path {
            &self.path
        }
    }

    pub(crate) fn temp_db(name: &str) -> TempDb {
        let dir = tempfile::Builder::new()
            .prefix(&format!("snowleak-test-{name}-"))
            .tempdir()
            .unwrap();
        let path = dir.path().join("run.db");
        TempDb { _dir: dir, path }
    }

    /// One naive poller, the recorder tests' run.
    fn naive() -> [PollerRow; 1] {
        [PollerRow {
            name: "naive".into(),
            policy: "naive".into(),
            ..PollerRow::default()
        }]
    }

    /// The run's `complete` flag, read beside the recorder.
    fn complete(path: &std::path::Path) -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row("SELECT complete FROM runs", [], |r| r.get(0))
            .unwrap()
    }

    pub(crate) fn run_info() -> RunRow {
        RunRow {
            started_at_ms: 1,
            target: "simulator".into(),
            profile: Some("twitter".into()),
            seed: Some(7),
            clock: "virtual".into(),
            layout: "twitter".into(),
            interval_ms: 1000,
            page_limit: 200,
            config: "{}".into(),
            ..RunRow::default()
        }
    }

    fn status(n: u64) -> StatusRecord {
        StatusRecord {
            status: rundb::StatusRow {
                id: n.to_string(),
                id_key: format!("{n:032x}"),
                id_time_ms: n as i64,
                created_at: None,
                author: None,
            },
            first_sighting: true,
        }
    }

    #[test]
    fn runs_are_added_never_overwritten_and_marked_complete() {
        let path = temp_db("runs");
        for round in 0..2 {
            let pollers = naive();
            let rec = Recorder::create(&path, &run_info(), &pollers).unwrap();
            assert_eq!(rec.run_id, round + 1);
            let tx = rec.sender();
            tx.request(RequestRecord {
                poller: 0,
                items: vec![status(1), status(2)],
                ..RequestRecord::default()
            });
            tx.request(RequestRecord {
                poller: 0,
                request: rundb::RequestRow {
                    cycle: 1,
                    ..Default::default()
                },
                items: vec![status(2)],
            });
            tx.truth(vec![TruthRow {
                id: "1".into(),
                id_key: format!("{:032x}", 1),
                id_time_ms: 1,
                posted_at_ms: 1,
                visible_at_ms: 2,
                deleted_at_ms: None,
                origin: "gen0".into(),
            }]);
            let stats = rec.finish(5, true, "duration").unwrap();
            assert_eq!(
                stats,
                WriterStats {
                    requests: 2,
                    observations: 3,
                    truth: 1
                }
            );
        }
        let conn = Connection::open(&path).unwrap();
        let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        assert_eq!(count("SELECT count(*) FROM runs WHERE complete = 1"), 2);
        assert_eq!(count("SELECT count(*) FROM statuses"), 4);
        assert_eq!(count("SELECT count(*) FROM observations"), 6);
        assert_eq!(count("PRAGMA user_version"), SCHEMA_VERSION);
    }

    fn truth_row(n: u64, posted_at_ms: i64) -> TruthRow {
        TruthRow {
            id: n.to_string(),
            id_key: since_id::id::Id(n as u128).sort_key(),
            id_time_ms: posted_at_ms,
            posted_at_ms,
            visible_at_ms: posted_at_ms + 1,
            deleted_at_ms: None,
            origin: "local".into(),
        }
    }

    /// The database targets' side tables go through the recorder's queue:
    /// each is created by its first record, empty or not; a partition drop
    /// and a deletion mark the truth sent before them; the final config
    /// replaces the stored one.
    #[test]
    fn side_rows_are_written_by_the_recorder_after_the_truth_they_mark() {
        let path = temp_db("side");
        let pollers = naive();
        let rec = Recorder::create(&path, &run_info(), &pollers).unwrap();
        let tx = rec.sender();
        tx.truth((1..=4).map(|n| truth_row(n, 10 * n as i64)).collect());
        tx.request(RequestRecord {
            poller: 0,
            request: rundb::RequestRow {
                sent_at_ms: 50,
                ..Default::default()
            },
            items: vec![status(1)],
        });
        tx.side(Vec::<rundb::WriterBracketRow>::new());
        tx.side(vec![rundb::PartitionDropRow {
            partition: "p0".into(),
            lo_id: 0,
            hi_id: 3,
            sent_at_ms: 100,
            returned_at_ms: 101,
            rows: 2,
        }]);
        tx.side(vec![rundb::CursorFlagRow {
            poller: "naive".into(),
            cycle: 0,
            page: 0,
            sent_at_ms: 50,
            cursor: 0,
            oldest_kept: 3,
        }]);
        tx.side(Vec::<rundb::FttPushRow>::new());
        tx.side(vec![rundb::FttDeleteRow {
            id: "4".into(),
            sent_at_ms: 200,
            returned_at_ms: 201,
        }]);
        tx.side(Vec::<rundb::TruthAuthorRow>::new());
        tx.run_config("{\"end\":1}".into());
        rec.finish(300, true, "duration").unwrap();
        let conn = Connection::open(&path).unwrap();
        let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        assert_eq!(
            count("SELECT count(*) FROM writer_brackets"),
            0,
            "created, empty"
        );
        assert_eq!(count("SELECT count(*) FROM partition_drops"), 1);
        assert_eq!(count("SELECT count(*) FROM cursor_flags"), 1);
        assert_eq!(
            count("SELECT count(*) FROM ftt_pushes"),
            0,
            "created, empty"
        );
        assert_eq!(
            count("SELECT count(*) FROM sqlite_master WHERE name = 'truth_authors'"),
            0,
            "comes with its first row"
        );
        let deleted: Vec<(String, Option<i64>)> = conn
            .prepare("SELECT id, deleted_at_ms FROM truth ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            deleted,
            vec![
                ("1".into(), Some(100)),
                ("2".into(), Some(100)),
                ("3".into(), None),
                ("4".into(), Some(200)),
            ]
        );
        let config: String = conn
            .query_row("SELECT config FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(config, "{\"end\":1}");
    }

    /// `experiment watch` advances its slot only past a committed state:
    /// `committed()` answers once what was sent before is in the database,
    /// for another connection to read, the run still going; a writer that
    /// failed never answers.
    #[test]
    fn committed_answers_once_what_was_sent_before_is_committed() {
        let path = temp_db("committed");
        let rec = Recorder::create(&path, &run_info(), &naive()).unwrap();
        let tx = rec.sender();
        tx.replace_side(vec![rundb::WatchStateRow {
            at_ms: 1,
            state: "{}".into(),
        }]);
        let committed = tx.committed();
        committed
            .recv_timeout(Duration::from_secs(60))
            .expect("the writer commits and answers");
        let reader = Connection::open(&path).unwrap();
        let at: i64 = reader
            .query_row("SELECT at_ms FROM watch_state", [], |r| r.get(0))
            .unwrap();
        assert_eq!(at, 1);
        rec.finish(5, true, "duration").unwrap();

        // A writer that fails drops the answer: the receiver is told so.
        let (_path, rec, tx) = filling_recorder("committed-failed");
        let committed = tx.committed();
        assert!(
            committed.recv_timeout(Duration::from_secs(60)).is_err(),
            "no answer from a writer that failed"
        );
        assert!(rec.finish(5, true, "duration").is_err());
    }

    /// A recorder on a file capped a few pages above its size (SQLite then
    /// answers SQLITE_FULL, exactly as it does when the disk fills up), sent
    /// a request too big for it.
    fn filling_recorder(name: &str) -> (TempDb, Recorder, RecordSender) {
        let path = temp_db(name);
        let conn = open_database(&path).unwrap();
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        conn.pragma_update(None, "max_page_count", pages + 4)
            .unwrap();
        let rec = Recorder::start(conn, &path, &run_info(), &naive()).unwrap();
        let tx = rec.sender();
        tx.request(RequestRecord {
            poller: 0,
            items: (0..20_000).map(status).collect(),
            ..RequestRecord::default()
        });
        (path, rec, tx)
    }

    #[test]
    fn a_full_disk_ends_the_run_with_a_clear_error_and_keeps_what_was_committed() {
        let (path, rec, tx) = filling_recorder("full");
        let err = rec.finish(5, true, "duration").unwrap_err();
        assert!(err.contains("full"), "{err}");
        assert_eq!(err.lines().count(), 1);
        assert!(tx.failed(), "the drivers are told to stop");
        // The run that was committed is still there, marked incomplete.
        assert_eq!(complete(&path), 0);
    }

    /// Issue 13.2: the real-time sender never waits; a recorder a whole queue
    /// behind ends the run with a one-line error, and the run stays incomplete.
    #[test]
    fn a_real_time_sender_reports_a_recorder_that_cannot_keep_up() {
        let path = temp_db("overrun");
        let pollers = naive();
        let rec = Recorder::create(&path, &run_info(), &pollers).unwrap();
        let blocker = Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let tx = rec.sender().never_waiting();
        // The writer takes at most one record before it blocks on the lock.
        for cycle in 0..QUEUE_BOUND as u64 + 2 {
            tx.request(RequestRecord {
                poller: 0,
                request: rundb::RequestRow {
                    cycle: cycle as i64,
                    ..Default::default()
                },
                items: vec![status(cycle + 1)],
            });
        }
        assert!(tx.failed(), "the driver is told to stop");
        assert!(tx.queue_high_water() <= QUEUE_BOUND + 1);
        blocker.execute_batch("COMMIT").unwrap();
        drop(tx);
        let err = rec.finish(5, true, "duration").unwrap_err();
        assert!(err.contains("cannot keep up"), "{err}");
        assert_eq!(err.lines().count(), 1);
        assert_eq!(complete(&path), 0);
    }

    #[test]
    fn refuses_another_programs_database() {
        let path = temp_db("foreign");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        let err = open_database(&path).err().unwrap();
        assert!(err.contains("another program"), "{err}");
    }

    #[test]
    fn refuses_a_newer_schema() {
        let path = temp_db("newer");
        drop(open_database(&path).unwrap());
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let err = open_database(&path).err().unwrap();
        assert!(err.contains("newer"), "{err}");
    }

    /// Issue 11.5: every state a kill while creating can leave is accepted by the
    /// next run: an empty file, WAL switched on and nothing else, some or all of
    /// an earlier build's tables without the marker. And the schema with its
    /// marker is one transaction: rolled back, nothing of it stays.
    #[test]
    fn a_database_left_empty_or_half_created_is_accepted() {
        let statements: Vec<&str> = CREATE
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        type Damage = Box<dyn Fn(&Connection)>;
        let mut states: Vec<(String, Damage)> = vec![
            ("empty file".into(), Box::new(|_: &Connection| {})),
            (
                "WAL only".into(),
                Box::new(|c: &Connection| {
                    c.pragma_update(None, "journal_mode", "WAL").unwrap();
                }),
            ),
        ];
        for n in 1..=statements.len() {
            let first: Vec<String> = statements[..n].iter().map(|s| s.to_string()).collect();
            states.push((
                format!("{n} of {} statements", statements.len()),
                Box::new(move |c: &Connection| c.execute_batch(&first.join(";")).unwrap()),
            ));
        }
        for (i, (what, make)) in states.iter().enumerate() {
            let path = temp_db(&format!("half-{i}"));
            std::fs::write(&path, b"").unwrap();
            make(&Connection::open(&path).unwrap());
            let recorder =
                Recorder::create(&path, &run_info(), &[]).unwrap_or_else(|e| panic!("{what}: {e}"));
            recorder.finish(2, true, "duration").unwrap();
            let conn = Connection::open(&path).unwrap();
            let marker: (i64, i64) = conn
                .query_row(
                    "SELECT application_id, user_version FROM pragma_application_id, pragma_user_version",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!(marker, (APPLICATION_ID, SCHEMA_VERSION), "{what}");
            let runs: i64 = conn
                .query_row("SELECT count(*) FROM runs WHERE complete = 1", [], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(runs, 1, "{what}");
        }
        // One of our tables with rows and no marker is not ours to complete.
        let path = temp_db("half-with-rows");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(statements[0]).unwrap();
        conn.execute(
            "INSERT INTO runs (started_at_ms, target, clock, layout, interval_ms, page_limit, config, version) VALUES (1, 'x', 'x', 'x', 1, 1, '{}', 'x')",
            [],
        )
        .unwrap();
        assert!(
            open_database(&path)
                .err()
                .unwrap()
                .contains("another program")
        );
        // The marker commits with the tables: a creation that does not commit leaves neither.
        let path = temp_db("rolled-back");
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        tx.execute_batch(CREATE).unwrap();
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .unwrap();
        drop(tx);
        let left: (i64, i64, i64) = conn
            .query_row(
                "SELECT application_id, user_version, (SELECT count(*) FROM sqlite_master) FROM pragma_application_id, pragma_user_version",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(left, (0, 0, 0));
    }
}
