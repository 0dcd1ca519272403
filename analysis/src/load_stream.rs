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
use crate::load::{LoadError, Loaded, Totals};
use crate::stream::{Checker, Item, StreamRequest, TruthRow};
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
    last_id: Option<String>,
    done: bool,
}

impl TruthFeed {
    fn refill(&mut self, conn: &Connection, run_id: i64) -> Result<(), LoadError> {
        let mut last = None;
        rundb::read::for_each_truth_after(
            conn,
            run_id,
            self.last_id.as_deref(),
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
                last = Some(t.id.to_string());
                Ok::<_, LoadError>(())
            },
        )?;
        self.done = last.is_none();
        if last.is_some() {
            self.last_id = last;
        }
        Ok(())
    }

    /// Feeds `c` every truth row with a key at or below `want`.
    fn through(
        &mut self,
        conn: &Connection,
        run_id: i64,
        c: &mut Checker,
        want: u128,
    ) -> Result<(), LoadError> {
        loop {
            while let Some(t) = self.buf.front().filter(|t| t.key <= want) {
                c.truth(*t);
                self.buf.pop_front();
            }
            if !self.buf.is_empty() || self.done {
                break;
            }
            self.refill(conn, run_id)?;
        }
        c.truth_done_through(want);
        Ok(())
    }
}

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
    let poller_ids: HashMap<i64, usize> =
        pollers.iter().enumerate().map(|(i, p)| (p.id, i)).collect();
    let mut truth = TruthFeed {
        buf: VecDeque::new(),
        last_id: None,
        done: false,
    };
    truth.refill(conn, run_id)?;
    let specs = pollers.iter().map(crate::load::poller_spec).collect();
    let mut c = Checker::new(
        layout.clone(),
        specs,
        run.interval_ms,
        !truth.buf.is_empty(),
    );
    let mut totals = Totals::default();
    let mut last_activity_ms = None;
    let mut heap: BinaryHeap<Reverse<(i64, i64, usize)>> = BinaryHeap::new();
    let mut slots: Vec<Option<Read>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut last_sent: Vec<i64> = vec![i64::MIN; pollers.len()];
    let mut after = 0i64;
    loop {
        let chunk = read_chunk(conn, run_id, after, &poller_ids, &layout)?;
        let Some(last) = chunk.last() else { break };
        after = last.id;
        for read in chunk {
            totals.requests += 1;
            totals.observations += read.items.len() as u64;
            last_activity_ms = last_activity_ms.max(Some(read.r.received_at_ms));
            let p = read.r.poller;
            last_sent[p] = last_sent[p].max(read.r.sent_at_ms);
            let slot = free.pop().unwrap_or(slots.len());
            let key = (read.r.sent_at_ms, read.id, slot);
            if slot == slots.len() {
                slots.push(Some(read));
            } else {
                slots[slot] = Some(read);
            }
            heap.push(Reverse(key));
        }
        progress(totals.observations);
        let ready = last_sent.iter().copied().min().unwrap_or(i64::MAX);
        release(
            conn, run_id, &mut c, &mut truth, &mut heap, &mut slots, &mut free, ready,
        )?;
    }
    release(
        conn,
        run_id,
        &mut c,
        &mut truth,
        &mut heap,
        &mut slots,
        &mut free,
        i64::MAX,
    )?;
    truth.through(conn, run_id, &mut c, u128::MAX)?;
    totals.truth_rows = c.truth_rows();
    let s = c.finish();
    if let Some(why) = s.inexact {
        return Ok(Streaming::GaveUp(why));
    }
    totals.seen = s.returned;
    totals.detection_delays = s.detection_delays;
    let loaded = Loaded::streamed(run, pollers, s.history, last_activity_ms, totals);
    Ok(Streaming::Judged(Box::new(loaded), Box::new(s.analysis)))
}

/// Feeds the checker every waiting request sent at or before `ready`, in
/// time order (ties: the order recorded), each after the truth it needs.
#[allow(clippy::too_many_arguments)]
fn release(
    conn: &Connection,
    run_id: i64,
    c: &mut Checker,
    truth: &mut TruthFeed,
    heap: &mut BinaryHeap<Reverse<(i64, i64, usize)>>,
    slots: &mut [Option<Read>],
    free: &mut Vec<usize>,
    ready: i64,
) -> Result<(), LoadError> {
    while let Some(&Reverse((sent, _, slot))) = heap.peek() {
        if sent > ready {
            break;
        }
        heap.pop();
        let Some(read) = slots[slot].take() else {
            continue;
        };
        free.push(slot);
        if let Some(want) = Checker::truth_wanted(&read.r, &read.items) {
            truth.through(conn, run_id, c, want)?;
        }
        c.request(read.r, read.items);
    }
    Ok(())
}

/// Up to [`CHUNK`] requests with ids above `after`, with their items.
fn read_chunk(
    conn: &Connection,
    run_id: i64,
    after: i64,
    poller_ids: &HashMap<i64, usize>,
    layout: &Layout,
) -> Result<Vec<Read>, LoadError> {
    let mut chunk: Vec<Read> = Vec::new();
    rundb::read::for_each_request_in_chunk(conn, run_id, after, CHUNK, |r| {
        let Some(&poller) = poller_ids.get(&r.poller_id) else {
            return Err(LoadError(format!(
                "run {run_id}: request {} names poller {}, which is not in the run",
                r.id, r.poller_id
            )));
        };
        let since_key = r.since_key.map(parse_key).transpose().map_err(LoadError)?;
        let before_key = r.before_key.map(parse_key).transpose().map_err(LoadError)?;
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
    rundb::read::for_each_observation(conn, first..=last, |o| {
        while at + 1 < chunk.len() && chunk[at].id < o.request_id {
            at += 1;
        }
        if chunk[at].id != o.request_id {
            return Ok(()); // another run's request
        }
        let key = layout
            .parse(o.status_id)
            .map_err(|e| LoadError(format!("run {run_id}: observation of {e}")))?;
        chunk[at].items.push(Item {
            key: key.0,
            id_time_ms: layout.ts_ms(key),
        });
        Ok::<_, LoadError>(())
    })?;
    Ok(chunk)
}
