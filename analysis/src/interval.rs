//! Intervals over runs: one value per run (a loss rate, say), summarised by
//! its mean with a 95 % percentile-bootstrap interval, and the runs' min,
//! median and max ([`over_runs`]); and, for a claim of "no difference"
//! between two settings, the smallest difference the design could have
//! detected ([`detectable_difference`] for settings run apart,
//! [`detectable_paired_difference`] for pollers sharing runs, and the floor
//! a count of lost rows puts under both, [`count_floor`]). Pure: no I/O, no clock; the
//! resampling takes a seed.
//!
//! Why a bootstrap over runs and not a Poisson interval: counts of lost rows
//! across runs are overdispersed. What moves a run's count is mostly the
//! machine's load and the run's start phase, which a Poisson model (variance
//! equal to the mean) does not know about, so its interval is too narrow.
//! Resampling whole runs uses the runs' own spread, whatever its source
//! (Efron and Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13,
//! the percentile interval). With few runs (fewer than about 10) the
//! percentile interval is itself too narrow: it uses the plug-in spread
//! (divisor n, not n - 1) and normal-like quantiles rather than Student's t.
//! docs/analysis.md ("Intervals over runs") says the same for readers.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// How many bootstrap resamples [`over_runs`] draws.
pub const RESAMPLES: usize = 10_000;

/// One value per run, summarised. With no runs every field is 0.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OverRuns {
    pub mean: f64,
    /// The 95 % percentile-bootstrap interval of the mean, `(low, high)`
    /// (a two-element array in JSON).
    pub ci95: (f64, f64),
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub runs: usize,
}

fn mean_of(values: impl Iterator<Item = f64>, n: usize) -> f64 {
    values.sum::<f64>() / n as f64
}

/// The mean of `values` (one per run) with a 95 % percentile-bootstrap
/// interval: [`RESAMPLES`] resamples of the runs with replacement, drawn from
/// ChaCha8 seeded with `seed`, the interval the 2.5th and 97.5th percentiles
/// of their means (order statistics 250 and 9,750 of 10,000). The same
/// values and seed give the same interval. One run gives a zero-width
/// interval: there is no spread to resample.
pub fn over_runs(values: &[f64], seed: u64) -> OverRuns {
    let n = values.len();
    if n == 0 {
        return OverRuns {
            mean: 0.0,
            ci95: (0.0, 0.0),
            min: 0.0,
            median: 0.0,
            max: 0.0,
            runs: 0,
        };
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (min, max) = (sorted[0], sorted[n - 1]);
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    let mean = mean_of(values.iter().copied(), n);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| mean_of((0..n).map(|_| values[rng.random_range(0..n)]), n))
        .collect();
    means.sort_by(f64::total_cmp);
    // A mean of values in [min, max] can round a hair outside it; the
    // interval cannot honestly be wider than the values themselves.
    let lo = means[RESAMPLES * 25 / 1000].clamp(min, max);
    let hi = means[RESAMPLES * 975 / 1000 - 1].clamp(min, max);
    OverRuns {
        mean,
        ci95: (lo, hi),
        min,
        median,
        max,
        runs: n,
    }
}

/// z quantiles: 1.96 for a two-sided 5 % test, 0.84 for 80 % power; their
/// sum is the 2.8 of the usual sample-size formula (e.g. Lehr, "Sixteen
/// s-squared over d-squared", Statistics in Medicine 11, 1992).
const Z_ALPHA_PLUS_POWER: f64 = 1.96 + 0.84;

/// The smallest difference of means between two settings, `a` and `b` (one
/// value per run each), that a two-sided test at 5 % would have found with
/// 80 % power, from the runs' pooled standard deviation:
/// `2.8 · sd · sqrt(1/n_a + 1/n_b)`, which is `2.8 · sd · sqrt(2/n)` for n
/// runs each. A claim of "no difference" is only as strong as this: a
/// smaller real difference could hide in the runs' spread. `None` when the
/// pooled SD is undefined (fewer than 3 runs in all, or a side with none).
pub fn detectable_difference(a: &[f64], b: &[f64]) -> Option<f64> {
    let (na, nb) = (a.len(), b.len());
    if na == 0 || nb == 0 || na + nb < 3 {
        return None;
    }
    let ss = |v: &[f64]| {
        let m = mean_of(v.iter().copied(), v.len());
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>()
    };
    let sd = ((ss(a) + ss(b)) / (na + nb - 2) as f64).sqrt();
    Some(Z_ALPHA_PLUS_POWER * sd * (1.0 / na as f64 + 1.0 / nb as f64).sqrt())
}

