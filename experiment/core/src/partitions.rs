//! The retention plan of a range-partitioned event table: bounded
//! partitions of the key, oldest first, one added ahead of the writers and
//! the oldest dropped beyond a number kept. Pure: the targets send their
//! database's SQL (MariaDB's `REORGANIZE PARTITION` and `DROP PARTITION`,
//! PostgreSQL's `PARTITION OF` and `DETACH PARTITION`) and report back.

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

    /// The oldest partition beyond the retained ones, to drop. Call
    /// [`Partitions::dropped`] once the database dropped it.
    pub fn beyond_retain(&self) -> Option<Partition> {
        (self.bounded.len() > self.retain)
            .then(|| self.bounded.front().expect("more than retain").clone())
    }

    /// The oldest partition is gone.
    pub fn dropped(&mut self) {
        self.bounded.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_adds_ahead_and_drops_the_oldest_beyond_retain() {
        let mut p = Partitions::new(100, 200, 3);
        assert!(p.beyond_retain().is_none());
        let part = p.next_partition(300);
        assert_eq!((part.lo, part.hi, part.name.as_str()), (200, 300, "p2"));
        p.added(part);
        assert!(p.beyond_retain().is_none(), "three kept");
        // A bound below the last one is raised: partitions never overlap.
        let part = p.next_partition(250);
        assert_eq!((part.lo, part.hi), (300, 301));
        p.added(part);
        let gone = p.beyond_retain().unwrap();
        assert_eq!((gone.lo, gone.hi, gone.name.as_str()), (0, 100, "p0"));
        p.dropped();
        assert!(p.beyond_retain().is_none());
        assert_eq!(p.oldest_lo(), 100);
        let names: Vec<&str> = p.bounded().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["p1", "p2", "p3"]);
    }
}
