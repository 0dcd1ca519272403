//! The consumers' judge ([`crate::consumers`]) kept up to date row by row,
//! in memory that does not grow with the run (`experiment watch`,
//! docs/log-truth.md, "Settled rows"). Pure: the log's rows and the
//! delivered lines in, as they are read; the verdicts out at any moment;
//! no clock but the times the rows carry.
//!
//! A committed row is **settled** when every consumer delivered it and it
//! committed more than the horizon (`horizon_ms`) before the newest time
//! the checker has seen (a commit's time, or a delivery's read time).
//! A settled row is folded: it leaves the open rows and only its key stays,
//! in a set of ranges (a run of consecutive integer keys is one range), so
//! that a later delivery of it counts as a duplicate, a later expiry once.
//! Every other row stays open with what each consumer did with it: a row a
//! consumer did not deliver (lost so far, expired, or not reached yet)
//! stays to the end, as the whole-run judge would list it.
//!
//! What the verdicts need of folded rows is kept as it goes: each
//! consumer's counts, its highest key and the latest row in commit order
//! it delivered, and two staircases within the horizon: the delivered rows
//! that set a new highest key in commit order (the lag of a row committed
//! later: `consumers`, "lag"), and the deliveries that set a new highest
//! key in file order with their read times (whether a row expired before
//! the consumer passed it). An open row gets its lag's row and its passing
//! time from them when it arrives, and again when a row committed before it
//! is delivered late.
//!
//! The verdicts equal [`crate::consumers::judge`]'s on the same history
//! when (1) the rows are fed in log order and each delivery after the log
//! rows committed before it was read (watch reads the files, then the log,
//! and feeds the log first), (2) each consumer's read times do not go back,
//! (3) no row commits more than the horizon after a row with a higher key
//! that a consumer delivered, and (4) no faults were injected (`restarts`:
//! watch injects none). Where (3) fails, a lost row is still lost, and its
//! lag is measured from the oldest such row within the horizon: shorter.

use crate::consumers::{self, Examples, Judged, Key, Lost, Parts, Promise, Stamp};
use rundb::{DeliveryRow, LogTruthRow};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// The horizon `experiment watch` settles rows at unless told
/// (`--settle-after`): a transaction that commits a minute after a higher
/// key was delivered is measured as if a minute late.
pub const HORIZON_MS: i64 = 60_000;

/// Keys, integers as ranges of consecutive ones.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct KeySet {
    /// Disjoint, not adjacent, rising: `(first, last)`.
    ranges: Vec<(i128, i128)>,
    text: HashSet<String>,
}

impl KeySet {
    pub fn contains(&self, key: &Key) -> bool {
        match key {
            Key::Int(n) => {
                let i = self.ranges.partition_point(|r| r.1 < *n);
                self.ranges.get(i).is_some_and(|r| r.0 <= *n)
            }
            Key::Text(t) => self.text.contains(t),
        }
    }

    pub fn insert(&mut self, key: &Key) {
        let n = match key {
            Key::Int(n) => *n,
            Key::Text(t) => {
                self.text.insert(t.clone());
                return;
            }
        };
        if self.contains(key) {
            return;
        }
        let i = self.ranges.partition_point(|r| r.1 < n);
        let left = i > 0 && n.checked_sub(1) == Some(self.ranges[i - 1].1);
        let right = i < self.ranges.len() && n.checked_add(1) == Some(self.ranges[i].0);
        match (left, right) {
            (true, true) => {
                self.ranges[i - 1].1 = self.ranges[i].1;
                self.ranges.remove(i);
            }
            (true, false) => self.ranges[i - 1].1 = n,
            (false, true) => self.ranges[i].0 = n,
            (false, false) => self.ranges.insert(i, (n, n)),
        }
    }

    /// Ranges and text keys held: what its memory grows with.
    pub fn pieces(&self) -> usize {
        self.ranges.len() + self.text.len()
    }
}

/// A delivered row that set a new highest key in commit order.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct High {
    index: u64,
    key: Key,
    stamp: Stamp,
}

