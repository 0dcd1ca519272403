//! The writers: `--writers N` connections writing events at a target total
//! rate (each paced on its own, offset from the others), one transaction per
//! event with durable commits: the event, a delivery row, and an update of a
//! counter row that other events update too (the shape of an outbox write in
//! an application's transaction). Nothing sleeps inside a transaction: the
//! lateness is what MariaDB produces under that load.
//!
//! Truth per event: its ID, when its writer sent `START TRANSACTION`, and
//! when `COMMIT` returned. Visibility to another session lies somewhere in
//! that bracket, and not in the order COMMITs return.
//!
//! Injected, and said so in the run's config (an assumption, like
//! PostgreSQL's `--pg-tail`): `--stall-share S --stall D` makes a seeded share
//! of transactions hold their ID for D after their inserts, before the
//! counter UPDATE and COMMIT (the slow transaction of an application doing
//! other work inside it), and
//! `--rollback-share S` makes a seeded share roll back after their inserts,
//! so their AUTO_INCREMENT value is taken and never used (MariaDB KB
//! "AUTO_INCREMENT": values are not reused after a rollback). Neither is
//! drawn unless asked for, so the writers' other draws stay as they were.
//!
//! Snowflake IDs are made by each writer, as a Snowflake library in each
//! application process does: worker ID = writer, time from the writer's own
//! clock, which `--clock-skew` offsets by a seeded amount per writer.

use super::schema::{COUNTER_ROWS, Schema};
use crate::sim::sync::lock;
use crate::workload::WriterPace;
pub use crate::workload::{Output, Written};
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use since_id::id::Layout;
use since_id::snowflake;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// How the writers serialise their transactions (`--writer-lock`).
///
/// The cure of the Python eventsourcing library: its PostgreSQL application
/// recorder runs `SET LOCAL lock_timeout = ...` and `LOCK TABLE <events> IN
/// EXCLUSIVE MODE` before each insert (pyeventsourcing/eventsourcing
/// module `eventsourcing.postgres`, `PostgresApplicationRecorder._lock_table`,
/// whose comment says it wants "the insert order to be the same as the
/// commit order" so that readers tailing the log do not pass over gaps
/// filled later). PostgreSQL's EXCLUSIVE mode still admits SELECTs and is
/// held until the transaction ends, after its commit is flushed.
///
/// On InnoDB the same effect takes a named lock, `GET_LOCK` before `START
/// TRANSACTION` and `RELEASE_LOCK` after `COMMIT` has returned:
/// - `LOCK TABLES events WRITE` is no equivalent: it commits the open
///   transaction implicitly, must name every table the transaction touches,
///   and blocks readers too (the pollers would stall behind every writer)
///   (MariaDB KB "LOCK TABLES").
/// - `SELECT ... FOR UPDATE` on one lock row orders the *in-memory* commits:
///   InnoDB releases a transaction's row locks when it commits in memory,
///   before it flushes the log for a durable commit (InnoDB's
///   `trx_commit_in_memory` calls `lock_trx_release_locks`, then
///   `trx_flush_log_if_needed`: mysql/mysql-server
///   storage/innobase/trx/trx0trx.cc), so the next writer can take its ID
///   and its COMMIT can return first; it orders visibility, not the returns.
/// - A named lock is the session's, not the transaction's: held from before
///   the ID is taken until after COMMIT returned, it admits one transaction
///   at a time, so AUTO_INCREMENT values are taken, made visible and
///   returned in one order, and plain SELECTs are never blocked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriterLock {
    /// No serialisation (how applications write by default).
    #[default]
    None,
    /// `GET_LOCK('snowleak_writers', ...)` around each transaction.
    GetLock,
}

/// The name of the writers' lock (one per server: the throwaway one).
const LOCK_NAME: &str = "snowleak_writers";

/// How long a writer waits for the lock before the transaction fails, s.
const LOCK_WAIT_S: u32 = 60;

impl std::str::FromStr for WriterLock {
    type Err = String;

