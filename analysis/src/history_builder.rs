//! A [`History`] built in memory from a run's records as they are made,
//! without run.db: what `experiment sweep` judges, one seed after another,
//! instead of writing every observation to SQLite and reading it back.
//!
//! It must give exactly what [`crate::load`] gives for the same records (a
//! test in `experiment/tests/sweep.rs` compares the two on whole runs), so it
//! follows the recorder and the loader step by step: a status is known by its
//! ID text; the first truth row of an ID wins (`INSERT OR IGNORE`); a request
//! is full when it returned at least its page limit; and [`HistoryBuilder::finish`]
//! orders the statuses as the loader reads them, those returned by some poller
//! (table `statuses`) by ID text, then those only the truth holds, by ID text
//! (both tables are keyed by `(run_id, id)`, `WITHOUT ROWID`).

use crate::history::{History, IdTimes, PollerSpec, Request, Status, Visibility};
use since_id::id::{Id, Layout};
use std::collections::HashMap;

/// One status as a response or the truth names it.
#[derive(Clone, Copy, Debug)]
pub struct StatusRef<'a> {
    pub id: &'a str,
    /// The sort key, 32 hex digits.
    pub key: &'a str,
    pub id_time_ms: i64,
}

/// Builds a [`History`] from records, in the order they are made.
pub struct HistoryBuilder {
    layout: Layout,
    pollers: Vec<PollerSpec>,
    interval_ms: i64,
    index: HashMap<Box<str>, u32, foldhash::fast::FixedState>,
    ids: Vec<Box<str>>,
    statuses: Vec<Status>,
    /// The ID time of each status's first record.
    id_times: Vec<i64>,
    /// Returned by some poller (in table `statuses`), by status.
    returned: Vec<bool>,
    truth: Vec<Option<Visibility>>,
    has_truth: bool,
    requests: Vec<Request>,
    observations: Vec<u32>,
    error: Option<String>,
}

fn parse_key(text: &str) -> Result<u128, String> {
    (text.len() == 32)
        .then(|| u128::from_str_radix(text, 16).ok())
        .flatten()
        .ok_or_else(|| format!("malformed sort key '{text}': expected 32 hex digits"))
}

impl HistoryBuilder {
    pub fn new(layout: Layout, pollers: Vec<PollerSpec>, interval_ms: i64) -> HistoryBuilder {
        HistoryBuilder {
            layout,
            pollers,
            interval_ms,
            index: HashMap::default(),
            ids: Vec::new(),
            statuses: Vec::new(),
            id_times: Vec::new(),
            returned: Vec::new(),
            truth: Vec::new(),
            has_truth: false,
            requests: Vec::new(),
            observations: Vec::new(),
            error: None,
        }
    }

    /// The dense index of a status, added on first sight.
    fn intern(&mut self, s: StatusRef<'_>) -> u32 {
        if let Some(&i) = self.index.get(s.id) {
            return i;
        }
        let key = match parse_key(s.key) {
            Ok(key) => key,
            Err(e) => {
                self.error.get_or_insert(e);
                0
            }
        };
        let i = self.statuses.len() as u32;
        self.index.insert(s.id.into(), i);
        self.ids.push(s.id.into());
        self.statuses.push(Status { key });
        self.id_times.push(s.id_time_ms);
        self.returned.push(false);
        self.truth.push(None);
        i
    }

    fn key(&mut self, text: Option<&str>) -> Option<u128> {
        text.and_then(|t| match parse_key(t) {
            Ok(k) => Some(k),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        })
    }

    /// One request of poller `poller` (an index into the run's pollers; the
    /// row's `poller_id` is the database's and not read) and the statuses it
    /// returned, in response order.
    pub fn request<'a>(
        &mut self,
        poller: usize,
        r: &rundb::RequestRow,
        items: impl IntoIterator<Item = StatusRef<'a>>,
    ) {
        let obs_start = self.observations.len() as u32;
        let mut count = 0usize;
        for s in items {
            let i = self.intern(s);
            self.returned[i as usize] = true;
            self.observations.push(i);
            count += 1;
        }
        // An empty response keeps the range 0..0, as the loader leaves it.
        let (obs_start, obs_end) = match count {
            0 => (0, 0),
            _ => (obs_start, self.observations.len() as u32),
        };
        let since_key = self.key(r.since_key.as_deref());
        let before_key = self.key(r.before_key.as_deref());
        self.requests.push(Request {
            poller,
            cycle: r.cycle,
            page: r.page,
            sent_at_ms: r.sent_at_ms,
            received_at_ms: r.received_at_ms,
            since_key,
            since_time_ms: since_key.map(|k| self.layout.ts_ms(Id(k))),
            before_key,
            failed: r.error.is_some(),
            overflow: r.overflow,
            full: r.page_limit > 0 && count as i64 >= r.page_limit,
            bytes: r.bytes,
            obs_start,
            obs_end,
        });
    }

    /// One row of the truth; only the first row of an ID counts.
    pub fn truth(&mut self, s: StatusRef<'_>, visibility: Visibility) {
        self.has_truth = true;
        let i = self.intern(s) as usize;
        if self.truth[i].is_none() {
            self.truth[i] = Some(visibility);
        }
    }

    /// The history, with its statuses in the loader's order; an error for a
    /// malformed sort key (the loader refuses those too).
    pub fn finish(self) -> Result<History, String> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut order: Vec<u32> = (0..self.statuses.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            self.returned[b]
                .cmp(&self.returned[a])
                .then_with(|| self.ids[a].as_bytes().cmp(self.ids[b].as_bytes()))
        });
        let mut new_index = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old as usize] = new as u32;
        }
        let mut statuses = Vec::with_capacity(order.len());
        let mut id_times = IdTimes::FromKeys;
        for &o in &order {
            statuses.push(self.statuses[o as usize]);
            id_times.push(&self.layout, &statuses, self.id_times[o as usize]);
        }
        let truth = self
            .has_truth
            .then(|| order.iter().map(|&o| self.truth[o as usize]).collect());
        let observations = self
            .observations
            .iter()
            .map(|&o| new_index[o as usize])
            .collect();
        Ok(History {
            layout: self.layout,
            statuses,
            id_times,
            truth,
            pollers: self.pollers,
            requests: self.requests,
            observations,
            interval_ms: self.interval_ms,
            unserved: Vec::new(),
            expired: Vec::new(),
        })
    }
}
