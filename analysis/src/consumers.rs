//! A consumer's verdict against the truth of PostgreSQL's log (`experiment
//! judge --log postgres`, docs/log-truth.md) or MariaDB's binary log
//! (`--log mariadb`): what a relay, a projection or a follower lost,
//! delivered twice or delivered out of commit order. Where the log's commit
//! times are whole seconds (MariaDB's), each row carries the time the
//! harness read its commit (`read_ms`), and lags are measured on that.
//! Pure: the log's rows and the delivered lines in, the verdicts out.
//!
//! The definitions (README, "Definitions"; docs/log-truth.md):
//!
//! - A row is **committed** when the log holds its INSERT (a transaction
//!   that rolled back is never in it); its place in the log is its commit
//!   order.
//! - **Lost**: committed, never delivered, and its key below the highest key
//!   the consumer delivered (with `--expect-all`, any committed row never
//!   delivered). A committed row above the highest key delivered is **not
//!   reached**: the consumer had not got there, which no list of deliveries
//!   can tell from losing it.
//! - **Duplicated**: delivered more than once. **Out of commit order**: a
//!   delivery of a key committed before a key delivered earlier. Both are
//!   reported, neither is a loss.
//! - The **lag** of a lost row r: f is the first row in commit order whose
//!   key is above r's and which the consumer delivered; `lag_ms` =
//!   commit time of r - commit time of f, how long r stayed invisible after
//!   a higher key was visible; a cursor that passes a key only once its
//!   commit is more than `k` ms old catches r for any k >= lag_ms. For
//!   integer keys, `behind_n` = (the highest key delivered among the rows
//!   committed before r) - r's key + 1: a cursor held N keys behind the
//!   highest key read (`behind:n=N`, `key > highest - N`) reads r at its
//!   first read after r's commit for any N >= behind_n, if nothing higher
//!   was read meanwhile. When no key above r's that the consumer delivered
//!   committed before it in the log, r is lost with no lag: the consumer
//!   read past r while r was visible, or r became visible after a row that
//!   committed after it (PostgreSQL writes a transaction's commit record
//!   before it leaves the proc array, which makes it visible: `CommitTransaction`
//!   in src/backend/access/transam/xact.c calls `RecordTransactionCommit`
//!   before `ProcArrayEndTransaction`, so two transactions committing at once
//!   can become visible in the other order).
//! - **Expired**: committed, never delivered, and gone with its partition
//!   (the log truth's `expire` row: a partition of the judged table dropped
//!   or detached, the retention of a partitioned table) or a `TRUNCATE`
//!   before the consumer had delivered any key above it. A loss, not a lost
//!   row: the consumer's cursor had not passed it, retention took it
//!   first. One the consumer had passed (a higher key delivered, read by
//!   the harness before the expiry) is lost.
//! - **Restarts**: a fault the judge injected (`judge --kill-at`,
//!   `--kill-every`, `--restart-server-at`), recorded in `runs.config`
//!   (`nemesis`) with the number of lines each consumer's file held at that
//!   moment. A duplicate is **redelivered** when its previous delivery came
//!   before a restart (an earlier life of the consumer, or of its
//!   connection): what a relay resuming from its last stored position
//!   re-sends; any other duplicate is **duplicated**.
//! - The **verdict**: `invalid` if it lost a row or one expired; else
//!   `unknown` if it delivered no committed key (and `--expect-all` is off);
//!   else `valid`. A consumer's **promise** (`judge --promise`) adds to
//!   what invalidates: `exactly-once`, any duplicate (redelivered or not);
//!   `ordered`, a delivery out of commit order; `at-least-once` nothing
//!   more (duplicates are its price, as Jepsen's total-queue checker
//!   reports them without failing).

use rundb::{DeliveryRow, LogTruthRow};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// `runs.target` of a run judged against PostgreSQL's log.
pub const TARGET: &str = "postgres-log";

/// `runs.target` of a run judged against MariaDB's binary log.
pub const TARGET_MARIADB: &str = "mariadb-log";

/// Whether a run with `runs.target` `target` was judged against a log.
pub fn is_log_run(target: &str) -> bool {
    target == TARGET || target == TARGET_MARIADB
}

/// How many examples a count shows.
const EXAMPLES: usize = 5;

/// A key as the consumers' order sees it: integers by value (`007` is 7),
/// anything else by its text, after every integer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Key {
    Int(i128),
    Text(String),
}

