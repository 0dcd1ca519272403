//! The machine's load during a real-time run (issue 34): the shape of the
//! `machine_load` object a run keeps in `runs.config` (docs/rundb.md), and
//! the pure summaries behind it: nearest-rank percentiles over a bounded
//! histogram, the share of CPU time stolen between two readings of
//! `/proc/stat`, and the reading of `/proc/loadavg` and `/proc/stat` text.
//! No I/O and no clock: the experiment's `load` module reads the files and
//! the clock and hands their text and times here; `analyze` reads the object
//! back ([`crate::load`]) and prints it in the report's header.
//!
//! The key is `machine_load`, not `load`: misskey-ftt's configuration already
//! has a `load` (its creators' rates).

use serde::{Deserialize, Serialize};

/// The key of `runs.config` that holds a run's [`MachineLoad`].
pub const CONFIG_KEY: &str = "machine_load";

/// A tick is counted late when it woke more than this after it was due.
pub const LATE_TICK_MS: i64 = 10;

/// What the machine was doing while a real-time run ran. A virtual run has
/// none (it reads no wall clock, so that a seed gives the same database).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineLoad {
    /// `std::thread::available_parallelism` when the run started.
    pub cores: u32,
    /// At the start, each minute and at the end.
    pub samples: Vec<LoadSample>,
    /// The harness's own CPU time over the run, user + system (getrusage of
    /// the process), ms.
    pub harness_cpu_ms: u64,
    /// Wall time from the first sample to the last, ms.
    pub wall_ms: u64,
    /// The pollers' ticks against their due times; `None` if no poller
    /// ticked on the shared schedule.
    pub ticks: Option<Lateness>,
    /// A database target's writers; `None` for the simulator.
    pub writers: Option<WritersLoad>,
}

/// One reading of the machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadSample {
    pub at_ms: i64,
    /// `/proc/loadavg`'s first field (runnable and uninterruptible tasks,
    /// averaged over one minute); `None` where the file cannot be read.
    pub load_avg_1m: Option<f64>,
    /// The share of all CPU time that was steal (time the hypervisor gave
    /// another guest) since the previous sample, or since boot for the
    /// first; `None` where `/proc/stat` cannot be read.
    pub steal_share: Option<f64>,
}

/// How late the pollers' ticks woke after they were due, ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    pub ticks: u64,
    /// Ticks that woke more than [`LATE_TICK_MS`] after they were due.
    pub late: u64,
    pub late_over_ms: i64,
    pub p50_ms: i64,
    pub p99_ms: i64,
    pub max_ms: i64,
}

/// A database target's writers: what they were asked and what they did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WritersLoad {
    /// Rows (notes) per second asked of all writers together.
    pub asked_per_s: f64,
    /// Commits per second over the writing time.
    pub achieved_per_s: f64,
    pub commits: u64,
    /// From the transaction's start to COMMIT returned (the bracket of
    /// `writer_brackets`; for misskey-ftt, the note's INSERT), ms.
    pub commit_p50_ms: Option<i64>,
    pub commit_p99_ms: Option<i64>,
    /// The row lock waits over the run, where the server counts them
    /// (MariaDB's InnoDB); `None` where it does not (PostgreSQL keeps no
    /// cumulative count of lock waits: `pg_stat_database` counts deadlocks
    /// only) or for a run recorded before they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_waits: Option<LockWaits>,
}

/// Row lock waits over a run: the difference of InnoDB's cumulative
/// `Innodb_row_lock_waits` and `Innodb_row_lock_time` (ms) between the
/// writers' start and their end, on a server the run has to itself
/// (<https://mariadb.com/kb/en/innodb-status-variables/>).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockWaits {
    /// Times a statement waited for a row lock.
    pub waits: u64,
    /// The time spent waiting, in all, ms.
    pub wait_ms: u64,
}

impl LockWaits {
    /// What happened between two readings of the cumulative counters
    /// (`waits`, `wait_ms`); a counter that went back (a server restarted
    /// between them) gives `None`, not a made-up difference.
    pub fn between(start: (u64, u64), end: (u64, u64)) -> Option<LockWaits> {
        Some(LockWaits {
            waits: end.0.checked_sub(start.0)?,
            wait_ms: end.1.checked_sub(start.1)?,
        })
    }
}

