//! `analyze`'s default reading of a run (issue 52): run.db read in time
//! order into the checker that streams ([`crate::stream`]), a chunk of
//! requests at a time, through [`rundb::read`] only.
//!
//! Requests come in id order (the order the writer committed them, a
//! primary-key range per chunk) with their items (`observations` in rowid
//! order, [`rundb::read::for_each_observation`]), and are put in time order
//! by a small heap: a request is released once every poller has sent one at
//! or after it, since each poller's own requests are recorded in the order
//! it sent them. The truth is read in its table's order (by ID text, which
//! is key order for the IDs of one run) on a thread and a connection of its
//! own, and passed on just ahead of the requests that need it. If the
//! order is not what the checker needs, or any other of its assumptions
//! fails, the checker says so and `analyze` judges the run in memory
//! instead ([`Streaming::GaveUp`]).

use crate::diff::Analysis;
use crate::history_builder::{parse_key, parse_key_bytes};
use crate::load::{LoadError, Loaded, Totals};
use crate::spill::Spill;
use crate::stream::{Checker, Item, RequiredKs, StreamRequest, TruthRow};
use rusqlite::Connection;
use since_id::id::{Id, Layout};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// Requests read per chunk: a few thousand requests and their items.
const CHUNK: usize = 2048;
/// Truth rows read per chunk.
const TRUTH_CHUNK: usize = 8192;

/// What the streaming read gave.
pub enum Streaming {
    /// The run, judged: the same as judging it in memory.
    Judged(Box<Loaded>, Box<Analysis>),
    /// A run this reading does not take (why): judge it in memory.
    NotStreamable(String),
    /// The checker's assumptions failed on this run (why): judge it in memory.
    GaveUp(String),
}

/// Chunks of truth rows in flight from the thread that reads them.
const TRUTH_IN_FLIGHT: usize = 4;

/// A chunk of the truth read on its own thread, or why it could not be.
type TruthChunk = Result<Vec<TruthRow>, LoadError>;

