//! The skeleton of the database targets (PostgreSQL, MariaDB, misskey-ftt's
//! PostgreSQL side), written once: the writers stop at the end of the run or
//! at a signal, the truth is pumped to the recorder every second while the
//! pollers run, then the writers and the jobs beside them are joined, the
//! truth pumped a last time and the side tables handed over, all through
//! the recorder (the one writer of run.db). Each target says
//! how it does each step by implementing [`Database`]; the pollers' future is
//! its own (`drive::run_real`, one or several).
//!
//! Below the targets: imports `drive`, `record` and `clock`, never a target.

mod pace;
mod retention;

pub use pace::{Arrivals, WriterPace};
pub use retention::{Retention, RetentionTask, Rounds};

use crate::drive::StopReason;
use crate::record::RecordSender;
use crate::sim::sync::lock;
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// Waits until a writer's next write is due as `pace` spaces them, and
/// counts it ([`WriterPace::wrote`]): `false` instead once `stop` says the
/// run is over. A stop during the wait is seen at once.
pub async fn next_write(pace: &mut WriterPace, stop: &mut watch::Receiver<bool>) -> bool {
    loop {
        if *stop.borrow() {
            return false;
        }
        let wait = pace.wait_ms(crate::clock::now_ms() as f64);
        if wait > 0 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                _ = stop.changed() => continue,
            }
        }
        pace.wrote();
        return true;
    }
}

/// Waits for every writer's task to end (each ends once its last
/// transaction has); a writer's failures are in its output, not here.
pub async fn join_writers(tasks: Vec<tokio::task::JoinHandle<()>>) -> Result<(), String> {
    for task in tasks {
        let _ = task.await;
    }
    Ok(())
}

/// One write as its writer saw it: the bracket inside which it became
/// visible, a row of `writer_brackets`.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    pub id: i64,
    /// The writing transaction: PostgreSQL's xid8 as text; `writer N` where
    /// the server names none (MariaDB).
    pub xid: String,
    /// When the transaction started: `now()` on PostgreSQL (the same
    /// machine's clock), `START TRANSACTION` sent on MariaDB.
    pub xact_start_ms: i64,
    /// When COMMIT returned to the writer (client clock).
    pub commit_returned_ms: i64,
    /// The injected sleep inside the transaction, 0 without a tail.
    pub sleep_ms: u64,
}

impl Written {
    /// Its row of `writer_brackets`, with the commit timestamp if the server keeps them.
    pub fn bracket(&self, commit_ts_ms: Option<i64>) -> rundb::WriterBracketRow {
        rundb::WriterBracketRow {
            id: self.id.to_string(),
            xid: self.xid.clone(),
            xact_start_ms: self.xact_start_ms,
            commit_ts_ms,
            commit_returned_ms: self.commit_returned_ms,
            injected_sleep_ms: self.sleep_ms as i64,
        }
    }
}

/// What the writers of a run produce, shared with the truth pump.
#[derive(Default)]
pub struct Output {
    /// Committed since the last pump took them.
    pub written: Vec<Written>,
    pub commits: u64,
    pub failed: u64,
    /// Rolled back on purpose (an injected rollback), not failed.
    pub rolled_back: u64,
    pub last_error: Option<String>,
    /// Each commit's latency, from the transaction's start to COMMIT
    /// returned (ms): the machine's load (`crate::load`).
    pub latency: analysis::machine::Histogram,
}

impl Output {
    pub fn committed(&mut self, written: Written) {
        self.commits += 1;
        self.latency
            .add(written.commit_returned_ms - written.xact_start_ms);
        self.written.push(written);
    }

    pub fn failed(&mut self, error: String) {
        self.failed += 1;
        self.last_error = Some(error);
    }

