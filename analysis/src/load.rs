//! Reading one run out of run.db into the structs the diff judges.
//!
//! The database is opened read-only (analysis must never change a history),
//! and checked before anything is read: is it SQLite, is it ours
//! (`PRAGMA application_id`), is its schema version one this build knows.
//! Every failure is an [`LoadError`] with a one-line message for the user.
//!
//! Speed matters: a run can hold ten million observations. Each table is read
//! with one prepared statement in key order, status IDs are mapped once to
//! dense `u32` indices (one hash lookup per observation, borrowing the text
//! from SQLite without allocating) and observations land in one flat `Vec<u32>`
//! that each request points into by range.

use crate::diff::{History, MAX_POLLERS, PollerSpec, Request, Status, Visibility};
use rundb::{Poller, Run};
use rusqlite::Connection;
use since_id::id::Layout;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

/// Why a database could not be analyzed; `Display` is the one-line message.
#[derive(Debug)]
pub struct LoadError(pub String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

fn err<T>(msg: impl Into<String>) -> Result<T, LoadError> {
    Err(LoadError(msg.into()))
}

impl From<rundb::Error> for LoadError {
    fn from(e: rundb::Error) -> LoadError {
        LoadError(e.0)
    }
}

/// One run, loaded.
pub struct Loaded {
    pub run: Run,
    pub pollers: Vec<Poller>,
    pub history: History,
    /// The status IDs as the API wrote them, by dense index.
    pub status_ids: Vec<Box<str>>,
    /// The latest client time recorded (for the duration of an incomplete run).
    pub last_activity_ms: Option<i64>,
}

fn sql(e: rusqlite::Error) -> LoadError {
    LoadError(format!("cannot read the database: {e}"))
}

/// Opens `path` read-only and checks that it is a run database this build
/// can read ([`rundb::read::open`]).
pub fn open(path: &Path) -> Result<Connection, LoadError> {
    Ok(rundb::read::open(path)?)
}

/// The run to analyze: `wanted`, or the latest.
pub fn pick_run(conn: &Connection, path: &Path, wanted: Option<i64>) -> Result<i64, LoadError> {
    let shown = path.display();
    let ids = rundb::read::run_ids(conn)?;
    let Some(&latest) = ids.last() else {
        return err(format!(
            "{shown}: no runs recorded yet (the database is empty)"
        ));
    };
    match wanted {
        None => Ok(latest),
        Some(n) if ids.contains(&n) => Ok(n),
        Some(n) => {
            let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
            err(format!(
                "{shown}: no run {n} (runs recorded: {})",
                ids.join(", ")
            ))
        }
    }
}

fn parse_key(text: &str) -> Result<u128, LoadError> {
    if text.len() != 32 {
        return err(format!(
            "malformed sort key '{text}': expected 32 hex digits"
        ));
    }
    u128::from_str_radix(text, 16).map_err(|_| {
        LoadError(format!(
            "malformed sort key '{text}': expected 32 hex digits"
        ))
    })
}

fn opt_key(text: Option<String>) -> Result<Option<u128>, LoadError> {
    text.as_deref().map(parse_key).transpose()
}

/// Loads run `run_id` from an opened database.
pub fn load(conn: &Connection, run_id: i64) -> Result<Loaded, LoadError> {
    let Some(run) = rundb::read::run(conn, run_id)? else {
        return err(format!("no run {run_id} in the database"));
    };
    let layout: Layout = run
        .layout
        .parse()
        .map_err(|e| LoadError(format!("run {}: {e}", run.id)))?;

    let pollers = rundb::read::pollers(conn, run_id)?;
    let poller_ids: HashMap<i64, usize> =
        pollers.iter().enumerate().map(|(i, p)| (p.id, i)).collect();
    if pollers.len() > MAX_POLLERS {
        return err(format!(
            "run {run_id} has {} pollers; analyze handles at most {MAX_POLLERS}",
            pollers.len()
        ));
    }

    // Statuses seen, then truth (which adds the statuses nobody saw).
    // foldhash, not SipHash: ten million lookups of short digit strings, where
    // SipHash costs a second. The input is our own database, so flooding is no concern.
    let mut index: HashMap<Box<[u8]>, u32, foldhash::fast::FixedState> = HashMap::default();
    let mut status_ids: Vec<Box<str>> = Vec::new();
    let mut statuses: Vec<Status> = Vec::new();
    {
        let mut st = conn
            .prepare("SELECT id, id_key, id_time_ms FROM statuses WHERE run_id = ?1")
            .map_err(sql)?;
        let mut rows = st.query([run_id]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let id: Box<str> = r
                .get_ref(0)
                .and_then(|v| Ok(v.as_str()?))
                .map_err(sql)?
                .into();
            let key = parse_key(r.get_ref(1).and_then(|v| Ok(v.as_str()?)).map_err(sql)?)?;
            let id_time_ms = r.get(2).map_err(sql)?;
            index.insert(id.as_bytes().into(), statuses.len() as u32);
            status_ids.push(id);
            statuses.push(Status { key, id_time_ms });
        }
    }
    let mut truth_rows: Vec<(u32, Visibility)> = Vec::new();
    let mut has_truth = false;
    {
        let mut st = conn
            .prepare(
                "SELECT id, id_key, id_time_ms, visible_at_ms, deleted_at_ms FROM truth WHERE run_id = ?1",
            )
            .map_err(sql)?;
        let mut rows = st.query([run_id]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            has_truth = true;
            let id = r.get_ref(0).and_then(|v| Ok(v.as_str()?)).map_err(sql)?;
            let idx = match index.get(id.as_bytes()) {
                Some(&i) => i,
                None => {
                    let key = parse_key(r.get_ref(1).and_then(|v| Ok(v.as_str()?)).map_err(sql)?)?;
                    let i = statuses.len() as u32;
                    index.insert(id.as_bytes().into(), i);
                    status_ids.push(id.into());
                    statuses.push(Status {
                        key,
                        id_time_ms: r.get(2).map_err(sql)?,
                    });
                    i
                }
            };
            truth_rows.push((
                idx,
                Visibility {
                    visible_at_ms: r.get(3).map_err(sql)?,
                    deleted_at_ms: r.get(4).map_err(sql)?,
                },
            ));
        }
    }

    let mut requests: Vec<Request> = Vec::new();
    let mut request_ids: Vec<i64> = Vec::new();
    let mut last_activity_ms: Option<i64> = None;
    {
        let mut st = conn
            .prepare(
                "SELECT id, poller_id, cycle, page, sent_at_ms, received_at_ms, since_key, before_key,
                        page_limit, error IS NOT NULL, items, bytes, overflow
                 FROM requests WHERE run_id = ?1 ORDER BY id",
            )
            .map_err(sql)?;
        let mut rows = st.query([run_id]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let poller_id: i64 = r.get(1).map_err(sql)?;
            let Some(&poller) = poller_ids.get(&poller_id) else {
                return err(format!(
                    "run {run_id}: request {} names poller {poller_id}, which is not in the run",
                    r.get::<_, i64>(0).map_err(sql)?
                ));
            };
            let received_at_ms: i64 = r.get(5).map_err(sql)?;
            last_activity_ms = last_activity_ms.max(Some(received_at_ms));
            let page_limit: i64 = r.get(8).map_err(sql)?;
            let items: i64 = r.get(10).map_err(sql)?;
            request_ids.push(r.get(0).map_err(sql)?);
            let since_key = opt_key(r.get(6).map_err(sql)?)?;
            requests.push(Request {
                poller,
                cycle: r.get(2).map_err(sql)?,
                page: r.get(3).map_err(sql)?,
                sent_at_ms: r.get(4).map_err(sql)?,
                received_at_ms,
                since_key,
                since_time_ms: since_key.map(|k| layout.ts_ms(since_id::id::Id(k))),
                before_key: opt_key(r.get(7).map_err(sql)?)?,
                failed: r.get(9).map_err(sql)?,
                overflow: r.get::<_, i64>(12).map_err(sql)? != 0,
                full: page_limit > 0 && items >= page_limit,
                bytes: r.get(11).map_err(sql)?,
                obs_start: 0,
                obs_end: 0,
            });
        }
    }

    // Observations in (request, position) order, so each request's items are
    // one contiguous range of the flat vector. The recorder appends each
    // request's observations in position order in the transaction that adds
    // the request, so rowid order is (request, position) order and no sort or
    // index is needed; no join with `requests` either (a third of the load
    // time at 10 M rows). Rows of other runs inside the range are skipped.
    let mut observations: Vec<u32> = Vec::with_capacity(requests.len() * 8);
    if let (Some(&first), Some(&last)) = (request_ids.first(), request_ids.last()) {
        let mut st = conn
            .prepare(
                "SELECT request_id, status_id FROM observations
                 WHERE request_id BETWEEN ?1 AND ?2 ORDER BY rowid",
            )
            .map_err(sql)?;
        let mut rows = st.query([first, last]).map_err(sql)?;
        let mut at = 0usize; // index into requests of the current request
        let mut current: Option<i64> = None;
        while let Some(r) = rows.next().map_err(sql)? {
            let rid: i64 = r.get(0).map_err(sql)?;
            if current != Some(rid) {
                if current.is_some() {
                    requests[at].obs_end = observations.len() as u32;
                }
                while at + 1 < request_ids.len() && request_ids[at] < rid {
                    at += 1;
                }
                if request_ids[at] != rid {
                    current = None;
                    continue; // another run's request
                }
                requests[at].obs_start = observations.len() as u32;
                current = Some(rid);
            }
            let id = r.get_ref(1).and_then(|v| Ok(v.as_bytes()?)).map_err(sql)?;
            let idx = match index.get(id) {
                Some(&i) => i,
                None => {
                    // Not in `statuses` (a recorder killed mid-write): decode it ourselves.
                    let text = String::from_utf8_lossy(id).into_owned();
                    let parsed = layout
                        .parse(&text)
                        .map_err(|e| LoadError(format!("run {run_id}: observation of {e}")))?;
                    let i = statuses.len() as u32;
                    index.insert(id.into(), i);
                    status_ids.push(text.into());
                    statuses.push(Status {
                        key: parsed.0,
                        id_time_ms: layout.ts_ms(parsed),
                    });
                    i
                }
            };
            observations.push(idx);
        }
        if current.is_some() {
            requests[at].obs_end = observations.len() as u32;
        }
    }
    if observations.len() > u32::MAX as usize {
        return err("more than 4 billion observations in one run");
    }
    drop(index);

    let truth = has_truth.then(|| {
        let mut t = vec![None; statuses.len()];
        for (i, v) in truth_rows {
            t[i as usize] = Some(v);
        }
        t
    });
    let history = History {
        layout,
        statuses,
        truth,
        pollers: pollers
            .iter()
            .map(|p| PollerSpec {
                name: p.name.clone(),
                k_ms: p.k_ms,
                keyset: p.policy == "xmin",
            })
            .collect(),
        requests,
        observations,
        interval_ms: run.interval_ms,
    };
    Ok(Loaded {
        run,
        pollers,
        history,
        status_ids,
        last_activity_ms,
    })
}
