//! The one way a [`History`] is built, from a run's records: by
//! [`crate::load`] as it reads them back from run.db, and by `experiment
//! sweep` as they are made, without run.db (one seed after another, instead
//! of writing every observation to SQLite and reading it back).
//!
//! Both give the same history for the same records (a test in
//! `experiment/tests/sweep.rs` compares them on whole runs): a status is
//! known by its ID text; the first truth row of an ID wins (`INSERT OR
//! IGNORE`); a request's items are one range of the flat observations; and
//! the statuses are in the loader's order, those returned by some poller
//! (table `statuses`) by ID text, then those only the truth holds, by ID
//! text (both tables are keyed by `(run_id, id)`, `WITHOUT ROWID`). The
//! loader adds them in that order (`HistoryBuilder::in_table_order`); a
//! builder fed as records are made ([`HistoryBuilder::new`]) sorts them so
//! in [`HistoryBuilder::finish`].
//!
//! Speed and memory matter: a run can hold tens of millions of statuses.
//! Status IDs are mapped to dense `u32` indices by `StatusIndex` (one
//! parse and one lookup in a table of bare indices per record, no text
//! kept when the layout can write it again).

use crate::history::{History, IdTimes, PollerSpec, Request, Status, TruthTable, Visibility};
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use since_id::id::{Id, Layout};
use std::collections::HashMap;
use std::hash::BuildHasher;

/// One status as a response or the truth names it.
#[derive(Clone, Copy, Debug)]
pub struct StatusRef<'a> {
    pub id: &'a str,
    /// The sort key, 32 hex digits.
    pub key: &'a str,
    pub id_time_ms: i64,
}

/// The texts of the status IDs that are not the layout's formatting of their
/// key (none in the harness's own runs): the others are formatted when shown,
/// so ten million statuses do not cost ten million strings.
#[derive(Default)]
pub(crate) struct StatusTexts {
    pub(crate) odd: HashMap<u32, Box<str>>,
}

/// Status ID text -> dense index. A status whose text is the layout's
/// formatting of its sort key (every status the harness records) is found by
/// parsing the text and looking the key up in a table of bare `u32` indices
/// (5 bytes a slot, hashed by the key the index points at): about 85 MB for
/// 11.7 M statuses, where a map from owned text cost about 70 bytes a status
/// and the text itself as much again. Other texts (another program's IDs)
/// are kept, and mapped by text. O(1) expected per lookup; parsing a decimal
/// ID costs about what hashing its text did.
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
}

/// How the statuses are ordered when the history is finished.
enum Order {
    /// They were added in the loader's order (run.db's): kept as they are.
    AsAdded,
    /// They were added as the records were made: sorted into the loader's
    /// order at the end, by whether some poller returned them, then by ID text.
    AsLoaded {
        texts: Vec<Box<str>>,
        returned: Vec<bool>,
    },
}

/// Builds a [`History`] from a run's records.
pub struct HistoryBuilder {
    ids: StatusIndex,
    statuses: Vec<Status>,
    truth: TruthTable,
    has_truth: bool,
    pollers: Vec<PollerSpec>,
    interval_ms: i64,
    requests: Vec<Request>,
    observations: Vec<u32>,
    /// The request whose observations are being added.
    open: Option<usize>,
    order: Order,
    /// The first error of the records given through the infallible methods.
    error: Option<String>,
}

pub(crate) fn parse_key(text: &str) -> Result<u128, String> {
    parse_key_bytes(text.as_bytes())
}

/// [`parse_key`] of a text's bytes (read as UTF-8 only when they are not
/// 32 hex digits).
pub(crate) fn parse_key_bytes(b: &[u8]) -> Result<u128, String> {
    if b.len() == 32
        && let (Some(hi), Some(lo)) = (hex16(&b[..16]), hex16(&b[16..]))
    {
        return Ok(u128::from(hi) << 64 | u128::from(lo));
    }
    // Anything else (a sign, say), as `from_str_radix` reads it.
    let text = String::from_utf8_lossy(b);
    (text.len() == 32)
        .then(|| u128::from_str_radix(&text, 16).ok())
        .flatten()
        .ok_or_else(|| format!("malformed sort key '{text}': expected 32 hex digits"))
}

