//! Making Snowflake IDs, as a Snowflake service or a library in each writer
//! process does: Twitter's layout ([`Layout::twitter`]), the ms of the
//! writer's own clock above 10 bits of worker and 12 of sequence. The
//! database targets' writers use it for their snowflake schemas.
//!
//! This module does no I/O and reads no clock: the clock is passed in.

use crate::id::{Id, Layout};

/// One worker's ID generator. Within one ms the sequence counts up; past
/// 4096 IDs the time borrows from the next ms, and a clock that goes back
/// makes no smaller ID, so one worker's IDs always increase.
///
/// ```
/// use since_id::{Id, Layout, snowflake::Generator};
/// let mut ids = Generator::new(3);
/// let id = ids.next(1_767_225_600_000);
/// assert_eq!(Layout::twitter().ts_ms(Id(id as u128)), 1_767_225_600_000);
/// ```
#[derive(Clone, Debug)]
pub struct Generator {
    worker: i64,
    last_ms: i64,
    sequence: i64,
}

impl Generator {
    /// A generator for `worker` (its low 10 bits).
    pub fn new(worker: u32) -> Generator {
        Generator {
            worker: i64::from(worker & 1023),
            last_ms: i64::MIN,
            sequence: 0,
        }
    }

    /// The next ID, at `clock_ms` (Unix ms) by this worker's clock.
    pub fn next(&mut self, clock_ms: i64) -> i64 {
        if clock_ms > self.last_ms {
            self.last_ms = clock_ms;
            self.sequence = 0;
        } else {
            self.sequence += 1;
            if self.sequence == 4096 {
                self.last_ms += 1;
                self.sequence = 0;
            }
        }
        let Id(base) = Layout::twitter().min_id_at(self.last_ms);
        base as i64 | (self.worker << 12) | self.sequence
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_writer_clock_and_worker_and_increase() {
        let l = Layout::twitter();
        let mut g = Generator::new(3);
        let t = 1_767_225_600_000;
        let a = g.next(t);
        let b = g.next(t);
        assert_eq!(l.ts_ms(Id(a as u128)), t);
        assert_eq!((a >> 12) & 1023, 3, "the worker bits");
        assert_eq!(b, a + 1);
        assert!(g.next(t - 5) > b, "a clock going back makes no smaller ID");
        // 4096 IDs in one ms borrow from the next ms.
        let mut g = Generator::new(0);
        let ids: Vec<i64> = (0..4097).map(|_| g.next(t)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(l.ts_ms(Id(ids[4096] as u128)), t + 1);
        // Workers never collide: the worker bits tell them apart.
        assert_ne!(Generator::new(1).next(t), Generator::new(2).next(t));
    }
}