impl WritersLoad {
    /// The writers' account over `writing_ms` of writing.
    pub fn of(asked_per_s: f64, latencies: &Histogram, writing_ms: u64) -> WritersLoad {
        let commits = latencies.count();
        WritersLoad {
            asked_per_s,
            achieved_per_s: commits as f64 * 1000.0 / writing_ms.max(1) as f64,
            commits,
            commit_p50_ms: latencies.percentile(0.50),
            commit_p99_ms: latencies.percentile(0.99),
            lock_waits: None,
        }
    }

    /// How far short of the asked rate the writers fell, as a share of it
    /// (0 when they met it or went faster).
    pub fn shortfall(&self) -> f64 {
        if self.asked_per_s <= 0.0 {
            return 0.0;
        }
        ((self.asked_per_s - self.achieved_per_s) / self.asked_per_s).max(0.0)
    }
}

impl MachineLoad {
    /// The highest one-minute load average of the samples.
    pub fn max_load_avg(&self) -> Option<f64> {
        self.samples
            .iter()
            .filter_map(|s| s.load_avg_1m)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    }

    /// The highest steal share of the samples.
    pub fn max_steal_share(&self) -> Option<f64> {
        self.samples
            .iter()
            .filter_map(|s| s.steal_share)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    }

    /// The harness's CPU time as a share of one core over the run.
    pub fn harness_cpu_share(&self) -> f64 {
        self.harness_cpu_ms as f64 / self.wall_ms.max(1) as f64
    }

    /// Why a campaign should not trust this run's figures as they stand:
    /// writers more than 5 % short of the asked rate, or a load average
    /// above the core count at some sample. Empty when neither.
    pub fn flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if let Some(w) = &self.writers
            && w.shortfall() > 0.05
        {
            flags.push(format!(
                "writers {:.0}/s of {:.0}/s asked",
                w.achieved_per_s, w.asked_per_s
            ));
        }
        if let Some(load) = self.max_load_avg()
            && load > self.cores as f64
        {
            flags.push(format!("load average {load:.2} > {} cores", self.cores));
        }
        flags
    }

    /// The object kept in `runs.config` of a run whose configuration is
    /// `config` (JSON), or `None` if it has none or cannot be read.
    pub fn from_config(config: &str) -> Option<MachineLoad> {
        let value: serde_json::Value = serde_json::from_str(config).ok()?;
        serde_json::from_value(value.get(CONFIG_KEY)?.clone()).ok()
    }

    /// The report's header lines (`analyze`).
    pub fn header_lines(&self) -> Vec<String> {
        let load = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let loads = |s: Option<&LoadSample>| load(s.and_then(|s| s.load_avg_1m));
        let mut lines = vec![format!(
            "load       {} cores; load average (1 min) {} at the start, {} at most, {} at the end ({} samples); steal up to {}; harness CPU {:.1} s ({:.0}% of a core)",
            self.cores,
            loads(self.samples.first()),
            load(self.max_load_avg()),
            loads(self.samples.last()),
            self.samples.len(),
            self.max_steal_share()
                .map_or("-".into(), |v| format!("{:.1}%", v * 100.0)),
            self.harness_cpu_ms as f64 / 1000.0,
            self.harness_cpu_share() * 100.0
        )];
        if let Some(t) = &self.ticks {
            lines.push(format!(
                "ticks      {} ticks, {} woke more than {} ms late; lateness p50 {} ms, p99 {} ms, max {} ms",
                t.ticks, t.late, t.late_over_ms, t.p50_ms, t.p99_ms, t.max_ms
            ));
        }
        if let Some(w) = &self.writers {
            let ms = |v: Option<i64>| v.map_or("-".into(), |v| format!("{v} ms"));
            let waits = w.lock_waits.map_or(String::new(), |l| {
                format!("; row lock waits {} ({} ms)", l.waits, l.wait_ms)
            });
            lines.push(format!(
                "writers    {:.1}/s of {:.1}/s asked ({} commits); commit latency p50 {}, p99 {}{waits}",
                w.achieved_per_s,
                w.asked_per_s,
                w.commits,
                ms(w.commit_p50_ms),
                ms(w.commit_p99_ms)
            ));
        }
        for flag in self.flags() {
            lines.push(format!(
                "FLAGGED    {flag}: the figures ran on a loaded machine"
            ));
        }
        lines
    }
}

