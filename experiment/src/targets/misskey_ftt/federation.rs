//! When a remote note arrives, after its `published` time: the federation
//! delay and the late share, the three inputs the home timeline's figures
//! follow from (docs/misskey-ftt.md, "What the figures rest on"). Pure: the
//! draws come from the caller's seeded generator.
//!
//! None of these is measured from a real instance: they are chosen, and each
//! is a flag (`--federation-delay`, `--federation-delay-dist`, `--late-share`,
//! `--late-max`) so that a figure can be re-measured without it.

use super::push::RECENT_MS;
use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};

/// `--federation-delay-dist`: the shape of the ordinary federation delay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DelayDist {
    /// Memoryless, the default (the mean is its only parameter).
    #[default]
    Exponential,
    /// Lognormal with sigma [`LOGNORMAL_SIGMA`] and the same mean: a longer
    /// right tail and fewer near-zero delays than the exponential.
    Lognormal,
}

impl std::str::FromStr for DelayDist {
    type Err = String;

    fn from_str(s: &str) -> Result<DelayDist, String> {
        match s {
            "exponential" => Ok(DelayDist::Exponential),
            "lognormal" => Ok(DelayDist::Lognormal),
            _ => Err(format!(
                "bad --federation-delay-dist '{s}': expected exponential or lognormal"
            )),
        }
    }
}

/// The lognormal's sigma (of the delay's logarithm). With sigma 1 the median
/// is the mean times exp(-1/2), about 0.61 of it, and 3.0 % of delays are
/// over 4 times the mean (the exponential: 1.8 %).
pub const LOGNORMAL_SIGMA: f64 = 1.0;

/// An ordinary (not late) delay is cut just under Misskey's 3 minutes, so
/// that only the late share takes the `LINDEX` path of `push`.
pub const ORDINARY_CAP_MS: i64 = RECENT_MS - 1_000;

/// The late notes' default ceiling, 9 minutes (`--late-max`).
pub const LATE_MAX_DEFAULT_MS: u64 = 540_000;

/// The ordinary delay, drawn with a given mean.
#[derive(Clone, Debug)]
pub enum Delay {
    Exponential(Exp<f64>),
    Lognormal(LogNormal<f64>),
}

impl Delay {
    /// The delay of `dist` with mean `mean_ms` (at least 1 ms). The
    /// lognormal keeps the mean: mu = ln(mean) - sigma^2 / 2.
    pub fn new(dist: DelayDist, mean_ms: u64) -> Delay {
        let mean = mean_ms.max(1) as f64;
        match dist {
            DelayDist::Exponential => Delay::Exponential(Exp::new(1.0 / mean).expect("mean > 0")),
            DelayDist::Lognormal => Delay::Lognormal(
                LogNormal::new(mean.ln() - LOGNORMAL_SIGMA.powi(2) / 2.0, LOGNORMAL_SIGMA)
                    .expect("sigma > 0"),
            ),
        }
    }

    /// One delay, ms, before the cut at [`ORDINARY_CAP_MS`].
    pub fn sample_raw(&self, rng: &mut impl Rng) -> f64 {
        match self {
            Delay::Exponential(d) => d.sample(rng),
            Delay::Lognormal(d) => d.sample(rng),
        }
    }
}

/// The late notes' floor for a ceiling of `late_max_ms`: 181 s (just past
/// Misskey's 3 minutes, so that a late note takes the `LINDEX` path) when
/// the ceiling is at least twice that, else half the ceiling (a ceiling of
/// 3 minutes: late notes 90 to 180 s, none on the `LINDEX` path). The
/// default ceiling, 540 s, keeps today's 181 to 540 s.
pub fn late_floor_ms(late_max_ms: u64) -> u64 {
    ((RECENT_MS + 1_000) as u64).min(late_max_ms / 2)
}

/// How a remote note arrives: its delay, the late share and their ceiling.
#[derive(Clone, Debug)]
pub struct Arrival {
    pub delay: Delay,
    /// Share of remote notes that are late, 0 to 1.
    pub late_share: f64,
    /// Late notes arrive uniformly from [`late_floor_ms`] up to this.
    pub late_max_ms: u64,
}

