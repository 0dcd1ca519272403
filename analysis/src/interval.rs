//! Intervals over runs.
//!
//! - A campaign's cell (a combination and poller, several runs): its loss
//!   rate with a 95 % interval whose coverage is tested by simulation
//!   ([`rate_over_runs`]: quasi-Poisson, exact bounds), and a difference
//!   between two cells as an interval and a p value ([`welch`] for cells run
//!   apart, [`paired`] for pollers sharing runs), with the 90 % interval an
//!   equivalence margin is checked against ([`Difference::within`]).
//! - The simulator's sweep: one value per seed summarised by its mean with a
//!   percentile-bootstrap interval ([`over_runs`]): its seeds are many and
//!   its values not counts of a few rows.
//!
//! Pure: no I/O, no clock; the resampling takes a seed. docs/analysis.md
//! ("Intervals over runs") says the same for readers.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use statrs::distribution::{ChiSquared, ContinuousCDF, StudentsT};
use statrs::function::gamma::gamma_lr;

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
    let (min, median, max) = spread(values);
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

/// The normal distribution's 97.5th percentile.
const Z975: f64 = 1.959_963_984_540_054;

/// Student's t quantile `p` with `df` degrees of freedom.
fn t_quantile(p: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df).expect("df > 0").inverse_cdf(p)
}

/// The chi-square quantile `p` with `df` (> 0, not necessarily whole)
/// degrees of freedom. statrs 0.18's inverse answers NaN for small `df`
/// (under about 1, which a cell of one or two lost rows and some dispersion
/// asks for): there the CDF, the regularized lower incomplete gamma function
/// `P(df/2, x/2)`, is inverted by bisection instead.
fn chi2_quantile(p: f64, df: f64) -> f64 {
    let fast = ChiSquared::new(df).expect("df > 0").inverse_cdf(p);
    if fast.is_finite() {
        return fast;
    }
    let cdf = |x: f64| gamma_lr(df / 2.0, x / 2.0);
    let mut hi = df.max(1.0);
    while cdf(hi) < p {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    // The CDF is monotone: 200 halvings reach f64's precision.
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if cdf(mid) < p { lo = mid } else { hi = mid }
    }
    (lo + hi) / 2.0
}

/// A loss rate over runs: the rows lost over the rows committed in all the
/// runs of a cell, with a 95 % interval whose coverage a seeded simulation
/// checks (the tests below: at least 93 % for 5 and 10 runs of Poisson and
/// negative binomial counts), and the runs' own rates' min, median and max.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rate {
    /// `lost / rows`, in the caller's unit (per 100,000 rows, say).
    pub rate: f64,
    /// The 95 % interval of the rate (a two-element array in JSON). With no
    /// loss at all its low end is 0 and its high end the one-sided 95 %
    /// bound: "0, at most X".
    pub ci95: (f64, f64),
    /// How much more the runs' counts vary than a Poisson count would: the
    /// Pearson statistic over its degrees of freedom, at least 1 (1 with
    /// fewer than two runs or no loss, where it cannot be estimated).
    pub dispersion: f64,
    pub lost: u64,
    pub rows: u64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub runs: usize,
}

/// The median of `values`: the middle one, or the mean of the middle two
/// when their count is even; `None` without any. The one median of every
/// report (a cell's loss, its writers' latency).
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut sorted: Vec<f64> = values.into_iter().collect();
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    Some(if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    })
}

/// The min, [`median`] and max of `values` (0s when empty).
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let Some(median) = median(values.iter().copied()) else {
        return (0.0, 0.0, 0.0);
    };
    let lowest = values.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lowest, median, highest)
}