/// Values under this many ms are counted in a bucket of their own; those at
/// or above it are kept one by one (they are rare: a tick or a commit ten
/// seconds late), so every percentile is exact whatever the run's length.
const EXACT_BELOW_MS: usize = 10_000;

/// Latencies in whole ms, in bounded memory for any length of run
/// (80 KB however many values), with exact nearest-rank percentiles.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    buckets: Vec<u64>,
    high: Vec<i64>,
    count: u64,
}

impl Histogram {
    /// Counts one value; a negative one (a clock step) counts as 0.
    pub fn add(&mut self, ms: i64) {
        let ms = ms.max(0);
        self.count += 1;
        if (ms as usize) < EXACT_BELOW_MS {
            if self.buckets.is_empty() {
                self.buckets = vec![0; EXACT_BELOW_MS];
            }
            self.buckets[ms as usize] += 1;
        } else {
            self.high.push(ms);
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// How many values exceed `ms`.
    pub fn above(&self, ms: i64) -> u64 {
        let low: u64 = self
            .buckets
            .iter()
            .enumerate()
            .filter(|(v, _)| *v as i64 > ms)
            .map(|(_, n)| n)
            .sum();
        low + self.high.iter().filter(|v| **v > ms).count() as u64
    }

    /// The nearest-rank percentile `q` (0 < q ≤ 1), as `diff::Distribution`
    /// computes them; `None` without values.
    pub fn percentile(&self, q: f64) -> Option<i64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (v, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(v as i64);
            }
        }
        let mut high = self.high.clone();
        high.sort_unstable();
        high.get((rank - seen - 1) as usize).copied()
    }

    pub fn max(&self) -> Option<i64> {
        self.percentile(1.0)
    }

    /// The lateness summary of ticks counted here.
    pub fn lateness(&self) -> Option<Lateness> {
        Some(Lateness {
            ticks: self.count,
            late: self.above(LATE_TICK_MS),
            late_over_ms: LATE_TICK_MS,
            p50_ms: self.percentile(0.50)?,
            p99_ms: self.percentile(0.99)?,
            max_ms: self.max()?,
        })
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        if !other.buckets.is_empty() {
            if self.buckets.is_empty() {
                self.buckets = vec![0; EXACT_BELOW_MS];
            }
            for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
                *a += b;
            }
        }
        self.high.extend(&other.high);
        self.count += other.count;
    }
}

/// `/proc/loadavg`'s one-minute load average (its first field; proc(5)).
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// The aggregate `cpu` line of `/proc/stat`: (all time, steal time) in
/// jiffies. proc(5): user nice system idle iowait irq softirq steal guest
/// guest_nice; guest time is already counted in user and nice, so the total
/// is the first eight fields.
pub fn parse_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let total = fields.iter().take(8).sum();
    let steal = fields.get(7).copied().unwrap_or(0);
    Some((total, steal))
}

