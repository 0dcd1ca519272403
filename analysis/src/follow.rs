//! `analyze --follow DB`: a run judged while it is written, each leak printed
//! once, when it has settled.
//!
//! There is one definition of a leak, `analysis::diff`'s: following never
//! decides one itself. It reads the requests recorded since its last read
//! (`rundb::read::for_each_request_after`, by request id, which the one
//! writer assigns in commit order) to know how far each poller has gone, and
//! when they have gone further it judges the rows recorded so far with the
//! checker (`analysis::load::load`, then `analysis::diff::analyze`); of the
//! leaks found, it prints those not printed before whose status has
//! **settled**:
//!
//! - every poller's cursor (the since_id of its latest successful request)
//!   is above the status: no since_id request can return it any more, so no
//!   later row can make it a late arrival rather than a leak, nor add a
//!   poller that leaked it;
//! - and the run's horizon has passed it: every poller has sent a request
//!   at least two intervals after the status became visible (truth, or its
//!   first sighting), beyond the 1.5 intervals for which a status seen by
//!   one poller is owed to the others without truth (README "Definitions").
//!
//! A keyset poller (PostgreSQL's `xmin`) has no since_id, so with one in
//! the run nothing settles before the run ends. When the run's row says it
//! ended (`runs.ended_at_ms`, set by the recorder when it closes the run),
//! every leak has settled: those not yet printed are printed, and the usual
//! report follows (`analyze`'s own code path, so it is `analyze DB`'s).
//!
//! Memory: what one judgement holds (the run so far), freed before the next,
//! plus the IDs of the leaks printed and one frontier per poller. Each
//! judgement reads the run again, so judgements are spaced: the next waits
//! at least four times as long as the last one took, so following costs at
//! most about a fifth of a core however long the run.

use analysis::diff::{self, Finding};
use analysis::load::{self, Loaded};
use rusqlite::Connection;
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How far one poller has gone, from the requests read so far.
#[derive(Clone, Copy, Debug, Default)]
struct Reach {
    /// The highest since_key of its successful requests.
    cursor: Option<u128>,
    /// The latest send time of its requests.
    sent_at_ms: Option<i64>,
    /// Its policy has no since_id (xmin): it never settles anything.
    keyset: bool,
}

/// The pollers' reach, updated from the requests recorded since the last read.
struct Frontier {
    run_id: i64,
    /// The highest request id read.
    last_request: i64,
    /// `pollers.id` -> its reach.
    pollers: Vec<(i64, Reach)>,
}