/// The loss rate of a cell's runs, each `(lost, rows)`, per `scale` rows,
/// with its 95 % interval: a quasi-Poisson exact interval.
///
/// - The runs' counts are overdispersed (their variance is several times
///   their mean), so the total count `C` is treated as a Poisson count
///   scaled by the dispersion `φ` (McCullagh and Nelder, *Generalized Linear
///   Models*, 2nd ed., 1989, §4.5): `C / φ` "effective" events.
/// - `φ` is estimated from the runs (Pearson's statistic over `n - 1`), and
///   an estimate from 5 or 10 runs is itself uncertain: it is inflated by
///   `(t₀.₉₇₅,ₙ₋₁ / z₀.₉₇₅)²`, the factor by which Student's t widens a normal
///   interval when the variance is estimated.
/// - The bounds are Garwood's exact Poisson bounds on the effective count
///   (chi-square quantiles; Garwood, "Fiducial limits for the Poisson
///   distribution", Biometrika 28, 1936), scaled back: skewed like the counts
///   themselves, so a cell of a few lost rows gets a long upper tail and no
///   negative lower end.
/// - With no loss at all, the dispersion cannot be estimated: the bound is
///   Poisson's one-sided 95 % `-ln 0.05 · scale / rows` ≈ `3 · scale / rows`
///   (the "rule of three": Hanley and Lippman-Hand, JAMA 249, 1983), widened
///   by the same small-sample factor, since the runs' counts may be
///   overdispersed all the same (without it, 5 runs of one lost row a run on
///   average and an index of dispersion of 3.5 show no loss 6 % of the time,
///   and the bound then misses).
///
/// Why not the percentile bootstrap [`over_runs`]: simulated with Poisson
/// and negative binomial counts of these campaigns' shapes it covered 84 to
/// 91 % instead of 95 % over 10 runs, and a cell with no loss got
/// "0.00 to 0.00". Why not t on the runs' rates: a count of a few rows a run
/// is too skewed for it (82 % at 5 runs in the same simulation). The
/// coverage test below is the basis of the choice.
pub fn rate_over_runs(runs: &[(u64, u64)], scale: f64) -> Rate {
    let n = runs.len();
    let lost: u64 = runs.iter().map(|&(c, _)| c).sum();
    let rows: u64 = runs.iter().map(|&(_, r)| r).sum();
    let rates: Vec<f64> = runs
        .iter()
        .map(|&(c, r)| c as f64 * scale / r.max(1) as f64)
        .collect();
    let (min, median, max) = spread(&rates);
    let mut out = Rate {
        rate: 0.0,
        ci95: (0.0, 0.0),
        dispersion: 1.0,
        lost,
        rows,
        min,
        median,
        max,
        runs: n,
    };
    if rows == 0 {
        return out;
    }
    let per_row = scale / rows as f64;
    out.rate = lost as f64 * per_row;
    let inflate = if n >= 2 {
        (t_quantile(0.975, (n - 1) as f64) / Z975).powi(2)
    } else {
        1.0
    };
    if lost == 0 {
        out.ci95 = (0.0, -(0.05f64.ln()) * inflate * per_row);
        return out;
    }
    out.dispersion = dispersion(runs, lost, rows);
    let phi = out.dispersion * inflate;
    let effective = lost as f64 / phi;
    out.ci95 = (
        chi2_quantile(0.025, 2.0 * effective) / 2.0 * phi * per_row,
        chi2_quantile(0.975, 2.0 * effective + 2.0) / 2.0 * phi * per_row,
    );
    out
}

/// Pearson's dispersion statistic of the runs' counts against a common
/// rate, `Σ (cᵢ - eᵢ)² / eᵢ / (n - 1)` with `eᵢ` the run's rows times the
/// pooled rate; at least 1 (a cell less spread than Poisson is taken as
/// Poisson), and 1 with fewer than two runs.
fn dispersion(runs: &[(u64, u64)], lost: u64, rows: u64) -> f64 {
    if runs.len() < 2 {
        return 1.0;
    }
    let pooled = lost as f64 / rows as f64;
    let pearson: f64 = runs
        .iter()
        .map(|&(c, r)| (c as f64, r as f64 * pooled))
        .filter(|&(_, e)| e > 0.0)
        .map(|(c, e)| (c - e).powi(2) / e)
        .sum();
    (pearson / (runs.len() - 1) as f64).max(1.0)
}

/// A difference between two cells' loss rates, in their unit: the
/// difference, its 95 % interval and two-sided p value (is it zero?), and
/// its 90 % interval, which an equivalence test (two one-sided tests at 5 %)
/// compares with a margin stated before the runs ([`Difference::within`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    pub difference: f64,
    pub ci95: (f64, f64),
    pub ci90: (f64, f64),
    pub p: f64,
}

