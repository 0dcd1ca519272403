//! The history the checker judges: a run's statuses, its truth, its pollers
//! and their requests, with every status a dense `u32` index.
//!
//! [`history_builder`](crate::history_builder) builds it from a run's
//! records, read back from run.db by [`load`](crate::load) or as they are
//! made;
//! [`diff`](crate::diff) judges it. A run at 3,000 statuses a second holds
//! tens of millions of statuses, so what is kept per status is counted in
//! bytes: 16 for the key ([`Status`]), 16 for the truth ([`TruthTable`]), and
//! the ID's time only when the layout cannot read it from the key
//! ([`IdTimes`]).

use since_id::id::{Id, Layout};

/// A distinct status: its sort key (the ID as an order-preserving integer).
/// The time in its ID is [`History::id_time_ms`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub key: u128,
}

/// When a status was visible according to the target's truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Visibility {
    pub visible_at_ms: i64,
    pub deleted_at_ms: Option<i64>,
}

/// Per status, its truth row or none, in 16 bytes a status where
/// `Vec<Option<Visibility>>` takes 24 (no niche in `Option<i64>`): a row
/// absent is a visibility time of `i64::MIN`, and never deleted a deletion
/// time of `i64::MAX`. So a row visible at `i64::MIN` is kept as visible at
/// `i64::MIN + 1`, and one deleted at `i64::MAX` as never deleted; no check
/// tells them apart (requests are sent after the first and received before
/// the last).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruthTable {
    rows: Vec<[i64; 2]>,
}

const ABSENT: i64 = i64::MIN;
const NEVER: i64 = i64::MAX;

fn pack(v: Option<Visibility>) -> [i64; 2] {
    match v {
        None => [ABSENT, NEVER],
        Some(v) => [
            v.visible_at_ms.max(ABSENT + 1),
            v.deleted_at_ms.unwrap_or(NEVER),
        ],
    }
}

fn unpack([visible, deleted]: [i64; 2]) -> Option<Visibility> {
    (visible != ABSENT).then_some(Visibility {
        visible_at_ms: visible,
        deleted_at_ms: (deleted != NEVER).then_some(deleted),
    })
}

impl TruthTable {
    /// Room for `n` statuses (capacity never written costs no resident memory).
    pub fn with_capacity(n: usize) -> TruthTable {
        TruthTable {
            rows: Vec::with_capacity(n),
        }
    }

    /// The number of statuses it covers.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Status `i`'s row; `None` without one (or past the end).
    pub fn get(&self, i: usize) -> Option<Visibility> {
        self.rows.get(i).copied().and_then(unpack)
    }

    pub fn push(&mut self, v: Option<Visibility>) {
        self.rows.push(pack(v));
    }

    /// Sets status `i`'s row, covering up to `len` statuses first if it is past the end.
    pub fn set(&mut self, i: usize, len: usize, v: Visibility) {
        if self.rows.len() <= i {
            self.resize(len.max(i + 1));
        }
        self.rows[i] = pack(Some(v));
    }

    /// Covers `n` statuses, the new ones without a row.
    pub fn resize(&mut self, n: usize) {
        self.rows.resize(n, pack(None));
    }

    /// Every status's row, in index order.
    pub fn iter(&self) -> impl Iterator<Item = Option<Visibility>> + '_ {
        self.rows.iter().copied().map(unpack)
    }
}

impl FromIterator<Option<Visibility>> for TruthTable {
    fn from_iter<I: IntoIterator<Item = Option<Visibility>>>(iter: I) -> TruthTable {
        TruthTable {
            rows: iter.into_iter().map(pack).collect(),
        }
    }
}

/// The time in each status's ID. Nearly always the layout's reading of the
/// key, so not stored; a run whose recorded ID times differ from it (an
/// outbox of BIGSERIAL IDs, which carry no time: the writer's time is
/// recorded instead) keeps one per status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IdTimes {
    #[default]
    FromKeys,
    Recorded(Vec<i64>),
}

impl IdTimes {
    /// Records the ID time of the status just pushed, the last of `statuses`.
    /// O(1), except the first time a recorded time differs from the key's:
    /// then every earlier status's time is written out (O(S), once).
    pub fn push(&mut self, layout: &Layout, statuses: &[Status], id_time_ms: i64) {
        let Some((last, earlier)) = statuses.split_last() else {
            return;
        };
        match self {
            IdTimes::FromKeys if layout.ts_ms(Id(last.key)) == id_time_ms => {}
            IdTimes::FromKeys => {
                let mut times: Vec<i64> = Vec::with_capacity(statuses.len());
                times.extend(earlier.iter().map(|s| layout.ts_ms(Id(s.key))));
                times.push(id_time_ms);
                *self = IdTimes::Recorded(times);
            }
            IdTimes::Recorded(times) => times.push(id_time_ms),
        }
    }
}

/// A poller as the diff needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PollerSpec {
    pub name: String,
    /// The k of a compensated policy; `None` for naive.
    pub k_ms: Option<i64>,
    /// The policy reads in its own keyset order from the start of the table
    /// (PostgreSQL's `xmin`), not by ID window: it has no since_id, so every
    /// request after its first tests its cursor, and it has no baseline.
    pub keyset: bool,
    /// The policy pages upward from its cursor (the integer-ID pollers of
    /// `since_id::gaps`: `WHERE id > ? ORDER BY id ASC LIMIT n`): a full page
    /// covers only up to its highest row, what lies above is its next page's.
    pub forward: bool,
}

