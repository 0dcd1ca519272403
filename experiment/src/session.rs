//! What every target's run shares, below all of them, one job a file: the
//! options and stored configuration of a run (`config`), its pollers and
//! plan (`pollers`), the rows it writes and the summary it returns (`rows`),
//! the async runtime and the one shutdown handler (`shutdown`), the poll
//! loop in real time (`real_time`) and the progress display (`progress`).
//! A leaf: it imports the core, the recorder's row types and the driver's
//! plan, never a target or a command. Its items are re-exported here, so
//! users name them `crate::session::X`.

mod config;
mod pollers;
mod progress;
mod real_time;
mod rows;
mod shutdown;

pub use config::{ClockMode, Common, StoredConfig, default_pollers};
pub use pollers::{build_pollers, plan_of, poller_names};
pub use progress::{Bar, describe};
pub use real_time::{Live, poll_in_real_time};
pub use rows::{RunRowParts, RunSummary, end_reason, poller_infos, poller_row, run_row};
pub use shutdown::{Shutdown, runtime, wait_for_signal};

/// A writer's pace: one write every `period_ms` from `start_ms`. A writer
/// that fell more than a second behind (a stall) starts afresh from now
/// instead of bursting to catch up. Pure: the time is passed in.
#[derive(Clone, Debug)]
pub struct WriterPace {
    base_ms: f64,
    period_ms: f64,
    written: u64,
}

impl WriterPace {
    pub fn new(start_ms: f64, period_ms: f64) -> WriterPace {
        WriterPace {
            base_ms: start_ms,
            period_ms,
            written: 0,
        }
    }

    /// How long to wait at `now_ms` before the next write (0: now).
    pub fn wait_ms(&mut self, now_ms: f64) -> u64 {
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
    }
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
}
