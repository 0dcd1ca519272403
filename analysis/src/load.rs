//! Reading one run out of run.db into the structs the diff judges.
//!
//! The database is opened read-only (analysis must never change a history),
//! and checked before anything is read: is it SQLite, is it ours
//! (`PRAGMA application_id`), is its schema version one this build knows.
//! Every failure is an [`LoadError`] with a one-line message for the user.
//!
//! Every table is read through [`rundb::read`], the one reader of run.db,
//! each in one pass in its key order (O(rows)), borrowing each row's text
//! from SQLite without allocating, and the rows go into the one
//! [`HistoryBuilder`] that `experiment sweep` also builds its histories
//! with: status IDs mapped once to dense `u32` indices, the IDs' texts not
//! kept when the layout can write them again ([`Loaded::status_id`]), and
//! observations in one flat `Vec<u32>` that each request points into by
//! range.

use crate::diff::MAX_POLLERS;
use crate::history::{History, PollerSpec, Visibility};
use crate::history_builder::{HistoryBuilder, StatusRef, StatusTexts};
use rundb::scope::{Scope, Scopes};
use rundb::{PollerRow, RunRow};
use rusqlite::Connection;
use since_id::id::Id;
use since_id::id::Layout;
use std::borrow::Cow;
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
    /// Judged streaming ([`crate::load_stream`]): `history` holds only the
    /// statuses the analysis names, and these are the run's own counts.
    pub totals: Option<Totals>,
    /// Judged streaming: the misses that are not leaks and the leaks and
    /// late arrivals, on disk (the analysis's `other_misses` and `items`
    /// are then empty): see [`Loaded::other_misses`], [`Loaded::findings`].
    on_disk: Option<crate::spill::Spilled>,
}

/// A miss that is not a leak, as the report lists it.
pub struct ShownMiss<'a> {
    pub id: Cow<'a, str>,
    pub poller: u8,
    pub cause: crate::diff::Cause,
}

/// A leak or late arrival, as the report lists it: its ID as the API wrote
/// it, its ID time, and what [`crate::diff::Finding`] says of it (its
/// `status` an index into the history, or 0 for one read from disk).
pub struct ShownFinding<'a> {
    pub id: Cow<'a, str>,
    pub id_time_ms: i64,
    pub finding: crate::diff::Finding,
}

/// A run's counts, kept when its history is not ([`Loaded::totals`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub requests: u64,
    pub observations: u64,
    /// Distinct statuses some poller returned.
    pub seen: u64,
    pub truth_rows: u64,
    /// Per poller, its detection delays ([`crate::oracle::detection_delays`]).
    pub detection_delays: Vec<Option<crate::diff::Distribution>>,
    /// With truth: how many statuses had each visibility lateness, by
    /// lateness ([`crate::stream::Streamed::lateness`]).
    pub lateness: Option<Vec<(i64, u64)>>,
}

impl Loaded {
    /// A run judged streaming: its rows, the compact history of the
    /// statuses its analysis names, and its counts.
    pub(crate) fn streamed(
        run: RunRow,
        pollers: Vec<PollerRow>,
        history: History,
        last_activity_ms: Option<i64>,
        totals: Totals,
        on_disk: crate::spill::Spilled,
    ) -> Loaded {
        Loaded {
            on_disk: Some(on_disk),
            clients: vec![None; pollers.len()],
            run,
            pollers,
            history,
            status_ids: StatusTexts::default(),
            last_activity_ms,
            totals: Some(totals),
        }
    }

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

    /// The misses that are not leaks, in the analysis's order (by poller,
    /// then key): those of `a`, then those on disk (a run judged
    /// streaming). An I/O error reading them back ends the list.
    pub fn other_misses<'a>(
        &'a self,
        a: &'a crate::diff::Analysis,
    ) -> impl Iterator<Item = std::io::Result<ShownMiss<'a>>> + 'a {
        let kept = a.other_misses.iter().map(|m| {
            Ok(ShownMiss {
                id: self.status_id(m.status),
                poller: m.poller,
                cause: m.cause,
            })
        });
        let spilled = self.on_disk.iter().flat_map(|d| d.misses()).map(|m| {
            m.map(|m| ShownMiss {
                id: Cow::Owned(format_key(&self.history.layout, m.key)),
                poller: m.poller,
                cause: m.cause,
            })
        });
        kept.chain(spilled)
    }

    /// The leaks and late arrivals, in the analysis's order (by ID time):
    /// those of `a`, then those on disk (a run judged streaming). An I/O
    /// error reading them back ends the list.
    pub fn findings<'a>(
        &'a self,
        a: &'a crate::diff::Analysis,
    ) -> impl Iterator<Item = std::io::Result<ShownFinding<'a>>> + 'a {
        let kept = a.items.iter().map(|f| {
            Ok(ShownFinding {
                id: self.status_id(f.status),
                id_time_ms: self.history.id_time_ms(f.status as usize),
                finding: f.clone(),
            })
        });
        let spilled = self.on_disk.iter().flat_map(|d| d.findings()).map(|f| {
            f.map(|f| ShownFinding {
                id: Cow::Owned(format_key(&self.history.layout, f.key)),
                id_time_ms: f.id_time_ms,
                finding: f.finding,
            })
        });
        kept.chain(spilled)
    }

    /// The leaks of [`Loaded::findings`].
    pub fn leaks<'a>(
        &'a self,
        a: &'a crate::diff::Analysis,
    ) -> impl Iterator<Item = std::io::Result<ShownFinding<'a>>> + 'a {
        self.findings(a)
            .filter(|f| f.as_ref().map_or(true, |f| f.finding.leaked_by != 0))
    }

    /// Status `i`'s ID as the API wrote it: the layout's formatting of its
    /// key, unless the text recorded was another (then it was kept).
    pub fn status_id(&self, i: u32) -> Cow<'_, str> {
        match self.status_ids.odd.get(&i) {
            Some(text) => Cow::Borrowed(text),
            None => Cow::Owned(format_key(
                &self.history.layout,
                self.history.statuses[i as usize].key,
            )),
        }
    }
}

