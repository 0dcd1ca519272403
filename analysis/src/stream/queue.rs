//! What the checker that streams has settled but not yet handed over, in
//! the report's order: a queue that takes items nearly in order (statuses
//! settle from the lowest key up, but for the few that waited) and gives
//! the least first. The items in order join a run at its back, O(1); only
//! those below the run's last go to a binary heap. A heap of all of them
//! cost 3 % of `analyze`'s time on the hour at 3,000/s (docs/benchmarks.md).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug)]
pub(super) struct NearlySorted<T> {
    /// Ascending.
    run: VecDeque<T>,
    /// The items that came below the run's last.
    late: BinaryHeap<Reverse<T>>,
}

impl<T: Ord> Default for NearlySorted<T> {
    fn default() -> Self {
        NearlySorted {
            run: VecDeque::new(),
            late: BinaryHeap::new(),
        }
    }
}

impl<T: Ord> NearlySorted<T> {
    pub(super) fn push(&mut self, x: T) {
        match self.run.back() {
            Some(last) if x < *last => self.late.push(Reverse(x)),
            _ => self.run.push_back(x),
        }
    }

    /// The least item.
    pub(super) fn peek(&self) -> Option<&T> {
        match (self.run.front(), self.late.peek()) {
            (Some(a), Some(Reverse(b))) => Some(if b < a { b } else { a }),
            (a, b) => a.or(b.map(|r| &r.0)),
        }
    }

    /// Takes the least item.
    pub(super) fn pop(&mut self) -> Option<T> {
        let from_late = match (self.run.front(), self.late.peek()) {
            (Some(a), Some(Reverse(b))) => b < a,
            (None, _) => true,
            (Some(_), None) => false,
        };
        if from_late {
            self.late.pop().map(|r| r.0)
        } else {
            self.run.pop_front()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the order pushed (in order, out of it, ties, pops between
    /// pushes), the least comes out first, as from a heap.
    #[test]
    fn the_least_comes_out_first() {
        let mut q = NearlySorted::default();
        let mut heap = BinaryHeap::new();
        let mut x: u64 = 11;
        for round in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(3) {
                assert_eq!(q.peek().copied(), heap.peek().map(|r: &Reverse<u64>| r.0));
                assert_eq!(q.pop(), heap.pop().map(|r| r.0));
            } else {
                // Mostly rising, some below, some equal.
                let below = if x.is_multiple_of(5) { 3 * (x % 50) } else { 0 };
                let v = (round + (x % 7) * 2).saturating_sub(below);
                q.push(v);
                heap.push(Reverse(v));
            }
        }
        while let Some(Reverse(v)) = heap.pop() {
            assert_eq!(q.pop(), Some(v));
        }
        assert_eq!(q.pop(), None);
        assert_eq!(q.peek(), None);
    }
}
