//! The writers' pacing, shared by the database targets' writers.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp1};

/// How a writer's writes are spaced (`--arrivals`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential gaps of mean `period_ms`: a Poisson process per writer,
    /// as independent clients arrive (no two writers keep a common phase).
    #[default]
    Poisson,
    /// One write every `period_ms` exactly, the writers offset by equal
    /// shares of the period (the harness's behaviour before `--arrivals`).
    Grid,
}

impl std::str::FromStr for Arrivals {
    type Err = String;

    fn from_str(s: &str) -> Result<Arrivals, String> {
        match s {
            "poisson" => Ok(Arrivals::Poisson),
            "grid" => Ok(Arrivals::Grid),
            _ => Err(format!(
                "unknown --arrivals '{s}': expected poisson (exponential gaps, the default) or grid"
            )),
        }
    }
}

impl std::fmt::Display for Arrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arrivals::Poisson => "poisson",
            Arrivals::Grid => "grid",
        })
    }
}

/// The seed of writer `index`'s arrivals in a run seeded `seed`: one stream
/// per writer, apart from the writers' other draws.
pub fn arrival_seed(seed: u64, index: u32) -> u64 {
    since_id::seed::stream(seed, 0x4152_5249_5641_4c53, index)
}

/// A writer's pace: on a grid, one write every `period_ms` from `start_ms`;
/// in Poisson arrivals, each write an exponential gap of mean `period_ms`
/// after the one before, drawn from the pace's own seeded RNG. A writer that
/// fell more than a second behind (a stall) starts afresh from now instead
/// of bursting to catch up. Pure: the time is passed in.
#[derive(Clone, Debug)]
pub struct WriterPace {
    base_ms: f64,
    period_ms: f64,
    written: u64,
    /// Poisson arrivals: the next write's due time and the gaps' RNG.
    poisson: Option<(f64, ChaCha8Rng)>,
}

impl WriterPace {
    /// A grid from `start_ms`.
    pub fn new(start_ms: f64, period_ms: f64) -> WriterPace {
        WriterPace {
            base_ms: start_ms,
            period_ms,
            written: 0,
            poisson: None,
        }
    }

    /// Poisson arrivals of mean gap `period_ms` from `start_ms` (the first
    /// write one gap after it), their gaps drawn from a ChaCha8 stream seeded
    /// `seed`.
    pub fn poisson(start_ms: f64, period_ms: f64, seed: u64) -> WriterPace {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let first = start_ms + gap(&mut rng, period_ms);
        WriterPace {
            base_ms: start_ms,
            period_ms,
            written: 0,
            poisson: Some((first, rng)),
        }
    }

    /// The pace of writer `index` of `writers` that share `rate_per_s`
    /// between them: each writes every `writers / rate` s on average. On a
    /// grid the writers are offset from each other by an equal share of that
    /// period; in Poisson arrivals each draws its own gaps, seeded by
    /// [`arrival_seed`]`(seed, index)`.
    pub fn of_writer(
        arrivals: Arrivals,
        (index, writers): (u32, u32),
        rate_per_s: f64,
        now_ms: i64,
        seed: u64,
    ) -> WriterPace {
        let period_ms = writers as f64 * 1000.0 / rate_per_s.max(0.001);
        match arrivals {
            Arrivals::Grid => {
                let phase = period_ms * index as f64 / writers as f64;
                WriterPace::new(now_ms as f64 + phase, period_ms)
            }
            Arrivals::Poisson => {
                WriterPace::poisson(now_ms as f64, period_ms, arrival_seed(seed, index))
            }
        }
    }

    /// How long to wait at `now_ms` before the next write (0: now).
    pub fn wait_ms(&mut self, now_ms: f64) -> u64 {
        if let Some((due, _)) = &mut self.poisson {
            if now_ms > *due + 1000.0 {
                *due = now_ms;
            }
            return (*due - now_ms).max(0.0) as u64;
        }
        let due = self.base_ms + self.written as f64 * self.period_ms;
        if now_ms > due + 1000.0 {
            self.base_ms = now_ms;
            self.written = 0;
            0
        } else {
            (due - now_ms).max(0.0) as u64
        }
    }

    /// Counts a write made.
    pub fn wrote(&mut self) {
        self.written += 1;
        if let Some((due, rng)) = &mut self.poisson {
            *due += gap(rng, self.period_ms);
        }
    }
}