/// What one consumer did with an open row.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Seen {
    delivered: bool,
    /// The earliest read of a delivered key above it (`None`: none yet).
    passed_at: Option<i64>,
    /// The first row in commit order before it, above it, delivered: its
    /// commit order and stamp.
    after: Option<(u64, Stamp)>,
    /// The highest key delivered among the rows committed before it.
    top: Option<Key>,
}

/// A committed row not settled yet.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Open {
    key: Key,
    seq: i64,
    xid: i64,
    commit_lsn: String,
    stamp: Stamp,
    deleted: bool,
    expired_ms: Option<i64>,
    /// One a consumer, in the order of the names.
    per: Vec<Seen>,
    /// Its deletes and expiries, as the log gave them (kept for run.db).
    #[serde(default)]
    later: Vec<Logged>,
}

/// A log row kept as it came (an open row's delete or expiry).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Logged {
    seq: i64,
    key: String,
    xid: i64,
    commit_lsn: String,
    commit_ms: i64,
    op: String,
    read_ms: Option<i64>,
}

impl Logged {
    fn of(t: &LogTruthRow) -> Logged {
        Logged {
            seq: t.seq,
            key: t.key.clone(),
            xid: t.xid,
            commit_lsn: t.commit_lsn.clone(),
            commit_ms: t.commit_ms,
            op: t.op.clone(),
            read_ms: t.read_ms,
        }
    }

    fn row(&self) -> LogTruthRow {
        LogTruthRow {
            seq: self.seq,
            key: self.key.clone(),
            xid: self.xid,
            commit_lsn: self.commit_lsn.clone(),
            commit_ms: self.commit_ms,
            op: self.op.clone(),
            read_ms: self.read_ms,
        }
    }
}

/// One consumer's account of its folded deliveries, and its staircases.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Tally {
    name: String,
    promise: Option<Promise>,
    deliveries: usize,
    delivered: usize,
    highest: Option<(Key, String)>,
    /// The delivered row latest in commit order: its order and key.
    latest: Option<(u64, String)>,
    duplicates: Examples,
    out_of_order: Examples,
    never_committed: Examples,
    garbage: Examples,
    /// Delivered rows that set a new highest key in commit order (order rising).
    highs: VecDeque<High>,
    /// Deliveries that set a new highest key in file order, with their read time.
    passes: VecDeque<(Key, i64)>,
    /// The open rows it did not deliver and no key above them yet: (key, order).
    #[serde(skip)]
    unpassed: BTreeSet<(Key, u64)>,
}

/// The incremental judge of a run's consumers (module docs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Checker {
    horizon_ms: i64,
    expect_all: bool,
    /// The newest time seen (commits, reads): what the horizon counts back from.
    now_ms: i64,
    /// The commit order of the next committed row.
    next: u64,
    /// The place in the log (`seq`) the next row kept gets at the least.
    #[serde(default)]
    logged: i64,
    committed: usize,
    expired: usize,
    open: BTreeMap<u64, Open>,
    #[serde(skip)]
    index: HashMap<Key, u64>,
    folded: KeySet,
    folded_expired: KeySet,
    tallies: Vec<Tally>,
}

impl Checker {
    /// A checker of the consumers `names`, owed every row with
    /// `expect_all`, each held to its promise if it has one.
    pub fn new(
        names: &[String],
        expect_all: bool,
        promises: &HashMap<String, Promise>,
        horizon_ms: i64,
    ) -> Checker {
        Checker {
            horizon_ms,
            expect_all,
            now_ms: i64::MIN,
            next: 0,
            logged: 0,
            committed: 0,
            expired: 0,
            open: BTreeMap::new(),
            index: HashMap::new(),
            folded: KeySet::default(),
            folded_expired: KeySet::default(),
            tallies: names
                .iter()
                .map(|n| Tally {
                    name: n.clone(),
                    promise: promises.get(n).copied(),
                    ..Tally::default()
                })
                .collect(),
        }
    }

