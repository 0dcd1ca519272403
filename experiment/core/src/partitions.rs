//! The retention plan of a range-partitioned event table: bounded
//! partitions of the key, oldest first, one added ahead of the writers and
//! the oldest dropped beyond a number kept. Pure: the targets send their
//! database's SQL (MariaDB's `REORGANIZE PARTITION` and `DROP PARTITION`,
//! PostgreSQL's `PARTITION OF` and `DETACH PARTITION`) and report back.
//!
//! A Snowflake key's partitions are bounded by time ([`Timed`]), so the
//! count alone ages them: beyond `retain`, the oldest ended `retain - 2`
//! periods ago. A
//! counter key's (AUTO_INCREMENT, BIGSERIAL) are made before their IDs
//! exist, so their bounds are guesses; [`Counter`] sizes them by what the
//! writers did and drops one only once it is as old as a Snowflake one.

use crate::id::Layout;
use std::collections::VecDeque;

/// One bounded partition: the IDs `lo <= id < hi`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// `p0`, `p1`, ... in the order they were made.
    pub name: String,
    /// The lowest ID it holds.
    pub lo: i64,
    /// The lowest ID above it (exclusive).
    pub hi: i64,
}

/// The plan: the bounded partitions, oldest first (beyond them, a catch-all).
#[derive(Clone, Debug)]
pub struct Partitions {
    bounded: VecDeque<Partition>,
    next_number: u32,
    retain: usize,
}

impl Partitions {
    /// The first two partitions: IDs below `first_hi`, then below `second_hi`.
    /// `retain` (at least 2) bounded partitions are kept.
    pub fn new(first_hi: i64, second_hi: i64, retain: u32) -> Partitions {
        assert!(second_hi > first_hi, "partition bounds increase");
        let bounded = VecDeque::from([
            Partition {
                name: "p0".into(),
                lo: 0,
                hi: first_hi,
            },
            Partition {
                name: "p1".into(),
                lo: first_hi,
                hi: second_hi,
            },
        ]);
        Partitions {
            bounded,
            next_number: 2,
            retain: retain.max(2) as usize,
        }
    }

    /// The upper bound of the newest bounded partition.
    pub fn last_hi(&self) -> i64 {
        self.bounded.back().map_or(0, |p| p.hi)
    }

    /// The bounded partitions, oldest first.
    pub fn bounded(&self) -> impl Iterator<Item = &Partition> {
        self.bounded.iter()
    }

    /// The lowest ID still kept (the oldest partition's lower bound).
    pub fn oldest_lo(&self) -> i64 {
        self.bounded.front().map_or(0, |p| p.lo)
    }

    /// The next partition, up to `hi` (raised past the last bound if
    /// needed: partitions never overlap). Call [`Partitions::added`] once
    /// the database made it.
    pub fn next_partition(&self, hi: i64) -> Partition {
        let lo = self.last_hi();
        Partition {
            name: format!("p{}", self.next_number),
            lo,
            hi: hi.max(lo + 1),
        }
    }

    /// The partition of [`Partitions::next_partition`] exists now.
    pub fn added(&mut self, p: Partition) {
        debug_assert_eq!(p.lo, self.last_hi());
        self.next_number += 1;
        self.bounded.push_back(p);
    }

    /// The oldest partition beyond the retained ones, to drop, if every ID
    /// it may hold lies below `aged_below` ([`Counter::aged_below`]; `i64::MAX`
    /// for a time-bounded key). Call [`Partitions::dropped`] once the
    /// database dropped it.
    pub fn beyond_retain(&self, aged_below: i64) -> Option<Partition> {
        let oldest = self.bounded.front()?;
        (self.bounded.len() > self.retain && oldest.hi <= aged_below).then(|| oldest.clone())
    }

    /// How many bounded partitions there are.
    pub fn len(&self) -> usize {
        self.bounded.len()
    }

    /// Never true: a plan starts with two partitions and keeps at least two.
    pub fn is_empty(&self) -> bool {
        self.bounded.is_empty()
    }

    /// The oldest partition is gone.
    pub fn dropped(&mut self) {
        self.bounded.pop_front();
    }
}

/// The writers' highest ID at each round of the job, for a counter key.
///
/// The partition ahead ends a period and a half of the last period's IDs past
/// the writers, so a rate that rises by half still finds room there, and
/// one is old enough to drop once the writers had passed its bound
/// `retain - 2` rounds before: every ID it may hold was taken by then, as a
/// Snowflake partition's IDs are when the count drops it. Then it does age
/// on time unless the writers slow by more than a quarter; if they do, the
/// drop waits a round: a slower writer never loses rows younger than
/// `--retain` promises (a rate asked but not reached dropped them: the
/// MariaDB retention hours, docs/mariadb.md).
#[derive(Clone, Debug)]
pub struct Counter {
    /// The highest ID at the last rounds, oldest first; 0 at round 0, the
    /// start, when the table is empty.
    seen: VecDeque<i64>,
    /// `retain - 2`: how many rounds old a bound must be.
    age_rounds: usize,
}