/// The steal share between two `(total, steal)` readings of [`parse_stat`]
/// (`earlier` `None`: since boot); `None` if no time passed.
pub fn steal_share(earlier: Option<(u64, u64)>, later: (u64, u64)) -> Option<f64> {
    let (t0, s0) = earlier.unwrap_or((0, 0));
    let total = later.0.checked_sub(t0)?;
    let steal = later.1.saturating_sub(s0);
    (total > 0).then(|| steal as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_as_the_checker_computes_them() {
        let values = [5, 1, 3, 20_000, 2, 4, 7, 9, 8, 6];
        let mut h = Histogram::default();
        for v in values {
            h.add(v);
        }
        let d = crate::diff::Distribution::of(values.to_vec()).unwrap();
        assert_eq!(h.percentile(0.5), Some(d.p50));
        assert_eq!(h.percentile(0.99), Some(d.p99));
        assert_eq!(h.max(), Some(20_000));
        assert_eq!(h.count(), 10);
        assert_eq!(h.above(7), 3);
        assert_eq!(Histogram::default().percentile(0.5), None);
    }

    #[test]
    fn a_negative_value_counts_as_zero_and_merging_adds_counts() {
        let mut a = Histogram::default();
        a.add(-3);
        let mut b = Histogram::default();
        b.add(12);
        b.add(30_000);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.percentile(0.01), Some(0));
        assert_eq!(a.max(), Some(30_000));
        let t = a.lateness().unwrap();
        assert_eq!((t.ticks, t.late, t.p50_ms), (3, 2, 12));
    }

    #[test]
    fn proc_files_are_read_as_proc5_describes_them() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 1/467 12345\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
        let stat = "cpu  100 0 50 800 10 0 0 40 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_stat(stat), Some((1000, 40)));
        assert_eq!(parse_stat("intr 1 2\n"), None);
        assert_eq!(steal_share(None, (1000, 40)), Some(0.04));
        assert_eq!(steal_share(Some((1000, 40)), (1200, 90)), Some(0.25));
        assert_eq!(steal_share(Some((1000, 40)), (1000, 40)), None);
    }

    #[test]
    fn a_run_is_flagged_when_its_writers_fall_short_or_the_load_exceeds_the_cores() {
        let mut lat = Histogram::default();
        for _ in 0..940 {
            lat.add(2);
        }
        let mut load = MachineLoad {
            cores: 2,
            samples: vec![LoadSample {
                at_ms: 0,
                load_avg_1m: Some(1.5),
                steal_share: Some(0.0),
            }],
            writers: Some(WritersLoad::of(100.0, &lat, 10_000)),
            ..MachineLoad::default()
        };
        // 94/s of 100/s asked: 6 % short.
        assert_eq!(load.flags().len(), 1);
        // 94/s of 98.9/s asked: 4.95 % short, within the 5 %.
        load.writers = Some(WritersLoad::of(98.9, &lat, 10_000));
        assert!(load.flags().is_empty(), "{:?}", load.flags());
        load.samples[0].load_avg_1m = Some(2.5);
        assert_eq!(load.flags(), ["load average 2.50 > 2 cores"]);
    }

    #[test]
    fn the_object_round_trips_through_a_runs_config() {
        let load = MachineLoad {
            cores: 4,
            harness_cpu_ms: 1200,
            wall_ms: 3000,
            ..MachineLoad::default()
        };
        let config = serde_json::json!({"seed": 1, CONFIG_KEY: load}).to_string();
        assert_eq!(MachineLoad::from_config(&config), Some(load));
        assert_eq!(MachineLoad::from_config("{\"seed\":1}"), None);
    }

    #[test]
    fn lock_waits_are_a_difference_shown_when_read_and_absent_in_old_runs() {
        assert_eq!(
            LockWaits::between((3, 40), (10, 95)),
            Some(LockWaits {
                waits: 7,
                wait_ms: 55
            })
        );
        // A server restarted between the readings: its counters began again.
        assert_eq!(LockWaits::between((10, 95), (2, 5)), None);
        let mut writers = WritersLoad::of(100.0, &Histogram::default(), 1000);
        let load = |writers: &WritersLoad| MachineLoad {
            cores: 2,
            writers: Some(writers.clone()),
            ..MachineLoad::default()
        };
        let line = |load: &MachineLoad| load.header_lines()[1].clone();
        assert!(!line(&load(&writers)).contains("lock waits"));
        // A run recorded before lock waits were read has no key: it still
        // reads, as "not read".
        let old = serde_json::json!({CONFIG_KEY: load(&writers)}).to_string();
        assert!(!old.contains("lock_waits"));
        assert_eq!(MachineLoad::from_config(&old), Some(load(&writers)));
        writers.lock_waits = LockWaits::between((0, 0), (4, 12));
        assert!(line(&load(&writers)).ends_with("; row lock waits 4 (12 ms)"));
        let config = serde_json::json!({CONFIG_KEY: load(&writers)}).to_string();
        assert_eq!(MachineLoad::from_config(&config), Some(load(&writers)));
    }
}
