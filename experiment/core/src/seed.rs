//! Seeds of independent random streams, derived from one run's seed.
//!
//! A run draws from several generators: one per writer and per purpose. A
//! stream seeded `seed + index` or `seed ^ index` overlaps the next run's:
//! with `seed + index`, run 2's writer 0 draws exactly what run 1's writer 1
//! drew, and with `seed ^ index` runs 1 to 7 of 8 writers draw the same eight
//! streams, shuffled among the writers. Runs meant as replicates would share
//! most of their draws. Each stream's seed here is a hash of the run's seed,
//! the purpose and the index, so that no two of them coincide.

/// SplitMix64's output function (Steele, Lea and Flood, "Fast Splittable
/// Pseudorandom Number Generators", OOPSLA 2014; the constants of Vigna's
/// reference code, <https://prng.di.unimi.it/splitmix64.c>): a stateless
/// 64-bit mix.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of stream `index` of `purpose` (a constant naming what it draws)
/// in a run seeded `seed`.
pub fn stream(seed: u64, purpose: u64, index: u32) -> u64 {
    splitmix64(splitmix64(splitmix64(seed) ^ purpose) ^ u64::from(index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Ten runs of eight streams of two purposes: 160 seeds, all distinct,
    /// where `seed + index` and `seed ^ index` give 17 and 16 a purpose.
    #[test]
    fn the_streams_of_different_runs_and_indexes_never_coincide() {
        let mut seeds = HashSet::new();
        let (mut added, mut xored) = (HashSet::new(), HashSet::new());
        for run in 1..=10u64 {
            for purpose in [1, 2] {
                for index in 0..8u32 {
                    seeds.insert(stream(run, purpose, index));
                    added.insert((run + u64::from(index), purpose));
                    xored.insert((run ^ u64::from(index), purpose));
                }
            }
        }
        assert_eq!(seeds.len(), 160);
        assert_eq!((added.len(), xored.len()), (34, 32));
    }
}