/// One HTTP request of one poller, with the items it returned as a range of
/// [`History::observations`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub poller: usize,
    pub cycle: i64,
    pub page: i64,
    pub sent_at_ms: i64,
    pub received_at_ms: i64,
    pub since_key: Option<u128>,
    /// The time in the since ID (`None` with no since, or when unknown).
    pub since_time_ms: Option<i64>,
    pub before_key: Option<u128>,
    /// `error` was non-NULL: the cursor did not move.
    pub failed: bool,
    /// The last request of a cycle whose back-paging was cut at its bound.
    pub overflow: bool,
    /// The response returned as many items as it asked for.
    pub full: bool,
    pub bytes: Option<i64>,
    pub obs_start: u32,
    pub obs_end: u32,
}

/// Everything the diff reads. Statuses are dense indices (`u32`) into `statuses`.
#[derive(Clone, Debug)]
pub struct History {
    /// The run's ID layout: required_k replays the compensated formula in it.
    pub layout: Layout,
    pub statuses: Vec<Status>,
    /// The time in each status's ID: read it with [`History::id_time_ms`].
    pub id_times: IdTimes,
    /// Per status, its truth row; `None` for the whole run when the target has no truth.
    pub truth: Option<TruthTable>,
    pub pollers: Vec<PollerSpec>,
    pub requests: Vec<Request>,
    pub observations: Vec<u32>,
    pub interval_ms: i64,
    /// Per status, the pollers (bit `p` for poller `p`) whose endpoints never
    /// serve it: a recorded client polling a local timeline, one author's
    /// posts, a home timeline (`client_requests.scope`, [`rundb::scope`]).
    /// It is owed to none of them. Empty when every poller is owed everything.
    pub unserved: Vec<u64>,
    /// The statuses a retention job dropped (their truth deletion is a
    /// partition drop: `partition_drops`), in index order; empty for runs
    /// without one. A poller loses them as **expired** ([`crate::diff`]).
    pub expired: Vec<u32>,
}

impl History {
    /// The pollers whose endpoints never serve status `su` (bits).
    pub fn unserved_to(&self, su: usize) -> u64 {
        self.unserved.get(su).copied().unwrap_or(0)
    }

    /// Whether the retention job dropped status `su` ([`History::expired`]).
    pub fn is_expired(&self, su: usize) -> bool {
        self.expired.binary_search(&(su as u32)).is_ok()
    }

    /// The time in status `su`'s ID, as recorded.
    pub fn id_time_ms(&self, su: usize) -> i64 {
        match &self.id_times {
            IdTimes::FromKeys => self.layout.ts_ms(Id(self.statuses[su].key)),
            IdTimes::Recorded(times) => times[su],
        }
    }

    /// Each status's visibility lateness (visible_at - ID time), for the
    /// statuses with a truth row, in index order; nothing without truth.
    pub fn lateness_ms(&self) -> impl Iterator<Item = i64> + '_ {
        let rows = self.truth.iter().flat_map(|t| t.iter().enumerate());
        rows.filter_map(|(su, v)| v.map(|v| v.visible_at_ms - self.id_time_ms(su)))
    }

    /// Status `su`'s truth row, if the run has truth and the status a row.
    pub fn truth_of(&self, su: usize) -> Option<Visibility> {
        self.truth.as_ref().and_then(|t| t.get(su))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truth_rows_round_trip_in_sixteen_bytes() {
        // What it saves: an Option<Visibility> takes 24 bytes.
        assert_eq!(std::mem::size_of::<Option<Visibility>>(), 24);
        let rows = [
            None,
            Some(Visibility {
                visible_at_ms: 5,
                deleted_at_ms: None,
            }),
            Some(Visibility {
                visible_at_ms: -3,
                deleted_at_ms: Some(7),
            }),
        ];
        let t: TruthTable = rows.iter().copied().collect();
        assert_eq!(std::mem::size_of_val(&t.rows[0]), 16);
        assert_eq!(t.iter().collect::<Vec<_>>(), rows);
        assert_eq!(t.get(3), None);
        // The two extremes the encoding takes are read as their neighbours.
        let mut t = TruthTable::default();
        t.set(
            1,
            2,
            Visibility {
                visible_at_ms: i64::MIN,
                deleted_at_ms: Some(i64::MAX),
            },
        );
        assert_eq!(t.get(0), None);
        assert_eq!(
            t.get(1),
            Some(Visibility {
                visible_at_ms: i64::MIN + 1,
                deleted_at_ms: None,
            })
        );
    }

    #[test]
    fn id_times_are_kept_only_when_the_key_does_not_give_them() {
        let layout = Layout::twitter();
        let at = |ms: i64| Status {
            key: layout.min_id_at(ms).0,
        };
        let mut statuses = Vec::new();
        let mut times = IdTimes::default();
        for ms in [1_500_000_000_000, 1_500_000_000_007] {
            statuses.push(at(ms));
            times.push(&layout, &statuses, ms);
        }
        assert_eq!(times, IdTimes::FromKeys);
        statuses.push(at(1_500_000_000_009));
        times.push(&layout, &statuses, 42);
        assert_eq!(
            times,
            IdTimes::Recorded(vec![1_500_000_000_000, 1_500_000_000_007, 42])
        );
        let h = History {
            layout,
            statuses,
            id_times: times,
            truth: None,
            pollers: Vec::new(),
            requests: Vec::new(),
            observations: Vec::new(),
            interval_ms: 1000,
            unserved: Vec::new(),
            expired: Vec::new(),
        };
        assert_eq!(h.id_time_ms(1), 1_500_000_000_007);
        assert_eq!(h.id_time_ms(2), 42);
    }
}
