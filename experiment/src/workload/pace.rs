//! The writers' pacing, shared by the database targets' writers.

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

    /// The pace of writer `index` of `writers` that share `rate_per_s`
    /// between them: each writes every `writers / rate` s, the writers
    /// offset from each other by an equal share of that period.
    pub fn of_writer(index: u32, writers: u32, rate_per_s: f64, now_ms: i64) -> WriterPace {
        let period_ms = writers as f64 * 1000.0 / rate_per_s.max(0.001);
        let phase = period_ms * index as f64 / writers as f64;
        WriterPace::new(now_ms as f64 + phase, period_ms)
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
