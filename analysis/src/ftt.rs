//! What became of each note a poller lost, in a `--target misskey-ftt` run,
//! by the FTT truth the run recorded (`ftt_pushes`, `ftt_trims`:
//! docs/rundb.md, docs/misskey-ftt.md). Per poller and lost note, one fate:
//!
//! - `leak`: the checker's leak: the poller's cursor passed the note's ID
//!   before the note was readable; PostgreSQL, which answers every request
//!   with a sinceId, could not give it to that poller any more.
//! - `trimmed`: not a leak, and an LTRIM cut it from the polled lists.
//! - `never-pushed`: not a leak, and no LPUSH of it into a polled list
//!   returned (the 3-minute rule refused it, or FTT was off).
//! - `in-lists`: not a leak, pushed and never cut: the lists held it, and the
//!   loss came from elsewhere (the fallback switched off answers a sinceId
//!   with an empty page; a page read before the push returned).
//! - `gone`: deleted (`ftt_deletes`) before the poller could see it: no
//!   request of the poller was sent once it was readable and answered
//!   before its `DELETE` was sent. The checker does not owe it (never a
//!   leak); the lists keep its ID and every read drops it at the
//!   PostgreSQL lookup.
//!
//! [`load`] reads the tables (none for other runs); [`fates`] is pure.

use crate::diff::Analysis;
use crate::load::Loaded;
use rusqlite::Connection;
use std::collections::{BTreeMap, HashMap};

/// A lost note's fate; see the module's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fate {
    Leak,
    Trimmed,
    NeverPushed,
    InLists,
    Gone,
}

impl Fate {
    /// Every fate, in the order the report, `--json` and `--html` give them.
    pub const ALL: [Fate; 5] = [
        Fate::Leak,
        Fate::Trimmed,
        Fate::NeverPushed,
        Fate::InLists,
        Fate::Gone,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Leak => "leak",
            Fate::Trimmed => "trimmed",
            Fate::NeverPushed => "never-pushed",
            Fate::InLists => "in-lists",
            Fate::Gone => "gone",
        }
    }
}

/// Per note: whether some LPUSH into a polled list returned, and whether
/// an LTRIM cut it from one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoteLists {
    pub pushed: bool,
    pub trimmed: bool,
}

/// The FTT truth of one run, by note ID.
#[derive(Debug, Default)]
pub struct FttTruth {
    pub notes: HashMap<String, NoteLists>,
}

/// The run's FTT truth; `None` when the run has none (not a misskey-ftt
/// run, or a file written before the tables existed).
pub fn load(conn: &Connection, run_id: i64) -> Result<Option<FttTruth>, String> {
    let e = |e: rundb::Error| format!("cannot read the FTT tables: {e}");
    for table in ["ftt_pushes", "ftt_trims"] {
        if !rundb::read::has_table(conn, table).map_err(e)? {
            return Ok(None);
        }
    }
    let mut truth = FttTruth::default();
    for row in rundb::read::side_rows::<rundb::FttPushRow>(conn, run_id).map_err(e)? {
        truth.notes.entry(row.id).or_default().pushed |= row.pushed_at_ms.is_some();
    }
    for row in rundb::read::side_rows::<rundb::FttTrimRow>(conn, run_id).map_err(e)? {
        truth.notes.entry(row.id).or_default().trimmed = true;
    }
    Ok((!truth.notes.is_empty()).then_some(truth))
}

/// One lost note of one poller, and its fate.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lost {
    pub poller: usize,
    pub id: String,
    pub fate: Fate,
    /// The poller's first request that owed it ([`crate::diff::first_owing`]),
    /// an index into the history's requests.
    pub request: Option<u32>,
}

/// The fate of every note each poller lost (the checker's leaks, its
/// misses of every kind, and the notes deleted before it could see them),
/// in poller then ID order.
pub fn fates(loaded: &Loaded, analysis: &Analysis, truth: &FttTruth) -> Vec<Lost> {
    let fate_of = |id: &str| {
        let lists = truth.notes.get(id).copied().unwrap_or_default();
        if lists.trimmed {
            Fate::Trimmed
        } else if !lists.pushed {
            Fate::NeverPushed
        } else {
            Fate::InLists
        }
    };
    let mut out = Vec::new();
    let mut pairs = Vec::new();
    for finding in analysis.leaks() {
        let id = loaded.status_id(finding.status).into_owned();
        for poller in 0..crate::diff::MAX_POLLERS {
            if finding.leaked_by >> poller & 1 == 1 {
                pairs.push((poller, finding.status));
                out.push(Lost {
                    poller,
                    id: id.clone(),
                    fate: Fate::Leak,
                    request: None,
                });
            }
        }
    }
    for miss in &analysis.other_misses {
        let id = loaded.status_id(miss.status).into_owned();
        pairs.push((usize::from(miss.poller), miss.status));
        out.push(Lost {
            poller: usize::from(miss.poller),
            fate: fate_of(&id),
            id,
            request: None,
        });
    }
    for (lost, request) in out
        .iter_mut()
        .zip(crate::diff::first_owing(&loaded.history, &pairs))
    {
        lost.request = request;
    }
    // Not owed, so no request owed them.
    out.extend(analysis.gone.iter().map(|g| Lost {
        poller: usize::from(g.poller),
        id: loaded.status_id(g.status).into_owned(),
        fate: Fate::Gone,
        request: None,
    }));
    out.sort();
    out
}

/// Per poller (those that lost a note), how many lost notes had each fate:
/// what the text report prints, and `--json` (so `--html`) carries.
pub fn counts(lost: &[Lost]) -> BTreeMap<usize, BTreeMap<Fate, usize>> {
    let mut counts: BTreeMap<usize, BTreeMap<Fate, usize>> = BTreeMap::new();
    for l in lost {
        *counts
            .entry(l.poller)
            .or_default()
            .entry(l.fate)
            .or_default() += 1;
    }
    counts
}

/// The report's section: per poller, how many lost notes had each fate.
pub fn render(loaded: &Loaded, lost: &[Lost]) -> String {
    let counts = counts(lost);
    let mut out = String::from(
        "\nFTT: what became of the notes each poller lost (ftt_pushes, ftt_trims, ftt_deletes; docs/misskey-ftt.md)\n",
    );
    if counts.is_empty() {
        out.push_str("  no poller lost a note.\n");
    }
    for (poller, by_fate) in counts {
        let name = loaded.pollers.get(poller).map_or("?", |p| p.name.as_str());
        let parts: Vec<String> = Fate::ALL
            .iter()
            .map(|f| format!("{} {}", f.as_str(), by_fate.get(f).copied().unwrap_or(0)))
            .collect();
        out.push_str(&format!("  {name:<28} {}\n", parts.join(", ")));
    }
    out
}