impl Difference {
    /// Is the difference shown to be smaller than `margin` either way? The
    /// 90 % interval lies inside `(-margin, margin)` (Schuirmann's two
    /// one-sided tests, J. Pharmacokinet. Biopharm. 15, 1987).
    pub fn within(&self, margin: f64) -> bool {
        -margin < self.ci90.0 && self.ci90.1 < margin
    }

    /// A difference `d` with standard error `se` on `df` degrees of freedom.
    fn from_t(d: f64, se: f64, df: f64) -> Difference {
        if se == 0.0 || !se.is_finite() {
            // No spread at all: the difference is what it is.
            let p = if d == 0.0 { 1.0 } else { 0.0 };
            return Difference {
                difference: d,
                ci95: (d, d),
                ci90: (d, d),
                p,
            };
        }
        let t = StudentsT::new(0.0, 1.0, df).expect("df > 0");
        let (h95, h90) = (t.inverse_cdf(0.975) * se, t.inverse_cdf(0.95) * se);
        Difference {
            difference: d,
            ci95: (d - h95, d + h95),
            ci90: (d - h90, d + h90),
            p: (2.0 * (1.0 - t.cdf((d / se).abs()))).min(1.0),
        }
    }
}

/// The mean and the sample variance (divisor `n - 1`) of `v`.
fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (
        m,
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0),
    )
}

/// Two cells run apart (other runs): Welch's t on the runs' rates `a` and
/// `b` (`mean(a) - mean(b)`), each side's variance of its mean at least the
/// Poisson variance of its pooled count (`floor_a`, `floor_b`: `max(C, 1) ·
/// scale² / rows²`), so that cells with no loss or identical runs do not
/// claim a precision their counts cannot have. `None` for fewer than two
/// runs on a side.
pub fn welch(a: &[f64], b: &[f64], floor_a: f64, floor_b: f64) -> Option<Difference> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let ((ma, va), (mb, vb)) = (mean_var(a), mean_var(b));
    let sa = (va / a.len() as f64).max(floor_a);
    let sb = (vb / b.len() as f64).max(floor_b);
    // Welch–Satterthwaite degrees of freedom.
    let df =
        (sa + sb).powi(2) / (sa.powi(2) / (a.len() - 1) as f64 + sb.powi(2) / (b.len() - 1) as f64);
    Some(Difference::from_t(ma - mb, (sa + sb).sqrt(), df))
}

/// Two pollers of the same runs (`a[i]` and `b[i]` from run i): the paired
/// t on the per-run differences, `mean(a - b)`. What the runs share (their
/// load, their start phase, the rows both lost) cancels out. The variance of
/// the mean difference is at least `floor`: the Poisson variance of the
/// rows on which the two differ (at least one), so that two pollers that
/// lost nothing, or the same rows in every run, do not claim a zero-width
/// difference. `None` for fewer than two pairs or lengths that differ.
pub fn paired(a: &[f64], b: &[f64], floor: f64) -> Option<Difference> {
    let n = a.len();
    if n < 2 || b.len() != n {
        return None;
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let (m, v) = mean_var(&d);
    Some(Difference::from_t(
        m,
        (v / n as f64).max(floor).sqrt(),
        (n - 1) as f64,
    ))
}

/// The ranks of `v`, 1-based, ties given their mean rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut out = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        for &k in &order[i..=j] {
            out[k] = (i + j) as f64 / 2.0 + 1.0;
        }
        i = j + 1;
    }
    out
}

/// Spearman's rank correlation of `x` and `y` (the same length, at least
/// 2): Pearson's correlation of their ranks; 0 when either is constant.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&ranks(x), &ranks(y))
}

/// Pearson's correlation of `a` and `b` (the same length); 0 when either is
/// constant.
fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let (ma, _) = mean_var(a);
    let (mb, _) = mean_var(b);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma).powi(2);
        sbb += (y - mb).powi(2);
    }
    if saa == 0.0 || sbb == 0.0 {
        0.0
    } else {
        sab / (saa * sbb).sqrt()
    }
}

/// Up to this many points [`spearman_p`] counts every ordering (9! =
/// 362,880 of them, each a pass over 9 ranks); from 10 on, Student's t.
const SPEARMAN_EXACT_UP_TO: usize = 9;

