//! The keys a table's committed rows have now, as a log decoder must know
//! them to expire what a TRUNCATE or a dropped partition takes
//! (PostgreSQL's [`crate::targets::postgres::decode::Decoder`], MariaDB's
//! [`crate::targets::mariadb::binlog::Decoder`]).
//!
//! A watch reads a production table for weeks: a set of every live key
//! grew by about 90 bytes a row (a soak at 300 commits a second,
//! docs/benchmarks.md, "watch for weeks"), with no end while rows are
//! not deleted. Keys of an integer column are held as ranges of
//! consecutive ones instead: the keys of a sequence or an AUTO_INCREMENT
//! column are nearly consecutive once their transactions have committed,
//! so the ranges stay few whatever the table's size. A key is an integer
//! only in its canonical spelling (what `i64`'s `Display` writes back), so
//! every key comes back exactly as it came in. A key column without a
//! unique index may repeat a key: the rows beyond a key's first are
//! counted apart, so a key stays live until its last row is deleted.

use std::collections::{BTreeMap, HashMap, HashSet};

/// A multiset of keys (their text, as the log spells them).
#[derive(Clone, Debug, Default)]
pub struct LiveKeys {
    /// Integer keys: first -> last of each run of consecutive ones;
    /// disjoint and not adjacent.
    ranges: BTreeMap<i64, i64>,
    /// Every other key.
    text: HashSet<String>,
    /// Keys held by more than one row: how many rows beyond the first.
    repeats: HashMap<String, u64>,
}

/// The key as an integer, if `key` is one in its canonical spelling.
fn integer(key: &str) -> Option<i64> {
    key.parse::<i64>().ok().filter(|n| n.to_string() == key)
}

impl LiveKeys {
    /// A row holding `key` was inserted.
    pub fn insert(&mut self, key: &str) {
        if self.contains(key) {
            *self.repeats.entry(key.to_string()).or_default() += 1;
            return;
        }
        self.insert_first(key);
    }

    /// A row holding `key` was deleted (a key not held is ignored: the
    /// reader started after its insert).
    pub fn remove(&mut self, key: &str) {
        if let Some(more) = self.repeats.get_mut(key) {
            *more -= 1;
            if *more == 0 {
                self.repeats.remove(key);
            }
            return;
        }
        self.remove_last(key);
    }

    fn contains(&self, key: &str) -> bool {
        match integer(key) {
            Some(n) => self
                .ranges
                .range(..=n)
                .next_back()
                .is_some_and(|(_, &last)| last >= n),
            None => self.text.contains(key),
        }
    }

    fn insert_first(&mut self, key: &str) {
        let Some(n) = integer(key) else {
            self.text.insert(key.to_string());
            return;
        };
        let below = self.ranges.range(..=n).next_back().map(|(&a, &b)| (a, b));
        if below.is_some_and(|(_, last)| last >= n) {
            return;
        }
        let joins_below = below.filter(|&(_, last)| last.checked_add(1) == Some(n));
        let above = n
            .checked_add(1)
            .and_then(|m| self.ranges.get(&m).map(|&last| (m, last)));
        let first = match joins_below {
            Some((first, _)) => first,
            None => n,
        };
        let last = match above {
            Some((start, last)) => {
                self.ranges.remove(&start);
                last
            }
            None => n,
        };
        self.ranges.insert(first, last);
    }

    fn remove_last(&mut self, key: &str) {
        let Some(n) = integer(key) else {
            self.text.remove(key);
            return;
        };
        let Some((first, last)) = self.ranges.range(..=n).next_back().map(|(&a, &b)| (a, b)) else {
            return;
        };
        if last < n {
            return;
        }
        self.ranges.remove(&first);
        if first < n {
            self.ranges.insert(first, n - 1);
        }
        if n < last {
            self.ranges.insert(n + 1, last);
        }
    }

    /// Every key, once, sorted as text (the order the expired rows are
    /// written in).
    pub fn sorted(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .ranges
            .iter()
            .flat_map(|(&first, &last)| (first..=last).map(|n| n.to_string()))
            .chain(self.text.iter().cloned())
            .collect();
        keys.sort();
        keys
    }

    /// Runs of integer keys and other keys held: what its memory grows with.
    #[cfg(test)]
    fn pieces(&self) -> usize {
        self.ranges.len() + self.text.len() + self.repeats.len()
    }

    /// Every key, emptying the set (a TRUNCATE): as [`LiveKeys::sorted`].
    pub fn take_sorted(&mut self) -> Vec<String> {
        let keys = self.sorted();
        *self = LiveKeys::default();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::LiveKeys;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn consecutive_keys_are_one_range_and_a_removal_splits_it() {
        let mut live = LiveKeys::default();
        for n in [3, 1, 2, 5, 4] {
            live.insert(&n.to_string());
        }
        assert_eq!(live.pieces(), 1);
        live.remove("3");
        assert_eq!(live.pieces(), 2);
        assert_eq!(live.sorted(), ["1", "2", "4", "5"]);
        live.insert("3");
        assert_eq!(live.pieces(), 1);
    }

    #[test]
    fn a_key_not_spelled_as_its_integer_is_kept_as_text() {
        let mut live = LiveKeys::default();
        for key in ["007", "7", "+8", "-0", "abc", "9223372036854775808"] {
            live.insert(key);
        }
        assert_eq!(
            live.sorted(),
            ["+8", "-0", "007", "7", "9223372036854775808", "abc"]
        );
        live.remove("007");
        assert_eq!(
            live.sorted(),
            ["+8", "-0", "7", "9223372036854775808", "abc"]
        );
    }

    #[test]
    fn the_extreme_integers_do_not_overflow() {
        let mut live = LiveKeys::default();
        for n in [i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1] {
            live.insert(&n.to_string());
        }
        assert_eq!(live.pieces(), 2);
        live.remove(&i64::MAX.to_string());
        live.remove(&i64::MIN.to_string());
        assert_eq!(live.pieces(), 2);
    }

    #[test]
    fn a_repeated_key_stays_until_its_last_row_goes() {
        let mut live = LiveKeys::default();
        for key in ["5", "5", "x", "x", "6"] {
            live.insert(key);
        }
        live.remove("5");
        live.remove("x");
        assert_eq!(live.sorted(), ["5", "6", "x"]);
        live.remove("5");
        live.remove("x");
        assert_eq!(live.sorted(), ["6"]);
        assert_eq!(live.take_sorted(), ["6"]);
        assert_eq!(live.pieces(), 0);
    }

    proptest! {
        /// The same keys, in the same order, as a plain count of rows per
        /// key's text (a delete of a key not held does nothing).
        #[test]
        fn it_holds_what_a_count_of_the_text_holds(
            ops in proptest::collection::vec((any::<bool>(), -40i64..40, any::<bool>()), 0..300)
        ) {
            let mut live = LiveKeys::default();
            let mut plain: BTreeMap<String, u64> = BTreeMap::new();
            for (insert, n, padded) in ops {
                let key = if padded { format!("0{n}") } else { n.to_string() };
                if insert {
                    live.insert(&key);
                    *plain.entry(key).or_default() += 1;
                } else {
                    live.remove(&key);
                    if let Some(rows) = plain.get_mut(&key) {
                        *rows -= 1;
                        if *rows == 0 {
                            plain.remove(&key);
                        }
                    }
                }
            }
            prop_assert_eq!(live.sorted(), plain.into_keys().collect::<Vec<_>>());
        }
    }
}