impl Frontier {
    fn new(conn: &Connection, run_id: i64) -> Result<Frontier, String> {
        let pollers = rundb::read::pollers(conn, run_id)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|p| {
                let keyset = since_id::CursorPolicy::text_is_keyset(&p.policy);
                (
                    p.id,
                    Reach {
                        keyset,
                        ..Reach::default()
                    },
                )
            })
            .collect();
        Ok(Frontier {
            run_id,
            last_request: 0,
            pollers,
        })
    }

    /// Reads the requests recorded since the last call; whether there were any.
    fn advance(&mut self, conn: &Connection) -> Result<bool, String> {
        let before = self.last_request;
        let pollers = &mut self.pollers;
        let last = &mut self.last_request;
        rundb::read::for_each_request_after(conn, self.run_id, before, |r| {
            *last = r.id;
            let Some((_, reach)) = pollers.iter_mut().find(|(id, _)| *id == r.poller_id) else {
                return Ok::<_, rundb::Error>(());
            };
            reach.sent_at_ms = reach.sent_at_ms.max(Some(r.sent_at_ms));
            if r.error.is_none()
                && let Some(key) = r.since_key.and_then(|k| u128::from_str_radix(k, 16).ok())
            {
                reach.cursor = reach.cursor.max(Some(key));
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        Ok(self.last_request > before)
    }

    /// Whether a leak of the status with sort key `key`, visible from
    /// `visible_ms`, has settled (the module's comment).
    fn settled(&self, key: u128, visible_ms: i64, interval_ms: i64) -> bool {
        !self.pollers.is_empty()
            && self.pollers.iter().all(|(_, r)| {
                !r.keyset
                    && r.cursor.is_some_and(|c| c > key)
                    && r.sent_at_ms
                        .is_some_and(|t| t >= visible_ms.saturating_add(2 * interval_ms))
            })
    }
}

/// One leak's line: `leak ID  id_time T  missed by P, ...  id_skew_ms S  required_k_ms K`.
fn leak_line(loaded: &Loaded, f: &Finding) -> String {
    let names: Vec<&str> = loaded
        .pollers
        .iter()
        .enumerate()
        .filter(|(i, _)| f.leaked_by & (1 << i) != 0)
        .map(|(_, p)| p.name.as_str())
        .collect();
    let opt = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let id_time = since_id::time::rfc3339_ms(loaded.history.id_time_ms(f.status as usize));
    format!(
        "leak {}  id_time {id_time}  missed by {}  id_skew_ms {}  required_k_ms {}",
        loaded.status_id(f.status),
        names.join(", "),
        opt(f.id_skew_ms),
        opt(f.required_k_ms),
    )
}

/// Follows run `wanted` (the latest when `None`) of the database at `path`
/// until its row says it ended or `stop` is set, writing each leak to `out`
/// as it settles; checks for new rows every `poll`. Returns the run's id,
/// for the final report.
pub fn follow(
    path: &Path,
    wanted: Option<i64>,
    stop: &AtomicBool,
    poll: Duration,
    out: &mut dyn Write,
) -> Result<i64, String> {
    let conn = load::open(path).map_err(|e| e.to_string())?;
    let run_id = load::pick_run(&conn, path, wanted).map_err(|e| e.to_string())?;
    // A run judged against a database's log has no pollers to follow: its
    // consumers are judged when it ends, by the usual report.
    let judging = rundb::read::run(&conn, run_id)
        .map_err(|e| e.to_string())?
        .is_some_and(|r| !analysis::consumers::is_log_run(&r.target));
    let mut frontier = Frontier::new(&conn, run_id)?;
    eprintln!(
        "analyze: following run {run_id} of {}: each leak as it settles, the report when the run ends (Ctrl-C: now)",
        path.display()
    );
    let mut printed: HashSet<String> = HashSet::new();
    let mut next_judgement = Instant::now();
    let mut pending = false;
    loop {
        // The run's row first: a run that had ended before its rows were
        // read has all of them in this read.
        let ended = rundb::read::run(&conn, run_id)
            .map_err(|e| e.to_string())?
            .is_none_or(|r| r.ended_at_ms.is_some());
        let stopping = ended || stop.load(Ordering::Relaxed);
        pending |= frontier.advance(&conn)?;
        if judging && ((pending && Instant::now() >= next_judgement) || stopping) {
            let started = Instant::now();
            judge(&conn, run_id, &frontier, stopping, &mut printed, out)?;
            next_judgement = Instant::now() + started.elapsed() * 4;
            pending = false;
        }
        if stopping {
            return Ok(run_id);
        }
        let until = Instant::now() + poll;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(poll.min(Duration::from_millis(50)));
        }
    }
}

/// Judges the rows recorded so far and prints the settled leaks not printed
/// before (every leak not printed when `all`).
fn judge(
    conn: &Connection,
    run_id: i64,
    frontier: &Frontier,
    all: bool,
    printed: &mut HashSet<String>,
    out: &mut dyn Write,
) -> Result<(), String> {
    // One read transaction: the tables are read from one snapshot of the
    // file (SQLite's WAL mode, https://sqlite.org/wal.html: a reader sees
    // the database as of its transaction's first read), not each table at
    // another commit of the writer.
    conn.execute_batch("BEGIN")
        .map_err(|e| format!("cannot read the database: {e}"))?;
    let loaded = load::load(conn, run_id);
    // Ending a read-only transaction cannot fail in a way that matters here.
    let _ = conn.execute_batch("COMMIT");
    let loaded = loaded.map_err(|e| e.to_string())?;
    let analysis = diff::analyze(&loaded.history);
    let h = &loaded.history;
    let interval_ms = loaded.run.interval_ms;
    for f in analysis.leaks() {
        let key = h.statuses[f.status as usize].key;
        let visible = f
            .visible_ms
            .or(f.first_seen_ms)
            .unwrap_or_else(|| h.id_time_ms(f.status as usize));
        if !all && !frontier.settled(key, visible, interval_ms) {
            continue;
        }
        let id = loaded.status_id(f.status).into_owned();
        if printed.contains(&id) {
            continue;
        }
        writeln!(out, "{}", leak_line(&loaded, f)).map_err(|e| e.to_string())?;
        printed.insert(id);
    }
    out.flush().map_err(|e| e.to_string())
}
