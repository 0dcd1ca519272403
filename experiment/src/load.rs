//! The machine's load during a real-time run (issue 34), read from the
//! system: the thin shell around `analysis::machine`, which holds the
//! object's shape and every sum. A [`Sampler`] reads `/proc/loadavg` and
//! `/proc/stat` (proc(5)) at the start, once a minute and at the end, and
//! the process's own CPU time with getrusage(2); the run's end hands it the
//! ticks' lateness and the writers' account and sends the whole to the
//! recorder as `runs.config`'s `machine_load`.
//!
//! A virtual run starts no sampler: it reads no wall clock, so that a seed
//! gives the same database every time.
//!
//! Below the targets: imports `clock` and `record`, never a target.

use crate::record::RecordSender;
use crate::sim::sync::lock;
use analysis::machine::{self, Histogram, LoadSample, MachineLoad, WritersLoad};
use std::sync::{Arc, Mutex};

/// How often the load is sampled between the start and the end.
const EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Samples the machine while a run runs. Start it inside the run's tokio
/// runtime.
pub struct Sampler {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
    cpu_at_start_ms: u64,
    started_ms: i64,
    cores: u32,
}

#[derive(Default)]
struct State {
    samples: Vec<LoadSample>,
    /// The last `/proc/stat` reading (total, steal jiffies).
    stat: Option<(u64, u64)>,
}

impl State {
    fn sample(&mut self) {
        let stat = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| machine::parse_stat(&t));
        let steal_share = stat.and_then(|now| machine::steal_share(self.stat, now));
        if stat.is_some() {
            self.stat = stat;
        }
        self.samples.push(LoadSample {
            at_ms: crate::clock::now_ms(),
            load_avg_1m: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|t| machine::parse_loadavg(&t)),
            steal_share,
        });
    }
}

impl Sampler {
    /// Takes the start sample and samples once a minute from then on.
    pub fn start() -> Sampler {
        let state = Arc::new(Mutex::new(State::default()));
        lock(&state).sample();
        let every = state.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
            loop {
                tick.tick().await;
                lock(&every).sample();
            }
        });
        Sampler {
            state,
            task,
            cpu_at_start_ms: process_cpu_ms(),
            started_ms: crate::clock::now_ms(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        }
    }

    /// Takes the end sample and sends the run's `machine_load` to the
    /// recorder, with the ticks' lateness and the writers' account.
    pub fn finish(self, ticks: &Histogram, writers: Option<WritersLoad>, sender: &RecordSender) {
        let load = self.end(ticks, writers);
        sender.machine_load(load);
    }

    /// The end sample and the whole object.
    fn end(self, ticks: &Histogram, writers: Option<WritersLoad>) -> MachineLoad {
        self.task.abort();
        let mut state = lock(&self.state);
        state.sample();
        MachineLoad {
            cores: self.cores,
            samples: std::mem::take(&mut state.samples),
            harness_cpu_ms: process_cpu_ms().saturating_sub(self.cpu_at_start_ms),
            wall_ms: (crate::clock::now_ms() - self.started_ms).max(0) as u64,
            ticks: ticks.lateness(),
            writers,
        }
    }
}

/// This process's CPU time so far, user + system, ms (getrusage(2),
/// `RUSAGE_SELF`: every thread of the process). 0 if the call fails.
fn process_cpu_ms() -> u64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return 0;
        }
        usage
    };
    let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}