/// The two-sided p value of Spearman's rho of `x` and `y` (the same length,
/// at least 3) being zero. Up to 9 points it is exact: the share of the
/// orderings of `y`'s ranks whose |rho| is at least the observed one, ties
/// kept as mid-ranks (so 4 points in perfect order give 2/24, not 0); from
/// 10 on, [`correlation_p`]'s t approximation, which holds from about 10
/// points (Zar, "Significance testing of the Spearman rank correlation
/// coefficient", JASA 67, 1972).
pub fn spearman_p(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len();
    let observed = spearman(x, y);
    if n > SPEARMAN_EXACT_UP_TO {
        return correlation_p(observed, n);
    }
    let rx = ranks(x);
    let mut ry = ranks(y);
    // As extreme: |rho| at least the observed one, less a rounding tolerance.
    let bound = observed.abs() - 1e-9;
    let (mut extreme, mut total) = (0u64, 0u64);
    let mut count = |ry: &[f64]| {
        total += 1;
        if pearson(&rx, ry).abs() >= bound {
            extreme += 1;
        }
    };
    // Heap's algorithm, iteratively: every ordering of `ry` once.
    let mut c = vec![0usize; n];
    count(&ry);
    let mut i = 1;
    while i < n {
        if c[i] < i {
            ry.swap(if i % 2 == 0 { 0 } else { c[i] }, i);
            count(&ry);
            c[i] += 1;
            i = 1;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    extreme as f64 / total as f64
}

/// The two-sided p value of a correlation `r` over `n` (> 2) points being
/// zero: Student's t with `n - 2` degrees of freedom,
/// `t = r · sqrt((n - 2) / (1 - r²))` (for Spearman's rho an approximation
/// that holds from about 10 points).
pub fn correlation_p(r: f64, n: usize) -> f64 {
    if r.abs() >= 1.0 {
        return 0.0;
    }
    let df = (n - 2) as f64;
    let t = r * (df / (1.0 - r * r)).sqrt();
    let dist = StudentsT::new(0.0, 1.0, df).expect("df > 0");
    (2.0 * (1.0 - dist.cdf(t.abs()))).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::Rng;

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

    /// Negative binomial counts as a gamma-Poisson mixture: mean `mu`,
    /// variance `mu + a·mu²` (`a` = 1/k; Poisson when `a` is 0).
    fn count(rng: &mut ChaCha8Rng, mu: f64, a: f64) -> u64 {
        use rand_distr::{Distribution, Gamma, Poisson};
        let lambda = if a == 0.0 {
            mu
        } else {
            Gamma::new(1.0 / a, a * mu).unwrap().sample(rng)
        };
        if lambda <= 0.0 {
            return 0;
        }
        Poisson::new(lambda).unwrap().sample(rng) as u64
    }

    /// The coverage claim of [`rate_over_runs`]: over 2,000 seeded
    /// campaigns per shape, the 95 % interval holds the true rate at least
    /// 93 % of the time, for 5 and for 10 runs, for Poisson counts and for
    /// negative binomial ones with an index of dispersion (variance over
    /// mean) of 2 and 3.5 (the campaigns' five-poller cells measured about
    /// 3.5; 1/k capped at 2), from 0.3 to 40 lost rows a run. Runs differ
    /// in length (30,000 to 42,000 rows), as real runs do.
    #[test]
    fn the_rate_interval_covers_at_least_93_percent() {
        let mut rng = ChaCha8Rng::seed_from_u64(54);
        let mut worst = (1.0f64, String::new());
        for n in [5usize, 10] {
            for mu in [0.3, 1.0, 2.0, 5.0, 15.0, 40.0] {
                for index in [1.0, 2.0, 3.5] {
                    let a = f64::min(2.0, (index - 1.0) / mu);
                    let sims = 2_000;
                    let mut covered = 0;
                    for _ in 0..sims {
                        let runs: Vec<(u64, u64)> = (0..n)
                            .map(|_| {
                                let rows = rng.random_range(30_000..=42_000u64);
                                let mu_run = mu * rows as f64 / 36_000.0;
                                (count(&mut rng, mu_run, a), rows)
                            })
                            .collect();
                        let truth = mu / 36_000.0 * 100_000.0;
                        let r = rate_over_runs(&runs, 100_000.0);
                        covered += usize::from(r.ci95.0 <= truth && truth <= r.ci95.1);
                    }
                    let coverage = covered as f64 / sims as f64;
                    if coverage < worst.0 {
                        worst = (coverage, format!("n {n}, mean {mu}, index {index}"));
                    }
                }
            }
        }
        assert!(worst.0 >= 0.93, "coverage {} at {}", worst.0, worst.1);
    }

    #[test]
    fn no_loss_is_zero_at_most_the_rule_of_three() {
        // 10 runs of 36,000 rows: 3.0 / 360,000 rows is 0.83 per 100,000,
        // widened by (t(0.975, 9) / 1.96)² = 1.332 to 1.11.
        let r = rate_over_runs(&[(0, 36_000); 10], 100_000.0);
        assert_eq!((r.rate, r.ci95.0, r.lost, r.runs), (0.0, 0.0, 0, 10));
        assert!((r.ci95.1 - 0.832 * 1.332).abs() < 0.001, "{r:?}");
        // One run: no widening.
        let r = rate_over_runs(&[(0, 36_000)], 100_000.0);
        assert!((r.ci95.1 - 8.32).abs() < 0.01, "{r:?}");
        assert_eq!(rate_over_runs(&[], 100_000.0).runs, 0);
    }

    #[test]
    fn the_rate_is_pooled_and_overdispersion_widens_its_interval() {
        // 30 lost of 300,000 rows either way; the second cell's runs vary.
        let even = rate_over_runs(&[(10, 100_000); 3], 100_000.0);
        let uneven = rate_over_runs(&[(1, 100_000), (4, 100_000), (25, 100_000)], 100_000.0);
        assert_eq!((even.rate, uneven.rate), (10.0, 10.0));
        assert_eq!(even.dispersion, 1.0);
        // Pearson: (81 + 36 + 225) / 10 / 2 = 17.1.
        assert!((uneven.dispersion - 17.1).abs() < 1e-9, "{uneven:?}");
        assert!(even.ci95.0 < 10.0 && 10.0 < even.ci95.1);
        assert!(uneven.ci95.1 - uneven.ci95.0 > 3.0 * (even.ci95.1 - even.ci95.0));
        assert!(uneven.ci95.0 >= 0.0);
        assert_eq!((uneven.min, uneven.median, uneven.max), (1.0, 4.0, 25.0));
    }

    #[test]
    fn a_paired_difference_uses_the_spread_of_the_differences() {
        // The runs move both pollers alike: the differences are constant,
        // and only the floor is left: se 0.5, t(0.975, 2) = 4.303.
        let d = paired(&[10.0, 50.0, 90.0], &[8.0, 48.0, 88.0], 0.25).unwrap();
        assert_eq!(d.difference, 2.0);
        assert!((d.ci95.0 - (2.0 - 4.303 * 0.5)).abs() < 0.001, "{d:?}");
        // Differences 1 and 3: mean 2, se 1 (above the floor), t(0.975, 1) = 12.706.
        let d = paired(&[1.0, 3.0], &[0.0, 0.0], 0.01).unwrap();
        assert!((d.ci95.1 - (2.0 + 12.706)).abs() < 0.001, "{d:?}");
        // t = 2 on 1 df: p = 0.2952.
        assert!((d.p - 0.2952).abs() < 0.001, "{d:?}");
        // Nothing lost by either: 0, but not a zero-width 0.
        let d = paired(&[0.0; 5], &[0.0; 5], 1.0).unwrap();
        assert_eq!((d.difference, d.p), (0.0, 1.0));
        assert!(d.ci95.1 > 2.0, "{d:?}");
        assert_eq!(paired(&[1.0], &[0.0], 0.0), None);
        assert_eq!(paired(&[1.0, 2.0], &[0.0], 0.0), None);
    }

    #[test]
    fn welch_has_a_floor_and_an_equivalence_margin() {
        // Two cells that lost nothing: no difference, but not a precise one.
        let f = 1.0 * 1e10 / (360_000f64).powi(2);
        let d = welch(&[0.0; 10], &[0.0; 10], f, f).unwrap();
        assert_eq!((d.difference, d.p), (0.0, 1.0));
        assert!(d.ci95.1 > 0.3 && d.ci95.0 < -0.3, "{d:?}");
        assert!(d.within(1.0) && !d.within(0.3), "{d:?}");
        // Well apart: a small p; Welch's df from unequal spreads.
        let a = [10.0, 12.0, 11.0, 13.0, 9.0];
        let b = [1.0, 2.0, 1.5, 0.5, 2.5];
        let d = welch(&a, &b, 0.0, 0.0).unwrap();
        assert!((d.difference - 9.5).abs() < 1e-9 && d.p < 0.001, "{d:?}");
        assert!(d.ci95.0 < d.ci90.0 && d.ci90.1 < d.ci95.1);
        assert_eq!(welch(&[1.0], &b, 0.0, 0.0), None);
    }

    #[test]
    fn spearman_ranks_with_ties_and_its_p() {
        assert_eq!(
            spearman(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 45.0]),
            1.0
        );
        assert_eq!(spearman(&[1.0, 2.0, 3.0, 4.0], &[4.0, 3.0, 2.0, 1.0]), -1.0);
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 2.0]), vec![3.5, 1.0, 3.5, 2.0]);
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[7.0, 7.0, 7.0]), 0.0);
        // r 0.5 over 12 points: t = 0.5 · sqrt(10 / 0.75) = 1.826, p = 0.098.
        assert!((correlation_p(0.5, 12) - 0.098).abs() < 0.001);
        assert_eq!(correlation_p(1.0, 5), 0.0);
    }

    /// Few points: the exact share of orderings, where the t approximation
    /// would call a perfect order of 4 points certain.
    #[test]
    fn spearman_p_is_exact_up_to_nine_points() {
        let up = [1.0, 2.0, 3.0, 4.0];
        // 2 of the 24 orderings of 4 ranks have |rho| = 1.
        assert!((spearman_p(&up, &[3.0, 5.0, 8.0, 9.0]) - 2.0 / 24.0).abs() < 1e-12);
        assert!((spearman_p(&up, &[9.0, 8.0, 5.0, 3.0]) - 2.0 / 24.0).abs() < 1e-12);
        // 5 points: 2 of 120 with |rho| = 1; rho 0.9 (one adjacent swap) is
        // reached by the identity, the 4 adjacent swaps and their 5 mirrors:
        // 10 of 120 (0.083, the tables' two-sided value).
        let five = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert!((spearman_p(&five, &five) - 2.0 / 120.0).abs() < 1e-12);
        assert!((spearman_p(&five, &[2.0, 1.0, 3.0, 4.0, 5.0]) - 10.0 / 120.0).abs() < 1e-12);
        // No association at all: every ordering is at least as extreme.
        assert_eq!(spearman_p(&five, &[3.0, 3.0, 3.0, 3.0, 3.0]), 1.0);
        // Ties stay mid-ranks: y = (1, 1, 2, 2) against x in order has rho
        // 0.894; of the 24 orderings 8 reach it (either pair of tied ranks
        // at either end, each 2 · 2 ways).
        assert!((spearman_p(&up, &[1.0, 1.0, 2.0, 2.0]) - 8.0 / 24.0).abs() < 1e-12);
        // From 10 points on, the t approximation.
        let ten: Vec<f64> = (0..10).map(f64::from).collect();
        let y: Vec<f64> = [1, 0, 2, 4, 3, 5, 7, 6, 9, 8].map(f64::from).to_vec();
        assert_eq!(spearman_p(&ten, &y), correlation_p(spearman(&ten, &y), 10));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The exact p is a share of orderings: at least 1/n! (the observed
        /// ordering reaches its own rho), at most 1, and no larger
        /// for a stronger rank order of the same x.
        #[test]
        fn spearman_p_is_a_share_of_orderings(y in prop::collection::vec(0u8..6, 4..8)) {
            let x: Vec<f64> = (0..y.len()).map(|i| i as f64).collect();
            let y: Vec<f64> = y.into_iter().map(f64::from).collect();
            let p = spearman_p(&x, &y);
            let orderings: f64 = (1..=y.len()).map(|i| i as f64).product();
            prop_assert!(p <= 1.0 && p * orderings >= 1.0 - 1e-9, "{p}");
            prop_assert!(spearman_p(&x, &x) <= p + 1e-12);
        }
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