/// Reads run `run_id`'s truth, a chunk at a time in the table's order, on
/// a connection of its own to `path`, and sends each chunk until the truth
/// ends (then the channel closes) or nobody takes it.
fn read_truth(path: &str, run_id: i64, tx: SyncSender<TruthChunk>) {
    let conn = match crate::load::open(std::path::Path::new(path)) {
        Ok(conn) => conn,
        Err(e) => {
            let _ = tx.send(Err(e));
            return;
        }
    };
    // One buffer for the last ID read, not a string a row.
    let mut last = String::new();
    loop {
        let mut rows = Vec::with_capacity(TRUTH_CHUNK);
        let after = last.clone();
        let read =
            rundb::read::for_each_truth_key_after(&conn, run_id, Some(&after), TRUTH_CHUNK, |t| {
                rows.push(TruthRow {
                    key: parse_key_bytes(t.id_key).map_err(LoadError)?,
                    id_time_ms: t.id_time_ms,
                    visibility: crate::history::Visibility {
                        visible_at_ms: t.visible_at_ms,
                        deleted_at_ms: t.deleted_at_ms,
                    },
                    expired: false,
                    unserved: 0,
                });
                last.clear();
                last.push_str(t.id);
                Ok::<_, LoadError>(())
            });
        match read {
            Ok(()) if rows.is_empty() => return,
            Ok(()) => {
                if tx.send(Ok(rows)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
    }
}

/// The truth, a chunk at a time, in the table's order, as [`read_truth`]
/// sends it.
struct TruthFeed {
    buf: VecDeque<TruthRow>,
    chunks: Receiver<TruthChunk>,
    done: bool,
}

impl TruthFeed {
    fn refill(&mut self) -> Result<(), LoadError> {
        match self.chunks.recv() {
            Ok(rows) => self.buf.extend(rows?),
            Err(_) => self.done = true,
        }
        Ok(())
    }

    /// Passes on every truth row with a key at or below `want`.
    fn through(&mut self, out: &mut Vec<Fed>, want: u128) -> Result<(), LoadError> {
        loop {
            while let Some(t) = self.buf.front().filter(|t| t.key <= want) {
                out.push(Fed::Truth(*t));
                self.buf.pop_front();
            }
            if !self.buf.is_empty() || self.done {
                break;
            }
            self.refill()?;
        }
        out.push(Fed::TruthThrough(want));
        Ok(())
    }
}

/// What the reading thread passes to the checking one, in the order the
/// [`Checker`] takes it.
enum Fed {
    Truth(TruthRow),
    TruthThrough(u128),
    /// Boxed: a batch can hold a million truth rows (the statuses written
    /// before the pollers began, all needed by their first page), each
    /// as large as the largest variant.
    Request(Box<(StreamRequest, Vec<Item>)>),
}

impl Fed {
    fn to(self, c: &mut Checker) {
        match self {
            Fed::Truth(t) => c.truth(t),
            Fed::TruthThrough(k) => c.truth_done_through(k),
            Fed::Request(r) => c.request(r.0, r.1),
        }
    }
}

/// Batches of [`Fed`] in flight between the threads: the reader is at most
/// this many chunks ahead of the checker.
const IN_FLIGHT: usize = 2;

/// A request read, waiting for its turn in time order.
struct Read {
    id: i64,
    r: StreamRequest,
    items: Vec<Item>,
}

/// Reads and judges run `run_id` streaming, or says why it must be judged
/// in memory: a target other than the simulator (whose IDs may not give
/// their times), recorded clients, a retention job or a Fanout Timeline's
/// truth (side tables read beside the whole history), or an assumption of
/// the checker failed.
pub fn load(conn: &Connection, run_id: i64) -> Result<Streaming, LoadError> {
    load_with(conn, run_id, &mut |_| {})
}

/// [`load`], telling `progress` the observations read so far after each
/// chunk (`analyze` draws its bar from it, [`crate::progress`]).
///
/// SQLite is read on this thread (the requests and their observations) and
/// on another (the truth, on a connection of its own), and the checker runs
/// on a third, each fed through a bounded channel of chunks: reading and
/// parsing the rows of each costs about as much as checking them.
pub fn load_with(
    conn: &Connection,
    run_id: i64,
    progress: &mut dyn FnMut(u64),
) -> Result<Streaming, LoadError> {
    let (run, layout, pollers) = match streamable(conn, run_id)? {
        Ok(run) => run,
        Err(why) => return Ok(Streaming::NotStreamable(why)),
    };
    let Some(path) = conn.path().filter(|p| !p.is_empty()).map(str::to_string) else {
        return Ok(Streaming::NotStreamable(
            "a database that is not a file".into(),
        ));
    };
    let specs = pollers.iter().map(crate::load::poller_spec).collect();
    let spill = Spill::new(pollers.len());
    let (tx_truth, rx_truth) = sync_channel(TRUTH_IN_FLIGHT);
    let (read, checked, has_truth) = std::thread::scope(|scope| {
        scope.spawn(move || read_truth(&path, run_id, tx_truth));
        let mut truth = TruthFeed {
            buf: VecDeque::new(),
            chunks: rx_truth,
            done: false,
        };
        truth.refill()?;
        let has_truth = !truth.buf.is_empty();
        let mut c = Checker::new(layout.clone(), specs, run.interval_ms, has_truth);
        c.hand_over = true;
        let (tx, rx) = sync_channel::<Vec<Fed>>(IN_FLIGHT);
        let checking = scope.spawn(move || check(c, spill, rx));
        let mut reader = Reader {
            conn,
            run_id,
            layout: &layout,
            pollers: &pollers,
            truth,
        };
        let read = reader.read(&mut |batch| tx.send(batch).is_ok(), progress);
        drop(tx);
        // Ends the truth's reader, if it is still at work.
        drop(reader);
        let checked = checking
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        Ok::<_, LoadError>((read, checked, has_truth))
    })?;
    let spill_error = |e| {
        LoadError(format!(
            "cannot keep the misses and leaks in a temporary file: {e}"
        ))
    };
    let (c, mut spill) = checked.map_err(spill_error)?;
    let (mut totals, last_activity_ms) = match read? {
        Ok(read) => read,
        Err(why) => return Ok(Streaming::GaveUp(why)),
    };
    totals.truth_rows = c.truth_rows();
    let mut s = c.finish();
    if let Some(why) = s.inexact {
        return Ok(Streaming::GaveUp(why));
    }
    for &m in &s.last_misses {
        spill.miss(m).map_err(spill_error)?;
    }
    for f in &s.last_findings {
        spill.finding(f).map_err(spill_error)?;
    }
    // Each finding resolved once, now the ticks are known, and what needs
    // every finding read from them as they pass.
    let mut ks = RequiredKs::default();
    let spilled = spill
        .finish(|f| {
            let f = s.resolve.finding(0, f);
            ks.add(&f);
            f
        })
        .map_err(spill_error)?;
    (s.analysis.k_to_catch_all_ms, s.analysis.required_k) = ks.finish();
    totals.seen = s.returned;
    totals.detection_delays = s.detection_delays;
    totals.lateness = has_truth.then_some(s.lateness);
    let loaded = Loaded::streamed(run, pollers, s.history, last_activity_ms, totals, spilled);
    Ok(Streaming::Judged(Box::new(loaded), Box::new(s.analysis)))
}

/// A run's row, its ID layout and its pollers.
type Run = (rundb::RunRow, Layout, Vec<rundb::PollerRow>);

/// Run `run_id`, its ID layout and its pollers, if the streaming check
/// takes it; else why not: a target other than the simulator (whose IDs
/// may not give their times), recorded clients, a retention job or a
/// Fanout Timeline's truth (side tables read beside the whole history),
/// too many pollers.
fn streamable(conn: &Connection, run_id: i64) -> Result<Result<Run, String>, LoadError> {
    let Some(run) = rundb::read::run(conn, run_id)? else {
        return Err(LoadError(format!("no run {run_id} in the database")));
    };
    if run.target != "simulator" {
        return Ok(Err(format!("a run of target {}", run.target)));
    }
    for table in ["client_requests", "partition_drops", "ftt_pushes"] {
        if rundb::read::has_rows_of_run(conn, table, run_id)? {
            return Ok(Err(format!("a run with {table}")));
        }
    }
    let layout: Layout = run
        .layout
        .parse()
        .map_err(|e| LoadError(format!("run {}: {e}", run.id)))?;
    let pollers = rundb::read::pollers(conn, run_id)?;
    if pollers.len() > crate::diff::MAX_POLLERS {
        return Ok(Err("more pollers than the checker takes".into()));
    }
    Ok(Ok((run, layout, pollers)))
}

/// The checking thread: each batch fed to the checker, and what it hands
/// over written to disk.
fn check(
    mut c: Checker,
    mut spill: Spill,
    rx: Receiver<Vec<Fed>>,
) -> std::io::Result<(Checker, Spill)> {
    let (mut misses, mut found) = (Vec::new(), Vec::new());
    for batch in rx {
        batch.into_iter().for_each(|f| f.to(&mut c));
        c.misses_in_order(&mut misses);
        misses.drain(..).try_for_each(|m| spill.miss(m))?;
        c.findings_in_order(&mut found);
        found.drain(..).try_for_each(|f| spill.finding(&f))?;
    }
    Ok((c, spill))
}

/// The reading side of [`load_with`]: run.db in the order the checker takes.
struct Reader<'a> {
    conn: &'a Connection,
    run_id: i64,
    layout: &'a Layout,
    pollers: &'a [rundb::PollerRow],
    truth: TruthFeed,
}

/// What the reader counted (the checker's figures apart) and the last
/// receive time; or why the run must be judged in memory.
type ReadOut = Result<(Totals, Option<i64>), String>;

impl Reader<'_> {
    /// Reads the run, a chunk of requests at a time, and hands `send` each
    /// chunk's batch in time order; stops early when `send` says the
    /// checker is gone.
    fn read(
        &mut self,
        send: &mut dyn FnMut(Vec<Fed>) -> bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ReadOut, LoadError> {
        let poller_ids: HashMap<i64, usize> = self
            .pollers
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id, i))
            .collect();
        let mut totals = Totals::default();
        let mut last_activity_ms = None;
        let mut order = TimeOrder::default();
        let mut last_sent: Vec<i64> = vec![i64::MIN; self.pollers.len()];
        let mut after = 0i64;
        let mut obs = (0i64, false);
        loop {
            let chunk = read_chunk(self, after, &mut obs, &poller_ids)?;
            if obs.1 {
                return Ok(Err(
                    "observations not stored in the order of their requests".into(),
                ));
            }
            let Some(last) = chunk.last() else { break };
            after = last.id;
            for read in chunk {
                totals.requests += 1;
                totals.observations += read.items.len() as u64;
                last_activity_ms = last_activity_ms.max(Some(read.r.received_at_ms));
                let p = read.r.poller;
                last_sent[p] = last_sent[p].max(read.r.sent_at_ms);
                order.push(read);
            }
            progress(totals.observations);
            let ready = last_sent.iter().copied().min().unwrap_or(i64::MAX);
            let mut batch = Vec::new();
            order.release(self, &mut batch, ready)?;
            if !send(batch) {
                break;
            }
        }
        let mut batch = Vec::new();
        order.release(self, &mut batch, i64::MAX)?;
        self.truth.through(&mut batch, u128::MAX)?;
        send(batch);
        Ok(Ok((totals, last_activity_ms)))
    }
}