impl Counter {
    /// The first two partitions of a counter key, each made for a period of
    /// IDs at the rate asked (`rate_per_s` over `every_ms`): from the first
    /// round on, the job sizes them by the rate reached.
    pub fn first_plan(rate_per_s: f64, every_ms: u64, retain: u32) -> Partitions {
        let width = ((rate_per_s * every_ms as f64 / 1000.0).ceil() as i64).max(1);
        Partitions::new(width + 1, 2 * width + 1, retain)
    }

    /// The job of a plan keeping `retain` partitions, before its first round.
    pub fn new(retain: u32) -> Counter {
        Counter {
            seen: VecDeque::from([0]),
            age_rounds: retain.max(2) as usize - 2,
        }
    }

    /// A round at which the writers' highest ID is `max_id`: the bound of the
    /// partition to add to `plan`, or None if its newest one reaches as far.
    pub fn round(&mut self, plan: &Partitions, max_id: i64) -> Option<i64> {
        let last = *self.seen.back().expect("never empty");
        self.seen.push_back(max_id);
        // The last period's count, and the one before it for the age.
        while self.seen.len() > (self.age_rounds + 1).max(2) {
            self.seen.pop_front();
        }
        let period = (max_id - last).max(1);
        let bound = max_id + 1 + period + (period + 1) / 2;
        (bound > plan.last_hi()).then_some(bound)
    }

    /// Every ID below this had been taken `retain - 2` rounds ago (1 before
    /// enough rounds have passed: the table was empty at the start).
    pub fn aged_below(&self) -> i64 {
        let back = self.age_rounds + 1;
        match self.seen.len().checked_sub(back) {
            Some(i) => self.seen[i] + 1,
            None => 1,
        }
    }
}

/// A time-bounded key's partitions (Snowflake IDs: the time is in the ID's
/// high bits), each covering one period of ID time: the first two cover the
/// periods after the start, and each round adds the one that ends two
/// periods ahead of the round. Their IDs are made at the times their bounds
/// say, so the count alone ages them ([`Partitions::beyond_retain`] with
/// `i64::MAX`).
#[derive(Clone, Debug)]
pub struct Timed {
    layout: Layout,
    every_ms: i64,
}

impl Timed {
    /// Partitions of `every_ms` of ID time in `layout`.
    pub fn new(layout: Layout, every_ms: u64) -> Timed {
        Timed {
            layout,
            every_ms: every_ms.max(1) as i64,
        }
    }

    /// The lowest ID made at `unix_ms` (a partition's bound).
    fn at(&self, unix_ms: i64) -> i64 {
        i64::try_from(self.layout.min_id_at(unix_ms).0).unwrap_or(i64::MAX)
    }

    /// The first two partitions, at a start of `start_ms`: IDs made before
    /// one period after it, then before two.
    pub fn first_plan(&self, start_ms: i64, retain: u32) -> Partitions {
        Partitions::new(
            self.at(start_ms + self.every_ms),
            self.at(start_ms + 2 * self.every_ms),
            retain,
        )
    }