impl Key {
    pub fn parse(text: &str) -> Key {
        match text.trim().parse::<i128>() {
            Ok(n) => Key::Int(n),
            Err(_) => Key::Text(text.to_string()),
        }
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::Int(a), Key::Int(b)) => a.cmp(b),
            (Key::Int(_), Key::Text(_)) => Ordering::Less,
            (Key::Text(_), Key::Int(_)) => Ordering::Greater,
            (Key::Text(a), Key::Text(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A consumer's verdict: a poller's, in the same words.
pub use crate::diff::Verdict;

/// What a consumer promises its readers (`judge --promise`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Promise {
    /// Every committed row, maybe more than once.
    AtLeastOnce,
    /// Every committed row, once.
    ExactlyOnce,
    /// Every committed row, first delivered in commit order.
    Ordered,
}

impl std::str::FromStr for Promise {
    type Err = String;

    fn from_str(s: &str) -> Result<Promise, String> {
        match s {
            "at-least-once" => Ok(Promise::AtLeastOnce),
            "exactly-once" => Ok(Promise::ExactlyOnce),
            "ordered" => Ok(Promise::Ordered),
            _ => Err(format!(
                "unknown promise '{s}': expected at-least-once, exactly-once or ordered"
            )),
        }
    }
}

impl Promise {
    pub fn as_str(self) -> &'static str {
        match self {
            Promise::AtLeastOnce => "at-least-once",
            Promise::ExactlyOnce => "exactly-once",
            Promise::Ordered => "ordered",
        }
    }
}

/// A fault the judge injected, as `runs.config`'s `nemesis` list holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restart {
    /// When, in ms since the epoch.
    pub at_ms: i64,
    /// When, in ms since the command's first start (as planned: `--kill-at`).
    #[serde(default)]
    pub offset_ms: i64,
    /// `kill` (the command killed with SIGKILL and started again) or
    /// `restart-server` (the database server stopped fast and started again).
    pub action: String,
    /// The lines each consumer's delivered file held at that moment: a
    /// line after them was delivered after the restart.
    pub lines: BTreeMap<String, i64>,
}

/// What the run says of its consumers beyond their lines: how much is owed,
/// their promises, the faults injected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Setting {
    pub expect_all: bool,
    /// A consumer's promise, by name.
    pub promises: HashMap<String, Promise>,
    pub restarts: Vec<Restart>,
}

impl Setting {
    /// The setting a log run recorded in `runs.config`: `expect_all`,
    /// `promises` (`{name: promise}`) and `nemesis` (a list of [`Restart`]s).
    pub fn from_config(config: &serde_json::Value) -> Result<Setting, String> {
        let promises = match config.get("promises") {
            None | Some(serde_json::Value::Null) => HashMap::new(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| format!("unreadable promises in the run's config: {e}"))?,
        };
        let restarts = match config.get("nemesis") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| format!("unreadable nemesis in the run's config: {e}"))?,
        };
        Ok(Setting {
            expect_all: config["expect_all"].as_bool().unwrap_or(false),
            promises,
            restarts,
        })
    }
}

/// How late a lost row committed behind a higher key the consumer delivered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lag {
    /// Its commit time minus that of `after`.
    pub lag_ms: i64,
    /// The first row in commit order above it that the consumer delivered.
    pub after: String,
    /// The N of `behind:n=N` that reads it (integer keys only).
    pub behind_n: Option<u128>,
}

/// A committed row the consumer lost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lost {
    pub key: String,
    pub xid: i64,
    pub commit_lsn: String,
    pub commit_ms: i64,
    /// The log also holds a DELETE of it (after its INSERT).
    pub deleted: bool,
    /// `None`: no key above it committed before it and was delivered (read
    /// past while visible, or, with `--expect-all`, above all it delivered).
    pub lag: Option<Lag>,
}

/// Some things counted, with the first few.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Examples {
    pub count: usize,
    pub first: Vec<String>,
}

impl Examples {
    pub(crate) fn add(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.len() < EXAMPLES {
            self.first.push(what());
        }
    }
}

/// One consumer judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Consumer {
    pub name: String,
    pub verdict: Verdict,
    pub verdict_reason: String,
    /// Lines that named a key.
    pub deliveries: usize,
    /// Distinct committed keys delivered.
    pub delivered: usize,
    /// The highest key delivered (among committed ones).
    pub highest: Option<String>,
    pub lost: Vec<Lost>,
    /// Committed above the highest key delivered, never delivered.
    pub not_reached: usize,
    /// Committed, never delivered, gone with its partition (or a TRUNCATE).
    pub expired: Examples,
    /// What it promised (`judge --promise`), if anything.
    pub promise: Option<Promise>,
    /// Deliveries of a key last delivered before a restart (the key each time).
    pub redelivered: Examples,
    /// Other deliveries of a key already delivered (the key each time).
    pub duplicates: Examples,
    /// Deliveries of a key committed before one delivered earlier (`KEY after EARLIER`).
    pub out_of_order: Examples,
    /// Delivered keys the log never committed.
    pub never_committed: Examples,
    /// Lines that named no key (`line N: TEXT`).
    pub garbage: Examples,
    /// The smallest k (ms) and N that would have caught every lost row with a lag.
    pub k_to_catch_all_ms: Option<i64>,
    pub n_to_catch_all: Option<u128>,
}

/// Every consumer of a run judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Judged {
    /// Distinct keys committed.
    pub committed: usize,
    /// Of them, gone with their partition (or a TRUNCATE).
    pub expired: usize,
    pub expect_all: bool,
    /// The faults injected, in order.
    pub restarts: Vec<Restart>,
    pub consumers: Vec<Consumer>,
}

impl Judged {
    pub fn any_invalid(&self) -> bool {
        self.consumers.iter().any(|c| c.verdict == Verdict::Invalid)
    }
}

/// A committed row: its first INSERT in the log.
struct Row<'a> {
    key: Key,
    truth: &'a LogTruthRow,
    deleted: bool,
    /// When it expired (its first `expire` row's time), if it did.
    expired_ms: Option<i64>,
}