/// The requests read and not yet passed on, by send time (ties: the order
/// recorded): a request is passed on once every poller has sent one at or
/// after it, since each poller's own requests are recorded in the order it
/// sent them.
#[derive(Default)]
struct TimeOrder {
    heap: BinaryHeap<Reverse<(i64, i64, usize)>>,
    slots: Vec<Option<Read>>,
    free: Vec<usize>,
}

impl TimeOrder {
    fn push(&mut self, read: Read) {
        let slot = self.free.pop().unwrap_or(self.slots.len());
        let key = (read.r.sent_at_ms, read.id, slot);
        if slot == self.slots.len() {
            self.slots.push(Some(read));
        } else {
            self.slots[slot] = Some(read);
        }
        self.heap.push(Reverse(key));
    }

    /// Passes on every waiting request sent at or before `ready`, each
    /// after the truth it needs.
    fn release(
        &mut self,
        reader: &mut Reader,
        out: &mut Vec<Fed>,
        ready: i64,
    ) -> Result<(), LoadError> {
        while let Some(&Reverse((sent, _, slot))) = self.heap.peek() {
            if sent > ready {
                break;
            }
            self.heap.pop();
            let Some(read) = self.slots[slot].take() else {
                continue;
            };
            self.free.push(slot);
            if let Some(want) = Checker::truth_wanted(&read.r, &read.items) {
                reader.truth.through(out, want)?;
            }
            out.push(Fed::Request(Box::new((read.r, read.items))));
        }
        Ok(())
    }
}