    fn from_str(s: &str) -> Result<WriterLock, String> {
        match s {
            "none" => Ok(WriterLock::None),
            "get-lock" => Ok(WriterLock::GetLock),
            _ => Err(format!(
                "unknown --writer-lock '{s}': expected none or get-lock (a named lock held from \
                 before the insert until COMMIT returned)"
            )),
        }
    }
}

impl std::fmt::Display for WriterLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WriterLock::None => "none",
            WriterLock::GetLock => "get-lock",
        })
    }
}

/// The workload of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Workload {
    pub schema: Schema,
    pub writer_lock: WriterLock,
    pub writers: u32,
    pub rate_per_s: f64,
    /// Each writer's clock offset, ms (Snowflake only; all 0 without `--clock-skew`).
    pub clock_offsets_ms: Vec<i64>,
    /// The injected stalls and rollbacks (none by default).
    #[serde(flatten)]
    pub inject: Injected,
    /// Stored at the top of `runs.config` (`arrivals`), not here.
    #[serde(skip)]
    pub arrivals: crate::workload::Arrivals,
    pub seed: u64,
}

/// What is injected into the writers' transactions (`--stall-share`,
/// `--stall`, `--rollback-share`): shares between 0 and 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Injected {
    /// Share of transactions that wait `stall_ms` after their inserts, before COMMIT.
    pub stall_share: f64,
    pub stall_ms: u64,
    /// Share of transactions rolled back after their inserts.
    pub rollback_share: f64,
}

impl Injected {
    pub fn any(&self) -> bool {
        self.stall_share > 0.0 || self.rollback_share > 0.0
    }

    /// What to do with the next transaction, drawn from `rng`: roll it back,
    /// else stall it (ms, 0: no stall). Draws nothing unless asked to.
    fn draw(&self, rng: &mut ChaCha8Rng) -> Fate {
        if self.rollback_share > 0.0 && rng.random_bool(self.rollback_share.min(1.0)) {
            return Fate::RollBack;
        }
        if self.stall_share > 0.0 && rng.random_bool(self.stall_share.min(1.0)) {
            return Fate::Commit {
                stall_ms: self.stall_ms,
            };
        }
        Fate::Commit { stall_ms: 0 }
    }

    /// The assumption stored with the run and said in its summary.
    pub fn assumption(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.stall_share > 0.0 {
            parts.push(format!(
                "{} of transactions hold their ID for {} ms before COMMIT",
                share_text(self.stall_share),
                self.stall_ms
            ));
        }
        if self.rollback_share > 0.0 {
            parts.push(format!(
                "{} of transactions roll back after taking their ID",
                share_text(self.rollback_share)
            ));
        }
        (!parts.is_empty()).then(|| format!("injected: {}", parts.join("; ")))
    }
}

fn share_text(share: f64) -> String {
    format!("{}%", share * 100.0)
}

/// A share given on the command line: `2%` or `0.02`, between 0 and 1.
pub fn parse_share(s: &str) -> Result<f64, String> {
    let bad =
        || format!("bad share '{s}': expected a percentage such as 2% or a fraction such as 0.02");
    let share = match s.strip_suffix('%') {
        Some(p) => p.parse::<f64>().map_err(|_| bad())? / 100.0,
        None => s.parse::<f64>().map_err(|_| bad())?,
    };
    if !(0.0..=1.0).contains(&share) {
        return Err(bad());
    }
    Ok(share)
}

/// How one transaction ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// COMMIT, after holding the ID this long (0: at once).
    Commit { stall_ms: u64 },
    /// ROLLBACK after the inserts: the ID is taken and never visible.
    RollBack,
}

/// What a transaction does after its event and delivery rows, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Hold the open transaction this long (ms).
    Hold(u64),
    /// The UPDATE of the stream's counter row.
    Counter,
    Commit,
    RollBack,
}

impl Fate {
    /// The steps after the inserts. A stall holds the ID *before* the
    /// counter UPDATE: the counter rows are few and shared by every writer,
    /// so one held locked for the stall queues every writer that draws its
    /// stream behind it, and the injection would measure that convoy rather
    /// than one slow transaction (at 0.1 % of 3 s the writers reached about
    /// half the asked rate; docs/mariadb.md, the controls).
    fn steps_after_inserts(self) -> Vec<Step> {
        match self {
            Fate::Commit { stall_ms: 0 } => vec![Step::Counter, Step::Commit],
            Fate::Commit { stall_ms } => vec![Step::Hold(stall_ms), Step::Counter, Step::Commit],
            Fate::RollBack => vec![Step::Counter, Step::RollBack],
        }
    }
}

