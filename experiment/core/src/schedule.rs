//! When one poller sends: the cadence, its alignment, backoff after failed
//! cycles, `Retry-After` and rate-limit waits, and the final drain, as one
//! state machine with no I/O and no clock, in the manner of quinn-proto's
//! `Connection::poll_timeout` / `handle_timeout`
//! (<https://docs.rs/quinn-proto/latest/quinn_proto/struct.Connection.html>):
//! the driver asks when the next deadline is, waits until then by whatever
//! clock it runs on, and says what time it is. The real-time driver waits with
//! tokio's timers; the virtual-time driver jumps its event queue to the
//! deadline. Both clocks therefore send at the same moments for the same
//! answers: a fault means the same thing in either.
//!
//! The rules (docs/experiment.md, "Failures and pacing" and "Ending"):
//! - Ticks fall on multiples of the interval since the Unix epoch; a tick
//!   missed while waiting is skipped, not made up. With a [`TickJitter`]
//!   each tick is moved later by a seeded draw in `[0, max_ms)`, a function
//!   of the seed and the tick alone, so pollers given the same seed still
//!   send together.
//! - After `n` consecutive failed cycles the next cycle waits
//!   [`backoff_ms`]`(n)` past the end of the last one (1, 2, 4 ... ticks, at most a minute).
//! - `Retry-After` (or a spent budget's reset) holds the next request until
//!   the time the server named.
//! - No wait outlasts the run: a wait past the end of `--duration` is cut
//!   there, and what was waited is recorded with the final cycle's first request.
//! - The drain: at the end of the duration (or at a stop), wait the largest k
//!   of the run, then make one last cycle, waiting for the server at most
//!   [`FINAL_PACE_CAP_MS`] past that moment.

use crate::seed::splitmix64;

/// The longest the final cycle waits for the server (Retry-After, the shared budget).
///
/// ```
/// use since_id::Schedule;
/// use since_id::schedule::FINAL_PACE_CAP_MS;
/// let mut s = Schedule::new(0, 1000, 1000, 0);
/// s.stop(0); // drain at once: the final cycle is due at 0
/// assert_eq!(s.pace_cap_ms(0), FINAL_PACE_CAP_MS);
/// ```
pub const FINAL_PACE_CAP_MS: u64 = 5_000;

/// The first tick at or after `t`.
///
/// ```
/// use since_id::schedule::align_up;
/// assert_eq!(align_up(1001, 1000), 2000);
/// assert_eq!(align_up(2000, 1000), 2000);
/// assert_eq!(align_up(-1, 1000), 0);
/// ```
pub fn align_up(t_ms: i64, interval_ms: u64) -> i64 {
    let i = interval_ms.max(1) as i64;
    t_ms.div_euclid(i) * i + if t_ms.rem_euclid(i) == 0 { 0 } else { i }
}

/// The tick after `tick` when the cycle ended at `now_ms`: ticks missed while
/// waiting are skipped, not made up, so the cadence stays aligned.
///
/// ```
/// use since_id::schedule::following_tick;
/// assert_eq!(following_tick(1000, 1000, 1500), 2000);
/// assert_eq!(following_tick(1000, 1000, 3500), 4000); // 2000 and 3000 were missed
/// ```
pub fn following_tick(tick: i64, interval_ms: u64, now_ms: i64) -> i64 {
    let next = tick + interval_ms as i64;
    if next <= now_ms {
        align_up(now_ms, interval_ms)
    } else {
        next
    }
}

/// Extra wait after `failures` consecutive failed cycles: 0 after one, then
/// 1, 3, 7 ... intervals more, so that cycles start 1, 2, 4, 8 ... ticks
/// apart, at most a minute.
///
/// ```
/// use since_id::schedule::backoff_ms;
/// let ticks_apart = |n| (backoff_ms(n, 1000) + 1000) / 1000;
/// assert_eq!([1, 2, 3, 4].map(ticks_apart), [1, 2, 4, 8]);
/// assert_eq!(backoff_ms(30, 1000), 59_000);
/// ```
pub fn backoff_ms(failures: u32, interval_ms: u64) -> u64 {
    if failures == 0 {
        return 0;
    }
    let doubled = interval_ms.saturating_mul(1u64 << (failures - 1).min(16));
    doubled.min(60_000).saturating_sub(interval_ms)
}