/// 16 hex digits (either case) as a `u64`; `None` if one is not a digit.
/// A run's every truth row has a key: `from_str_radix` on `u128`s cost 2 %
/// of the streaming check of the hour at 3,000/s (docs/benchmarks.md).
fn hex16(digits: &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for &c in digits {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        n = n << 4 | u64::from(d);
    }
    Some(n)
}

fn opt_key(text: Option<&str>) -> Result<Option<u128>, String> {
    text.map(parse_key).transpose()
}

impl HistoryBuilder {
    /// For records given as they are made, in any order of statuses.
    pub fn new(layout: Layout, pollers: Vec<PollerSpec>, interval_ms: i64) -> HistoryBuilder {
        HistoryBuilder::with(
            layout,
            pollers,
            interval_ms,
            0,
            Order::AsLoaded {
                texts: Vec::new(),
                returned: Vec::new(),
            },
        )
    }

    /// For records given in run.db's order ([`crate::load`]), with room for
    /// `statuses` statuses (capacity never written costs no resident memory,
    /// while growing by doubling would hold two copies at once).
    pub(crate) fn in_table_order(
        layout: Layout,
        pollers: Vec<PollerSpec>,
        interval_ms: i64,
        statuses: usize,
    ) -> HistoryBuilder {
        HistoryBuilder::with(layout, pollers, interval_ms, statuses, Order::AsAdded)
    }

    fn with(
        layout: Layout,
        pollers: Vec<PollerSpec>,
        interval_ms: i64,
        capacity: usize,
        order: Order,
    ) -> HistoryBuilder {
        HistoryBuilder {
            ids: StatusIndex::new(layout),
            statuses: Vec::with_capacity(capacity),
            truth: TruthTable::with_capacity(capacity),
            has_truth: false,
            pollers,
            interval_ms,
            requests: Vec::new(),
            observations: Vec::new(),
            open: None,
            order,
            error: None,
        }
    }

    /// Room for `n` more observations.
    pub(crate) fn reserve_observations(&mut self, n: usize) {
        self.observations.reserve_exact(n);
    }

    pub(crate) fn has_truth(&self) -> bool {
        self.has_truth
    }

    pub(crate) fn status_count(&self) -> usize {
        self.statuses.len()
    }

    pub(crate) fn observation_count(&self) -> usize {
        self.observations.len()
    }

    /// The index of the status whose ID text is `text`, if one was added.
    pub(crate) fn index_of(&self, text: &[u8]) -> Option<u32> {
        self.ids.get(&self.statuses, text)
    }

    fn add(&mut self, text: &str, key: u128, id_time_ms: i64, returned: bool) -> u32 {
        let i = (self.ids).add(&mut self.statuses, text, Status { key }, id_time_ms);
        if let Order::AsLoaded { texts, returned: r } = &mut self.order {
            texts.push(text.into());
            r.push(returned);
        }
        i
    }

    /// A status some poller returned (a row of `statuses`), not added before.
    pub(crate) fn status(&mut self, s: StatusRef<'_>) -> Result<u32, String> {
        let key = parse_key(s.key)?;
        Ok(self.add(s.id, key, s.id_time_ms, true))
    }

    /// The dense index of a status, added on first sight.
    fn intern(&mut self, s: StatusRef<'_>, returned: bool) -> Result<u32, String> {
        if let Some(i) = self.index_of(s.id.as_bytes()) {
            if let Order::AsLoaded { returned: r, .. } = &mut self.order {
                r[i as usize] |= returned;
            }
            return Ok(i);
        }
        let key = parse_key(s.key)?;
        Ok(self.add(s.id, key, s.id_time_ms, returned))
    }