/// The writers' clock offsets: seeded, uniform within `spread_ms` around 0.
pub fn clock_offsets(writers: u32, spread_ms: u64, seed: u64) -> Vec<i64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x534b_4557);
    let half = spread_ms as i64 / 2;
    (0..writers)
        .map(|_| {
            if spread_ms == 0 {
                0
            } else {
                rng.random_range(-half..=spread_ms as i64 - half)
            }
        })
        .collect()
}

/// Runs the writers until `stop` turns true (or its sender drops); returns
/// when every writer's last transaction has ended.
pub async fn run_writers(
    opts: mysql_async::Opts,
    workload: Workload,
    output: Arc<Mutex<Output>>,
    stop: watch::Receiver<bool>,
) -> Result<(), String> {
    let mut tasks = Vec::new();
    for index in 0..workload.writers {
        // A server that dies as the run starts: the writer is one failed
        // transaction, and the run goes on to a clean end like any other
        // failure of the server (its pollers' requests fail too).
        let conn = match mysql_async::Conn::new(opts.clone()).await {
            Ok(conn) => conn,
            Err(e) => {
                lock(&output).failed(format!(
                    "writer {index} cannot connect: {}",
                    super::db_error(&e)
                ));
                continue;
            }
        };
        let (workload, output, stop) = (workload.clone(), output.clone(), stop.clone());
        tasks.push(tokio::spawn(writer(index, conn, workload, output, stop)));
    }
    crate::workload::join_writers(tasks).await
}

async fn writer(
    index: u32,
    mut conn: mysql_async::Conn,
    w: Workload,
    output: Arc<Mutex<Output>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng =
        ChaCha8Rng::seed_from_u64(since_id::seed::stream(w.seed, 0x4d41_5249_4144, index));
    let mut ids = snowflake::Generator::new(index);
    let offset_ms = w.clock_offsets_ms.get(index as usize).copied().unwrap_or(0);
    // A stream of its own, so that injecting leaves every other draw as it was.
    let mut inject_rng =
        ChaCha8Rng::seed_from_u64(since_id::seed::stream(w.seed, 0x494e_4a45_4354, index));
    let mut pace = WriterPace::of_writer(
        w.arrivals,
        (index, w.writers),
        w.rate_per_s,
        crate::clock::now_ms(),
        w.seed,
    );
    let mut n = 0u64;
    while crate::workload::next_write(&mut pace, &mut stop).await {
        n += 1;
        let event = Event {
            stream: rng.random_range(1..=COUNTER_ROWS),
            subscriber: rng.random_range(1..=COUNTER_ROWS),
            payload: format!("event {n} by writer {index}"),
            fate: w.inject.draw(&mut inject_rng),
        };
        let result = write_event(
            &mut conn,
            w.schema,
            w.writer_lock,
            &mut ids,
            offset_ms,
            index,
            event,
        )
        .await;
        let mut out = lock(&output);
        match result {
            Ok(Some(written)) => out.committed(written),
            Ok(None) => out.rolled_back += 1,
            Err((e, gone)) => {
                out.failed(e);
                if gone {
                    // The server went away: this writer is done.
                    return;
                }
            }
        }
    }
    let _ = conn.disconnect().await;
}

/// What one event writes.
pub struct Event {
    pub stream: i32,
    pub subscriber: i32,
    pub payload: String,
    pub fate: Fate,
}

