//! The open statuses of the checker that streams, in key order: one vector
//! of keys and one of their [`Open`] state, not a hash map beside an
//! ordered set (docs/benchmarks.md, "At scale": a map entry and a set entry
//! for every truth row cost more than the check).
//!
//! Keys arrive nearly in order (the truth in key order, a page's statuses
//! next to each other), so a status is appended at the end, or found by a
//! galloping search from where the last one was found, a few steps away.
//! Statuses settle mostly from the lowest key up: a settled one leaves a
//! tombstone, the front advances past them, and the vectors are compacted
//! once the tombstones outnumber the open statuses (so each removal costs
//! O(1), amortized, and memory is the open statuses', give or take half).

use super::Open;

#[derive(Debug, Default)]
pub(super) struct Ring {
    /// Keys, ascending, from `start` on (before it: all settled).
    keys: Vec<u128>,
    /// Beside each key, its state; `None`: settled (a tombstone).
    vals: Vec<Option<Open>>,
    /// The first position that may be open.
    start: usize,
    /// Open statuses.
    live: usize,
    /// Where the last search ended: the next starts there.
    finger: usize,
    /// Changes whenever an open status's position changes or one opens
    /// below the last (a compaction, an insertion, a revival): positions
    /// kept across it name other statuses.
    version: u64,
}

/// Tombstones allowed beyond the open statuses before a compaction.
const SLACK: usize = 4096;

impl Ring {
    /// Open statuses.
    pub(super) fn len(&self) -> usize {
        self.live
    }

    /// See [`Ring::version`]'s field: positions taken from [`Ring::through`]
    /// stay those of the same statuses, and no status opens below the
    /// last, while it is unchanged.
    pub(super) fn version(&self) -> u64 {
        self.version
    }

    /// The lowest open key.
    pub(super) fn first_key(&self) -> Option<u128> {
        (self.start..self.keys.len())
            .find(|&i| self.vals[i].is_some())
            .map(|i| self.keys[i])
    }

    /// The position of `key`, or where it would go: the first position
    /// from `start` whose key is at least `key`.
    fn lower_bound(&mut self, key: u128) -> usize {
        let (k, n, start) = (&self.keys, self.keys.len(), self.start);
        if n == start || k[n - 1] < key {
            return n;
        }
        let h = self.finger.clamp(start, n);
        let (mut lo, mut hi);
        if h == n || k[h] >= key {
            // At or before h: gallop down.
            hi = h;
            let mut step = 1;
            loop {
                if hi < start + step {
                    lo = start;
                    break;
                }
                let probe = hi - step;
                if k[probe] < key {
                    lo = probe + 1;
                    break;
                }
                hi = probe;
                step *= 2;
            }
        } else {
            // After h: gallop up.
            lo = h + 1;
            let mut step = 1;
            loop {
                let probe = lo + step - 1;
                if probe >= n {
                    hi = n;
                    break;
                }
                if k[probe] >= key {
                    hi = probe;
                    break;
                }
                lo = probe + 1;
                step *= 2;
            }
        }
        lo += k[lo..hi].partition_point(|&x| x < key);
        self.finger = lo;
        lo
    }

    /// The open status `key`, opened with `open()` if it is not (then
    /// `true`).
    pub(super) fn get_or_open(
        &mut self,
        key: u128,
        open: impl FnOnce() -> Open,
    ) -> (&mut Open, bool) {
        let i = self.lower_bound(key);
        let appended = i == self.keys.len();
        if appended {
            self.keys.push(key);
            self.vals.push(None);
        } else if self.keys[i] != key {
            // Rare: a key below the newest (a page's statuses come newest first).
            self.keys.insert(i, key);
            self.vals.insert(i, None);
        }
        let v = &mut self.vals[i];
        let opened = v.is_none();
        self.live += opened as usize;
        self.version += (opened && !appended) as u64;
        (v.get_or_insert_with(open), opened)
    }

    /// Positions from the lowest open key through `bound`, for
    /// [`Ring::at`] and [`Ring::settle_at`]; stable until [`Ring::tidy`].
    pub(super) fn through(&self, bound: u128) -> std::ops::Range<usize> {
        let end = self.start + self.keys[self.start..].partition_point(|&k| k <= bound);
        self.start..end
    }

    /// The open status at position `i` (`None`: settled).
    pub(super) fn at(&self, i: usize) -> Option<(u128, &Open)> {
        self.vals[i].as_ref().map(|o| (self.keys[i], o))
    }

    /// The status at position `i` settles.
    pub(super) fn settle_at(&mut self, i: usize) {
        if self.vals[i].take().is_some() {
            self.live -= 1;
        }
    }

    /// Advances past the settled front, and compacts when the tombstones
    /// outnumber the open statuses.
    pub(super) fn tidy(&mut self) {
        while self.start < self.keys.len() && self.vals[self.start].is_none() {
            self.start += 1;
        }
        let dead = self.keys.len() - self.live;
        if dead <= self.live + SLACK {
            return;
        }
        let mut w = 0;
        for r in self.start..self.keys.len() {
            if let Some(v) = self.vals[r].take() {
                self.keys[w] = self.keys[r];
                self.vals[w] = Some(v);
                w += 1;
            }
        }
        self.keys.truncate(w);
        self.vals.truncate(w);
        if self.keys.capacity() > 4 * w.max(SLACK) {
            self.keys.shrink_to(2 * w);
            self.vals.shrink_to(2 * w);
        }
        self.start = 0;
        self.finger = 0;
        self.version += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn open(t: i64) -> Open {
        Open::new(t)
    }

    /// The ring against a map: the same open statuses, in the same order,
    /// through insertions near the end and below it, lookups anywhere,
    /// and settling from the front and out of order with compactions.
    #[test]
    fn the_ring_is_an_ordered_map_of_open_statuses() {
        let mut ring = Ring::default();
        let mut map: BTreeMap<u128, i64> = BTreeMap::new();
        let mut x: u64 = 7;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..20_000u64 {
            let r = next();
            let top = round as u128 * 10;
            // Mostly new keys near the top, some below, some looked up.
            let key = top.saturating_sub(u128::from(r % 64));
            match r % 5 {
                0..=3 => {
                    // A lookup that opens: new keys, and ones open or settled.
                    let was = map.contains_key(&key);
                    let t = (key as i64).wrapping_add(round as i64);
                    let (o, opened) = ring.get_or_open(key, || open(t));
                    assert_eq!(opened, !was);
                    assert_eq!(o.id_time_ms, *map.entry(key).or_insert(t));
                }
                _ => {
                    // Settle every third open key through a bound.
                    let bound = key.saturating_sub(u128::from(r % 500));
                    for i in ring.through(bound) {
                        if let Some((k, o)) = ring.at(i) {
                            assert_eq!(Some(&o.id_time_ms), map.get(&k));
                            if (k + u128::from(round)) % 3 == 0 || r % 2 == 0 {
                                ring.settle_at(i);
                                map.remove(&k);
                            }
                        }
                    }
                    ring.tidy();
                }
            }
            assert_eq!(ring.len(), map.len());
            assert_eq!(ring.first_key(), map.keys().next().copied());
        }
        let all: Vec<u128> = ring
            .through(u128::MAX)
            .filter_map(|i| ring.at(i).map(|(k, _)| k))
            .collect();
        assert_eq!(all, map.keys().copied().collect::<Vec<_>>());
    }
}
