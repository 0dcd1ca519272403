//! The "part 2" experiment of tesaguri's "Your Timelines Are Leaky" run
//! directly against the model, in virtual time: a naive poller (since_id =
//! highest ID seen) and a compensated one (the article's final formula with a
//! given k, `since_id::policy`) poll side by side on a fixed cadence, paging back
//! with `before` whenever a page is full, and every status the truth says was
//! visible at one of their requests but never returned is a leak.
//!
//! This is how the `twitter` profile is calibrated (see its docs and the test
//! below), and what the `sim` bench prints. It is deliberately independent of
//! the real poller code: a second, small implementation of the same loop.

use super::model::{Query, Simulator};
use super::profile::SimConfig;
use since_id::PolicyState;
use since_id::id::Id;
use since_id::policy::{CursorPolicy, smallest_k_catching};
use std::collections::HashSet;

/// A status a poller never returned although it was visible at its requests.
#[derive(Clone, Debug, PartialEq)]
pub struct Part2Leak {
    pub id: Id,
    pub id_time_ms: i64,
    pub visible_at_ms: i64,
    /// `ts(the poller's highest ID at the first request that could return it) - ts(item)`:
    /// how far below the naive cursor it landed.
    pub id_skew_ms: i64,
    /// The smallest k for which the compensated formula would have returned it
    /// at the first request it was visible at (`policy::smallest_k_catching`,
    /// with that poller's latest ID and the previous send time).
    pub required_k_ms: i64,
}

/// One poller's result.
#[derive(Clone, Debug)]
pub struct PollerOutcome {
    pub policy: CursorPolicy,
    pub requests: u64,
    /// Distinct statuses returned.
    pub returned: usize,
    pub leaks: Vec<Part2Leak>,
}

/// Both pollers' results, and the number of statuses that existed.
#[derive(Clone, Debug)]
pub struct Part2 {
    pub statuses: usize,
    pub naive: PollerOutcome,
    pub compensated: PollerOutcome,
}

/// The parameters of a run; [`Part2Setup::hour`] is the calibration setting.
#[derive(Clone, Debug)]
pub struct Part2Setup {
    pub seed: u64,
    /// Start of the run (the simulator's start), aligned to the second.
    pub start_ms: i64,
    pub duration_ms: i64,
    pub interval_ms: i64,
    pub k_ms: u64,
    pub page_limit: usize,
    /// Statuses that became visible only in the last `margin_ms` are not judged.
    pub margin_ms: i64,
}

impl Part2Setup {
    /// One hour from 2023-11-14T22:13:20Z, polled every 1 s, k = 1 s, pages of 200.
    pub fn hour(seed: u64) -> Part2Setup {
        Part2Setup {
            seed,
            start_ms: 1_700_000_000_000,
            duration_ms: 3_600_000,
            interval_ms: 1000,
            k_ms: 1000,
            page_limit: 200,
            margin_ms: 10_000,
        }
    }
}

struct LoopPoller {
    policy: CursorPolicy,
    latest: Option<Id>,
    previous_send_ms: i64,
    seen: HashSet<Id>,
    /// The highest ID seen before each request (for skews).
    latest_before: Vec<Option<Id>>,
    requests: u64,
}

impl LoopPoller {
    fn new(policy: CursorPolicy) -> LoopPoller {
        LoopPoller {
            policy,
            latest: None,
            previous_send_ms: 0,
            seen: HashSet::new(),
            latest_before: Vec::new(),
            requests: 0,
        }
    }

    /// One cycle at `now`: a request with this policy's since_id, and pages
    /// back while the page is full.
    fn poll(&mut self, sim: &Simulator, now_ms: i64, limit: usize) {
        let layout = sim.layout();
        self.latest_before.push(self.latest);
        let since = self.latest.map(|latest| {
            PolicyState::new(self.policy).since_id(layout, latest, self.previous_send_ms)
        });
        let mut before = None;
        loop {
            let page = sim.query(&Query {
                after: since,
                before,
                limit,
                oldest_first: false,
            });
            self.requests += 1;
            for s in &page {
                self.seen.insert(s.id);
                self.latest = self.latest.max(Some(s.id));
            }
            match page.last() {
                Some(oldest) if page.len() == limit => before = Some(oldest.id),
                _ => break,
            }
        }
        self.previous_send_ms = now_ms;
    }
}