/// One event: one transaction (under the writers' lock if `lock` says so);
/// `None` if it was rolled back as its [`Fate`] said. An error says whether
/// the connection is gone.
pub async fn write_event(
    conn: &mut mysql_async::Conn,
    schema: Schema,
    lock: WriterLock,
    ids: &mut snowflake::Generator,
    clock_offset_ms: i64,
    writer: u32,
    event: Event,
) -> Result<Option<Written>, (String, bool)> {
    if lock == WriterLock::GetLock {
        let got: Option<Option<i64>> = conn
            .exec_first("SELECT GET_LOCK(?, ?)", (LOCK_NAME, LOCK_WAIT_S))
            .await
            .map_err(fail)?;
        if got.flatten() != Some(1) {
            return Err((
                format!("the writers' lock was not granted within {LOCK_WAIT_S} s"),
                false,
            ));
        }
    }
    let result = transaction(conn, schema, ids, clock_offset_ms, writer, event).await;
    if lock == WriterLock::GetLock && !result.as_ref().is_err_and(|e| e.1) {
        // After COMMIT returned (and its time was read): the next writer's
        // transaction starts only now.
        conn.exec_drop("SELECT RELEASE_LOCK(?)", (LOCK_NAME,))
            .await
            .map_err(fail)?;
    }
    result
}

/// A failed statement in one line, and whether the connection is gone.
fn fail(e: mysql_async::Error) -> (String, bool) {
    let gone = matches!(e, mysql_async::Error::Io(_) | mysql_async::Error::Driver(_));
    (super::db_error(&e), gone)
}

/// The transaction of [`write_event`]: the event, its delivery row, the counter.
async fn transaction(
    conn: &mut mysql_async::Conn,
    schema: Schema,
    ids: &mut snowflake::Generator,
    clock_offset_ms: i64,
    writer: u32,
    event: Event,
) -> Result<Option<Written>, (String, bool)> {
    // After the writers' lock, if any: the bracket starts when this
    // transaction can start taking IDs.
    let xact_start_ms = crate::clock::now_ms();
    conn.query_drop("START TRANSACTION").await.map_err(fail)?;
    let outcome = async {
        let id = match schema {
            Schema::Autoinc => {
                conn.exec_drop(
                    "INSERT INTO events (stream, payload) VALUES (?, ?)",
                    (event.stream, &event.payload),
                )
                .await?;
                conn.last_insert_id().unwrap_or(0) as i64
            }
            Schema::Snowflake => {
                // The writer's ID, from its own clock, inside the transaction.
                let id = ids.next(crate::clock::now_ms() + clock_offset_ms);
                conn.exec_drop(
                    "INSERT INTO events (id, stream, payload) VALUES (?, ?, ?)",
                    (id, event.stream, &event.payload),
                )
                .await?;
                id
            }
        };
        conn.exec_drop(
            "INSERT INTO deliveries (event_id, subscriber) VALUES (?, ?)",
            (id, event.subscriber),
        )
        .await?;
        for step in event.fate.steps_after_inserts() {
            match step {
                Step::Hold(ms) => {
                    // The ID is taken and its row locked: held open, as a
                    // slow transaction holds it.
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                }
                Step::Counter => {
                    conn.exec_drop(
                        "UPDATE streams SET events_count = events_count + 1 WHERE id = ?",
                        (event.stream,),
                    )
                    .await?;
                }
                Step::RollBack => {
                    conn.query_drop("ROLLBACK").await?;
                    return Ok(None);
                }
                Step::Commit => conn.query_drop("COMMIT").await?,
            }
        }
        Ok::<_, mysql_async::Error>(Some(id))
    }
    .await;
    match outcome {
        Ok(None) => Ok(None),
        Ok(Some(id)) => {
            let commit_returned_ms = crate::clock::now_ms();
            let sleep_ms = match event.fate {
                Fate::Commit { stall_ms } => stall_ms,
                Fate::RollBack => 0,
            };
            Ok(Some(Written {
                id,
                // MariaDB names no transaction a client can read: the writer.
                xid: format!("writer {writer}"),
                xact_start_ms,
                commit_returned_ms,
                sleep_ms,
            }))
        }
        Err(e) => {
            let failure = fail(e);
            if !failure.1 {
                let _ = conn.query_drop("ROLLBACK").await;
            }
            Err(failure)
        }
    }
}

/// The ID's time of an event: decoded from a Snowflake ID; for
/// AUTO_INCREMENT, whose IDs carry no time, the transaction's start.
pub fn id_time_ms(schema: Schema, w: &Written) -> i64 {
    match schema {
        Schema::Autoinc => w.xact_start_ms,
        Schema::Snowflake => Layout::twitter().ts_ms(since_id::id::Id(w.id as u128)),
    }
}

