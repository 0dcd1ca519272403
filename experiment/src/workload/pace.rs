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
    /// Bursts: the run alternates on and off spells, their lengths
    /// exponential of mean [`SPELL_MS`], one sequence for the whole run
    /// (seeded by the run's seed, so that every writer bursts at once);
    /// in an on spell each writer writes in Poisson arrivals at twice its
    /// rate, in an off spell not at all. The mean rate is the one asked.
    Bursty,
}

/// The mean length of a bursty run's on and off spells, ms: an input, not a
/// measurement (docs/assumptions.md).
pub const SPELL_MS: f64 = 1000.0;

impl std::str::FromStr for Arrivals {
    type Err = String;

    fn from_str(s: &str) -> Result<Arrivals, String> {
        match s {
            "poisson" => Ok(Arrivals::Poisson),
            "grid" => Ok(Arrivals::Grid),
            "bursty" => Ok(Arrivals::Bursty),
            _ => Err(format!(
                "unknown --arrivals '{s}': expected poisson (exponential gaps, the default), grid or bursty"
            )),
        }
    }
}

impl std::fmt::Display for Arrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arrivals::Poisson => "poisson",
            Arrivals::Grid => "grid",
            Arrivals::Bursty => "bursty",
        })
    }
}

/// The seed of writer `index`'s arrivals in a run seeded `seed`: one stream
/// per writer, apart from the writers' other draws.
pub fn arrival_seed(seed: u64, index: u32) -> u64 {
    since_id::seed::stream(seed, 0x4152_5249_5641_4c53, index)
}

/// The seed of a bursty run's spells: one for all its writers.
fn spell_seed(seed: u64) -> u64 {
    since_id::seed::stream(seed, 0x5350_454c_4c53, 0)
}

/// A bursty run's on and off spells from its start, each exponential of
/// mean [`SPELL_MS`]; every writer walks its own copy of the same sequence.
#[derive(Clone, Debug)]
struct Spells {
    rng: ChaCha8Rng,
    on: bool,
    /// The end of the current spell, ms.
    ends_ms: f64,
}

impl Spells {
    /// The run's spells from `start_ms`, an on spell first.
    fn new(start_ms: f64, seed: u64) -> Spells {
        let mut rng = ChaCha8Rng::seed_from_u64(spell_seed(seed));
        let ends_ms = start_ms + gap(&mut rng, SPELL_MS);
        Spells {
            rng,
            on: true,
            ends_ms,
        }
    }

    /// Whether `t_ms` lies in an on spell; times asked never go back.
    fn on_at(&mut self, t_ms: f64) -> bool {
        while t_ms >= self.ends_ms {
            self.on = !self.on;
            self.ends_ms += gap(&mut self.rng, SPELL_MS);
        }
        self.on
    }
}

/// Poisson arrivals, perhaps within spells: the next write's due time, the
/// gaps' RNG and mean, and a bursty run's spells (a due time drawn in an
/// off spell is passed over: thinning, as a modulated Poisson process is drawn).
#[derive(Clone, Debug)]
struct Draws {
    due_ms: f64,
    rng: ChaCha8Rng,
    mean_ms: f64,
    spells: Option<Spells>,
}

impl Draws {
    fn new(start_ms: f64, mean_ms: f64, seed: u64, spells: Option<Spells>) -> Draws {
        let mut draws = Draws {
            due_ms: start_ms,
            rng: ChaCha8Rng::seed_from_u64(seed),
            mean_ms,
            spells,
        };
        draws.advance();
        draws
    }

