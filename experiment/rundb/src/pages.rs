//! A served page's IDs as one value: `client_requests.served`.
//!
//! A client recorded by `experiment serve --record` may ask for thousands of
//! pages of 200 a second. A row per observation caps the recorder near 3,000
//! such pages a second (docs/benchmarks.md), so a recorded client's page is
//! stored as one value, the IDs it served in response order, and `analyze`
//! expands it into the request's observations ([`decode`]). The harness's own
//! pollers, which ask once a second, keep a row per observation.
//!
//! Two encodings, told apart by the first byte, both exact:
//! - [`DECIMAL`]: every ID is the canonical decimal text of a `u64` (Snowflake,
//!   Mastodon): each is stored as the zigzag LEB128 varint of its difference
//!   from the previous one (the first from 0). A page is sorted, so most
//!   differences take three or four bytes, against about twenty as text.
//! - [`TEXT`]: any other IDs (Misskey's aid): each as its length (a varint)
//!   and its bytes.
//!
//! Pure: no I/O.

/// The first byte of a page whose IDs are all canonical decimal `u64`s.
pub const DECIMAL: u8 = 1;
/// The first byte of a page of other IDs, each length-prefixed.
pub const TEXT: u8 = 2;

/// The IDs of a page, in order, as one value.
pub fn encode<S: AsRef<str>>(ids: &[S]) -> Vec<u8> {
    let decimal: Option<Vec<u64>> = ids.iter().map(|s| canonical_u64(s.as_ref())).collect();
    if let Some(numbers) = decimal {
        return encode_numbers(&numbers);
    }
    let mut out = Vec::with_capacity(1 + ids.len() * 12);
    out.push(TEXT);
    for id in ids {
        let bytes = id.as_ref().as_bytes();
        put_varint(&mut out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    out
}

/// The page of IDs written as these numbers' decimal text: [`encode`] of
/// those texts, without making them (a recorded client's page, whose IDs
/// the server handed over as numbers).
pub fn encode_numbers(numbers: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + numbers.len() * 4);
    out.push(DECIMAL);
    let mut previous = 0u64;
    for &n in numbers {
        // Wrapping keeps every difference of two u64s in an i64's bits.
        let delta = n.wrapping_sub(previous) as i64;
        put_varint(&mut out, ((delta << 1) ^ (delta >> 63)) as u64);
        previous = n;
    }
    out
}

/// The IDs [`encode`] stored, in order; an error names what is wrong with a
/// value it did not write.
pub fn decode(bytes: &[u8]) -> Result<Vec<String>, String> {
    let (&tag, mut rest) = bytes
        .split_first()
        .ok_or("an empty served page (no encoding byte)")?;
    let mut ids = Vec::new();
    match tag {
        DECIMAL => {
            let mut previous = 0u64;
            while !rest.is_empty() {
                let zigzag = take_varint(&mut rest)?;
                let delta = ((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64);
                previous = previous.wrapping_add(delta as u64);
                ids.push(previous.to_string());
            }
        }
        TEXT => {
            while !rest.is_empty() {
                let len = usize::try_from(take_varint(&mut rest)?)
                    .map_err(|_| "a served ID longer than memory")?;
                if len > rest.len() {
                    return Err("a served page cut short".into());
                }
                let (id, tail) = rest.split_at(len);
                ids.push(String::from_utf8(id.to_vec()).map_err(|_| "a served ID not UTF-8")?);
                rest = tail;
            }
        }
        other => return Err(format!("a served page of unknown encoding {other}")),
    }
    Ok(ids)
}

/// `text` as a `u64` if it is exactly that number's decimal text (no sign,
/// no leading zero), so that decoding gives the same text back.
fn canonical_u64(text: &str) -> Option<u64> {
    let n: u64 = text.parse().ok()?;
    let canonical = !text.starts_with('+') && (text == "0" || !text.starts_with('0'));
    canonical.then_some(n)
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn take_varint(rest: &mut &[u8]) -> Result<u64, String> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, tail) = rest.split_first().ok_or("a served page cut short")?;
        *rest = tail;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err("a served page with a varint longer than 64 bits".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_sorted_page_of_snowflakes_takes_a_few_bytes_an_id() {
        let ids: Vec<String> = (0..200u64)
            .map(|i| (1_850_000_000_000_000_000 - i * 4_194_304 * 17).to_string())
            .collect();
        let bytes = encode(&ids);
        assert_eq!(bytes[0], DECIMAL);
        assert!(bytes.len() < 200 * 5, "{} bytes", bytes.len());
        assert_eq!(decode(&bytes).unwrap(), ids);
    }

    #[test]
    fn ids_that_are_not_canonical_numbers_are_kept_as_text() {
        for ids in [
            vec!["9xkq7b2n4c", "9xkq7b2n4b"],
            vec!["007", "8"],
            vec!["+5"],
        ] {
            let bytes = encode(&ids);
            assert_eq!(bytes[0], TEXT, "{ids:?}");
            assert_eq!(decode(&bytes).unwrap(), ids);
        }
        assert_eq!(decode(&encode::<&str>(&[])).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_value_it_did_not_write_is_an_error_not_a_panic() {
        for bad in [
            &[][..],
            &[9, 1],
            &[DECIMAL, 0x80],
            &[TEXT, 5, b'a'],
            &[TEXT, 1, 0xff],
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
        let too_long = [
            DECIMAL, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1,
        ];
        assert!(decode(&too_long).is_err());
    }

    proptest! {
        #[test]
        fn any_numbers_round_trip(ids in proptest::collection::vec(any::<u64>(), 0..300)) {
            let text: Vec<String> = ids.iter().map(u64::to_string).collect();
            prop_assert_eq!(decode(&encode(&text)).unwrap(), text);
        }

        #[test]
        fn numbers_encode_as_their_decimal_text_does(ids in proptest::collection::vec(any::<u64>(), 0..300)) {
            let text: Vec<String> = ids.iter().map(u64::to_string).collect();
            prop_assert_eq!(encode_numbers(&ids), encode(&text));
        }

        #[test]
        fn any_text_round_trips(ids in proptest::collection::vec(".{0,30}", 0..50)) {
            prop_assert_eq!(decode(&encode(&ids)).unwrap(), ids);
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes);
        }
    }
}