    /// A checker saved with [`Checker::to_json`], its indexes rebuilt.
    pub fn from_json(text: &str) -> Result<Checker, String> {
        let value =
            serde_json::from_str(text).map_err(|e| format!("unreadable checker state: {e}"))?;
        Checker::from_value(value)
    }

    /// A checker saved as a JSON value, its indexes rebuilt.
    pub fn from_value(value: serde_json::Value) -> Result<Checker, String> {
        let mut c: Checker =
            serde_json::from_value(value).map_err(|e| format!("unreadable checker state: {e}"))?;
        for (&i, row) in &c.open {
            c.index.insert(row.key.clone(), i);
            for (t, seen) in c.tallies.iter_mut().zip(&row.per) {
                if !seen.delivered && seen.passed_at.is_none() {
                    t.unpassed.insert((row.key.clone(), i));
                }
            }
        }
        Ok(c)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a checker serializes")
    }

    /// Owes every committed row to every consumer (`analyze --expect-all`).
    pub fn expect_all(&mut self) {
        self.expect_all = true;
    }

    /// Rows open: not settled, or not delivered by some consumer.
    pub fn open_rows(&self) -> usize {
        self.open.len()
    }

    /// What the checker holds beyond its open rows: the folded keys' ranges
    /// and the staircases' steps.
    pub fn held(&self) -> usize {
        let steps: usize = self
            .tallies
            .iter()
            .map(|t| t.highs.len() + t.passes.len())
            .sum();
        self.folded.pieces() + self.folded_expired.pieces() + steps
    }

    /// The open rows as the log gave them (their inserts, deletes and
    /// expiries), in log order.
    pub fn open_truth(&self) -> Vec<LogTruthRow> {
        let mut rows: Vec<LogTruthRow> = self
            .open
            .values()
            .flat_map(|r| {
                let insert = LogTruthRow {
                    seq: r.seq,
                    key: r.stamp.key.clone(),
                    xid: r.xid,
                    commit_lsn: r.commit_lsn.clone(),
                    commit_ms: r.stamp.commit_ms,
                    op: "insert".into(),
                    read_ms: r.stamp.read_ms,
                };
                std::iter::once(insert).chain(r.later.iter().map(Logged::row))
            })
            .collect();
        rows.sort_by_key(|r| r.seq);
        rows
    }

    fn see(&mut self, at: i64) {
        self.now_ms = self.now_ms.max(at);
    }

    /// The log's next rows, in log order.
    pub fn log(&mut self, rows: &[LogTruthRow]) {
        for t in rows {
            // A resumed watch's decoder numbers its rows from 0 again: the
            // places kept go on from the last one, so run.db's stay unique.
            let seq = t.seq.max(self.logged);
            self.logged = seq + 1;
            let t = &LogTruthRow { seq, ..t.clone() };
            self.see(t.commit_ms.max(t.read_ms.unwrap_or(i64::MIN)));
            let key = Key::parse(&t.key);
            let at = self.index.get(&key).copied();
            match (t.op.as_str(), at) {
                ("insert", None) if !self.folded.contains(&key) => self.commit(key, t),
                ("delete", Some(i)) => {
                    let row = self.open.get_mut(&i).expect("indexed");
                    row.deleted = true;
                    row.later.push(Logged::of(t));
                }
                ("expire", Some(i)) => {
                    let row = self.open.get_mut(&i).expect("indexed");
                    row.later.push(Logged::of(t));
                    if row.expired_ms.is_none() {
                        // MariaDB's commit times are whole seconds: its read time, if kept.
                        row.expired_ms = Some(t.read_ms.unwrap_or(t.commit_ms));
                        self.expired += 1;
                    }
                }
                ("expire", None)
                    if self.folded.contains(&key) && !self.folded_expired.contains(&key) =>
                {
                    self.folded_expired.insert(&key);
                    self.expired += 1;
                }
                _ => {}
            }
        }
        self.settle();
    }