/// Up to [`CHUNK`] requests with ids above `after`, with their items: the
/// observations from rowid `obs.0` on, through the last of this chunk's
/// requests (rowid order is request order, checked by each request's count
/// of items: `obs.1` is set when one differs).
fn read_chunk(
    reader: &Reader,
    after: i64,
    obs: &mut (i64, bool),
    poller_ids: &HashMap<i64, usize>,
) -> Result<Vec<Read>, LoadError> {
    let (conn, run_id, layout) = (reader.conn, reader.run_id, reader.layout);
    let mut chunk: Vec<Read> = Vec::new();
    let mut counts: Vec<i64> = Vec::new();
    rundb::read::for_each_request_in_chunk(conn, run_id, after, CHUNK, |r| {
        let Some(&poller) = poller_ids.get(&r.poller_id) else {
            return Err(LoadError(format!(
                "run {run_id}: request {} names poller {}, which is not in the run",
                r.id, r.poller_id
            )));
        };
        let since_key = r.since_key.map(parse_key).transpose().map_err(LoadError)?;
        let before_key = r.before_key.map(parse_key).transpose().map_err(LoadError)?;
        counts.push(r.items);
        chunk.push(Read {
            id: r.id,
            r: StreamRequest {
                poller,
                cycle: r.cycle,
                page: r.page,
                sent_at_ms: r.sent_at_ms,
                received_at_ms: r.received_at_ms,
                since_key,
                since_time_ms: since_key.map(|k| layout.ts_ms(Id(k))),
                before_key,
                failed: r.error.is_some(),
                overflow: r.overflow,
                full: r.page_limit > 0 && r.items >= r.page_limit,
                bytes: r.bytes,
            },
            items: Vec::with_capacity(usize::try_from(r.items).unwrap_or(0)),
        });
        Ok(())
    })?;
    let (Some(first), Some(last)) = (chunk.first().map(|r| r.id), chunk.last().map(|r| r.id))
    else {
        return Ok(chunk);
    };
    let mut at = 0usize;
    obs.0 = rundb::read::for_each_observation_after(conn, obs.0, |o| {
        if o.request_id > last {
            return Ok(false);
        }
        if o.request_id < first {
            return Ok(true); // another run's request
        }
        while at + 1 < chunk.len() && chunk[at].id < o.request_id {
            at += 1;
        }
        if chunk[at].id != o.request_id {
            return Ok(true); // another run's request
        }
        let key = parse_id(layout, o.status_id)
            .map_err(|e| LoadError(format!("run {run_id}: observation of {e}")))?;
        chunk[at].items.push(Item {
            key,
            id_time_ms: id_time_ms(layout, key),
        });
        Ok::<_, LoadError>(true)
    })?;
    obs.1 |= chunk
        .iter()
        .zip(&counts)
        .any(|(r, &n)| r.items.len() as i64 != n);
    Ok(chunk)
}