    /// A round at `now_ms`: the bound of the partition to add to `plan`
    /// (the IDs made before two periods from now), or None if its newest one
    /// reaches as far.
    pub fn round(&self, plan: &Partitions, now_ms: i64) -> Option<i64> {
        let bound = self.at(now_ms + 2 * self.every_ms);
        (bound > plan.last_hi()).then_some(bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_time_keys_partitions_each_cover_a_period_of_id_time() {
        let layout = Layout::twitter();
        let every = 1000;
        let timed = Timed::new(layout.clone(), every);
        let start = 1_700_000_000_000;
        let mut plan = timed.first_plan(start, 2);
        let bounds: Vec<i64> = plan.bounded().map(|p| p.hi).collect();
        let at = |ms: i64| layout.min_id_at(ms).0 as i64;
        assert_eq!(bounds, [at(start + 1000), at(start + 2000)]);
        assert_eq!(
            timed.round(&plan, start),
            None,
            "p1 reaches two periods ahead"
        );
        // The rounds, each a period later: one partition each, ending two periods ahead.
        for n in 1..=5 {
            let now = start + n * every as i64;
            let hi = timed.round(&plan, now).unwrap();
            assert_eq!(hi, at(now + 2000));
            let part = plan.next_partition(hi);
            assert_eq!(part.lo, at(now + 1000), "contiguous: one period each");
            plan.added(part);
            assert_eq!(timed.round(&plan, now), None, "nothing more this round");
            let gone = plan.beyond_retain(i64::MAX).unwrap();
            // Keeping 2 (the one written to, the one ahead), the one dropped
            // ends now (`retain - 2` periods ago): its IDs were all made.
            assert_eq!(gone.hi, at(now));
            plan.dropped();
            assert_eq!(plan.len(), 2);
        }
    }

    #[test]
    fn the_plan_adds_ahead_and_drops_the_oldest_beyond_retain() {
        let mut p = Partitions::new(100, 200, 3);
        assert!(p.beyond_retain(i64::MAX).is_none());
        let part = p.next_partition(300);
        assert_eq!((part.lo, part.hi, part.name.as_str()), (200, 300, "p2"));
        p.added(part);
        assert!(p.beyond_retain(i64::MAX).is_none(), "three kept");
        // A bound below the last one is raised: partitions never overlap.
        let part = p.next_partition(250);
        assert_eq!((part.lo, part.hi), (300, 301));
        p.added(part);
        assert!(p.beyond_retain(99).is_none(), "not aged yet");
        let gone = p.beyond_retain(100).unwrap();
        assert_eq!((gone.lo, gone.hi, gone.name.as_str()), (0, 100, "p0"));
        p.dropped();
        assert!(p.beyond_retain(i64::MAX).is_none());
        assert_eq!(p.oldest_lo(), 100);
        let names: Vec<&str> = p.bounded().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["p1", "p2", "p3"]);
    }

    /// One round of a counter key's job over `plan`: the writers reached
    /// `max_id`; returns the partitions dropped.
    fn round(plan: &mut Partitions, counter: &mut Counter, max_id: i64) -> Vec<Partition> {
        if let Some(hi) = counter.round(plan, max_id) {
            plan.added(plan.next_partition(hi));
        }
        let mut gone = Vec::new();
        while let Some(p) = plan.beyond_retain(counter.aged_below()) {
            plan.dropped();
            gone.push(p);
        }
        gone
    }

    #[test]
    fn writers_slower_than_asked_lose_nothing_younger_than_retain_promises() {
        // Partitions made for 100 IDs a period; the writers take 60.
        let (retain, asked, rate) = (3, 100.0, 60);
        let mut plan = Counter::first_plan(asked, 1000, retain);
        let mut counter = Counter::new(retain);
        let mut at = vec![0];
        let mut drops = 0;
        for n in 1..=40usize {
            at.push(rate * n as i64);
            for p in round(&mut plan, &mut counter, at[n]) {
                drops += 1;
                // Every ID of it was taken a round (retain - 2) before.
                assert!(p.hi <= at[n - 1] + 1, "round {n} dropped {p:?}");
            }
            assert!(plan.len() <= retain as usize + 1, "round {n}: {plan:?}");
        }
        // The rule (asked rate, one drop a round) this replaces dropped the
        // partition being written from round 4 on; this one drops a period's
        // worth a round once the first partitions aged.
        assert!(drops >= 35, "{drops} drops in 40 rounds");
        assert!(plan.oldest_lo() >= at[37], "{plan:?}");
    }

    proptest! {
        /// Whatever the writers do, a counter key's job drops a partition
        /// only once every ID it may hold was taken `retain - 2` rounds
        /// before, keeps a bounded number of partitions, and always has room
        /// past the writers.
        #[test]
        fn a_counter_keys_drops_are_aged_and_its_partitions_bounded(
            retain in 2u32..7,
            asked in 1u32..10_000,
            periods in proptest::collection::vec(0i64..20_000, 1..60),
        ) {
            let mut plan = Counter::first_plan(asked as f64, 1000, retain);
            let mut counter = Counter::new(retain);
            let age = retain as usize - 2;
            let mut at = vec![0i64];
            for (i, written) in periods.iter().enumerate() {
                let n = i + 1;
                at.push(at[n - 1] + written);
                let before = plan.last_hi();
                for p in round(&mut plan, &mut counter, at[n]) {
                    let aged = if n >= age { at[n - age] + 1 } else { 1 };
                    prop_assert!(p.hi <= aged, "round {}: {:?} not aged ({})", n, p, aged);
                }
                prop_assert!(plan.len() <= retain as usize + 2, "round {}: {:?}", n, plan);
                prop_assert!(plan.last_hi() > at[n], "room past the writers");
                prop_assert!(plan.last_hi() >= before);
            }
        }
    }
}