    /// A new committed row: what each consumer delivered before it tells
    /// its lag's row and whether a key above it was passed.
    fn commit(&mut self, key: Key, t: &LogTruthRow) {
        let i = self.next;
        self.next += 1;
        self.committed += 1;
        let per = self
            .tallies
            .iter_mut()
            .map(|tally| {
                let first_above = tally.highs.partition_point(|h| h.key <= key);
                let step = tally.passes.partition_point(|(k, _)| *k <= key);
                let seen = Seen {
                    delivered: false,
                    passed_at: tally.passes.get(step).map(|(_, at)| *at),
                    after: tally
                        .highs
                        .get(first_above)
                        .map(|h| (h.index, h.stamp.clone())),
                    top: tally.highs.back().map(|h| h.key.clone()),
                };
                if seen.passed_at.is_none() {
                    tally.unpassed.insert((key.clone(), i));
                }
                seen
            })
            .collect();
        self.index.insert(key.clone(), i);
        self.open.insert(
            i,
            Open {
                key,
                seq: t.seq,
                xid: t.xid,
                commit_lsn: t.commit_lsn.clone(),
                stamp: Stamp::of(t),
                deleted: false,
                expired_ms: None,
                per,
                later: Vec::new(),
            },
        );
    }

    /// The consumers' next lines, each consumer's in file order (lines of
    /// consumers not named are ignored, as the judge ignores them).
    pub fn deliver(&mut self, lines: &[DeliveryRow]) {
        for d in lines {
            self.see(d.read_at_ms);
            let Some(c) = self.tallies.iter().position(|t| t.name == d.consumer) else {
                continue;
            };
            let Some(text) = &d.key else {
                let raw = d.raw.as_deref().unwrap_or("");
                self.tallies[c]
                    .garbage
                    .add(|| format!("line {}: {raw}", d.line));
                continue;
            };
            self.tallies[c].deliveries += 1;
            let key = Key::parse(text);
            match self.index.get(&key).copied() {
                Some(i) if self.open[&i].per[c].delivered => {
                    self.tallies[c].duplicates.add(|| text.clone())
                }
                Some(i) => self.first_delivery(c, i, text, d.read_at_ms),
                None if self.folded.contains(&key) => {
                    self.tallies[c].duplicates.add(|| text.clone())
                }
                None => self.tallies[c].never_committed.add(|| text.clone()),
            }
        }
        self.settle();
    }

    /// Consumer `c` delivered open row `i` for the first time, read at `at`.
    fn first_delivery(&mut self, c: usize, i: u64, text: &str, at: i64) {
        let row = self.open.get_mut(&i).expect("open");
        row.per[c].delivered = true;
        let (key, stamp) = (row.key.clone(), row.stamp.clone());
        let tally = &mut self.tallies[c];
        tally.unpassed.remove(&(key.clone(), i));
        tally.delivered += 1;
        match &tally.latest {
            Some((l, earlier)) if *l > i => {
                tally.out_of_order.add(|| format!("{text} after {earlier}"))
            }
            _ => tally.latest = Some((i, stamp.key.clone())),
        }
        if tally.highest.as_ref().is_none_or(|(h, _)| *h < key) {
            tally.highest = Some((key.clone(), stamp.key.clone()));
            tally.passes.push_back((key.clone(), at));
            // Read times do not go back: this is the first pass of these rows.
            let rest = tally.unpassed.split_off(&(key.clone(), 0));
            for (_, j) in std::mem::replace(&mut tally.unpassed, rest) {
                self.open.get_mut(&j).expect("open").per[c].passed_at = Some(at);
            }
        }
        climb(&mut tally.highs, i, &key, &stamp);
        // Rows committed after it, not delivered: it may be their lag's row.
        for row in self.open.range_mut(i + 1..).map(|(_, r)| r) {
            let seen = &mut row.per[c];
            if seen.delivered {
                continue;
            }
            if seen.top.as_ref().is_none_or(|t| *t < key) {
                seen.top = Some(key.clone());
            }
            if row.key < key && seen.after.as_ref().is_none_or(|(a, _)| *a > i) {
                seen.after = Some((i, stamp.clone()));
            }
        }
    }