/// The smallest difference between two pollers measured in the same runs
/// (`a[i]` and `b[i]` from run i) that a two-sided test at 5 % would have
/// found with 80 % power: `2.8 · sd(a - b) / sqrt(n)`, from the spread of the
/// per-run differences (the paired design: what the runs share, their load
/// and start phase, cancels out). `None` for fewer than 2 runs or lengths
/// that differ.
pub fn detectable_paired_difference(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len();
    if n < 2 || b.len() != n {
        return None;
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let m = mean_of(d.iter().copied(), n);
    let sd = (d.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    Some(Z_ALPHA_PLUS_POWER * sd / (n as f64).sqrt())
}

/// The floor a count puts under any detectable difference of loss rates:
/// a setting whose true rate is d per `scale` rows, over `rows` rows in all,
/// shows no loss at all with probability `exp(-d · rows / scale)` (Poisson),
/// so it shows one with 80 % probability only from `d = ln 5 · scale / rows`.
/// Below that, a run set where nothing was lost cannot be told from one where
/// a little was, however small the runs' spread (which is zero when every run
/// lost nothing). The 95 % analogue, `3 / rows`, is the "rule of three"
/// (Hanley and Lippman-Hand, "If nothing goes wrong, is everything all
/// right?", JAMA 249, 1983). `None` for no rows.
pub fn count_floor(rows: u64, scale: f64) -> Option<f64> {
    (rows > 0).then(|| 5f64.ln() * scale / rows as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_constant_sample_has_a_zero_width_interval() {
        let r = over_runs(&[7.5; 12], 3);
        assert_eq!(r.ci95, (7.5, 7.5));
        assert_eq!(
            (r.mean, r.min, r.median, r.max, r.runs),
            (7.5, 7.5, 7.5, 7.5, 12)
        );
    }

    #[test]
    fn no_runs_and_one_run() {
        assert_eq!(over_runs(&[], 1).runs, 0);
        let one = over_runs(&[4.0], 1);
        assert_eq!((one.mean, one.ci95, one.runs), (4.0, (4.0, 4.0), 1));
    }

    #[test]
    fn order_statistics() {
        let r = over_runs(&[5.0, 1.0, 3.0, 9.0], 1);
        assert_eq!((r.min, r.median, r.max, r.mean), (1.0, 4.0, 9.0, 4.5));
        assert_eq!(over_runs(&[5.0, 1.0, 3.0], 1).median, 3.0);
    }

    /// Ten runs 0..=9: the sd of the mean is about 0.91 (plug-in sd 2.87 over
    /// sqrt 10), so the interval is about 4.5 ± 1.8.
    #[test]
    fn width_matches_the_spread() {
        let v: Vec<f64> = (0..10).map(f64::from).collect();
        let r = over_runs(&v, 1);
        let (lo, hi) = r.ci95;
        assert!(
            (2.4..3.0).contains(&lo) && (6.0..6.6).contains(&hi),
            "{lo} {hi}"
        );
    }

    #[test]
    fn detectable_difference_formula() {
        // Pooled sd 1 (each side 0, 2 around 1: ss 2 each, 4 / 2 df), n 2 each.
        let d = detectable_difference(&[0.0, 2.0], &[5.0, 7.0]).unwrap();
        assert!((d - 2.8 * (2.0f64 / 2.0).sqrt() * 2f64.sqrt()).abs() < 1e-12);
        // Ten runs each with sd 1: 2.8 * sqrt(2/10).
        let a: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { -1.0 } else { 1.0 })
            .collect();
        let sd = (10.0f64 / 9.0).sqrt();
        let d = detectable_difference(&a, &a).unwrap();
        assert!((d - 2.8 * sd * (2.0f64 / 10.0).sqrt()).abs() < 1e-12);
        assert_eq!(detectable_difference(&[1.0], &[2.0]), None);
        assert_eq!(detectable_difference(&[], &[2.0, 3.0]), None);
    }

    #[test]
    fn detectable_paired_difference_uses_the_spread_of_the_differences() {
        // The runs move both pollers alike: the differences are constant,
        // so any difference would be seen.
        let a = [10.0, 50.0, 90.0];
        let b = [8.0, 48.0, 88.0];
        assert_eq!(detectable_paired_difference(&a, &b), Some(0.0));
        // Differences 1 and 3: sd sqrt(2), n 2.
        let d = detectable_paired_difference(&[1.0, 3.0], &[0.0, 0.0]).unwrap();
        assert!((d - 2.8 * 2f64.sqrt() / 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(detectable_paired_difference(&[1.0], &[0.0]), None);
        assert_eq!(detectable_paired_difference(&[1.0, 2.0], &[0.0]), None);
    }

    #[test]
    fn count_floor_is_ln5_rows_scaled() {
        // 10 runs of 54,000 rows: a rate below 0.30 per 100,000 shows no
        // loss in more than 20 % of such campaigns.
        let f = count_floor(540_000, 100_000.0).unwrap();
        assert!((f - 5f64.ln() / 5.4).abs() < 1e-12, "{f}");
        assert_eq!(count_floor(0, 100_000.0), None);
    }

    proptest! {
        // Each case draws 10,000 resamples: a few dozen cases keep the
        // debug-build test to seconds.
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn interval_bounds_hold(values in prop::collection::vec(0.0f64..1e6, 1..25), seed: u64) {
            let r = over_runs(&values, seed);
            let (lo, hi) = r.ci95;
            prop_assert!(r.min <= lo && lo <= hi && hi <= r.max);
            prop_assert!(lo <= r.mean && r.mean <= hi, "{values:?}: {r:?}");
            prop_assert!(r.min <= r.median && r.median <= r.max);
            prop_assert_eq!(r.runs, values.len());
            prop_assert_eq!(over_runs(&values, seed), r);
        }
    }
}
