//! Reading one run out of run.db into the structs the diff judges.
//!
//! The database is opened read-only (analysis must never change a history),
//! and checked before anything is read: is it SQLite, is it ours
//! (`PRAGMA application_id`), is its schema version one this build knows.
//! Every failure is an [`LoadError`] with a one-line message for the user.
//!
//! Speed and memory matter: a run can hold tens of millions of observations
//! and statuses. Each table is read with one prepared statement in key order
//! (O(rows)), status IDs are mapped once to dense `u32` indices (one parse and
//! one lookup in a table of bare indices per observation, borrowing the text
//! from SQLite without allocating; `StatusIndex`), the IDs' texts are not
//! kept when the layout can write them again ([`Loaded::status_id`]), and
//! observations land in one flat `Vec<u32>` that each request points into by
//! range.

use crate::diff::MAX_POLLERS;
use crate::history::{History, IdTimes, PollerSpec, Request, Status, TruthTable, Visibility};
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use rundb::scope::{Scope, Scopes};
use rundb::{PollerRow, RunRow};
use rusqlite::Connection;
use since_id::id::Id;
use since_id::id::Layout;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
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
    pub run: RunRow,
    pub pollers: Vec<PollerRow>,
    pub history: History,
    /// The status IDs as the API wrote them: see [`Loaded::status_id`].
    status_ids: StatusTexts,
    /// The latest client time recorded (for the duration of an incomplete run).
    pub last_activity_ms: Option<i64>,
    /// The client each poller was recorded for (`client_requests.client`),
    /// in the pollers' order: see [`Loaded::client_of`].
    clients: Vec<Option<String>>,
}

impl Loaded {
    /// The machine's load while the run ran (`runs.config`'s
    /// `machine_load`, [`crate::machine`]); `None` for a virtual run or one
    /// recorded before it was kept.
    pub fn machine_load(&self) -> Option<crate::machine::MachineLoad> {
        crate::machine::MachineLoad::from_config(&self.run.config)
    }

    /// The client poller `i` is one timeline of (`experiment serve
    /// --record`, docs/judging.md); `None` for the harness's own pollers.
    pub fn client_of(&self, i: usize) -> Option<&str> {
        self.clients.get(i).and_then(|c| c.as_deref())
    }

    /// Status `i`'s ID as the API wrote it: the layout's formatting of its
    /// key, unless the text recorded was another (then it was kept).
    pub fn status_id(&self, i: u32) -> Cow<'_, str> {
        match self.status_ids.odd.get(&i) {
            Some(text) => Cow::Borrowed(text),
            None => Cow::Owned(
                self.history
                    .layout
                    .format(Id(self.history.statuses[i as usize].key)),
            ),
        }
    }
}

/// The texts of the status IDs that are not the layout's formatting of their
/// key (none in the harness's own runs): the others are formatted when shown,
/// so ten million statuses do not cost ten million strings.
#[derive(Default)]
struct StatusTexts {
    odd: HashMap<u32, Box<str>>,
}

/// Status ID text -> dense index, while loading. A status whose text is the
/// layout's formatting of its sort key (every status the harness records) is
/// found by parsing the text and looking the key up in a table of bare `u32`
/// indices (5 bytes a slot, hashed by the key the index points at): about
/// 85 MB for 11.7 M statuses, where a map from owned text cost about 70 bytes a
/// status and the text itself as much again. Other texts (another program's
/// IDs) are kept, and mapped by text. O(1) expected per lookup; parsing a
/// decimal ID costs about what hashing its text did.
struct StatusIndex {
    layout: Layout,
    by_key: HashTable<u32>,
    hasher: foldhash::fast::FixedState,
    odd_by_text: HashMap<Box<[u8]>, u32, foldhash::fast::FixedState>,
    texts: StatusTexts,
    id_times: IdTimes,
}

impl StatusIndex {
    fn new(layout: Layout) -> StatusIndex {
        StatusIndex {
            layout,
            by_key: HashTable::new(),
            hasher: foldhash::fast::FixedState::default(),
            odd_by_text: HashMap::default(),
            texts: StatusTexts::default(),
            id_times: IdTimes::FromKeys,
        }
    }