/// Judges each consumer `names` names (in that order) from the log's truth
/// (in log order) and the delivered lines (each consumer's in file order).
pub fn judge(
    truth: &[LogTruthRow],
    deliveries: &[DeliveryRow],
    names: &[String],
    setting: &Setting,
) -> Judged {
    let mut rows: Vec<Row> = Vec::new();
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut ordered: Vec<&LogTruthRow> = truth.iter().collect();
    ordered.sort_by_key(|r| r.seq);
    for t in ordered {
        let key = Key::parse(&t.key);
        match (t.op.as_str(), index.get(&key)) {
            ("insert", None) => {
                index.insert(key.clone(), rows.len());
                rows.push(Row {
                    key,
                    truth: t,
                    deleted: false,
                    expired_ms: None,
                });
            }
            ("delete", Some(&i)) => rows[i].deleted = true,
            ("expire", Some(&i)) => {
                // MariaDB's commit times are whole seconds: its read time, if kept.
                rows[i]
                    .expired_ms
                    .get_or_insert(t.read_ms.unwrap_or(t.commit_ms));
            }
            _ => {}
        }
    }
    let consumers = names
        .iter()
        .map(|name| {
            let mine: Vec<&DeliveryRow> =
                deliveries.iter().filter(|d| d.consumer == *name).collect();
            judge_one(name, &rows, &index, &mine, setting)
        })
        .collect();
    Judged {
        committed: rows.len(),
        expired: rows.iter().filter(|r| r.expired_ms.is_some()).count(),
        expect_all: setting.expect_all,
        restarts: setting.restarts.clone(),
        consumers,
    }
}

fn judge_one(
    name: &str,
    rows: &[Row],
    index: &HashMap<Key, usize>,
    lines: &[&DeliveryRow],
    setting: &Setting,
) -> Consumer {
    let expect_all = setting.expect_all;
    // The line counts of this consumer's file at each restart, rising.
    let mut marks: Vec<i64> = setting
        .restarts
        .iter()
        .filter_map(|r| r.lines.get(name).copied())
        .collect();
    marks.sort_unstable();
    // A line's life: how many restarts came before it was written.
    let life = |line: i64| marks.partition_point(|&m| m < line);
    // The line of each row's last delivery, and when its first was read.
    let mut delivered_at: Vec<i64> = vec![0; rows.len()];
    let mut first_read: Vec<i64> = vec![i64::MAX; rows.len()];
    let mut delivered = vec![false; rows.len()];
    let mut redelivered = Examples::default();
    let mut duplicates = Examples::default();
    let mut out_of_order = Examples::default();
    let mut never_committed = Examples::default();
    let mut garbage = Examples::default();
    let mut deliveries = 0;
    // The delivered row latest in commit order so far.
    let mut latest: Option<usize> = None;
    for d in lines {
        let Some(text) = &d.key else {
            garbage.add(|| format!("line {}: {}", d.line, d.raw.as_deref().unwrap_or("")));
            continue;
        };
        deliveries += 1;
        let Some(&i) = index.get(&Key::parse(text)) else {
            never_committed.add(|| text.clone());
            continue;
        };
        if delivered[i] {
            if life(delivered_at[i]) < life(d.line) {
                redelivered.add(|| text.clone());
            } else {
                duplicates.add(|| text.clone());
            }
            delivered_at[i] = d.line;
            continue;
        }
        delivered[i] = true;
        delivered_at[i] = d.line;
        first_read[i] = d.read_at_ms;
        match latest {
            Some(l) if l > i => out_of_order.add(|| format!("{text} after {}", rows[l].truth.key)),
            _ => latest = Some(i),
        }
    }
    let highest: Option<&Row> = rows
        .iter()
        .zip(&delivered)
        .filter(|(_, d)| **d)
        .map(|(r, _)| r)
        .max_by(|a, b| a.key.cmp(&b.key));
    let (lost, not_reached, expired) = losses(rows, &delivered, &first_read, highest, expect_all);
    let parts = Parts {
        name: name.to_string(),
        deliveries,
        delivered: delivered.iter().filter(|d| **d).count(),
        highest: highest.map(|h| h.truth.key.clone()),
        lost,
        not_reached,
        expired,
        redelivered,
        duplicates,
        out_of_order,
        never_committed,
        garbage,
    };
    assemble(parts, setting.promises.get(name).copied(), expect_all)
}

/// What a consumer's judgement is made of, before its verdict (the
/// whole-run judge's and `crate::settle`'s).
pub(crate) struct Parts {
    pub(crate) name: String,
    pub(crate) deliveries: usize,
    /// Distinct committed keys delivered.
    pub(crate) delivered: usize,
    pub(crate) highest: Option<String>,
    pub(crate) lost: Vec<Lost>,
    pub(crate) not_reached: usize,
    pub(crate) expired: Examples,
    pub(crate) redelivered: Examples,
    pub(crate) duplicates: Examples,
    pub(crate) out_of_order: Examples,
    pub(crate) never_committed: Examples,
    pub(crate) garbage: Examples,
}