/// Each tick moved later by a uniform draw in `[0, max_ms)` (`--tick-jitter`),
/// seeded: the draw of tick `t` is a hash of `(seed, t)`, so the same seed
/// gives the same ticks in every run and in either clock. `max_ms` 0 (the
/// default): the ticks lie on the grid.
///
/// ```
/// use since_id::schedule::TickJitter;
/// let j = TickJitter { max_ms: 100, seed: 1 };
/// assert!((0..100).contains(&j.at(5000)));
/// assert_eq!(j.at(5000), TickJitter { max_ms: 100, seed: 1 }.at(5000));
/// assert_eq!(TickJitter::default().at(5000), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickJitter {
    /// The largest move is just below this, ms; 0: no jitter.
    pub max_ms: u64,
    /// The seed of the draws.
    pub seed: u64,
}

impl TickJitter {
    /// How far the tick due at `tick_ms` is moved, in `[0, max_ms)`.
    pub fn at(&self, tick_ms: i64) -> i64 {
        if self.max_ms == 0 {
            return 0;
        }
        let h = splitmix64(self.seed ^ splitmix64(tick_ms as u64));
        (h % self.max_ms) as i64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Ticking until the end of the duration.
    Running,
    /// Waiting for the final cycle, due at `at`; the server may hold it until `deadline`.
    Draining { at: i64, deadline: i64 },
    /// The final cycle was made.
    Done,
}

/// What the driver is to do at a deadline: begin a cycle.
///
/// ```
/// use since_id::{CycleStart, Schedule};
/// let mut s = Schedule::new(0, 2000, 1000, 0);
/// assert_eq!(s.handle_timeout(0), Some(CycleStart { wait_ms: 0, last: false }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CycleStart {
    /// How long the cycle was held past its tick (Retry-After, backoff, a
    /// wait cut at the end of the run): recorded with its first request.
    pub wait_ms: u64,
    /// The final cycle of the drain.
    pub last: bool,
}

/// One poller's schedule. The driver loops: ask [`Schedule::poll_timeout`], wait until
/// then by its own clock, call [`Schedule::handle_timeout`], and run the cycle it starts,
/// reporting each response and the cycle's end.
///
/// ```
/// use since_id::Schedule;
///
/// // 3 s from t = 0, a tick a second, drained 500 ms (the largest k) after the end.
/// let mut s = Schedule::new(0, 3000, 1000, 500);
/// let mut sent = Vec::new();
/// while let Some(at) = s.poll_timeout() {
///     // (a driver sleeps until `at` here; virtual time just jumps)
///     if let Some(cycle) = s.handle_timeout(at) {
///         sent.push((at, cycle.last));
///         s.on_response(at + 20, None); // one request, answered in 20 ms
///         s.on_cycle_end(at + 20, false);
///     }
/// }
/// assert!(s.is_done());
/// assert_eq!(sent, [(0, false), (1000, false), (2000, false), (3500, true)]);
/// ```
#[derive(Clone, Debug)]
pub struct Schedule {
    interval_ms: u64,
    end_ms: i64,
    final_wait_ms: u64,
    next_tick: i64,
    /// Nothing is sent before this (Retry-After, backoff).
    not_before: i64,
    failures: u32,
    phase: Stage,
    in_cycle: bool,
    /// Waits cut short by the end of the run, for the final cycle's first request.
    cut_wait_ms: u64,
    stopped: bool,
    jitter: TickJitter,
}

impl Schedule {
    /// A schedule for a run from `start_ms` for `duration_ms`, ticking every
    /// `interval_ms` and draining for `final_wait_ms` (the largest k).
    ///
    /// ```
    /// use since_id::Schedule;
    /// let s = Schedule::new(1500, 3000, 1000, 500);
    /// assert_eq!(s.poll_timeout(), Some(2000)); // ticks align to the interval
    /// assert_eq!(s.end_ms(), 4500);
    /// ```
    pub fn new(start_ms: i64, duration_ms: u64, interval_ms: u64, final_wait_ms: u64) -> Self {
        let mut s = Schedule {
            interval_ms: interval_ms.max(1),
            end_ms: start_ms.saturating_add(duration_ms as i64),
            final_wait_ms,
            next_tick: align_up(start_ms, interval_ms),
            not_before: i64::MIN,
            failures: 0,
            phase: Stage::Running,
            in_cycle: false,
            cut_wait_ms: 0,
            stopped: false,
            jitter: TickJitter::default(),
        };
        s.drain_if_due();
        s
    }