/// An exponential gap of mean `mean_ms` (inverse transform of `Exp1`, the
/// standard exponential, as rand_distr defines it).
fn gap(rng: &mut ChaCha8Rng, mean_ms: f64) -> f64 {
    let e: f64 = Exp1.sample(rng);
    e * mean_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_keeps_its_period_and_starts_afresh_after_a_stall() {
        let mut pace = WriterPace::new(1000.0, 100.0);
        assert_eq!(pace.wait_ms(990.0), 10, "before its start");
        pace.wrote();
        assert_eq!(
            pace.wait_ms(1040.0),
            60,
            "the next is one period after the first"
        );
        pace.wrote();
        assert_eq!(pace.wait_ms(1250.0), 0, "late by 50 ms: now, no wait");
        pace.wrote();
        // Stalled 2 s: it starts afresh from now instead of 20 writes at once.
        assert_eq!(pace.wait_ms(3500.0), 0);
        pace.wrote();
        assert_eq!(pace.wait_ms(3500.0), 100);
    }

    /// Grid arrivals are the schedule of before `--arrivals`: writer i of n
    /// at `now + i * period / n + k * period`, whatever the seed.
    #[test]
    fn grid_arrivals_are_the_old_schedule() {
        for seed in [1, 2] {
            let mut pace = WriterPace::of_writer(Arrivals::Grid, (1, 4), 40.0, 10_000, seed);
            // 4 writers at 40/s: each every 100 ms, writer 1 a quarter late.
            let mut dues = Vec::new();
            let mut now = 10_000.0;
            for _ in 0..4 {
                let wait = pace.wait_ms(now);
                now += wait as f64;
                dues.push(now);
                pace.wrote();
            }
            assert_eq!(dues, [10_025.0, 10_125.0, 10_225.0, 10_325.0]);
        }
    }

    /// The gaps a Poisson pace makes, writing the moment each is due.
    fn poisson_gaps(seed: u64, n: usize) -> Vec<f64> {
        let mut pace = WriterPace::poisson(0.0, 50.0, seed);
        let mut dues = Vec::with_capacity(n + 1);
        for _ in 0..=n {
            let (due, _) = pace.poisson.as_ref().unwrap();
            dues.push(*due);
            pace.wrote();
        }
        dues.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Exponential gaps of mean 50 ms: over 10,000 draws of this fixed seed
    /// the mean is within 2 % of it (an exact property of the seed's stream,
    /// not a timing threshold), and every gap is positive.
    #[test]
    fn poisson_gaps_average_the_period() {
        let gaps = poisson_gaps(7, 10_000);
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 50.0).abs() < 1.0, "mean gap {mean}");
        assert!(gaps.iter().all(|&g| g >= 0.0));
        // Not a grid: the gaps spread as an exponential's do (sd = mean).
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((var.sqrt() - 50.0).abs() < 2.5, "sd {}", var.sqrt());
    }

    #[test]
    fn the_same_seed_gives_the_same_gaps_and_writers_differ() {
        assert_eq!(poisson_gaps(3, 100), poisson_gaps(3, 100));
        assert_ne!(poisson_gaps(3, 100), poisson_gaps(4, 100));
        assert_ne!(arrival_seed(1, 0), arrival_seed(1, 1));
        // Not the next run's writer before it: runs share no arrivals.
        assert_ne!(arrival_seed(1, 1), arrival_seed(2, 0));
    }

    #[test]
    fn a_poisson_writer_waits_for_its_draw_and_starts_afresh_after_a_stall() {
        let mut pace = WriterPace::poisson(1000.0, 100.0, 1);
        let first = pace.poisson.as_ref().unwrap().0;
        assert!(first >= 1000.0);
        assert_eq!(pace.wait_ms(1000.0), (first - 1000.0) as u64);
        pace.wrote();
        // Stalled far past its next due time: now, not a burst.
        assert_eq!(pace.wait_ms(first + 5000.0), 0);
        pace.wrote();
        assert!(pace.poisson.as_ref().unwrap().0 >= first + 5000.0);
    }

    #[test]
    fn arrivals_parse_and_print() {
        for a in [Arrivals::Poisson, Arrivals::Grid] {
            assert_eq!(a.to_string().parse::<Arrivals>().unwrap(), a);
        }
        assert!(
            "uniform"
                .parse::<Arrivals>()
                .unwrap_err()
                .contains("--arrivals")
        );
    }
}