/// `layout.parse` of an ID's text, given as bytes: a decimal ID of up to 19
/// digits read straight into a `u64` (what `Layout::parse` makes of it,
/// without checking the text as UTF-8 and then its digits again); any
/// other, and a malformed one (for its message), through `Layout::parse`.
fn parse_id(layout: &Layout, text: &[u8]) -> Result<u128, String> {
    if layout.is_numeric() && (1..=19).contains(&text.len()) {
        let (mut n, mut digits) = (0u64, true);
        for &b in text {
            let d = b.wrapping_sub(b'0');
            digits &= d < 10;
            n = n.wrapping_mul(10).wrapping_add(u64::from(d));
        }
        if digits {
            return Ok(u128::from(n));
        }
    }
    let text = std::str::from_utf8(text).map_err(|e| format!("an ID that is not UTF-8: {e}"))?;
    layout.parse(text).map(|id| id.0).map_err(|e| e.to_string())
}

/// `layout.ts_ms(Id(key))` (the ID's time: its epoch plus the key over
/// the multiplier, in units), dividing `u64`s when key and multiplier fit
/// in one rather than `u128`s, a call per observation.
fn id_time_ms(layout: &Layout, key: u128) -> i64 {
    match (u64::try_from(key), u64::try_from(layout.multiplier())) {
        (Ok(k), Ok(m)) if m > 0 => {
            let since = u128::from(k / m) * u128::from(layout.unit_ms());
            let t = i128::from(layout.epoch_ms()) + since.min(i128::MAX as u128 / 2) as i128;
            t.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
        }
        _ => layout.ts_ms(Id(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader's shortcuts give what the layout gives: every layout's
    /// IDs parsed from bytes (malformed ones refused with the layout's
    /// message) and their times.
    #[test]
    fn ids_parse_and_time_as_the_layout_has_them() {
        let texts: Vec<String> = [
            "0",
            "7",
            "0042",
            "1462015105796587520",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "",
            "12a4",
            "+12",
            "-1",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "9fz8k2c1ab",
            "0123456789abcdef01234567",
        ]
        .iter()
        .map(|t| t.to_string())
        .collect();
        for name in Layout::NAMES {
            let layout: Layout = name.parse().unwrap();
            let mut keys = vec![0u128, 1, u64::MAX as u128, u64::MAX as u128 + 1, u128::MAX];
            for text in &texts {
                let want = layout.parse(text).map(|id| id.0).map_err(|e| e.to_string());
                assert_eq!(parse_id(&layout, text.as_bytes()), want, "{name} {text:?}");
                keys.extend(want.ok());
            }
            assert!(parse_id(&layout, &[b'1', 0xff]).is_err());
            for key in keys {
                assert_eq!(
                    id_time_ms(&layout, key),
                    layout.ts_ms(Id(key)),
                    "{name} {key}"
                );
            }
        }
    }
}
