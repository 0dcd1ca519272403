//! The truth of a misskey-ftt run as the creators report it: notes of the
//! polled timeline into `truth` at each pump; pushes to and trims of its
//! lists and the deletions into `ftt_pushes`, `ftt_trims` and
//! `ftt_deletes`, handed to the recorder when the run ends.

use super::creators::{Created, Event};
use crate::record::TruthRow;
use since_id::id::Layout;
use std::collections::{HashMap, HashSet};

/// Which notes the polled timeline shows: the truth a poller is judged by.
/// The home timeline shows its authors' notes, the local one every local
/// note, the hybrid one both.
#[derive(Clone)]
pub struct Membership {
    pub home_authors: HashSet<i32>,
    pub shows_home: bool,
    pub shows_local: bool,
}

impl Membership {
    fn shows(&self, user: i32, is_local: bool) -> bool {
        (self.shows_local && is_local) || (self.shows_home && self.home_authors.contains(&user))
    }
}

/// Counters for the closing summary.
#[derive(Default)]
pub struct Counts {
    pub notes: u64,
    /// Each note's INSERT, from its start to its return, ms.
    pub latency: analysis::machine::Histogram,
    pub deletes: u64,
    pub redis_commands: u64,
    pub failures: u64,
    pub last_failure: Option<String>,
}

/// The creators' events, taken as they arrive, kept until the next pump.
pub struct TruthSink {
    layout: Layout,
    membership: Membership,
    /// The lists the polled endpoints read.
    keys: HashSet<String>,
    /// Commit times of notes whose push has not been reported yet.
    committed: HashMap<String, i64>,
    rows: Vec<TruthRow>,
    ftt: rundb::FttRows,
    pub counts: Counts,
}

impl TruthSink {
    pub fn new(membership: Membership, keys: HashSet<String>) -> Result<TruthSink, String> {
        Ok(TruthSink {
            layout: "misskey-aidx".parse().map_err(|e| format!("{e}"))?,
            membership,
            keys,
            committed: HashMap::new(),
            rows: Vec::new(),
            ftt: Default::default(),
            counts: Counts::default(),
        })
    }

    pub fn take(&mut self, event: Event) {
        let counts = &mut self.counts;
        match event {
            Event::Created(c) => {
                counts.notes += 1;
                counts.latency.add(c.committed_ms - c.started_ms);
                if self.membership.shows(c.note.user_id, c.note.is_local) {
                    match note_row(&self.layout, &c) {
                        Ok(row) => self.rows.push(row),
                        Err(m) => {
                            counts.failures += 1;
                            counts.last_failure = Some(m);
                            return;
                        }
                    }
                }
                self.committed.insert(c.note.id, c.committed_ms);
            }
            Event::Pushed { id, report } => {
                counts.redis_commands += report.commands;
                let committed = self.committed.remove(&id).unwrap_or_default();
                ftt_rows(&id, committed, report, &self.keys, &mut self.ftt);
            }
            Event::Deleted(row) => {
                counts.deletes += 1;
                self.ftt.deletes.push(row);
            }
            Event::Failed(e) => {
                counts.failures += 1;
                counts.last_failure = Some(e);
            }
        }
    }

    /// The truth rows taken since the last call.
    pub fn take_truth(&mut self) -> Vec<TruthRow> {
        std::mem::take(&mut self.rows)
    }

    /// The pushes, trims and deletions: kept (one row per note and polled
    /// list, a few MB for an hour) until the run ends, as `ftt_pushes`
    /// promises (docs/rundb.md), then taken once.
    pub fn take_ftt(&mut self) -> rundb::FttRows {
        std::mem::take(&mut self.ftt)
    }
}

/// The truth row of a created note, owed from the ms after the INSERT
/// returned: a request with a sinceId reads PostgreSQL (`read`,
/// docs/misskey-ftt.md); the failure's words if its ID is not an aidx of
/// `layout`. A run's and `serve --record`'s (`serve.rs`).
pub fn note_row(layout: &Layout, c: &Created) -> Result<TruthRow, String> {
    let id_key = layout
        .parse(&c.note.id)
        .map(|id| id.sort_key())
        .map_err(|_| format!("not an aidx: {}", c.note.id))?;
    Ok(TruthRow {
        id: c.note.id.clone(),
        id_key,
        id_time_ms: c.id_ms,
        posted_at_ms: c.started_ms,
        visible_at_ms: c.committed_ms + 1,
        deleted_at_ms: None,
        origin: c.origin().into(),
    })
}

/// The `ftt_pushes` and `ftt_trims` rows of one `pushToTl` report, for the
/// lists in `keys` (those the polled endpoints read): a run's and
/// `serve --record`'s (`serve.rs`).
pub fn ftt_rows(
    id: &str,
    committed_ms: i64,
    report: super::push::Report,
    keys: &HashSet<String>,
    ftt: &mut rundb::FttRows,
) {
    for p in report.pushed.into_iter().filter(|p| keys.contains(&p.list)) {
        ftt.pushes.push(rundb::FttPushRow {
            id: id.to_string(),
            list: p.list,
            committed_at_ms: committed_ms,
            pushed_at_ms: p.pushed_at_ms,
            path: p.path.into(),
        });
    }
    for t in report
        .trimmed
        .into_iter()
        .filter(|t| keys.contains(&t.list))
    {
        ftt.trims
            .extend(t.ids.into_iter().map(|cut| rundb::FttTrimRow {
                id: cut,
                list: t.list.clone(),
                trimmed_at_ms: t.at_ms,
            }));
    }
}