    /// Whether `text` is exactly what the layout writes for `key` (as
    /// `Layout::format`; decimal IDs checked without formatting them).
    fn canonical(&self, text: &str, key: u128) -> bool {
        if self.layout.is_numeric() {
            let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
            digits
                && (text == "0" || !text.starts_with('0'))
                && key <= self.layout.max_id().0
                && text.parse::<u128>() == Ok(key)
        } else {
            self.layout.format(Id(key)) == text
        }
    }

    /// The index of the status whose ID text is `text`, if one was added.
    fn get(&self, statuses: &[Status], text: &[u8]) -> Option<u32> {
        if !self.odd_by_text.is_empty()
            && let Some(&i) = self.odd_by_text.get(text)
        {
            return Some(i);
        }
        let text = std::str::from_utf8(text).ok()?;
        let key = self.layout.parse(text).ok()?.0;
        let hash = self.hasher.hash_one(key);
        let &i = self
            .by_key
            .find(hash, |&i| statuses[i as usize].key == key)?;
        self.canonical(text, key).then_some(i)
    }

    /// Appends `status`, with ID text `text` and ID time `id_time_ms`, and
    /// returns its index. A text added again takes the new index, as
    /// inserting into a map would.
    fn add(
        &mut self,
        statuses: &mut Vec<Status>,
        text: &str,
        status: Status,
        id_time_ms: i64,
    ) -> u32 {
        let i = statuses.len() as u32;
        statuses.push(status);
        self.id_times.push(&self.layout, statuses, id_time_ms);
        if self.canonical(text, status.key) {
            let hasher = &self.hasher;
            let hash = hasher.hash_one(status.key);
            match self.by_key.entry(
                hash,
                |&j| statuses[j as usize].key == status.key,
                |&j| hasher.hash_one(statuses[j as usize].key),
            ) {
                Entry::Occupied(mut e) => *e.get_mut() = i,
                Entry::Vacant(e) => {
                    e.insert(i);
                }
            }
        } else {
            self.odd_by_text.insert(text.as_bytes().into(), i);
            self.texts.odd.insert(i, text.into());
        }
        i
    }

    fn finish(self) -> (StatusTexts, IdTimes) {
        (self.texts, self.id_times)
    }
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

/// How big a run is, from its tables' counts (read without scanning the
/// observations: the requests carry their item counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Distinct statuses, at least (the larger of the two tables that list them).
    pub statuses: u64,
    pub observations: u64,
    pub requests: u64,
}

impl Footprint {
    /// What analyzing the run takes, about: 70 bytes a status (its key, its
    /// truth row, the check's 16 bytes, its share of the misses and plots)
    /// and 4 an observation, measured on the hour at 3,000 statuses a second
    /// (12.6 M statuses, 23.8 M observations: 895 MiB, 953 MiB estimated;
    /// docs/analysis.md), and 200 bytes a request.
    pub fn estimated_bytes(&self) -> u64 {
        self.statuses
            .saturating_mul(70)
            .saturating_add(self.observations.saturating_mul(4))
            .saturating_add(self.requests.saturating_mul(200))
    }
}

/// The size of run `run_id`: O(statuses + truth rows + requests), no scan of
/// the observations.
pub fn footprint(conn: &Connection, run_id: i64) -> Result<Footprint, LoadError> {
    conn.query_row(
        "SELECT max((SELECT count(*) FROM statuses WHERE run_id = ?1),
                    (SELECT count(*) FROM truth WHERE run_id = ?1)),
                (SELECT coalesce(sum(items), 0) FROM requests WHERE run_id = ?1),
                (SELECT count(*) FROM requests WHERE run_id = ?1)",
        [run_id],
        |r| {
            let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
            Ok(Footprint {
                statuses: n(0)?,
                observations: n(1)?,
                requests: n(2)?,
            })
        },
    )
    .map_err(sql)
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
    load_with(conn, run_id, &mut |_, _| {})
}

/// How often [`load_with`] reports the rows read: every 65,536 rows, so that
/// ten million rows cost 150 calls, not ten million.
const REPORT_EVERY: u64 = 1 << 16;