/// `layout.format(Id(key))`, a decimal ID that fits in a `u64` formatted
/// as one: the same text (`Layout::format` writes the number in decimal),
/// without the `u128` divisions, for the millions of IDs a large run's
/// report lists.
pub fn format_key(layout: &Layout, key: u128) -> String {
    match u64::try_from(key) {
        Ok(small) if layout.is_numeric() && key <= layout.max_id().0 => small.to_string(),
        _ => layout.format(Id(key)),
    }
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
    let sizes = rundb::read::table_sizes(conn, run_id)?;
    let n = |v: i64| v.max(0) as u64;
    Ok(Footprint {
        statuses: n(sizes.statuses.max(sizes.truth)),
        observations: n(sizes.items),
        requests: n(sizes.requests),
    })
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
    // Reserved once, from the tables' sizes (a bound: a status is usually in
    // both): growing by doubling would hold the old and the new copy at once,
    // hundreds of MiB at 3,000 statuses/s.
    let sizes = rundb::read::table_sizes(conn, run_id)?;
    let bound = usize::try_from(sizes.statuses + sizes.truth).unwrap_or(0);
    let specs = pollers.iter().map(poller_spec).collect();
    let mut b = HistoryBuilder::in_table_order(layout, specs, run.interval_ms, bound);
    let mut n = 0;
    rundb::read::for_each_status(conn, run_id, |s| {
        counted("statuses", &mut n);
        b.status(StatusRef {
            id: s.id,
            key: s.id_key,
            id_time_ms: s.id_time_ms,
        })
        .map_err(LoadError)?;
        Ok::<_, LoadError>(())
    })?;
    let mut n = 0;
    rundb::read::for_each_truth(conn, run_id, |t| {
        counted("truth", &mut n);
        let s = StatusRef {
            id: t.id,
            key: t.id_key,
            id_time_ms: t.id_time_ms,
        };
        let v = Visibility {
            visible_at_ms: t.visible_at_ms,
            deleted_at_ms: t.deleted_at_ms,
        };
        b.truth_row(s, v).map_err(LoadError)
    })?;
    let (request_ids, last_activity_ms) = read_requests(conn, run_id, &poller_ids, &mut b)?;
    read_observations(conn, run_id, &request_ids, &mut b, &mut counted)?;
    if b.observation_count() > u32::MAX as usize {
        return err("more than 4 billion observations in one run");
    }
    let (unserved, expired) = if b.has_truth() {
        (
            unserved(conn, run_id, &poller_ids, &b)?,
            expired(conn, run_id, &b)?,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let (mut history, status_ids) = b.finish_with_texts().map_err(LoadError)?;
    history.unserved = unserved;
    history.expired = expired;
    Ok(Loaded {
        clients: clients(conn, run_id, &poller_ids)?,
        run,
        pollers,
        history,
        status_ids,
        last_activity_ms,
        totals: None,
        on_disk: None,
    })
}

/// A poller as the checker judges it.
pub(crate) fn poller_spec(p: &PollerRow) -> PollerSpec {
    PollerSpec {
        name: p.name.clone(),
        k_ms: p.k_ms,
        keyset: since_id::CursorPolicy::text_is_keyset(&p.policy),
        forward: since_id::gaps::IdPolicy::text_reads_forward(&p.policy),
    }
}

/// The run's requests, in id order, into `b`; their ids, and the latest
/// client time recorded. Room is made for every request's items: the exact
/// size of the observations.
fn read_requests(
    conn: &Connection,
    run_id: i64,
    poller_ids: &HashMap<i64, usize>,
    b: &mut HistoryBuilder,
) -> Result<(Vec<i64>, Option<i64>), LoadError> {
    let mut request_ids: Vec<i64> = Vec::new();
    let mut last_activity_ms: Option<i64> = None;
    let mut items_total: usize = 0;
    rundb::read::for_each_request(conn, run_id, |r| {
        let Some(&poller) = poller_ids.get(&r.poller_id) else {
            return err(format!(
                "run {run_id}: request {} names poller {}, which is not in the run",
                r.id, r.poller_id
            ));
        };
        last_activity_ms = last_activity_ms.max(Some(r.received_at_ms));
        items_total = items_total.saturating_add(usize::try_from(r.items).unwrap_or(0));
        request_ids.push(r.id);
        b.push_request(poller, &r, r.items).map_err(LoadError)?;
        Ok(())
    })?;
    b.reserve_observations(items_total);
    Ok((request_ids, last_activity_ms))
}

/// The items of the requests with ids `request_ids` (ascending), each
/// request's one contiguous range of the flat observations: the rows of
/// `observations`, in (request, position) order ([`rundb::read::for_each_observation`]:
/// no sort, index or join needed; rows of other runs inside the range are
/// skipped), then a recorded client's pages, one value each
/// (`client_requests.served`, rundb::pages), as if they had been rows.
fn read_observations(
    conn: &Connection,
    run_id: i64,
    request_ids: &[i64],
    b: &mut HistoryBuilder,
    counted: &mut impl FnMut(&'static str, &mut u64),
) -> Result<(), LoadError> {
    let (Some(&first), Some(&last)) = (request_ids.first(), request_ids.last()) else {
        return Ok(());
    };
    let in_run = |e: String| LoadError(format!("run {run_id}: {e}"));
    let mut at = 0usize; // index into the requests of the current request
    let mut n = 0;
    rundb::read::for_each_observation(conn, first..=last, |o| {
        counted("observations", &mut n);
        while at + 1 < request_ids.len() && request_ids[at] < o.request_id {
            at += 1;
        }
        if request_ids[at] != o.request_id {
            return Ok(()); // another run's request
        }
        let i = b.observed(o.status_id.as_bytes()).map_err(in_run)?;
        b.observe(at, i);
        Ok::<_, LoadError>(())
    })?;
    rundb::read::for_each_served(conn, first..=last, |rid, bytes| {
        let Ok(at) = request_ids.binary_search(&rid) else {
            return Ok(()); // another run's request
        };
        let served =
            rundb::pages::decode(bytes).map_err(|e| in_run(format!("request {rid}: {e}")))?;
        b.served(at, &served).map_err(in_run)
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
    for (poller_id, client) in rundb::read::poller_clients(conn, run_id)? {
        if let Some(&p) = poller_ids.get(&poller_id) {
            clients[p].get_or_insert(client);
        }
    }
    Ok(clients)
}

/// [`History::expired`]: the truth rows a retention job dropped
/// ([`rundb::read::for_each_expired`]), in index order. Empty without
/// `partition_drops`.
fn expired(conn: &Connection, run_id: i64, b: &HistoryBuilder) -> Result<Vec<u32>, LoadError> {
    let mut out = Vec::new();
    rundb::read::for_each_expired(conn, run_id, |id| {
        out.extend(b.index_of(id.as_bytes()));
        Ok::<_, LoadError>(())
    })?;
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
    b: &HistoryBuilder,
) -> Result<Vec<u64>, LoadError> {
    let mut scopes: Vec<Option<Scopes>> = vec![None; poller_ids.len()];
    for (poller_id, text) in rundb::read::poller_scopes(conn, run_id)? {
        let scope = Scope::parse(&text).ok_or_else(|| {
            LoadError(format!(
                "run {run_id}: a client request's scope '{text}' is not one analyze knows"
            ))
        })?;
        if let Some(&p) = poller_ids.get(&poller_id) {
            scopes[p].get_or_insert_with(Scopes::default).add(scope);
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
    if scoped.iter().any(|(_, s)| s.needs_authors()) {
        authors = vec![None; b.status_count()];
        rundb::read::for_each_truth_author(conn, run_id, |id, author| {
            if let Some(i) = b.index_of(id.as_bytes()) {
                authors[i as usize] = Some(author);
            }
            Ok::<_, LoadError>(())
        })?;
    }
    let mut unserved = vec![0u64; b.status_count()];
    rundb::read::for_each_truth(conn, run_id, |t| {
        if let Some(i) = b.index_of(t.id.as_bytes()) {
            let author = authors.get(i as usize).copied().flatten();
            for (p, s) in &scoped {
                if !s.admits(t.origin, author) {
                    unserved[i as usize] |= 1 << p;
                }
            }
        }
        Ok::<_, LoadError>(())
    })?;
    Ok(unserved)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`format_key`] writes every layout's IDs as `Layout::format` does:
    /// decimal ones through `u64`, the others (and keys past a layout's
    /// largest ID) through the layout.
    #[test]
    fn format_key_is_the_layouts_format() {
        let keys = [
            0u128,
            1,
            9,
            10,
            1_462_015_105_796 << 22 | 12_345,
            u64::MAX as u128 - 1,
            u64::MAX as u128,
            u64::MAX as u128 + 1,
            u128::MAX,
        ];
        for name in Layout::NAMES {
            let layout: Layout = name.parse().unwrap();
            for key in keys {
                assert_eq!(
                    format_key(&layout, key),
                    layout.format(Id(key)),
                    "{name} {key}"
                );
            }
        }
    }
}