    /// The next due time: a gap after the last, in an on spell if any.
    fn advance(&mut self) {
        loop {
            self.due_ms += gap(&mut self.rng, self.mean_ms);
            if self.spells.as_mut().is_none_or(|s| s.on_at(self.due_ms)) {
                return;
            }
        }
    }
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
    /// Poisson or bursty arrivals: their draws.
    poisson: Option<Draws>,
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
        WriterPace {
            base_ms: start_ms,
            period_ms,
            written: 0,
            poisson: Some(Draws::new(start_ms, period_ms, seed, None)),
        }
    }

    /// Bursty arrivals of mean gap `period_ms` from `start_ms`: gaps of half
    /// that mean, seeded `seed`, kept only in the on spells of the run
    /// seeded `run_seed` ([`Arrivals::Bursty`]).
    fn bursty(start_ms: f64, period_ms: f64, seed: u64, run_seed: u64) -> WriterPace {
        let spells = Spells::new(start_ms, run_seed);
        WriterPace {
            base_ms: start_ms,
            period_ms,
            written: 0,
            poisson: Some(Draws::new(start_ms, period_ms / 2.0, seed, Some(spells))),
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
            Arrivals::Bursty => {
                WriterPace::bursty(now_ms as f64, period_ms, arrival_seed(seed, index), seed)
            }
        }
    }

    /// How long to wait at `now_ms` before the next write (0: now).
    pub fn wait_ms(&mut self, now_ms: f64) -> u64 {
        if let Some(draws) = &mut self.poisson {
            if now_ms > draws.due_ms + 1000.0 {
                draws.due_ms = now_ms;
            }
            return (draws.due_ms - now_ms).max(0.0) as u64;
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
        if let Some(draws) = &mut self.poisson {
            draws.advance();
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
            dues.push(pace.poisson.as_ref().unwrap().due_ms);
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
        let first = pace.poisson.as_ref().unwrap().due_ms;
        assert!(first >= 1000.0);
        assert_eq!(pace.wait_ms(1000.0), (first - 1000.0) as u64);
        pace.wrote();
        // Stalled far past its next due time: now, not a burst.
        assert_eq!(pace.wait_ms(first + 5000.0), 0);
        pace.wrote();
        assert!(pace.poisson.as_ref().unwrap().due_ms >= first + 5000.0);
    }

    #[test]
    fn arrivals_parse_and_print() {
        for a in [Arrivals::Poisson, Arrivals::Grid, Arrivals::Bursty] {
            assert_eq!(a.to_string().parse::<Arrivals>().unwrap(), a);
        }
        assert!(
            "uniform"
                .parse::<Arrivals>()
                .unwrap_err()
                .contains("--arrivals")
        );
    }

    /// A writer's write times over `until_ms`, writing the moment each is due.
    fn writes(mut pace: WriterPace, until_ms: f64) -> Vec<f64> {
        let mut now = 0.0;
        let mut out = Vec::new();
        loop {
            now += pace.wait_ms(now) as f64;
            now = now.max(pace.poisson.as_ref().map_or(now, |d| d.due_ms));
            if now > until_ms {
                return out;
            }
            out.push(now);
            pace.wrote();
        }
    }

    /// Bursty writers write only in the run's on spells, all of them in
    /// the same spells, at the asked rate on average; the spells are the
    /// run's seed's (a fixed seed: exact properties of its streams).
    #[test]
    fn bursty_writers_burst_together_at_the_asked_mean_rate() {
        let (seed, writers, rate) = (5, 4, 40.0);
        let horizon = 1_000_000.0;
        let all: Vec<Vec<f64>> = (0..writers)
            .map(|i| {
                let pace = WriterPace::of_writer(Arrivals::Bursty, (i, writers), rate, 0, seed);
                writes(pace, horizon)
            })
            .collect();
        assert_ne!(all[0], all[1], "each writer draws its own gaps");
        let mut spells = Spells::new(0.0, seed);
        let mut times: Vec<f64> = all.concat();
        times.sort_by(f64::total_cmp);
        assert!(
            times.iter().all(|&t| spells.on_at(t)),
            "a write in an off spell"
        );
        // 40/s over 1,000 s: 40,000 asked; the spells' lengths vary, so the
        // count does too, by a few per cent at this length.
        let n = times.len() as f64;
        assert!((n / 40_000.0 - 1.0).abs() < 0.05, "{n} writes");
        // Bursts: a second's count varies far more than a Poisson stream's
        // (index of dispersion 1); here about 2 * rate * SPELL_MS / 1000.
        let mut per_s = vec![0.0f64; (horizon / 1000.0) as usize];
        for t in &times {
            per_s[(*t / 1000.0) as usize] += 1.0;
        }
        let mean = per_s.iter().sum::<f64>() / per_s.len() as f64;
        let var = per_s.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / per_s.len() as f64;
        assert!(var / mean > 10.0, "index of dispersion {}", var / mean);
        // Another run's seed, other spells.
        let other = writes(
            WriterPace::of_writer(Arrivals::Bursty, (0, writers), rate, 0, seed + 1),
            horizon,
        );
        assert_ne!(other, all[0]);
    }
}