    /// A status known only by the ID text a response gave (not in
    /// `statuses`: a recorder killed mid-write, or a served page), its key
    /// and time read from the text by the layout.
    pub(crate) fn observed(&mut self, text: &[u8]) -> Result<u32, String> {
        if let Some(i) = self.index_of(text) {
            return Ok(i);
        }
        let text = String::from_utf8_lossy(text);
        let layout = &self.ids.layout;
        let parsed = layout
            .parse(&text)
            .map_err(|e| format!("observation of {e}"))?;
        let id_time_ms = layout.ts_ms(parsed);
        Ok(self.add(&text, parsed.0, id_time_ms, true))
    }

    /// One row of the truth; only the first row of an ID counts.
    pub(crate) fn truth_row(&mut self, s: StatusRef<'_>, v: Visibility) -> Result<(), String> {
        self.has_truth = true;
        let i = self.intern(s, false)? as usize;
        if self.truth.get(i).is_none() {
            self.truth.set(i, self.statuses.len(), v);
        }
        Ok(())
    }

    /// One request of poller `poller` (an index into the run's pollers; the
    /// row's `poller_id` is the database's and not read) that returned
    /// `items` items, without them (see `HistoryBuilder::observe`); its index.
    pub(crate) fn push_request<S: AsRef<str>>(
        &mut self,
        poller: usize,
        r: &rundb::RequestRow<S>,
        items: i64,
    ) -> Result<usize, String> {
        let since_key = opt_key(r.since_key.as_ref().map(AsRef::as_ref))?;
        let before_key = opt_key(r.before_key.as_ref().map(AsRef::as_ref))?;
        self.requests.push(Request {
            poller,
            cycle: r.cycle,
            page: r.page,
            sent_at_ms: r.sent_at_ms,
            received_at_ms: r.received_at_ms,
            since_key,
            since_time_ms: since_key.map(|k| self.ids.layout.ts_ms(Id(k))),
            before_key,
            failed: r.error.is_some(),
            overflow: r.overflow,
            full: r.page_limit > 0 && items >= r.page_limit,
            bytes: r.bytes,
            obs_start: 0,
            obs_end: 0,
        });
        Ok(self.requests.len() - 1)
    }

    /// Status `i` returned by request `at`, after the items it returned
    /// before. A request's items are one range: those of another request
    /// in between start its range again. A request given none keeps `0..0`.
    pub(crate) fn observe(&mut self, at: usize, i: u32) {
        if self.open != Some(at) {
            self.close();
            self.requests[at].obs_start = self.observations.len() as u32;
            self.open = Some(at);
        }
        self.observations.push(i);
    }

    fn close(&mut self) {
        if let Some(at) = self.open.take() {
            self.requests[at].obs_end = self.observations.len() as u32;
        }
    }

    /// The whole page request `at` was served, as ID texts, in response
    /// order (`client_requests.served`): its range, even when empty.
    pub(crate) fn served(&mut self, at: usize, texts: &[String]) -> Result<(), String> {
        self.close();
        self.requests[at].obs_start = self.observations.len() as u32;
        for text in texts {
            let i = self.observed(text.as_bytes())?;
            self.observations.push(i);
        }
        self.requests[at].obs_end = self.observations.len() as u32;
        Ok(())
    }