/// The consumer judged from its parts: the figures to catch its losses and
/// its verdict under `promise`.
pub(crate) fn assemble(p: Parts, promise: Option<Promise>, expect_all: bool) -> Consumer {
    let k_to_catch_all_ms = p
        .lost
        .iter()
        .filter_map(|l| Some(l.lag.as_ref()?.lag_ms))
        .max();
    let n_to_catch_all = p.lost.iter().filter_map(|l| l.lag.as_ref()?.behind_n).max();
    let broken = Broken {
        lost: &p.lost,
        expired: p.expired.count,
        redelivered: p.redelivered.count,
        duplicates: p.duplicates.count,
        out_of_order: p.out_of_order.count,
    };
    let (verdict, verdict_reason) = verdict(&broken, promise, p.delivered, expect_all);
    Consumer {
        name: p.name,
        verdict,
        verdict_reason,
        deliveries: p.deliveries,
        delivered: p.delivered,
        highest: p.highest,
        lost: p.lost,
        not_reached: p.not_reached,
        expired: p.expired,
        promise,
        redelivered: p.redelivered,
        duplicates: p.duplicates,
        out_of_order: p.out_of_order,
        never_committed: p.never_committed,
        garbage: p.garbage,
        k_to_catch_all_ms,
        n_to_catch_all,
    }
}

/// The rows a consumer did not deliver, judged: lost (below the highest key
/// it delivered, or any with `expect_all`), not reached, or expired first.
fn losses(
    rows: &[Row],
    delivered: &[bool],
    first_read: &[i64],
    highest: Option<&Row>,
    expect_all: bool,
) -> (Vec<Lost>, usize, Examples) {
    // In commit order: each delivered row that set a new highest key, so
    // that the first delivered row above a key is found by a binary search.
    let mut highs: Vec<usize> = Vec::new();
    let mut lost = Vec::new();
    let mut not_reached = 0;
    let mut expired = Examples::default();
    let passed = Passed::new(rows, first_read);
    for (i, row) in rows.iter().enumerate() {
        let gone_first = row
            .expired_ms
            .is_some_and(|at| passed.first_above(&row.key) >= at);
        if !delivered[i] && gone_first {
            expired.add(|| row.truth.key.clone());
        } else if !delivered[i] {
            let below = highest.is_some_and(|h| row.key < h.key);
            if below || expect_all {
                lost.push(Lost {
                    key: row.truth.key.clone(),
                    xid: row.truth.xid,
                    commit_lsn: row.truth.commit_lsn.clone(),
                    commit_ms: row.truth.commit_ms,
                    deleted: row.deleted,
                    lag: lag(rows, &highs, row),
                });
            } else {
                not_reached += 1;
            }
        } else if highs.last().is_none_or(|&h| rows[h].key < row.key) {
            highs.push(i);
        }
    }
    (lost, not_reached, expired)
}

/// When the consumer first delivered a key above a given one: the
/// delivered keys in key order, each with the earliest read time of it or
/// any key above it.
struct Passed<'a> {
    keys: Vec<&'a Key>,
    earliest: Vec<i64>,
}

impl<'a> Passed<'a> {
    fn new(rows: &'a [Row], first_read: &[i64]) -> Passed<'a> {
        let mut delivered: Vec<(&Key, i64)> = rows
            .iter()
            .zip(first_read)
            .filter(|(_, at)| **at != i64::MAX)
            .map(|(r, at)| (&r.key, *at))
            .collect();
        delivered.sort_by(|a, b| a.0.cmp(b.0));
        let mut earliest: Vec<i64> = delivered.iter().map(|(_, at)| *at).collect();
        for i in (0..earliest.len().saturating_sub(1)).rev() {
            earliest[i] = earliest[i].min(earliest[i + 1]);
        }
        Passed {
            keys: delivered.into_iter().map(|(k, _)| k).collect(),
            earliest,
        }
    }

    /// The earliest read of a delivered key above `key` (`i64::MAX`: none).
    fn first_above(&self, key: &Key) -> i64 {
        let at = self.keys.partition_point(|k| *k <= key);
        self.earliest.get(at).copied().unwrap_or(i64::MAX)
    }
}

/// What a consumer did that a promise may forbid.
struct Broken<'a> {
    lost: &'a [Lost],
    expired: usize,
    redelivered: usize,
    duplicates: usize,
    out_of_order: usize,
}

/// The verdict and its reason (module docs, "The verdict").
fn verdict(
    b: &Broken,
    promise: Option<Promise>,
    distinct: usize,
    expect_all: bool,
) -> (Verdict, String) {
    let mut broken = Vec::new();
    if !b.lost.is_empty() {
        let skips = b.lost.iter().filter(|l| l.lag.is_none()).count();
        broken.push(format!(
            "lost {} committed rows{}",
            b.lost.len(),
            if skips > 0 {
                format!(" ({skips} with no delivered higher key committed before them in the log)")
            } else {
                String::new()
            }
        ));
    }
    if b.expired > 0 {
        broken.push(format!(
            "{} rows expired (their partition dropped or detached, or the table truncated, \
             before it read them)",
            b.expired
        ));
    }
    let said = |p: Promise| format!("it promised {}", p.as_str());
    match promise {
        Some(p @ Promise::ExactlyOnce) if b.redelivered + b.duplicates > 0 => broken.push(format!(
            "delivered {} rows twice ({} redelivered after a restart); {}",
            b.redelivered + b.duplicates,
            b.redelivered,
            said(p)
        )),
        Some(p @ Promise::Ordered) if b.out_of_order > 0 => broken.push(format!(
            "delivered {} rows out of commit order; {}",
            b.out_of_order,
            said(p)
        )),
        _ => {}
    }
    if !broken.is_empty() {
        return (Verdict::Invalid, broken.join("; "));
    }
    if distinct == 0 && !expect_all {
        return (
            Verdict::Unknown,
            "delivered no committed key: nothing to judge it by (--expect-all owes it every row)"
                .into(),
        );
    }
    let mut reason = if expect_all {
        "delivered every committed row".to_string()
    } else {
        "delivered every committed row up to the highest key it delivered".to_string()
    };
    if let Some(p) = promise {
        reason.push_str(&format!(", as it promised ({})", p.as_str()));
        if p != Promise::ExactlyOnce && b.redelivered + b.duplicates > 0 {
            reason.push_str(&format!(
                "; {} duplicates ({} redelivered after a restart) are within {}",
                b.redelivered + b.duplicates,
                b.redelivered,
                p.as_str()
            ));
        }
    }
    (Verdict::Valid, reason)
}