    /// Folds the settled rows and drops the staircases' steps older than
    /// the horizon (their last step stays).
    fn settle(&mut self) {
        let cutoff = self.now_ms.saturating_sub(self.horizon_ms);
        let old: Vec<u64> = self
            .open
            .iter()
            .take_while(|(_, r)| r.stamp.commit_ms < cutoff)
            .filter(|(_, r)| r.per.iter().all(|s| s.delivered))
            .map(|(i, _)| *i)
            .collect();
        for i in old {
            let row = self.open.remove(&i).expect("open");
            self.index.remove(&row.key);
            self.folded.insert(&row.key);
            if row.expired_ms.is_some() {
                self.folded_expired.insert(&row.key);
            }
        }
        for t in &mut self.tallies {
            while t.highs.len() > 1 && t.highs[0].stamp.commit_ms < cutoff {
                t.highs.pop_front();
            }
            while t.passes.len() > 1 && t.passes[0].1 < cutoff {
                t.passes.pop_front();
            }
        }
    }

    /// Every consumer judged on what was fed so far.
    pub fn judged(&self) -> Judged {
        let consumers = (0..self.tallies.len()).map(|c| self.judge_one(c)).collect();
        Judged {
            committed: self.committed,
            expired: self.expired,
            expect_all: self.expect_all,
            restarts: Vec::new(),
            consumers,
        }
    }

    fn judge_one(&self, c: usize) -> consumers::Consumer {
        let t = &self.tallies[c];
        let mut lost = Vec::new();
        let mut not_reached = 0;
        let mut expired = Examples::default();
        for row in self.open.values() {
            let seen = &row.per[c];
            if seen.delivered {
                continue;
            }
            let gone_first = row
                .expired_ms
                .is_some_and(|at| seen.passed_at.unwrap_or(i64::MAX) >= at);
            let below = t.highest.as_ref().is_some_and(|(h, _)| row.key < *h);
            if gone_first {
                expired.add(|| row.stamp.key.clone());
            } else if below || self.expect_all {
                let lag = match (&seen.after, &seen.top) {
                    (Some((_, after)), Some(top)) => Some(consumers::measure(
                        &row.key,
                        row.stamp.clone(),
                        after.clone(),
                        top,
                    )),
                    _ => None,
                };
                lost.push(Lost {
                    key: row.stamp.key.clone(),
                    xid: row.xid,
                    commit_lsn: row.commit_lsn.clone(),
                    commit_ms: row.stamp.commit_ms,
                    deleted: row.deleted,
                    lag,
                });
            } else {
                not_reached += 1;
            }
        }
        let parts = Parts {
            name: t.name.clone(),
            deliveries: t.deliveries,
            delivered: t.delivered,
            highest: t.highest.as_ref().map(|(_, text)| text.clone()),
            lost,
            not_reached,
            expired,
            redelivered: Examples::default(),
            duplicates: t.duplicates.clone(),
            out_of_order: t.out_of_order.clone(),
            never_committed: t.never_committed.clone(),
            garbage: t.garbage.clone(),
        };
        consumers::assemble(parts, t.promise, self.expect_all)
    }
}

/// Adds delivered row `index` to the staircase of rows that set a new
/// highest key in commit order, if it sets one, and drops the steps after
/// it that it overtops.
fn climb(highs: &mut VecDeque<High>, index: u64, key: &Key, stamp: &Stamp) {
    let at = highs.partition_point(|h| h.index < index);
    if at > 0 && highs[at - 1].key >= *key {
        return;
    }
    while highs.get(at).is_some_and(|h| h.key <= *key) {
        highs.remove(at);
    }
    highs.insert(
        at,
        High {
            index,
            key: key.clone(),
            stamp: stamp.clone(),
        },
    );
}

pub mod stored;

#[cfg(test)]
mod tests;