    /// One request of poller `poller` and the statuses it returned, in
    /// response order.
    pub fn request<'a>(
        &mut self,
        poller: usize,
        r: &rundb::RequestRow,
        items: impl IntoIterator<Item = StatusRef<'a>>,
    ) {
        let at = match self.push_request(poller, r, 0) {
            Ok(at) => at,
            Err(e) => {
                self.error.get_or_insert(e);
                return;
            }
        };
        let mut count = 0i64;
        for s in items {
            match self.intern(s, true) {
                Ok(i) => self.observe(at, i),
                Err(e) => {
                    self.error.get_or_insert(e);
                }
            }
            count += 1;
        }
        self.close();
        self.requests[at].full = r.page_limit > 0 && count >= r.page_limit;
    }

    /// One row of the truth; only the first row of an ID counts.
    pub fn truth(&mut self, s: StatusRef<'_>, visibility: Visibility) {
        if let Err(e) = self.truth_row(s, visibility) {
            self.error.get_or_insert(e);
        }
    }

    /// The history, with its statuses in the loader's order; an error for a
    /// malformed sort key (the loader refuses those too).
    pub fn finish(self) -> Result<History, String> {
        self.finish_with_texts().map(|(history, _)| history)
    }

    /// [`HistoryBuilder::finish`], with the texts of the IDs that are not
    /// the layout's formatting of their key.
    pub(crate) fn finish_with_texts(mut self) -> Result<(History, StatusTexts), String> {
        self.close();
        if let Some(e) = self.error {
            return Err(e);
        }
        let StatusIndex {
            layout,
            texts: odd,
            id_times,
            ..
        } = self.ids;
        let mut history = History {
            layout,
            statuses: self.statuses,
            id_times,
            truth: None,
            pollers: self.pollers,
            requests: self.requests,
            observations: self.observations,
            interval_ms: self.interval_ms,
            unserved: Vec::new(),
            expired: Vec::new(),
        };
        let mut truth = self.truth;
        let odd = match self.order {
            Order::AsAdded => {
                if self.has_truth {
                    truth.resize(history.statuses.len());
                }
                odd
            }
            Order::AsLoaded { texts, returned } => {
                sort_as_loaded(&mut history, &mut truth, &texts, &returned, odd)
            }
        };
        history.truth = self.has_truth.then_some(truth);
        Ok((history, odd))
    }
}

/// Puts the statuses of `h` (with their truth rows and odd texts) in the
/// loader's order: those `returned` by ID text, then the others by ID text.
fn sort_as_loaded(
    h: &mut History,
    truth: &mut TruthTable,
    texts: &[Box<str>],
    returned: &[bool],
    odd: StatusTexts,
) -> StatusTexts {
    let mut order: Vec<u32> = (0..h.statuses.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        returned[b]
            .cmp(&returned[a])
            .then_with(|| texts[a].as_bytes().cmp(texts[b].as_bytes()))
    });
    let mut new_index = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old as usize] = new as u32;
    }
    let old_time = |o: usize| h.id_time_ms(o);
    let mut statuses = Vec::with_capacity(order.len());
    let mut id_times = IdTimes::FromKeys;
    for &o in &order {
        statuses.push(h.statuses[o as usize]);
        id_times.push(&h.layout, &statuses, old_time(o as usize));
    }
    let sorted: TruthTable = order.iter().map(|&o| truth.get(o as usize)).collect();
    *truth = sorted;
    for o in &mut h.observations {
        *o = new_index[*o as usize];
    }
    h.statuses = statuses;
    h.id_times = id_times;
    StatusTexts {
        odd: odd
            .odd
            .into_iter()
            .map(|(i, text)| (new_index[i as usize], text))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sort key's shortcut reads what `from_str_radix` reads: every
    /// digit of either case, in each place, and refuses what it refuses.
    #[test]
    fn sort_keys_parse_as_from_str_radix_has_them() {
        let slow = |t: &str| {
            (t.len() == 32)
                .then(|| u128::from_str_radix(t, 16).ok())
                .flatten()
        };
        let mut texts: Vec<String> = vec![
            "0".repeat(32),
            "f".repeat(32),
            "F".repeat(32),
            format!("{:032x}", 1_462_015_105_796u128 << 22 | 5),
            format!("+{}", "7".repeat(31)),
            format!("-{}", "7".repeat(31)),
            "0".repeat(31),
            "0".repeat(33),
            String::new(),
            format!("{}g", "0".repeat(31)),
            format!("{} ", "0".repeat(31)),
        ];
        for (i, c) in "0123456789abcdefABCDEF".chars().enumerate() {
            let mut t: Vec<char> = format!("{:032x}", u128::MAX / 7).chars().collect();
            t[(i * 5) % 32] = c;
            texts.push(t.into_iter().collect());
        }
        for t in &texts {
            assert_eq!(parse_key(t).ok(), slow(t), "{t:?}");
        }
    }
}
