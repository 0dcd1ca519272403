//! The writers at the pollers' ticks (issue 54's footprint): how long the
//! writers' transaction in flight when a poller sent its query took, against
//! the one in flight at any instant of the run.
//!
//! A poller's query lands on the server at its tick, and every poller of a
//! run ticks on the same cadence. If the queries slow the server, they slow
//! it at the ticks, and only there: a run's commit percentiles, taken over
//! all its transactions, hardly move, yet a transaction in flight at a tick
//! stays open longer exactly when a poller reads, which is when a row with a
//! lower ID still uncommitted is skipped by a cursor that moved past it.
//!
//! The comparison needs a fair baseline. A transaction of L ms holds a
//! uniformly drawn instant with a chance in proportion to L, so the mean
//! latency of the transaction in flight at any instant is the length-biased
//! mean, sum(L^2) / sum(L), not the plain mean; the ticks, drawn by the
//! cadence and not by the writers, see that same mean when the pollers do
//! nothing to the writers. Pure: the brackets and the ticks come in.

use serde::{Deserialize, Serialize};

/// One run's writers at its ticks. In milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AtTicks {
    /// The transactions in flight at a tick (started at or before it, their
    /// COMMIT returned after it).
    pub in_flight: u64,
    /// Their mean latency, from the transaction's start to COMMIT returned;
    /// `None` when no transaction was in flight at any tick (or no tick).
    pub at_ticks_ms: Option<f64>,
    /// The mean latency of the transaction in flight at an instant drawn
    /// uniformly over the writing: sum(L^2) / sum(L) over all transactions
    /// (0 when every one took 0 ms).
    pub any_time_ms: f64,
}

/// [`AtTicks`] of the writers' `brackets` (start, COMMIT returned; ms) and
/// the `ticks` (when a poller sent its tick's first query; ms); `None`
/// without a bracket (a target without writers' brackets). Without a tick
/// (the writers alone) only `any_time_ms` is known: the control's.
pub fn at_ticks(brackets: &[(i64, i64)], ticks: &[i64]) -> Option<AtTicks> {
    if brackets.is_empty() {
        return None;
    }
    let mut ticks = ticks.to_vec();
    ticks.sort_unstable();
    let (mut sum, mut sum_sq) = (0.0, 0.0);
    let (mut in_flight, mut in_flight_sum) = (0u64, 0.0);
    for &(start, end) in brackets {
        let latency = (end - start).max(0) as f64;
        sum += latency;
        sum_sq += latency * latency;
        // The first tick at or after the start: in flight if before the end.
        let next = ticks.partition_point(|&t| t < start);
        if ticks.get(next).is_some_and(|&t| t < end) {
            in_flight += 1;
            in_flight_sum += latency;
        }
    }
    Some(AtTicks {
        in_flight,
        at_ticks_ms: (in_flight > 0).then(|| in_flight_sum / in_flight as f64),
        any_time_ms: if sum > 0.0 { sum_sq / sum } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn a_tick_counts_the_transactions_that_hold_it() {
        // 5 lies in [0, 10); 20 in none; 31 in [30, 32). [40, 40) holds nothing.
        let brackets = [(0, 10), (21, 22), (30, 32), (40, 40)];
        let a = at_ticks(&brackets, &[31, 5, 20]).unwrap();
        assert_eq!(a.in_flight, 2);
        assert_eq!(a.at_ticks_ms, Some(6.0));
        assert!((a.any_time_ms - 105.0 / 13.0).abs() < 1e-12, "{a:?}");
        // A tick at the COMMIT's return is after it: the row was visible.
        assert_eq!(at_ticks(&[(0, 10)], &[10]).unwrap().at_ticks_ms, None);
        assert_eq!(at_ticks(&[(0, 10)], &[0]).unwrap().in_flight, 1);
        assert_eq!(at_ticks(&[], &[5]), None);
        let alone = at_ticks(&[(0, 10), (5, 7)], &[]).unwrap();
        assert_eq!((alone.in_flight, alone.at_ticks_ms), (0, None));
        assert!(
            (alone.any_time_ms - 104.0 / 12.0).abs() < 1e-12,
            "{alone:?}"
        );
    }

    /// Writers at about 300 commits a second with latencies of 0 to 9 ms,
    /// for `seconds`, and a tick a second at `phase` ms into each; `slowed`
    /// adds that many ms to a transaction in flight at a tick, as a server
    /// busy with the pollers' queries would.
    fn run(seed: u64, seconds: i64, phase: i64, slowed: i64) -> AtTicks {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ticks: Vec<i64> = (0..seconds).map(|s| s * 1_000 + phase).collect();
        let brackets: Vec<(i64, i64)> = (0..seconds * 300)
            .map(|_| {
                let start = rng.random_range(0..seconds * 1_000);
                let mut end = start + rng.random_range(0..10);
                let next = ticks.partition_point(|&t| t < start);
                if ticks.get(next).is_some_and(|&t| t < end) {
                    end += slowed;
                }
                (start, end)
            })
            .collect();
        at_ticks(&brackets, &ticks).unwrap()
    }

    #[test]
    fn ticks_that_do_nothing_see_the_length_biased_mean() {
        // sum(L^2)/sum(L) of 0..=9 ms uniform is 285/45 = 6.33 ms; the plain
        // mean, 4.5 ms, would be the wrong baseline.
        let a = run(1, 3_600, 500, 0);
        let at = a.at_ticks_ms.unwrap();
        assert!((a.any_time_ms - 285.0 / 45.0).abs() < 0.05, "{a:?}");
        assert!((at - a.any_time_ms).abs() < 0.2, "{a:?}");
    }

    #[test]
    fn ticks_that_slow_the_writers_stand_out_while_the_run_s_mean_hardly_moves() {
        let quiet = run(2, 3_600, 500, 0);
        let slowed = run(2, 3_600, 500, 3);
        // The same draws: only the transactions at a tick grew, by 3 ms.
        assert_eq!(quiet.in_flight, slowed.in_flight);
        let grew = slowed.at_ticks_ms.unwrap() - quiet.at_ticks_ms.unwrap();
        assert!((grew - 3.0).abs() < 1e-9, "{grew}");
        assert!(
            slowed.at_ticks_ms.unwrap() > slowed.any_time_ms + 2.5,
            "{slowed:?}"
        );
        // Under 1 % of the transactions hold a tick.
        assert!(slowed.any_time_ms - quiet.any_time_ms < 0.2, "{slowed:?}");
    }
}