/// Runs both pollers against a fresh simulator of `config`.
pub fn run_part2(config: SimConfig, setup: &Part2Setup) -> Part2 {
    let mut sim = Simulator::new(config, setup.seed, setup.start_ms);
    let mut naive = LoopPoller::new(CursorPolicy::Naive);
    let mut compensated = LoopPoller::new(CursorPolicy::Compensated { k_ms: setup.k_ms });
    let interval = setup.interval_ms.max(1);
    let cycles = setup.duration_ms / interval;
    let request_times: Vec<i64> = (1..=cycles)
        .map(|i| setup.start_ms + i * interval)
        .collect();
    let mut truth = Vec::new();
    for &now in &request_times {
        sim.advance(now);
        truth.extend(sim.take_truth());
        naive.poll(&sim, now, setup.page_limit);
        compensated.poll(&sim, now, setup.page_limit);
    }
    let judge_until = setup.start_ms + setup.duration_ms - setup.margin_ms;
    let layout = sim.layout().clone();
    let leaks = |p: &LoopPoller| -> Vec<Part2Leak> {
        let mut out = Vec::new();
        for s in &truth {
            let first = request_times.partition_point(|&r| r < s.visible_at_ms);
            let visible_at = |i: usize| {
                request_times
                    .get(i)
                    .is_some_and(|&r| s.deleted_at_ms.is_none_or(|d| r < d))
            };
            let judged = request_times.get(first).is_some_and(|&r| r <= judge_until);
            if !judged || !visible_at(first) || p.seen.contains(&s.id) {
                continue;
            }
            let cursor_ts = p.latest_before[first].map_or(s.id_time_ms, |id| layout.ts_ms(id));
            // The policy's own edge (both bounds of its clamp), at the first
            // request that could return it: later ones only need more.
            let mut required_k = i64::MAX;
            let mut i = first;
            while visible_at(i) {
                let previous = if i == 0 {
                    setup.start_ms
                } else {
                    request_times[i - 1]
                };
                let k = match p.latest_before[i] {
                    Some(latest) => smallest_k_catching(&layout, latest, previous, s.id),
                    None => Some(0),
                };
                if let Some(k) = k {
                    required_k = k.min(i64::MAX as u64) as i64;
                    break;
                }
                i += 1;
            }
            out.push(Part2Leak {
                id: s.id,
                id_time_ms: s.id_time_ms,
                visible_at_ms: s.visible_at_ms,
                id_skew_ms: cursor_ts - s.id_time_ms,
                required_k_ms: required_k.max(0),
            });
        }
        out
    };
    let outcome = |p: &LoopPoller| PollerOutcome {
        policy: p.policy,
        requests: p.requests,
        returned: p.seen.len(),
        leaks: leaks(p),
    };
    Part2 {
        statuses: truth.len(),
        naive: outcome(&naive),
        compensated: outcome(&compensated),
    }
}

/// Nearest-rank percentile of `values` (`p` in 0..=100); `None` when empty.
pub fn percentile(values: &[i64], p: usize) -> Option<i64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return None;
    }
    let rank = (p.min(100) * v.len()).div_ceil(100).max(1);
    Some(v[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part-2 observation, reproduced by the default profile and seed:
    /// tens of naive leaks, most caught by k = 1 s, several needing more.
    #[test]
    fn twitter_part2_reproduced() {
        let run = run_part2(SimConfig::profile("twitter").unwrap(), &Part2Setup::hour(1));
        let naive = run.naive.leaks.len();
        let k1 = run.compensated.leaks.len();
        let skews: Vec<i64> = run.naive.leaks.iter().map(|l| l.id_skew_ms).collect();
        let required: Vec<i64> = run.naive.leaks.iter().map(|l| l.required_k_ms).collect();
        eprintln!(
            "statuses {} naive leaks {naive} k=1s leaks {k1}; naive skew p50 {:?} p90 {:?} max {:?}; required k p50 {:?} p90 {:?} max {:?}",
            run.statuses,
            percentile(&skews, 50),
            percentile(&skews, 90),
            percentile(&skews, 100),
            percentile(&required, 50),
            percentile(&required, 90),
            percentile(&required, 100),
        );
        assert!((20..=80).contains(&naive), "naive leaks {naive}");
        assert!((3..=15).contains(&k1), "k=1s leaks {k1}");
        assert!(k1 * 2 < naive, "k=1s must catch most: {k1} of {naive}");
        // Every k=1s leak is also a naive leak that needed more than 1 s.
        let naive_ids: HashSet<Id> = run.naive.leaks.iter().map(|l| l.id).collect();
        for leak in &run.compensated.leaks {
            assert!(naive_ids.contains(&leak.id));
            assert!(leak.required_k_ms > 1000, "{leak:?}");
        }
    }

    /// Robustness of the calibration beyond seed 1 (slow in debug: `--ignored`).
    /// Seeds 1-20: the ranges hold for at least 16 of them.
    #[test]
    #[ignore]
    fn twitter_part2_across_seeds() {
        let mut within = 0;
        for seed in 1..=20 {
            let run = run_part2(
                SimConfig::profile("twitter").unwrap(),
                &Part2Setup::hour(seed),
            );
            let (naive, k1) = (run.naive.leaks.len(), run.compensated.leaks.len());
            eprintln!("seed {seed}: naive {naive} k=1s {k1}");
            if (20..=80).contains(&naive) && (3..=15).contains(&k1) {
                within += 1;
            }
        }
        assert!(within >= 16, "only {within} of 20 seeds within the ranges");
    }

    #[test]
    fn percentiles() {
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(percentile(&[5, 1, 3], 50), Some(3));
        assert_eq!(percentile(&[5, 1, 3], 100), Some(5));
        assert_eq!(percentile(&[5, 1, 3], 0), Some(1));
    }
}