/// Bare single-row autocommit inserts into a table of their own, from
/// `connections` connections for `duration_ms`: the server's ceiling for the
/// smallest durable write, the benchmark's reference. Returns the inserts.
pub async fn bare_inserts(
    opts: mysql_async::Opts,
    connections: u32,
    duration_ms: u64,
) -> Result<u64, String> {
    let mut admin = mysql_async::Conn::new(opts.clone())
        .await
        .map_err(|e| super::db_error(&e))?;
    admin
        .query_drop(
            "CREATE TABLE IF NOT EXISTS bare (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, \
             payload VARCHAR(200) NOT NULL) ENGINE=InnoDB",
        )
        .await
        .map_err(|e| super::db_error(&e))?;
    let end = crate::clock::now_ms() + duration_ms as i64;
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let mut conn = mysql_async::Conn::new(opts.clone())
            .await
            .map_err(|e| super::db_error(&e))?;
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while crate::clock::now_ms() < end {
                if conn
                    .exec_drop("INSERT INTO bare (payload) VALUES (?)", ("bare",))
                    .await
                    .is_err()
                {
                    break;
                }
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap_or(0);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_offsets_are_seeded_and_within_the_spread() {
        assert_eq!(clock_offsets(4, 0, 1), vec![0; 4]);
        let a = clock_offsets(8, 2000, 7);
        assert_eq!(a, clock_offsets(8, 2000, 7));
        assert!(a.iter().all(|o| (-1000..=1000).contains(o)), "{a:?}");
        assert!(a.iter().any(|&o| o != a[0]), "writers differ: {a:?}");
    }

    #[test]
    fn shares_parse_as_percentages_or_fractions() {
        assert_eq!(parse_share("2%").unwrap(), 0.02);
        assert_eq!(parse_share("0.5").unwrap(), 0.5);
        for bad in ["", "x", "101%", "-0.1", "2"] {
            assert!(parse_share(bad).is_err(), "{bad}");
        }
    }

    /// A stalled transaction holds its ID before it locks the shared
    /// counter row, so the other writers do not queue behind the stall; every
    /// fate updates the counter once and ends once.
    #[test]
    fn a_stall_holds_the_id_before_the_shared_counter_row() {
        assert_eq!(
            Fate::Commit { stall_ms: 2000 }.steps_after_inserts(),
            vec![Step::Hold(2000), Step::Counter, Step::Commit]
        );
        assert_eq!(
            Fate::Commit { stall_ms: 0 }.steps_after_inserts(),
            vec![Step::Counter, Step::Commit]
        );
        assert_eq!(
            Fate::RollBack.steps_after_inserts(),
            vec![Step::Counter, Step::RollBack]
        );
    }

    /// Nothing injected draws nothing; a share draws its fates from the
    /// seeded stream, the same for the same seed, near the share asked for.
    #[test]
    fn injected_fates_are_seeded_and_near_their_shares() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let none = Injected::default();
        assert_eq!(none.draw(&mut rng), Fate::Commit { stall_ms: 0 });
        assert_eq!(rng, ChaCha8Rng::seed_from_u64(1), "no draw made");
        let inject = Injected {
            stall_share: 0.1,
            stall_ms: 3000,
            rollback_share: 0.05,
        };
        let fates = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..10_000)
                .map(|_| inject.draw(&mut rng))
                .collect::<Vec<_>>()
        };
        let a = fates(3);
        assert_eq!(a, fates(3));
        let rolled = a.iter().filter(|f| **f == Fate::RollBack).count();
        let stalled = a
            .iter()
            .filter(|f| **f == Fate::Commit { stall_ms: 3000 })
            .count();
        // This seed's exact counts lie near 5 % and 9.5 % (10 % of the rest).
        assert!((400..600).contains(&rolled), "{rolled}");
        assert!((850..1050).contains(&stalled), "{stalled}");
        assert!(
            inject
                .assumption()
                .unwrap()
                .contains("10% of transactions hold")
        );
    }
}
