//! Each poller's detection delay ([`crate::oracle::detection_delays`]),
//! streamed: the same nearest-rank percentiles, from a count per distinct
//! delay (a few thousand values, whatever the run's length) rather than
//! one value per status.

use crate::diff::Distribution;
use std::collections::{BTreeMap, HashMap as StdHashMap};

/// foldhash, as in `diff`: a count per status that is returned.
type HashMap<K, V> = StdHashMap<K, V, foldhash::fast::FixedState>;

/// The delays so far, and what decides which statuses count.
pub(super) struct Delays {
    interval_ms: i64,
    /// The cadence's ticks ([`crate::oracle::ticks`]): how many, the last
    /// two, and the interval bucket of the last.
    ticks: usize,
    last_two: [i64; 2],
    last_bucket: Option<i64>,
    /// Per poller, its first request's send time.
    first_request: Vec<Option<i64>>,
    /// Per poller, how many statuses had each delay (hashed: a count per
    /// status, ordered once at the end).
    counts: Vec<HashMap<i64, u64>>,
    /// (visible at, poller, delay) of statuses that became visible after the
    /// last tick but one: the horizon, past which the final drain's wait,
    /// not the poller's policy, made the delay.
    waiting: Vec<(i64, usize, i64)>,
}

impl Delays {
    pub(super) fn new(pollers: usize, interval_ms: i64) -> Delays {
        Delays {
            interval_ms: interval_ms.max(1),
            ticks: 0,
            last_two: [i64::MIN; 2],
            last_bucket: None,
            first_request: vec![None; pollers],
            counts: vec![HashMap::default(); pollers],
            waiting: Vec::new(),
        }
    }

    /// A request of poller `p`, in time order.
    pub(super) fn request(&mut self, p: usize, sent_at_ms: i64, page: i64) {
        self.first_request[p].get_or_insert(sent_at_ms);
        let bucket = sent_at_ms.div_euclid(self.interval_ms);
        if page == 0 && self.last_bucket != Some(bucket) {
            self.last_bucket = Some(bucket);
            self.last_two = [self.last_two[1], sent_at_ms];
            self.ticks += 1;
            if let Some(h) = self.horizon() {
                let counts = &mut self.counts;
                self.waiting.retain(|&(v, p, d)| {
                    let past = v <= h;
                    if past {
                        *counts[p].entry(d).or_insert(0) += 1;
                    }
                    !past
                });
            }
        }
    }

    /// The horizon so far (it only grows); `None` before two ticks.
    fn horizon(&self) -> Option<i64> {
        (self.ticks >= 2).then_some(self.last_two[0])
    }

    /// Poller `p` returned a status for the first time, in a request sent
    /// at `sent_at_ms`; `visible_at_ms` from its truth row.
    pub(super) fn first_return(&mut self, p: usize, sent_at_ms: i64, visible_at_ms: Option<i64>) {
        let Some(v) = visible_at_ms else { return };
        if self.first_request[p].is_none_or(|start| v <= start) {
            return;
        }
        let d = sent_at_ms - v;
        match self.horizon() {
            Some(h) if v <= h => *self.counts[p].entry(d).or_insert(0) += 1,
            _ => self.waiting.push((v, p, d)),
        }
    }

    /// Per poller, its delays' distribution (`None` for none).
    pub(super) fn finish(mut self) -> Vec<Option<Distribution>> {
        let h = self.horizon().unwrap_or(i64::MAX);
        for &(v, p, d) in &self.waiting {
            if v <= h {
                *self.counts[p].entry(d).or_insert(0) += 1;
            }
        }
        self.counts
            .iter()
            .map(|c| distribution(&c.iter().map(|(&d, &n)| (d, n)).collect()))
            .collect()
    }
}

/// [`Distribution::of`] the values counted in `counts`.
pub(super) fn distribution(counts: &BTreeMap<i64, u64>) -> Option<Distribution> {
    let n: u64 = counts.values().sum();
    let (&max, _) = counts.last_key_value()?;
    let rank = |p: f64| {
        let want = ((p * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (&v, &c) in counts {
            seen += c;
            if seen >= want {
                return v;
            }
        }
        max
    };
    Some(Distribution {
        basis: n as usize,
        p50: rank(0.50),
        p90: rank(0.90),
        p99: rank(0.99),
        max,
    })
}
