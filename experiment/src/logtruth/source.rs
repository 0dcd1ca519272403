//! A database's log as the commands see it: what `judge --log NAME`
//! and `watch --target NAME:URL` ask of a database, written once here and
//! implemented in the database's own folder (`targets/postgres/log.rs`,
//! `targets/mariadb/log.rs`); `targets::LOGS` lists them, one line each.
//! The skeletons (`logtruth/judge.rs`, `logtruth/watch.rs`) and the commands
//! never name a database.

use super::Counts;
use crate::record::RecordSender;
use std::ffi::OsString;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

/// How often the judge's log is read (a slot drained, the binlog's rows
/// handed to the recorder) and the delivered files read: a delivery's time
/// is known to within this.
pub const PERIOD: Duration = Duration::from_millis(200);

/// How long connecting to the user's database may take before its URL
/// counts as not connecting (watch).
pub const CONNECT_TIMEOUT_MS: u64 = 10_000;

/// One database whose log the commands read: its line in `targets::LOGS`.
pub trait LogSource: Sync {
    /// `postgres`, `mariadb`: `judge --log NAME`, `watch --target NAME:URL`.
    fn name(&self) -> &'static str;
    /// The log as the judge's messages name it: "PostgreSQL's log".
    fn log(&self) -> &'static str;
    /// judge's `--slot`, checked at once: the slot's name to read (its
    /// default when not given), or a refusal where the log has none.
    fn judge_slot(&self, slot: Option<String>) -> Result<Option<String>, String>;
    /// The judged table (and slot), checked before anything starts.
    fn judge_check(&self, table: &str, slot: Option<&str>) -> Result<(), String>;
    /// Starts the throwaway server and readies its log's reader.
    fn judge_open(
        &self,
        runtime: &tokio::runtime::Runtime,
        table: &str,
        key: &str,
        slot: Option<&str>,
    ) -> Result<JudgeOpened, String>;
    /// watch's `--target` for this database, as the refusal of a bad one
    /// shows it: `postgres:postgresql://USER@HOST/DB`.
    fn watch_example(&self) -> &'static str;
    /// watch's options for this database, checked before anything
    /// connects (the other database's flags refused); the future returned
    /// connects and opens the log when polled.
    fn watch_check(&self, url: &str, args: &WatchArgs) -> Result<WatchOpening, String>;
}

/// A line of `targets::LOGS` as `judge --log` holds it: by its name.
impl std::fmt::Debug for dyn LogSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The throwaway server the judge's log comes from: dropping it stops and removes it.
pub trait Server: Send {
    /// Stops it fast and starts it again (`--restart-server-at`).
    fn restart(&mut self) -> Result<(), String>;
}

/// What the judge's log reader is given once the run is recorded.
pub struct ReaderCtx {
    pub sender: RecordSender,
    /// Changes to `true` when the run ends: read the log to its end, then stop.
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// A failure is reported here at once (the run stops).
    pub failed: Box<dyn Fn(String) + Send + Sync>,
}

pub type ReaderFuture = Pin<Box<dyn Future<Output = Result<Counts, String>> + Send>>;

/// A judge's log source opened before COMMAND starts.
pub struct JudgeOpened {
    /// Kept to the end, after the reader is done: dropping it stops the
    /// server and removes it.
    pub server: Box<dyn Server>,
    /// COMMAND's environment: the connection to the server.
    pub env: Vec<(&'static str, OsString)>,
    /// The judged table as messages name it (`schema.table`).
    pub table: String,
    /// "PostgreSQL's log", "MariaDB's binary log".
    pub log: &'static str,
    /// The run's `runs.target`.
    pub target: &'static str,
    /// What `runs.config` holds beyond the common flags.
    pub config: Vec<(&'static str, serde_json::Value)>,
    /// `runs.page_limit`: the most rows a read of the log takes at once.
    pub batch: i64,
    /// Reads the log into the truth until told to stop, then to its end.
    pub reader: Box<dyn FnOnce(ReaderCtx) -> ReaderFuture + Send>,
}

/// A source's future, boxed for the trait's object.
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// watch's log, opened: the slot, or the binlog's dump.
pub trait WatchSource {
    /// Reads the log up to where it ends now, its truth rows added to
    /// `into` (a slot only when it is due, or `last`); `true` when it did
    /// (every row committed before the call is then in `into` or before).
    fn drain<'a>(
        &'a mut self,
        into: &'a mut Vec<rundb::LogTruthRow>,
        last: bool,
    ) -> Boxed<'a, Result<bool, String>>;
    /// Waits `period` before the next drain, reading the log meanwhile if
    /// its events come as the server writes them.
    fn wait(&mut self, period: Duration) -> Boxed<'_, Result<(), String>>;
    /// Where the rows handed to `drain` so far end in the log: every row of
    /// the log before it was handed on, none after (JSON, the source's own;
    /// `watch_state`'s `log`, docs/rundb.md). A watch resumed from a state
    /// reads the log from there.
    fn position(&self) -> serde_json::Value;
    /// Tells the log that a state holding everything before `position` (an
    /// earlier [`WatchSource::position`]) is committed to run.db: a slot
    /// is confirmed up to there (what it keeps before is released); a log
    /// read without a slot keeps nothing for watch, and does nothing.
    fn confirm<'a>(&'a mut self, position: &'a serde_json::Value) -> Boxed<'a, Result<(), String>>;
    /// Lets go of the log: a slot watch made is dropped, a dump closed.
    fn release(self: Box<Self>) -> Boxed<'static, Result<(), String>>;
    /// A slot's status at its last drain (none for a log without a slot).
    fn slot_status(&self) -> Option<SlotStatus>;
    fn counts(&self) -> &Counts;
}

/// watch's log being opened: connects and opens it when awaited.
pub type WatchOpening = Boxed<'static, Result<WatchOpened, String>>;

/// watch's source opened, with what the run records and says about it.
pub struct WatchOpened {
    pub source: Box<dyn WatchSource>,
    /// The watched table as messages name it (`schema.table`).
    pub table: String,
    /// The banner's words for where the truth comes from.
    pub from: String,
    /// The run's `runs.target`.
    pub target: &'static str,
    /// What `runs.config` holds beyond the common flags.
    pub config: Vec<(&'static str, serde_json::Value)>,
    /// `runs.page_limit`: the most rows a read of the log takes at once.
    pub batch: i64,
}

/// A size in bytes: `N`, `NB`, `NKiB`, `NMiB`, `NGiB` or `NTiB`, above 0.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!("bad --max-slot-lag '{text}': a size above 0 such as 64MiB, 1GiB or 500000 (bytes)")
    };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return Err(bad()),
    };
    match n.checked_mul(scale) {
        Some(v) if v > 0 => Ok(v),
        _ => Err(bad()),
    }
}