/// The lag of `row`, from the delivered rows committed before it that set a
/// new highest key (`highs`, in commit order, keys rising).
fn lag(rows: &[Row], highs: &[usize], row: &Row) -> Option<Lag> {
    let first_above = highs.partition_point(|&h| rows[h].key <= row.key);
    let after = rows[*highs.get(first_above)?].truth;
    let top = &rows[*highs.last()?].key;
    Some(measure(
        &row.key,
        Stamp::of(row.truth),
        Stamp::of(after),
        top,
    ))
}

/// A row's key as the log printed it and its commit's times.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    pub(crate) key: String,
    pub(crate) commit_ms: i64,
    pub(crate) read_ms: Option<i64>,
}

impl Stamp {
    pub(crate) fn of(t: &LogTruthRow) -> Stamp {
        Stamp {
            key: t.key.clone(),
            commit_ms: t.commit_ms,
            read_ms: t.read_ms,
        }
    }
}

/// The lag of a lost row (`key`, stamped `lost`) behind `after`, the first
/// row in commit order above it that the consumer delivered, with `top` the
/// highest key delivered among the rows committed before it.
pub(crate) fn measure(key: &Key, lost: Stamp, after: Stamp, top: &Key) -> Lag {
    let behind_n = match (top, key) {
        (Key::Int(top), Key::Int(k)) => Some((top - k + 1) as u128),
        _ => None,
    };
    // A log whose commit times are whole seconds (MariaDB's binlog) has
    // each commit's read time: the lag is measured on that
    // (docs/log-truth.md, "MariaDB").
    let lag_ms = match (lost.read_ms, after.read_ms) {
        (Some(r), Some(a)) => r - a,
        _ => lost.commit_ms - after.commit_ms,
    };
    Lag {
        lag_ms,
        after: after.key,
        behind_n,
    }
}

/// The text report: a line per consumer, then its lost rows (the first 20).
pub fn render(judged: &Judged) -> String {
    let mut out = String::new();
    if !judged.restarts.is_empty() {
        out.push_str(&format!(
            "faults injected: {}\n",
            timeline(judged).join(", ")
        ));
    }
    for c in &judged.consumers {
        out.push_str(&format!(
            "{}: {} ({}; {} of {} committed rows delivered, {} lost, {}{} not reached, \
             {}{} duplicated, {} out of commit order)\n",
            c.name,
            c.verdict.as_str(),
            c.verdict_reason,
            c.delivered,
            judged.committed,
            c.lost.len(),
            if judged.expired > 0 {
                format!("{} expired, ", c.expired.count)
            } else {
                String::new()
            },
            c.not_reached,
            if judged.restarts.is_empty() {
                String::new()
            } else {
                format!("{} redelivered after a restart, ", c.redelivered.count)
            },
            c.duplicates.count,
            c.out_of_order.count,
        ));
        for l in c.lost.iter().take(20) {
            let lag = match &l.lag {
                Some(lag) => format!(
                    "committed {} ms after key {}{}",
                    lag.lag_ms,
                    lag.after,
                    lag.behind_n
                        .map(|n| format!(", behind:n={n} reads it"))
                        .unwrap_or_default()
                ),
                None => "no delivered higher key committed before it in the log: read past while \
                         visible, or visible only after a later commit"
                    .into(),
            };
            out.push_str(&format!(
                "  lost key {} (xid {}, commit {}{}): {lag}\n",
                l.key,
                l.xid,
                l.commit_lsn,
                if l.deleted { ", deleted since" } else { "" }
            ));
        }
        if c.lost.len() > 20 {
            out.push_str(&format!(
                "  ... and {} more (analyze --json lists them all)\n",
                c.lost.len() - 20
            ));
        }
        if let (Some(k), Some(n)) = (c.k_to_catch_all_ms, c.n_to_catch_all) {
            out.push_str(&format!(
                "  to catch every lost row with a lag: k >= {k} ms, or behind:n={n}\n"
            ));
        } else if let Some(k) = c.k_to_catch_all_ms {
            out.push_str(&format!(
                "  to catch every lost row with a lag: k >= {k} ms\n"
            ));
        }
        for (what, ex) in [
            ("keys the log never committed", &c.never_committed),
            ("lines that name no key", &c.garbage),
            ("expired", &c.expired),
            ("redelivered after a restart", &c.redelivered),
            ("duplicates", &c.duplicates),
            ("out of commit order", &c.out_of_order),
        ] {
            if ex.count > 0 {
                out.push_str(&format!(
                    "  {what}: {} (first: {})\n",
                    ex.count,
                    ex.first.join("; ")
                ));
            }
        }
    }
    out
}