impl Arrival {
    /// ms from a remote note's `published` time to its arrival: late with
    /// probability `late_share` (uniform on `[floor, late_max)`), else the
    /// ordinary delay, cut at [`ORDINARY_CAP_MS`]. The draws are made in the
    /// order they always were, so the defaults give the same notes as
    /// before the flags existed.
    pub fn lateness_ms(&self, rng: &mut impl Rng) -> i64 {
        let late = rng.random_bool(self.late_share.clamp(0.0, 1.0));
        if late {
            let floor = late_floor_ms(self.late_max_ms);
            rng.random_range(floor..self.late_max_ms.max(floor + 1)) as i64
        } else {
            (self.delay.sample_raw(rng) as i64).min(ORDINARY_CAP_MS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn mean_of(dist: DelayDist, mean_ms: u64, seed: u64) -> f64 {
        let d = Delay::new(dist, mean_ms);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = 200_000;
        (0..n).map(|_| d.sample_raw(&mut rng)).sum::<f64>() / n as f64
    }

    /// The lognormal keeps the mean it is given. With sigma 1 the sample
    /// mean's sd is about 1.3 times the mean over sqrt(200,000): 0.3 %; on
    /// this fixed seed it is within 1 %.
    #[test]
    fn the_lognormal_keeps_the_mean() {
        for mean in [500, 2_000, 10_000] {
            let m = mean_of(DelayDist::Lognormal, mean, 7);
            assert!((m / mean as f64 - 1.0).abs() < 0.01, "{mean}: {m}");
            let e = mean_of(DelayDist::Exponential, mean, 7);
            assert!((e / mean as f64 - 1.0).abs() < 0.01, "{mean}: {e}");
        }
        // Same mean, another shape: the lognormal's median is lower.
        let d = Delay::new(DelayDist::Lognormal, 2_000);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut v: Vec<f64> = (0..100_001).map(|_| d.sample_raw(&mut rng)).collect();
        v.sort_by(f64::total_cmp);
        let median = v[50_000];
        assert!(
            (median / (2_000.0 * (-0.5f64).exp()) - 1.0).abs() < 0.02,
            "{median}"
        );
    }

    #[test]
    fn the_late_window() {
        assert_eq!(late_floor_ms(LATE_MAX_DEFAULT_MS), 181_000);
        assert_eq!(late_floor_ms(30 * 60_000), 181_000);
        assert_eq!(late_floor_ms(3 * 60_000), 90_000);
        let arrival = |late_share, late_max_ms| Arrival {
            delay: Delay::new(DelayDist::Exponential, 2_000),
            late_share,
            late_max_ms,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let all_late = arrival(1.0, 600_000);
        for _ in 0..10_000 {
            let l = all_late.lateness_ms(&mut rng);
            assert!((181_000..600_000).contains(&l), "{l}");
        }
        let none_late = arrival(0.0, 600_000);
        for _ in 0..10_000 {
            assert!(none_late.lateness_ms(&mut rng) <= ORDINARY_CAP_MS);
        }
        let three_min = arrival(1.0, 180_000);
        for _ in 0..10_000 {
            let l = three_min.lateness_ms(&mut rng);
            assert!((90_000..180_000).contains(&l), "{l}");
        }
    }

    /// The defaults draw what the creators drew before the flags: the late
    /// coin, then `random_range(181 s..540 s)` or the exponential.
    #[test]
    fn the_defaults_keep_the_old_stream() {
        let arrival = Arrival {
            delay: Delay::new(DelayDist::Exponential, 2_000),
            late_share: 0.5,
            late_max_ms: LATE_MAX_DEFAULT_MS,
        };
        let exp = Exp::new(1.0 / 2_000.0).unwrap();
        let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(9), ChaCha8Rng::seed_from_u64(9));
        for _ in 0..1_000 {
            let old = if b.random_bool(0.5) {
                b.random_range(RECENT_MS + 1_000..RECENT_MS * 3)
            } else {
                (exp.sample(&mut b) as i64).min(RECENT_MS - 1_000)
            };
            assert_eq!(arrival.lateness_ms(&mut a), old);
        }
    }
}