/// A slot as `pg_replication_slots` shows it at a drain.
#[derive(Clone, Copy, Debug, Default)]
pub struct SlotStatus {
    /// WAL the slot keeps: `pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)`.
    pub retained: i64,
    /// Up to where it was read: `confirmed_flush_lsn` as a number of bytes.
    pub position: i64,
}

/// Record the truth of your own PostgreSQL or MariaDB table from its log
/// while your system runs, and judge its consumers.
#[derive(clap::Args, Debug, Clone)]
pub struct WatchArgs {
    /// `postgres:URL` (postgresql://USER@HOST:PORT/DB, or ?host=/socket/dir)
    /// or `mariadb:URL` (mysql://USER@HOST:PORT/DB, or ?socket=/path): your
    /// database. The password comes from PGPASSWORD or MYSQL_PWD, or
    /// --token-file, never the URL.
    #[arg(long, value_name = "postgres:URL|mariadb:URL")]
    pub target: String,
    /// The password's file (else PGPASSWORD, or MYSQL_PWD for mariadb).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The watched table (postgres: `T` is `public.T`, `SCHEMA.T` names the
    /// schema; mariadb: `T` is in the URL's database, `DB.T` names it).
    #[arg(long, value_name = "T")]
    pub table: String,
    /// Its key column: the value every consumer names.
    #[arg(long, value_name = "COLUMN", default_value = "id")]
    pub key: String,
    /// postgres: the logical replication slot (of `test_decoding`) the truth
    /// is read from: yours, or with --create-slot one watch makes and drops.
    #[arg(long, value_name = "NAME")]
    pub slot: Option<String>,
    /// postgres: make the slot (needs the REPLICATION attribute or
    /// superuser) and drop it at the end.
    #[arg(long)]
    pub create_slot: bool,
    /// mariadb: the server id watch's binlog reader registers with, unique
    /// among the server's replicas (default 1734921553).
    #[arg(long, value_name = "N")]
    pub server_id: Option<u32>,
    /// A consumer's delivered keys, one a line (CSV's first field, or JSON
    /// lines with "key" or "id"), read from the file's end as it grows. Repeatable.
    #[arg(long = "delivered", value_name = "NAME=FILE")]
    pub delivered: Vec<String>,
    /// Every committed row is owed to every consumer, not only those below
    /// the highest key it delivered.
    #[arg(long)]
    pub expect_all: bool,
    /// Stop after this long (else at Ctrl-C).
    #[arg(long, value_parser = since_id::time::parse_duration_ms)]
    pub duration: Option<u64>,
    /// A row every consumer delivered is settled (folded into counts,
    /// dropped from memory and run.db) once it committed this long before
    /// the newest time watch read; a transaction that commits later than
    /// this after a higher key was delivered has its lag measured short.
    #[arg(long, value_parser = since_id::time::parse_duration_ms, default_value = "60s")]
    pub settle_after: u64,
    /// Serve GET /metrics (Prometheus text format 0.0.4) on this address
    /// while watch runs, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// postgres: warn when the slot keeps more than half of SIZE of WAL;
    /// beyond SIZE stop with exit 2 (dropping the slot if watch made it).
    /// E.g. 64MiB, 1GiB.
    #[arg(long, value_name = "SIZE")]
    pub max_slot_lag: Option<String>,
    /// The run database (a run is added to it; the last watch run there
    /// with the same flags is resumed).
    #[arg(long, default_value = "data/watch.db")]
    pub db: PathBuf,
    /// The run this one resumes (`logtruth::watch::resumable`), found before
    /// the source opens.
    #[arg(skip)]
    pub resume: Option<Resumed>,
    /// The last run of `--db` with these flags, if it was killed (it never
    /// recorded its end): a slot it made (`--create-slot`) it could not
    /// drop (`logtruth::watch::killed`).
    #[arg(skip)]
    pub killed: Option<Killed>,
}

/// A watch run to continue: its id and its `watch_state`.
#[derive(Clone, Debug)]
pub struct Resumed {
    pub run_id: i64,
    pub state: serde_json::Value,
}

/// A watch run that was killed: its id and its `runs.config`.
#[derive(Clone, Debug)]
pub struct Killed {
    pub run_id: i64,
    pub config: serde_json::Value,
}