    /// The same schedule with each tick moved by `jitter`.
    ///
    /// ```
    /// use since_id::Schedule;
    /// use since_id::schedule::TickJitter;
    /// let jitter = TickJitter { max_ms: 300, seed: 9 };
    /// let s = Schedule::new(0, 3000, 1000, 0).with_jitter(jitter);
    /// assert_eq!(s.poll_timeout(), Some(jitter.at(0)));
    /// ```
    pub fn with_jitter(mut self, jitter: TickJitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The end of the duration.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// assert_eq!(s.end_ms(), 3000);
    /// ```
    pub fn end_ms(&self) -> i64 {
        self.end_ms
    }

    /// Whether a stop (Ctrl-C, SIGTERM) ended the run early.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// s.stop(1200);
    /// assert!(s.stopped());
    /// assert_eq!(s.poll_timeout(), Some(1700)); // the drain waits k from the stop
    /// ```
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Still ticking: neither the end nor a stop has come.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// assert!(s.is_running());
    /// s.stop(0);
    /// assert!(!s.is_running() && !s.is_done());
    /// ```
    pub fn is_running(&self) -> bool {
        self.phase == Stage::Running
    }

    /// The final cycle was made: nothing more to do.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 0, 1000, 0); // no duration: only the final cycle
    /// assert!(s.handle_timeout(0).unwrap().last);
    /// s.on_cycle_end(10, false);
    /// assert!(s.is_done());
    /// assert_eq!(s.poll_timeout(), None);
    /// ```
    pub fn is_done(&self) -> bool {
        self.phase == Stage::Done
    }

    /// When [`Schedule::handle_timeout`] next has something to do; `None`
    /// while a cycle is under way (its responses drive it) or once done.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// assert_eq!(s.poll_timeout(), Some(0));
    /// s.handle_timeout(0);
    /// assert_eq!(s.poll_timeout(), None); // the cycle is under way
    /// ```
    pub fn poll_timeout(&self) -> Option<i64> {
        if self.in_cycle {
            return None;
        }
        match self.phase {
            Stage::Done => None,
            // While running, the next tick is before the end (else the drain began).
            Stage::Running => Some(self.running_wait_until().min(self.end_ms)),
            Stage::Draining { at, deadline } => Some(at.max(self.not_before.min(deadline))),
        }
    }

    /// When the next cycle may go while running: its tick, or later if the server or backoff says so.
    fn running_wait_until(&self) -> i64 {
        self.jittered_tick().max(self.not_before)
    }

    /// The next tick, moved by the jitter (the tick itself without one).
    fn jittered_tick(&self) -> i64 {
        self.next_tick
            .saturating_add(self.jitter.at(self.next_tick))
    }

    /// Time is `now_ms` (at or after [`Schedule::poll_timeout`]): a cycle
    /// begins, or a wait was cut at the end of the run and the drain begins.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// s.handle_timeout(0).unwrap();
    /// s.on_response(20, Some(1500)); // Retry-After: 1.5 s
    /// s.on_cycle_end(20, false);
    /// assert_eq!(s.handle_timeout(1000), None); // too early
    /// assert_eq!(s.handle_timeout(1520).unwrap().wait_ms, 520); // held past its tick
    /// ```
    pub fn handle_timeout(&mut self, now_ms: i64) -> Option<CycleStart> {
        let due = self.poll_timeout()?;
        if now_ms < due {
            return None;
        }
        match self.phase {
            Stage::Done => None,
            Stage::Running => {
                let wait_until = self.running_wait_until();
                if wait_until > self.end_ms {
                    // Cut short at the end: recorded with the final cycle.
                    self.cut_wait_ms += (self.end_ms - self.jittered_tick()).max(0) as u64;
                    self.next_tick = self.end_ms;
                    self.drain_if_due();
                    return None;
                }
                self.in_cycle = true;
                Some(CycleStart {
                    wait_ms: (wait_until - self.jittered_tick()).max(0) as u64
                        + std::mem::take(&mut self.cut_wait_ms),
                    last: false,
                })
            }
            Stage::Draining { at, .. } => {
                self.in_cycle = true;
                Some(CycleStart {
                    wait_ms: (due - at).max(0) as u64 + std::mem::take(&mut self.cut_wait_ms),
                    last: true,
                })
            }
        }
    }

    /// How long the shared rate-limit budget may hold the next request of the
    /// cycle at `now_ms`: until the end of the run (then the cycle is
    /// abandoned, see [`Schedule::abandon`]), or in the final cycle until its
    /// deadline (then the request goes anyway, and a refusal is recorded).
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// assert_eq!(s.pace_cap_ms(1000), 2000);
    /// ```
    pub fn pace_cap_ms(&self, now_ms: i64) -> u64 {
        let until = match self.phase {
            Stage::Draining { deadline, .. } => deadline,
            _ => self.end_ms,
        };
        (until - now_ms).max(0) as u64
    }

    /// A response came back at `received_ms`, with the server's requested wait if any.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// s.handle_timeout(0);
    /// s.on_response(20, Some(5000));
    /// s.on_cycle_end(20, false);
    /// assert_eq!(s.poll_timeout(), Some(3000)); // never past the end of the run
    /// ```
    pub fn on_response(&mut self, received_ms: i64, retry_after_ms: Option<u64>) {
        if let Some(retry) = retry_after_ms {
            self.not_before = received_ms.saturating_add(retry as i64);
        }
    }

    /// The cycle ended at `now_ms` (its last response), failed or not.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 60_000, 1000, 0);
    /// for at in [0, 1000] {
    ///     s.handle_timeout(at);
    ///     s.on_cycle_end(at + 20, true);
    /// }
    /// assert_eq!(s.poll_timeout(), Some(3000)); // two failures: two ticks apart
    /// ```
    pub fn on_cycle_end(&mut self, now_ms: i64, failed: bool) {
        self.in_cycle = false;
        if matches!(self.phase, Stage::Draining { .. }) {
            self.phase = Stage::Done;
            return;
        }
        self.failures = if failed { self.failures + 1 } else { 0 };
        self.next_tick = following_tick(self.next_tick, self.interval_ms, now_ms);
        // Backoff counts from the next tick, so backed-off cycles stay on the cadence.
        let backoff = backoff_ms(self.failures, self.interval_ms);
        if backoff > 0 {
            self.not_before = self
                .not_before
                .max(self.next_tick.saturating_add(backoff as i64));
        }
        self.drain_if_due();
    }

    /// The policy skipped the tick that began at `now_ms` (its request
    /// budget): no request went, so nothing failed or succeeded, and the
    /// backoff stays as it was; on to the next tick.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// s.handle_timeout(0);
    /// s.skip(0);
    /// assert_eq!(s.poll_timeout(), Some(1000));
    /// ```
    pub fn skip(&mut self, now_ms: i64) {
        self.in_cycle = false;
        if matches!(self.phase, Stage::Draining { .. }) {
            self.phase = Stage::Done;
            return;
        }
        // The first tick strictly after the skipped one (which may have been
        // held past its own tick by a backoff or a Retry-After).
        self.next_tick = align_up(now_ms.saturating_add(1), self.interval_ms);
        self.drain_if_due();
    }

    /// The cycle was given up at `now_ms` before its request went (the budget's
    /// wait reached the end of the run, or a stop came): the cursor stays, and
    /// `cut_wait_ms` is recorded with the final cycle's first request.
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// s.handle_timeout(0);
    /// s.abandon(3000, 700);
    /// assert_eq!(s.handle_timeout(3500).unwrap().wait_ms, 700);
    /// ```
    pub fn abandon(&mut self, now_ms: i64, cut_wait_ms: u64) {
        self.in_cycle = false;
        self.cut_wait_ms += cut_wait_ms;
        self.next_tick = self.next_tick.max(self.end_ms.min(now_ms));
        self.drain_if_due();
    }

    /// A stop at `now_ms`: the drain begins then (after the cycle under way, if any).
    ///
    /// ```
    /// use since_id::Schedule;
    /// let mut s = Schedule::new(0, 3000, 1000, 500);
    /// s.stop(100);
    /// let last = s.handle_timeout(600).unwrap();
    /// assert!(last.last);
    /// ```
    pub fn stop(&mut self, now_ms: i64) {
        if self.phase != Stage::Running {
            return;
        }
        self.stopped = true;
        self.begin_drain(now_ms.min(self.end_ms));
    }

    fn drain_if_due(&mut self) {
        if self.phase == Stage::Running && self.next_tick >= self.end_ms {
            self.begin_drain(self.end_ms);
        }
    }

    fn begin_drain(&mut self, from_ms: i64) {
        let at = from_ms.saturating_add(self.final_wait_ms as i64);
        self.phase = Stage::Draining {
            at,
            deadline: at.saturating_add(FINAL_PACE_CAP_MS as i64),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a schedule whose every cycle is one request answered at once,
    /// with `answer(n)` = (failed, retry_after) for the n-th cycle; returns
    /// each cycle's (send time, wait_ms, last).
    fn drive(
        mut s: Schedule,
        answer: impl Fn(usize) -> (bool, Option<u64>),
    ) -> Vec<(i64, u64, bool)> {
        let mut sent = Vec::new();
        while let Some(at) = s.poll_timeout() {
            if let Some(start) = s.handle_timeout(at) {
                let (failed, retry) = answer(sent.len());
                sent.push((at, start.wait_ms, start.last));
                s.on_response(at + 20, retry);
                s.on_cycle_end(at + 20, failed);
            }
            assert!(sent.len() < 10_000, "the schedule ends");
        }
        assert!(s.is_done());
        sent
    }

    #[test]
    fn ticks_align_to_the_interval() {
        // align_up itself: `run::tests::ticks_align_to_the_interval`; missed
        // ticks: `run::tests::missed_ticks_are_skipped`.
        // A run started mid-second ticks on whole seconds, then drains at end + k.
        let sent = drive(Schedule::new(10_250, 3_000, 1000, 500), |_| (false, None));
        let times: Vec<i64> = sent.iter().map(|s| s.0).collect();
        assert_eq!(times, vec![11_000, 12_000, 13_000, 13_750]);
        assert!(sent[3].2 && !sent[2].2);
    }

    #[test]
    fn failed_cycles_back_off_on_the_cadence() {
        // backoff_ms itself: `run::tests::backoff_doubles_and_caps`.
        // Nine failed cycles: they go 1, 2, 4 ... ticks apart, then a minute
        // apart, on the cadence; one success resets it.
        let sent = drive(Schedule::new(0, 400_000, 1000, 0), |n| (n < 9, None));
        let times: Vec<i64> = sent.iter().take(11).map(|s| s.0).collect();
        assert_eq!(
            times,
            vec![
                0, 1000, 3000, 7000, 15_000, 31_000, 63_000, 123_000, 183_000, 243_000, 244_000
            ]
        );
        // The backoff past the tick is recorded as the cycle's wait.
        assert_eq!(sent[2].1, 1000);
        assert_eq!(sent[10].1, 0);
    }

    #[test]
    fn retry_after_holds_the_next_request_until_the_time_named() {
        // The first answer asks for 2.5 s: the next request goes 2.5 s after
        // that answer, off the cadence, and records how long it was held past
        // its tick; then the cadence resumes.
        let sent = drive(Schedule::new(0, 6_000, 1000, 0), |n| {
            (n == 0, (n == 0).then_some(2_500))
        });
        assert_eq!(sent[0].0, 0);
        assert_eq!(sent[1].0, 2_520);
        assert_eq!(sent[1].1, 1_520, "held from the 1 s tick to 2.52 s");
        assert_eq!(sent[2].0, 3_000, "the next tick after the answer");
    }

    #[test]
    fn no_wait_outlasts_the_run_and_the_cut_is_recorded() {
        // Retry-After of a day, 300 ms into a 1 s run: the wait is cut at the
        // end, the drain waits k = 100 ms, and the final cycle goes within
        // FINAL_PACE_CAP_MS, recording the whole wait.
        let sent = drive(Schedule::new(0, 1_000, 100, 100), |n| {
            (true, (n == 0).then_some(86_400_000))
        });
        assert_eq!(sent.len(), 2);
        let (at, wait, last) = sent[1];
        assert!(last);
        assert_eq!(at, 1_000 + 100 + FINAL_PACE_CAP_MS as i64);
        assert_eq!(wait, 900 + FINAL_PACE_CAP_MS);
    }

    #[test]
    fn the_drain_waits_the_largest_k_after_the_end_or_the_stop() {
        let sent = drive(Schedule::new(0, 3_000, 1000, 2_000), |_| (false, None));
        assert_eq!(
            sent.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![0, 1000, 2000, 5000]
        );
        // A stop at 1.4 s: the drain starts then, whatever the duration.
        let mut s = Schedule::new(0, 60_000, 1000, 2_000);
        assert!(s.handle_timeout(0).is_some());
        s.on_cycle_end(20, false);
        assert!(s.handle_timeout(1000).is_some());
        s.on_cycle_end(1020, false);
        s.stop(1_400);
        assert!(s.stopped());
        assert_eq!(s.poll_timeout(), Some(3_400));
        assert_eq!(s.handle_timeout(3_000), None, "not before its time");
        let start = s.handle_timeout(3_400).unwrap();
        assert!(start.last);
        assert_eq!(s.poll_timeout(), None, "under way: the responses drive it");
        s.on_cycle_end(3_420, false);
        assert!(s.is_done());
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn a_budget_wait_past_the_end_abandons_the_cycle_for_the_drain() {
        let mut s = Schedule::new(0, 1_000, 100, 0);
        s.handle_timeout(900).unwrap();
        // The budget could hold the request at most until the end.
        assert_eq!(s.pace_cap_ms(900), 100);
        s.abandon(1_000, 100);
        let last = s.handle_timeout(s.poll_timeout().unwrap()).unwrap();
        assert!(last.last);
        assert_eq!(last.wait_ms, 100);
        assert_eq!(s.pace_cap_ms(1_000), FINAL_PACE_CAP_MS);
    }

    /// With a jitter of D, every tick of the run goes within `[due, due + D)`
    /// of its grid tick, the cadence keeps its grid, and the same seed gives
    /// the same ticks (another seed other ones); the drain is not moved.
    #[test]
    fn jittered_ticks_stay_within_the_jitter_and_repeat_for_a_seed() {
        let run = |seed| {
            let jitter = TickJitter { max_ms: 250, seed };
            drive(
                Schedule::new(0, 60_000, 1000, 500).with_jitter(jitter),
                |_| (false, None),
            )
        };
        let sent = run(3);
        assert_eq!(sent.len(), 61);
        for (n, &(at, wait, last)) in sent[..60].iter().enumerate() {
            let due = n as i64 * 1000;
            assert!((due..due + 250).contains(&at), "tick {n} at {at}");
            assert_eq!((wait, last), (0, false), "a jitter is no wait");
        }
        assert_eq!(sent[60].0, 60_500, "the drain is at end + k");
        assert!(sent.iter().any(|s| s.0 % 1000 != 0), "moved off the grid");
        assert_eq!(sent, run(3));
        assert_ne!(sent, run(4));
        // No jitter: the grid.
        let grid = drive(Schedule::new(0, 3_000, 1000, 0), |_| (false, None));
        assert_eq!(
            grid.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![0, 1000, 2000, 3000]
        );
    }

    /// A tick the policy skips sends nothing and keeps the backoff: the
    /// failures before it still count, the skipped tick is not made up, and
    /// skipping the final cycle ends the schedule.
    #[test]
    fn a_skipped_tick_moves_to_the_next_and_keeps_the_backoff() {
        let mut s = Schedule::new(0, 60_000, 1000, 0);
        let cycle = |s: &mut Schedule, failed: Option<bool>| -> i64 {
            let at = s.poll_timeout().unwrap();
            s.handle_timeout(at).unwrap();
            match failed {
                Some(failed) => s.on_cycle_end(at + 20, failed),
                None => s.skip(at),
            }
            at
        };
        let t0 = cycle(&mut s, Some(true));
        assert_eq!(cycle(&mut s, Some(true)), t0 + 1000);
        // Two failures: the next cycle is two ticks on.
        assert_eq!(cycle(&mut s, None), t0 + 3000, "skipped");
        // Still two failures behind it: a third backs off four ticks.
        assert_eq!(cycle(&mut s, Some(true)), t0 + 4000);
        assert_eq!(s.poll_timeout(), Some(t0 + 8000));

        let mut s = Schedule::new(0, 1000, 1000, 0);
        while !s.is_done() {
            let at = s.poll_timeout().unwrap();
            if s.handle_timeout(at).is_some() {
                s.skip(at);
            }
        }
        assert_eq!(s.poll_timeout(), None);
    }
}
