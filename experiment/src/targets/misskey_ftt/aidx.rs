//! Misskey's aidx IDs as one Misskey process makes them
//! (misskey-dev/misskey `packages/backend/src/misc/id/aidx.ts` at 09323238,
//! `genAidx` and `parseAidx`): 8 base36 digits of the ms since 2000-01-01
//! (`TIME2000`), 4 base36 characters of a per-process node ID, 4 base36
//! digits of a per-process counter incremented before every ID. Within one
//! ms, IDs of different processes sort by node ID, not by time.
//!
//! Same layout as the core's `misskey-aidx` (`experiment/core/src/id.rs`).
//! Pure: the time is an argument, nothing here reads a clock.

use rand::Rng;
use since_id::id::MISSKEY_EPOCH_MS;

const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
const TIME_LENGTH: usize = 8;
const NODE_LENGTH: usize = 4;
const NOISE_LENGTH: usize = 4;

/// One process's ID generator: its node ID and its counter.
#[derive(Clone, Debug)]
pub struct Aidx {
    node: String,
    counter: u64,
}

/// `n` in base36, left-padded with zeros and cut to its last `width` digits
/// (`toString(36).padStart(width, '0').slice(-width)`).
fn base36(mut n: u64, width: usize) -> String {
    let mut digits = vec![b'0'; width];
    for slot in digits.iter_mut().rev() {
        *slot = ALPHABET[(n % 36) as usize];
        n /= 36;
    }
    String::from_utf8(digits).expect("ASCII digits")
}

impl Aidx {
    /// A process with a random node ID (`customAlphabet(..., 4)()`), drawn from `rng`.
    pub fn new(rng: &mut impl Rng) -> Aidx {
        let node = (0..NODE_LENGTH)
            .map(|_| ALPHABET[rng.random_range(0..36)] as char)
            .collect();
        Aidx { node, counter: 0 }
    }

    /// A process with a given node ID (4 base36 characters).
    pub fn with_node(node: &str) -> Aidx {
        assert_eq!(node.len(), NODE_LENGTH, "an aidx node ID has 4 characters");
        Aidx {
            node: node.to_string(),
            counter: 0,
        }
    }

    /// `genAidx(t)`: the counter first, then time + node + counter.
    pub fn gen_at(&mut self, unix_ms: i64) -> String {
        self.counter += 1;
        format!(
            "{}{}{}",
            time_part(unix_ms),
            self.node,
            base36(self.counter, NOISE_LENGTH)
        )
    }
}

/// `getTime(t)`: ms since 2000, 0 before it, 8 base36 digits.
fn time_part(unix_ms: i64) -> String {
    base36((unix_ms - MISSKEY_EPOCH_MS).max(0) as u64, TIME_LENGTH)
}

/// `parseAidx(id).date`: the Unix ms of an aidx; `None` if it is not one.
pub fn parse_ms(id: &str) -> Option<i64> {
    if id.len() != TIME_LENGTH + NODE_LENGTH + NOISE_LENGTH {
        return None;
    }
    // `get`, not indexing: a client's multi-byte text of 16 bytes must not
    // cut a character (a panic that closed the connection).
    let time = u64::from_str_radix(id.get(..TIME_LENGTH)?, 36).ok()?;
    Some(MISSKEY_EPOCH_MS + time as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use since_id::id::Layout;

    #[test]
    fn text_that_is_not_an_aidx_is_none_even_with_multibyte_characters() {
        // 16 bytes, with a two-byte character across the 8th byte.
        assert_eq!(parse_ms("aaaaaaa\u{e9}xxxxxxx"), None);
        assert_eq!(parse_ms("short"), None);
        assert_eq!(parse_ms("00000001read0001"), Some(MISSKEY_EPOCH_MS + 1));
    }

    #[test]
    fn an_id_carries_its_time_node_and_counter() {
        let mut p = Aidx::with_node("ab12");
        let t = MISSKEY_EPOCH_MS + 36 * 36 + 5; // 1301 ms: "105" in base36
        assert_eq!(p.gen_at(t), "00000105ab120001");
        assert_eq!(p.gen_at(t), "00000105ab120002");
        assert_eq!(parse_ms("00000105ab120002"), Some(t));
    }

    #[test]
    fn the_core_layout_reads_the_same_time() {
        let aidx: Layout = "misskey-aidx".parse().unwrap();
        let mut p = Aidx::new(&mut rand_chacha::ChaCha8Rng::seed_from_u64(7));
        let t = 1_764_000_000_123;
        let id = p.gen_at(t);
        assert_eq!(aidx.ts_ms(aidx.parse(&id).unwrap()), t);
        assert_eq!(parse_ms(&id), Some(t));
    }

    #[test]
    fn within_one_ms_the_node_orders_processes_not_time() {
        let (mut early, mut late) = (Aidx::with_node("zzzz"), Aidx::with_node("0000"));
        let t = 1_764_000_000_000;
        let first = early.gen_at(t);
        let second = late.gen_at(t);
        assert!(second < first, "made later, sorts earlier");
    }

    #[test]
    fn the_counter_wraps_to_its_last_four_digits() {
        let mut p = Aidx::with_node("0000");
        p.counter = 36u64.pow(4) - 1;
        assert!(p.gen_at(MISSKEY_EPOCH_MS).ends_with("0000"));
        assert_eq!(parse_ms("short"), None);
    }
}