    /// The summary's account of the writers over `over_ms` of writing.
    pub fn line(&self, over_ms: i64) -> String {
        format!(
            "{} commits ({:.0}/s), {}{} failed transactions{}",
            self.commits,
            self.commits as f64 * 1000.0 / over_ms.max(1) as f64,
            match self.rolled_back {
                0 => String::new(),
                n => format!("{n} rolled back (injected), "),
            },
            self.failed,
            self.last_error
                .as_ref()
                .map(|e| format!(" (last: {e})"))
                .unwrap_or_default()
        )
    }
}

/// Takes what the writers committed since the last take.
pub fn take_written(output: &std::sync::Mutex<Output>) -> Vec<Written> {
    std::mem::take(&mut lock(output).written)
}

/// What a database target supplies to the skeleton ([`run`]).
pub trait Database {
    /// Starts the writers and the jobs beside them (a retention job, Redis
    /// restarts); each stops once `stop` turns true.
    fn start(&mut self, stop: watch::Receiver<bool>) -> impl Future<Output = Result<(), String>>;

    /// Hands the truth of what was committed since the last pump to the
    /// recorder; keeps its side rows (writer brackets, FTT pushes) for
    /// [`Database::side_rows`].
    fn pump(&mut self, sender: &RecordSender) -> impl Future<Output = ()>;

    /// Waits for the writers and the jobs, once stopped. An error of the
    /// writers is the run's, given after the run is recorded as ended.
    fn join(&mut self) -> impl Future<Output = Result<(), String>>;

    /// After the last pump, the side tables, written when the run ends
    /// (docs/rundb.md): the rows kept since the start, those only the end
    /// knows (partition drops, cursor flags, truth read at the end), and an
    /// empty record of each side table the target always has.
    fn side_rows(&mut self, sender: &RecordSender) -> impl Future<Output = ()>;

    /// The writers' account over `writing_ms` of writing: the rate asked,
    /// the commits and their latency (`analysis::machine::WritersLoad::of`);
    /// `None` for a target that writes nothing (your own table).
    fn writers_load(&self, writing_ms: u64) -> Option<analysis::machine::WritersLoad>;
}

/// How the skeleton ended.
pub struct Ended {
    pub reason: StopReason,
    /// The writers' error, if they failed.
    pub writers: Result<(), String>,
    /// What the writers did against what they were asked.
    pub writers_load: Option<analysis::machine::WritersLoad>,
}

/// Runs a database target's run: starts `db`'s writers (stopped at `end_ms`
/// or when `signal` turns true), pumps its truth every second until
/// `pollers` ends, joins the writers, pumps a last time and hands the side
/// rows to `sender`. The caller then finishes the recorder.
pub async fn run<D: Database>(
    db: &mut D,
    pollers: impl Future<Output = StopReason>,
    end_ms: i64,
    signal: watch::Receiver<bool>,
    sender: &RecordSender,
) -> Result<Ended, String> {
    let started_ms = crate::clock::now_ms();
    db.start(stop_at(end_ms, signal)).await?;
    tokio::pin!(pollers);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // A slow pump delays the next one instead of bunching them.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let reason = loop {
        tokio::select! {
            reason = &mut pollers => break reason,
            _ = tick.tick() => db.pump(sender).await,
        }
    };
    let writers = db.join().await;
    // The writers stop at the end, not after the pollers' last cycle.
    let writing_ms = (crate::clock::now_ms().min(end_ms) - started_ms).max(0) as u64;
    db.pump(sender).await;
    db.side_rows(sender).await;
    Ok(Ended {
        reason,
        writers,
        writers_load: db.writers_load(writing_ms),
    })
}

/// A watch that turns true at `end_ms` or when `signal` does, whichever
/// comes first: the writers' stop.
fn stop_at(end_ms: i64, mut signal: watch::Receiver<bool>) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let until_end = Duration::from_millis((end_ms - crate::clock::now_ms()).max(0) as u64);
        tokio::select! {
            _ = tokio::time::sleep(until_end) => {}
            _ = signal.wait_for(|s| *s) => {}
        }
        let _ = tx.send(true);
    });
    rx
}