/// [`load`], telling `progress` the table being read (`"statuses"`,
/// `"truth"`, `"observations"`) and the rows of it read so far: at its
/// first row and every `REPORT_EVERY` rows after. `analyze` draws
/// its bar from it ([`crate::progress`]).
pub fn load_with(
    conn: &Connection,
    run_id: i64,
    progress: &mut dyn FnMut(&'static str, u64),
) -> Result<Loaded, LoadError> {
    let mut counted = |table: &'static str, n: &mut u64| {
        if n.is_multiple_of(REPORT_EVERY) {
            progress(table, *n);
        }
        *n += 1;
    };
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

    // Statuses seen, then truth (which adds the statuses nobody saw). Each
    // pass is one scan of its table, O(rows) with O(1) expected per row.
    let mut ids = StatusIndex::new(layout.clone());
    // Reserved once, from the tables' sizes (a bound: a status is usually in
    // both): growing by doubling would hold the old and the new copy at once,
    // hundreds of MiB at 3,000 statuses/s, while capacity never written to
    // costs no resident memory.
    let bound: i64 = conn
        .query_row(
            "SELECT (SELECT count(*) FROM statuses WHERE run_id = ?1)
                  + (SELECT count(*) FROM truth WHERE run_id = ?1)",
            [run_id],
            |r| r.get(0),
        )
        .map_err(sql)?;
    let bound = usize::try_from(bound).unwrap_or(0);
    let mut statuses: Vec<Status> = Vec::with_capacity(bound);
    {
        let mut st = conn
            .prepare("SELECT id, id_key, id_time_ms FROM statuses WHERE run_id = ?1")
            .map_err(sql)?;
        let mut rows = st.query([run_id]).map_err(sql)?;
        let mut n = 0;
        while let Some(r) = rows.next().map_err(sql)? {
            counted("statuses", &mut n);
            let id = r.get_ref(0).and_then(|v| Ok(v.as_str()?)).map_err(sql)?;
            let key = parse_key(r.get_ref(1).and_then(|v| Ok(v.as_str()?)).map_err(sql)?)?;
            let id_time_ms = r.get(2).map_err(sql)?;
            ids.add(&mut statuses, id, Status { key }, id_time_ms);
        }
    }
    // Written straight into the per-status vector (grown as truth adds
    // statuses): no list of rows held beside it.
    let mut truth = TruthTable::with_capacity(bound);
    let mut has_truth = false;
    {
        let mut st = conn
            .prepare(
                "SELECT id, id_key, id_time_ms, visible_at_ms, deleted_at_ms FROM truth WHERE run_id = ?1",
            )
            .map_err(sql)?;
        let mut rows = st.query([run_id]).map_err(sql)?;
        let mut n = 0;
        while let Some(r) = rows.next().map_err(sql)? {
            counted("truth", &mut n);
            has_truth = true;
            let id = r.get_ref(0).and_then(|v| Ok(v.as_str()?)).map_err(sql)?;
            let idx = match ids.get(&statuses, id.as_bytes()) {
                Some(i) => i,
                None => {
                    let key = parse_key(r.get_ref(1).and_then(|v| Ok(v.as_str()?)).map_err(sql)?)?;
                    let id_time_ms = r.get(2).map_err(sql)?;
                    ids.add(&mut statuses, id, Status { key }, id_time_ms)
                }
            } as usize;
            let row = Visibility {
                visible_at_ms: r.get(3).map_err(sql)?,
                deleted_at_ms: r.get(4).map_err(sql)?,
            };
            truth.set(idx, statuses.len(), row);
        }
    }

    let mut requests: Vec<Request> = Vec::new();
    let mut request_ids: Vec<i64> = Vec::new();
    let mut last_activity_ms: Option<i64> = None;
    // Every request's item count: the exact size of the observations vector.
    let mut items_total: usize = 0;
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
            items_total = items_total.saturating_add(usize::try_from(items).unwrap_or(0));
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
    let mut observations: Vec<u32> = Vec::with_capacity(items_total);
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
        let mut n = 0;
        while let Some(r) = rows.next().map_err(sql)? {
            counted("observations", &mut n);
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
            let idx = match ids.get(&statuses, id) {
                Some(i) => i,
                None => {
                    // Not in `statuses` (a recorder killed mid-write): decode it ourselves.
                    let text = String::from_utf8_lossy(id);
                    let parsed = layout
                        .parse(&text)
                        .map_err(|e| LoadError(format!("run {run_id}: observation of {e}")))?;
                    let id_time_ms = layout.ts_ms(parsed);
                    ids.add(&mut statuses, &text, Status { key: parsed.0 }, id_time_ms)
                }
            };
            observations.push(idx);
        }
        if current.is_some() {
            requests[at].obs_end = observations.len() as u32;
        }
    }
    // A recorded client's pages are one value each (`client_requests.served`,
    // rundb::pages), expanded here into the same flat vector: each page's IDs
    // are its request's range, as if they had been rows of `observations`.
    if let (Some(&first), Some(&last)) = (request_ids.first(), request_ids.last())
        && rundb::read::has_column(conn, "client_requests", "served").map_err(|e| LoadError(e.0))?
    {
        let mut st = conn
            .prepare(
                "SELECT request_id, served FROM client_requests
                 WHERE request_id BETWEEN ?1 AND ?2 AND served IS NOT NULL ORDER BY request_id",
            )
            .map_err(sql)?;
        let mut rows = st.query([first, last]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let rid: i64 = r.get(0).map_err(sql)?;
            let Ok(at) = request_ids.binary_search(&rid) else {
                continue; // another run's request
            };
            let bytes = r.get_ref(1).and_then(|v| Ok(v.as_blob()?)).map_err(sql)?;
            let served = rundb::pages::decode(bytes)
                .map_err(|e| LoadError(format!("run {run_id}: request {rid}: {e}")))?;
            requests[at].obs_start = observations.len() as u32;
            for text in served {
                let idx = match ids.get(&statuses, text.as_bytes()) {
                    Some(i) => i,
                    None => {
                        let parsed = layout
                            .parse(&text)
                            .map_err(|e| LoadError(format!("run {run_id}: observation of {e}")))?;
                        let id_time_ms = layout.ts_ms(parsed);
                        ids.add(&mut statuses, &text, Status { key: parsed.0 }, id_time_ms)
                    }
                };
                observations.push(idx);
            }
            requests[at].obs_end = observations.len() as u32;
        }
    }
    if observations.len() > u32::MAX as usize {
        return err("more than 4 billion observations in one run");
    }
    let (unserved, expired) = if has_truth {
        (
            unserved(conn, run_id, &poller_ids, &ids, &statuses)?,
            expired(conn, run_id, &ids, &statuses)?,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let (status_ids, id_times) = ids.finish();
    let truth = if has_truth {
        truth.resize(statuses.len());
        Some(truth)
    } else {
        None
    };
    let history = History {
        layout,
        statuses,
        id_times,
        truth,
        pollers: pollers
            .iter()
            .map(|p| PollerSpec {
                name: p.name.clone(),
                k_ms: p.k_ms,
                keyset: since_id::CursorPolicy::text_is_keyset(&p.policy),
                forward: since_id::gaps::IdPolicy::text_reads_forward(&p.policy),
            })
            .collect(),
        requests,
        observations,
        interval_ms: run.interval_ms,
        unserved,
        expired,
    };
    Ok(Loaded {
        clients: clients(conn, run_id, &poller_ids)?,
        run,
        pollers,
        history,
        status_ids,
        last_activity_ms,
    })
}

/// [`Loaded::clients`]: per poller, the client its recorded requests name
/// (`client_requests.client`); all `None` without recorded clients.
fn clients(
    conn: &Connection,
    run_id: i64,
    poller_ids: &HashMap<i64, usize>,
) -> Result<Vec<Option<String>>, LoadError> {
    let mut clients = vec![None; poller_ids.len()];
    if !rundb::read::has_table(conn, "client_requests")? {
        return Ok(clients);
    }
    let mut st = conn
        .prepare(
            "SELECT DISTINCT r.poller_id, c.client FROM client_requests c
             JOIN requests r ON r.id = c.request_id WHERE r.run_id = ?1",
        )
        .map_err(sql)?;
    let mut rows = st.query([run_id]).map_err(sql)?;
    while let Some(r) = rows.next().map_err(sql)? {
        let poller_id: i64 = r.get(0).map_err(sql)?;
        if let Some(&p) = poller_ids.get(&poller_id) {
            clients[p].get_or_insert(r.get(1).map_err(sql)?);
        }
    }
    Ok(clients)
}

/// [`History::expired`]: the truth rows a retention job dropped, that is
/// whose deletion is the drop of a partition that held them (the experiment
/// marks a dropped range's rows deleted at the drop's send: rundb's
/// `insert_partition_drops`), in index order. Empty without `partition_drops`.
fn expired(
    conn: &Connection,
    run_id: i64,
    ids: &StatusIndex,
    statuses: &[Status],
) -> Result<Vec<u32>, LoadError> {
    if !rundb::read::has_table(conn, "partition_drops")? {
        return Ok(Vec::new());
    }
    let mut st = conn
        .prepare(
            "SELECT t.id FROM partition_drops d JOIN truth t
                ON t.run_id = d.run_id AND t.deleted_at_ms = d.sent_at_ms
              WHERE d.run_id = ?1
                AND CAST(t.id AS INTEGER) >= d.lo_id AND CAST(t.id AS INTEGER) < d.hi_id",
        )
        .map_err(sql)?;
    let mut rows = st.query([run_id]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        let id = r.get_ref(0).and_then(|v| Ok(v.as_str()?)).map_err(sql)?;
        out.extend(ids.get(statuses, id.as_bytes()));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// [`History::unserved`]: per status, the pollers whose endpoints never serve
/// it, from the scopes of recorded client requests (`client_requests.scope`)
/// against the truth's origin and the recording's authors (`truth_authors`).
/// Empty when no poller is scoped: a run of the harness's own pollers, or
/// clients that polled every status.
fn unserved(
    conn: &Connection,
    run_id: i64,
    poller_ids: &HashMap<i64, usize>,
    ids: &StatusIndex,
    statuses: &[Status],
) -> Result<Vec<u64>, LoadError> {
    if !rundb::read::has_column(conn, "client_requests", "scope")? {
        return Ok(Vec::new());
    }
    let mut scopes: Vec<Option<Scopes>> = vec![None; poller_ids.len()];
    {
        let mut st = conn
            .prepare(
                "SELECT DISTINCT r.poller_id, c.scope FROM client_requests c
                 JOIN requests r ON r.id = c.request_id WHERE r.run_id = ?1",
            )
            .map_err(sql)?;
        let mut rows = st.query([run_id]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let poller_id: i64 = r.get(0).map_err(sql)?;
            let text: String = r.get(1).map_err(sql)?;
            let scope = Scope::parse(&text).ok_or_else(|| {
                LoadError(format!(
                    "run {run_id}: a client request's scope '{text}' is not one analyze knows"
                ))
            })?;
            if let Some(&p) = poller_ids.get(&poller_id) {
                scopes[p].get_or_insert_with(Scopes::default).add(scope);
            }
        }
    }
    let scoped: Vec<(usize, Scopes)> = scopes
        .into_iter()
        .enumerate()
        .filter_map(|(p, s)| s.filter(|s| !s.is_all()).map(|s| (p, s)))
        .collect();
    if scoped.is_empty() {
        return Ok(Vec::new());
    }
    let mut authors: Vec<Option<i64>> = Vec::new();
    if scoped.iter().any(|(_, s)| s.needs_authors())
        && rundb::read::has_table(conn, "truth_authors")?
    {
        authors = vec![None; statuses.len()];
        let mut st = conn
            .prepare("SELECT id, author FROM truth_authors WHERE run_id = ?1")
            .map_err(sql)?;
        let mut rows = st.query([run_id]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let id = r.get_ref(0).and_then(|v| Ok(v.as_str()?)).map_err(sql)?;
            if let Some(i) = ids.get(statuses, id.as_bytes()) {
                authors[i as usize] = Some(r.get(1).map_err(sql)?);
            }
        }
    }
    let mut unserved = vec![0u64; statuses.len()];
    let mut st = conn
        .prepare("SELECT id, origin FROM truth WHERE run_id = ?1")
        .map_err(sql)?;
    let mut rows = st.query([run_id]).map_err(sql)?;
    while let Some(r) = rows.next().map_err(sql)? {
        let id = r.get_ref(0).and_then(|v| Ok(v.as_str()?)).map_err(sql)?;
        let origin = r.get_ref(1).and_then(|v| Ok(v.as_str()?)).map_err(sql)?;
        let Some(i) = ids.get(statuses, id.as_bytes()) else {
            continue;
        };
        let author = authors.get(i as usize).copied().flatten();
        for (p, s) in &scoped {
            if !s.admits(origin, author) {
                unserved[i as usize] |= 1 << p;
            }
        }
    }
    Ok(unserved)
}