/// Each fault injected, `ACTION at +S s` from the command's first start.
fn timeline(judged: &Judged) -> Vec<String> {
    judged
        .restarts
        .iter()
        .map(|r| format!("{} at +{:.1} s", r.action, r.offset_ms as f64 / 1000.0))
        .collect()
}

/// `--html` for a run judged against the log: the faults' timeline (when
/// each was injected, and how far each consumer's file had got), then the
/// text report, as one self-contained page.
pub fn html(title: &str, judged: &Judged) -> String {
    let esc = crate::html::escape;
    let mut faults = String::new();
    if !judged.restarts.is_empty() {
        let names: Vec<&str> = judged.consumers.iter().map(|c| c.name.as_str()).collect();
        faults
            .push_str("<h2>Timeline of the faults</h2>\n<table>\n<tr><th>time</th><th>after the start</th><th>fault</th>");
        for n in &names {
            faults.push_str(&format!("<th>lines of {}</th>", esc(n)));
        }
        faults.push_str("</tr>\n");
        for r in &judged.restarts {
            let at = since_id::time::rfc3339_ms(r.at_ms);
            faults.push_str(&format!(
                "<tr><td>{at}</td><td>{:.1} s</td><td>{}</td>",
                r.offset_ms as f64 / 1000.0,
                esc(&r.action)
            ));
            for n in &names {
                let lines = r.lines.get(*n).map_or("-".to_string(), |l| l.to_string());
                faults.push_str(&format!("<td>{lines}</td>"));
            }
            faults.push_str("</tr>\n");
        }
        faults.push_str("</table>\n");
    }
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title></head>\n\
         <body><h1>{t}</h1>\n{faults}<pre>{}</pre>\n</body></html>\n",
        esc(&render(judged)),
        t = esc(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Setting {
        Setting {
            expect_all: true,
            ..Setting::default()
        }
    }

    fn insert(seq: i64, key: &str, commit_ms: i64) -> LogTruthRow {
        LogTruthRow {
            seq,
            key: key.into(),
            xid: 100 + seq,
            commit_lsn: format!("0/{seq}"),
            commit_ms,
            op: "insert".into(),
            read_ms: None,
        }
    }

    fn delivered(name: &str, keys: &[&str]) -> Vec<DeliveryRow> {
        keys.iter()
            .enumerate()
            .map(|(n, k)| DeliveryRow {
                consumer: name.into(),
                line: n as i64 + 1,
                key: (!k.starts_with('!')).then(|| k.to_string()),
                raw: k.starts_with('!').then(|| k[1..].to_string()),
                read_at_ms: 0,
            })
            .collect()
    }

    /// Keys 1..=6; 2 and 4 commit late (after 3 and 6).
    fn truth() -> Vec<LogTruthRow> {
        vec![
            insert(0, "1", 1000),
            insert(1, "3", 1010),
            insert(2, "2", 1040),
            insert(3, "5", 1050),
            insert(4, "6", 1060),
            insert(5, "4", 1100),
        ]
    }

    #[test]
    fn a_naive_reader_loses_what_committed_behind_a_key_it_read_and_the_lag_says_by_how_much() {
        let names = ["naive".to_string()];
        // Read 1, 3 (2 not committed yet), then 5, 6 (4 not yet): cursor at 6.
        let j = judge(
            &truth(),
            &delivered("naive", &["1", "3", "5", "6"]),
            &names,
            &Setting::default(),
        );
        let c = &j.consumers[0];
        assert_eq!(c.verdict, Verdict::Invalid);
        let lost: Vec<(&str, Option<Lag>)> = c
            .lost
            .iter()
            .map(|l| (l.key.as_str(), l.lag.clone()))
            .collect();
        assert_eq!(
            lost,
            [
                // 2 trailed 3 (the first higher key in commit order) by 30 ms;
                // the highest delivered key committed before it was 3: N = 3 - 2 + 1.
                (
                    "2",
                    Some(Lag {
                        lag_ms: 30,
                        after: "3".into(),
                        behind_n: Some(2)
                    })
                ),
                // 4 trailed 5 by 50 ms; the highest before it was 6: N = 3.
                (
                    "4",
                    Some(Lag {
                        lag_ms: 50,
                        after: "5".into(),
                        behind_n: Some(3)
                    })
                ),
            ]
        );
        assert_eq!((c.k_to_catch_all_ms, c.n_to_catch_all), (Some(50), Some(3)));
        assert_eq!((c.delivered, c.not_reached), (4, 0));
    }

    #[test]
    fn duplicates_and_commit_order_are_reported_not_lost() {
        let names = ["r".to_string()];
        let j = judge(
            &truth(),
            &delivered("r", &["1", "3", "2", "3", "5", "6", "4", "9", "!junk"]),
            &names,
            &Setting::default(),
        );
        let c = &j.consumers[0];
        assert_eq!(c.verdict, Verdict::Valid, "{}", c.verdict_reason);
        assert_eq!(c.duplicates.first, ["3"]);
        // 3 committed before 2: delivering 2 after 3 keeps commit order.
        assert_eq!(c.out_of_order.count, 0);
        assert_eq!(c.never_committed.first, ["9"]);
        assert_eq!(c.garbage.first, ["line 9: junk"]);
        let j = judge(
            &truth(),
            &delivered("r", &["3", "1", "2", "5", "6", "4"]),
            &names,
            &Setting::default(),
        );
        assert_eq!(j.consumers[0].out_of_order.first, ["1 after 3"]);
    }

    #[test]
    fn above_the_highest_delivered_is_not_reached_unless_all_is_expected() {
        let names = ["r".to_string()];
        let rows = delivered("r", &["1", "3", "2"]);
        let c = &judge(&truth(), &rows, &names, &Setting::default()).consumers[0];
        assert_eq!(
            (c.verdict, c.lost.len(), c.not_reached),
            (Verdict::Valid, 0, 3)
        );
        let c = &judge(&truth(), &rows, &names, &all()).consumers[0];
        assert_eq!(c.verdict, Verdict::Invalid);
        let keys: Vec<&str> = c.lost.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys, ["5", "6", "4"]);
        // Nothing above them was delivered: no lag.
        assert!(c.lost.iter().all(|l| l.lag.is_none()));
        let c = &judge(&truth(), &[], &names, &Setting::default()).consumers[0];
        assert_eq!(c.verdict, Verdict::Unknown);
    }

    #[test]
    fn with_read_times_the_lag_is_measured_on_them_not_on_whole_second_commit_times() {
        // MariaDB's binlog: both commits in the same second, read 35 ms apart.
        let truth = vec![
            LogTruthRow {
                read_ms: Some(5010),
                ..insert(0, "2", 5000)
            },
            LogTruthRow {
                read_ms: Some(5045),
                ..insert(1, "1", 5000)
            },
        ];
        let names = ["r".to_string()];
        let c = &judge(&truth, &delivered("r", &["2"]), &names, &Setting::default()).consumers[0];
        assert_eq!(c.lost.len(), 1);
        let lag = c.lost[0].lag.as_ref().unwrap();
        assert_eq!((lag.lag_ms, lag.after.as_str()), (35, "2"));
    }

    #[test]
    fn a_row_read_past_while_visible_is_lost_with_no_lag_and_deletes_are_noted() {
        let names = ["r".to_string()];
        let mut truth = truth();
        truth.push(LogTruthRow {
            op: "delete".into(),
            ..insert(6, "1", 1200)
        });
        // 1 committed first; 3 is the first key above it, committed after it.
        let c = &judge(
            &truth,
            &delivered("r", &["3", "2", "5", "6", "4"]),
            &names,
            &Setting::default(),
        )
        .consumers[0];
        assert_eq!(c.lost.len(), 1);
        assert_eq!(
            (c.lost[0].key.as_str(), c.lost[0].deleted, &c.lost[0].lag),
            ("1", true, &None)
        );
        assert!(
            c.verdict_reason.contains("1 with no delivered higher key"),
            "{}",
            c.verdict_reason
        );
    }

    #[test]
    fn keys_order_as_integers_then_text() {
        assert!(Key::parse("10") > Key::parse("9"));
        assert_eq!(Key::parse("007"), Key::parse("7"));
        assert!(Key::parse("a") > Key::parse("99999"));
        assert!(Key::parse("b") > Key::parse("a"));
    }

    #[test]
    fn an_expired_row_is_not_lost_but_still_invalidates_and_says_why() {
        let names = ["r".to_string()];
        let mut truth = truth();
        // Keys 2 and 4 went with their partition at 1200.
        truth.push(LogTruthRow {
            op: "expire".into(),
            ..insert(6, "2", 1200)
        });
        truth.push(LogTruthRow {
            op: "expire".into(),
            ..insert(7, "4", 1200)
        });
        // Read after the expiry: the relay had not passed 2 or 4 when they went.
        let late = |keys: &[&str]| -> Vec<DeliveryRow> {
            delivered("r", keys)
                .into_iter()
                .map(|d| DeliveryRow {
                    read_at_ms: 2000,
                    ..d
                })
                .collect()
        };
        let j = judge(
            &truth,
            &late(&["1", "3", "5", "6"]),
            &names,
            &Setting::default(),
        );
        let c = &j.consumers[0];
        assert_eq!(j.expired, 2);
        assert!(c.lost.is_empty(), "{:?}", c.lost);
        assert_eq!(c.expired.first, ["2", "4"]);
        assert_eq!(c.verdict, Verdict::Invalid);
        assert!(
            c.verdict_reason.starts_with("2 rows expired"),
            "{}",
            c.verdict_reason
        );
        // Read before it: 3 and 5 were delivered above them while they were
        // there, so the cursor skipped them: lost, not expired.
        let c = &judge(
            &truth,
            &delivered("r", &["1", "3", "5", "6"]),
            &names,
            &Setting::default(),
        )
        .consumers[0];
        assert_eq!((c.lost.len(), c.expired.count), (2, 0));
        // A row delivered before its partition went is not expired for the relay.
        let c = &judge(
            &truth,
            &late(&["1", "3", "2", "5", "6", "4"]),
            &names,
            &Setting::default(),
        )
        .consumers[0];
        assert_eq!((c.verdict, c.expired.count), (Verdict::Valid, 0));
    }

    fn restart_after(name: &str, lines: i64) -> Restart {
        Restart {
            at_ms: 5000,
            offset_ms: 1000,
            action: "kill".into(),
            lines: [(name.to_string(), lines)].into(),
        }
    }

    #[test]
    fn a_duplicate_across_a_restart_is_redelivered_one_within_a_life_is_duplicated() {
        let names = ["r".to_string()];
        // Lines 1-3 before the kill (after line 3), then it resumes at 3 and
        // later sends 5 twice in one life.
        let rows = delivered("r", &["1", "3", "2", "3", "5", "5", "6", "4"]);
        let mut setting = Setting {
            restarts: vec![restart_after("r", 3)],
            ..Setting::default()
        };
        let c = &judge(&truth(), &rows, &names, &setting).consumers[0];
        assert_eq!(c.redelivered.first, ["3"]);
        assert_eq!(c.duplicates.first, ["5"]);
        assert_eq!(c.verdict, Verdict::Valid, "{}", c.verdict_reason);
        // At least once: both kept. Exactly once: both break it.
        setting.promises.insert("r".into(), Promise::AtLeastOnce);
        let c = &judge(&truth(), &rows, &names, &setting).consumers[0];
        assert_eq!(c.verdict, Verdict::Valid);
        assert!(
            c.verdict_reason
                .contains("2 duplicates (1 redelivered after a restart) are within at-least-once"),
            "{}",
            c.verdict_reason
        );
        setting.promises.insert("r".into(), Promise::ExactlyOnce);
        let c = &judge(&truth(), &rows, &names, &setting).consumers[0];
        assert_eq!(c.verdict, Verdict::Invalid);
        assert_eq!(
            c.verdict_reason,
            "delivered 2 rows twice (1 redelivered after a restart); it promised exactly-once"
        );
        // Without the restart both are plain duplicates.
        let c = &judge(&truth(), &rows, &names, &Setting::default()).consumers[0];
        assert_eq!((c.redelivered.count, c.duplicates.count), (0, 2));
    }

    #[test]
    fn ordered_is_broken_by_a_first_delivery_out_of_commit_order_not_by_a_redelivery() {
        let names = ["r".to_string()];
        let mut setting = Setting {
            restarts: vec![restart_after("r", 2)],
            ..Setting::default()
        };
        setting.promises.insert("r".into(), Promise::Ordered);
        // Commit order is 1 3 2 5 6 4; the redelivery of 1 after the restart is not out of order.
        let rows = delivered("r", &["1", "3", "1", "2", "5", "6", "4"]);
        let c = &judge(&truth(), &rows, &names, &setting).consumers[0];
        assert_eq!(c.verdict, Verdict::Valid, "{}", c.verdict_reason);
        let rows = delivered("r", &["1", "2", "3", "5", "6", "4"]);
        let c = &judge(&truth(), &rows, &names, &setting).consumers[0];
        assert_eq!(c.verdict, Verdict::Invalid);
        assert_eq!(
            c.verdict_reason,
            "delivered 1 rows out of commit order; it promised ordered"
        );
        // A loss breaks every promise, and is said first.
        let rows = delivered("r", &["1", "3", "5", "6"]);
        let c = &judge(&truth(), &rows, &names, &setting).consumers[0];
        assert!(
            c.verdict_reason.starts_with("lost 2 committed rows"),
            "{}",
            c.verdict_reason
        );
    }

    #[test]
    fn the_setting_reads_from_the_runs_config_and_bad_promises_are_one_line() {
        let config = serde_json::json!({
            "expect_all": true,
            "promises": {"a": "exactly-once", "b": "ordered"},
            "nemesis": [{"at_ms": 7, "action": "kill", "lines": {"a": 3}}],
        });
        let s = Setting::from_config(&config).unwrap();
        assert!(s.expect_all);
        assert_eq!(s.promises["a"], Promise::ExactlyOnce);
        assert_eq!(
            s.restarts,
            vec![Restart {
                at_ms: 7,
                offset_ms: 0,
                ..restart_after("a", 3)
            }]
        );
        assert_eq!(
            Setting::from_config(&serde_json::json!({})).unwrap(),
            Setting::default()
        );
        assert_eq!(
            "twice".parse::<Promise>().unwrap_err(),
            "unknown promise 'twice': expected at-least-once, exactly-once or ordered"
        );
    }

    #[test]
    fn the_html_report_has_the_faults_timeline_with_each_consumers_lines() {
        let names = ["r".to_string()];
        let mut setting = Setting {
            restarts: vec![restart_after("r", 3)],
            ..Setting::default()
        };
        setting.restarts.push(Restart {
            at_ms: 7500,
            offset_ms: 3500,
            action: "restart-server".into(),
            lines: [("r".to_string(), 5)].into(),
        });
        let rows = delivered("r", &["1", "3", "2", "3", "5", "6", "4"]);
        let judged = judge(&truth(), &rows, &names, &setting);
        let page = html("run 1 <x>", &judged);
        assert!(page.contains("<h2>Timeline of the faults</h2>"), "{page}");
        assert!(page.contains("<th>lines of r</th>"), "{page}");
        assert!(
            page.contains("<td>1970-01-01T00:00:05.000Z</td><td>1.0 s</td><td>kill</td><td>3</td>"),
            "{page}"
        );
        assert!(page.contains("<td>restart-server</td><td>5</td>"), "{page}");
        assert!(page.contains("run 1 &lt;x&gt;"));
        // And the text report's first line.
        assert!(
            render(&judged)
                .starts_with("faults injected: kill at +1.0 s, restart-server at +3.5 s\n"),
            "{}",
            render(&judged)
        );
        // No faults, no timeline.
        let plain = html("t", &judge(&truth(), &rows, &names, &Setting::default()));
        assert!(!plain.contains("Timeline"));
    }
}
