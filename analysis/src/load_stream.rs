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
//! is key order for the IDs of one run) just ahead of the requests. If the
//! order is not what the checker needs, or any other of its assumptions
//! fails, the checker says so and `analyze` judges the run in memory
//! instead ([`Streaming::GaveUp`]).

use crate::diff::Analysis;
use crate::history_builder::parse_key;
use crate::load::{LoadError, Loaded, OnDisk, Totals};
use crate::spill::Spill;
use crate::stream::{Checker, Item, RequiredKs, StreamRequest, TruthRow};
use rusqlite::Connection;
use since_id::id::{Id, Layout};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

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

/// The truth, a chunk at a time, in the table's order.
struct TruthFeed {
    buf: VecDeque<TruthRow>,
    /// The last ID read (empty: none yet; IDs are not empty).
    last_id: String,
    done: bool,
}

impl TruthFeed {
    fn refill(&mut self, conn: &Connection, run_id: i64) -> Result<(), LoadError> {
        // One buffer for the last ID read, not a string a row.
        let mut last = self.last_id.clone();
        let mut read = false;
        rundb::read::for_each_truth_after(
            conn,
            run_id,
            Some(self.last_id.as_str()),
            TRUTH_CHUNK,
            |t| {
                let key = parse_key(t.id_key).map_err(LoadError)?;
                self.buf.push_back(TruthRow {
                    key,
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
                read = true;
                Ok::<_, LoadError>(())
            },
        )?;
        self.done = !read;
        self.last_id = last;
        Ok(())
    }

    /// Passes on every truth row with a key at or below `want`.
    fn through(
        &mut self,
        conn: &Connection,
        run_id: i64,
        out: &mut Vec<Fed>,
        want: u128,
    ) -> Result<(), LoadError> {
        loop {
            while let Some(t) = self.buf.front().filter(|t| t.key <= want) {
                out.push(Fed::Truth(*t));
                self.buf.pop_front();
            }
            if !self.buf.is_empty() || self.done {
                break;
            }
            self.refill(conn, run_id)?;
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
    Request(StreamRequest, Vec<Item>),
}

impl Fed {
    fn to(self, c: &mut Checker) {
        match self {
            Fed::Truth(t) => c.truth(t),
            Fed::TruthThrough(k) => c.truth_done_through(k),
            Fed::Request(r, items) => c.request(r, items),
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
/// SQLite is read on this thread and the checker runs on another, fed
/// through a bounded channel of chunks: reading and parsing the rows costs
/// about as much as checking them, and the machine has two cores.
pub fn load_with(
    conn: &Connection,
    run_id: i64,
    progress: &mut dyn FnMut(u64),
) -> Result<Streaming, LoadError> {
    let Some(run) = rundb::read::run(conn, run_id)? else {
        return Err(LoadError(format!("no run {run_id} in the database")));
    };
    if run.target != "simulator" {
        return Ok(Streaming::NotStreamable(format!(
            "a run of target {}",
            run.target
        )));
    }
    // Recorded clients, a retention job, a Fanout Timeline's truth: each
    // reads the whole history beside the check (`load`, `ftt`).
    for table in ["client_requests", "partition_drops", "ftt_pushes"] {
        if rundb::read::has_rows_of_run(conn, table, run_id)? {
            return Ok(Streaming::NotStreamable(format!("a run with {table}")));
        }
    }
    let layout: Layout = run
        .layout
        .parse()
        .map_err(|e| LoadError(format!("run {}: {e}", run.id)))?;
    let pollers = rundb::read::pollers(conn, run_id)?;
    if pollers.len() > crate::diff::MAX_POLLERS {
        return Ok(Streaming::NotStreamable(
            "more pollers than the checker takes".into(),
        ));
    }
    let mut truth = TruthFeed {
        buf: VecDeque::new(),
        last_id: String::new(),
        done: false,
    };
    truth.refill(conn, run_id)?;
    let specs = pollers.iter().map(crate::load::poller_spec).collect();
    let has_truth = !truth.buf.is_empty();
    let mut c = Checker::new(layout.clone(), specs, run.interval_ms, has_truth);
    c.hand_over = true;
    let mut spill = Spill::new(pollers.len());
    let (read, checked) = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Fed>>(IN_FLIGHT);
        let checking = scope.spawn(move || {
            let (mut misses, mut found) = (Vec::new(), Vec::new());
            for batch in rx {
                batch.into_iter().for_each(|f| f.to(&mut c));
                c.misses_in_order(&mut misses);
                misses.drain(..).try_for_each(|m| spill.miss(m))?;
                c.findings_in_order(&mut found);
                found.drain(..).try_for_each(|f| spill.finding(&f))?;
            }
            Ok::<_, std::io::Error>((c, spill))
        });
        let mut reader = Reader {
            conn,
            run_id,
            layout: &layout,
            pollers: &pollers,
            truth,
        };
        let read = reader.read(&mut |batch| tx.send(batch).is_ok(), progress);
        drop(tx);
        let c = checking
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (read, c)
    });
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
    let spilled = spill.finish().map_err(spill_error)?;
    // What needs every finding: read them back once.
    let mut ks = RequiredKs::default();
    for f in spilled.findings() {
        ks.add(&s.resolve.finding(0, &f.map_err(spill_error)?));
    }
    (s.analysis.k_to_catch_all_ms, s.analysis.required_k) = ks.finish();
    totals.seen = s.returned;
    totals.detection_delays = s.detection_delays;
    totals.lateness = has_truth.then_some(s.lateness);
    let kept = OnDisk {
        spilled,
        resolve: s.resolve,
    };
    let loaded = Loaded::streamed(run, pollers, s.history, last_activity_ms, totals, kept);
    Ok(Streaming::Judged(Box::new(loaded), Box::new(s.analysis)))
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
        self.truth
            .through(self.conn, self.run_id, &mut batch, u128::MAX)?;
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
                reader
                    .truth
                    .through(reader.conn, reader.run_id, out, want)?;
            }
            out.push(Fed::Request(read.r, read.items));
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
        let key = layout
            .parse(o.status_id)
            .map_err(|e| LoadError(format!("run {run_id}: observation of {e}")))?;
        chunk[at].items.push(Item {
            key: key.0,
            id_time_ms: layout.ts_ms(key),
        });
        Ok::<_, LoadError>(true)
    })?;
    obs.1 |= chunk
        .iter()
        .zip(&counts)
        .any(|(r, &n)| r.items.len() as i64 != n);
    Ok(chunk)
}
