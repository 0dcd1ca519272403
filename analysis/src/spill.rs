//! What a run judged streaming lists in its report but does not keep in
//! memory (issue 52, item 1): the misses that are not leaks, and the leaks
//! and late arrivals. A run with heavy overflow has one miss per missed
//! (status, poller), 9.9 million in the hour at 3,000/s, and 963,231 leaks
//! (docs/benchmarks.md): kept, they would grow with the run. The checker
//! hands each over once its place in the report's order is final
//! ([`Checker::misses_in_order`](crate::stream::Checker::misses_in_order),
//! [`Checker::findings_in_order`](crate::stream::Checker::findings_in_order));
//! they are written here, in that order, and read back each time the report
//! lists them.
//!
//! One home for both: a [`Tape`] is one temporary file of fixed-size
//! records, written in order and read back from the start as often as
//! needed. Each file is made already unlinked (`tempfile::tempfile`): it is
//! gone when the process ends, however it ends. The leaks and late
//! arrivals are handed over before the run's ticks are known; at the end
//! each is resolved once (its `id_skew_ms` and `required_k_ms`,
//! [`Spill::finish`]) onto a second tape, which the report reads.

use crate::diff::{Cause, Finding};
use crate::stream::{HandedFinding, HandedMiss};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::marker::PhantomData;

/// A record of fixed size, as a [`Tape`] stores it.
pub trait Record: Sized {
    /// Its size in bytes, at most [`MAX_RECORD`].
    const SIZE: usize;
    /// Writes it into `out` (`SIZE` bytes).
    fn put(&self, out: &mut [u8]);
    /// Reads it back from `rec` (`SIZE` bytes).
    fn get(rec: &[u8]) -> Self;
}

/// The largest [`Record::SIZE`].
pub const MAX_RECORD: usize = 128;

/// Bytes read or written at a time.
const BUFFER: usize = 1 << 16;

/// Records being written, in order, to one temporary file (made on the
/// first record).
pub struct TapeWriter<T> {
    out: Option<BufWriter<File>>,
    n: u64,
    of: PhantomData<T>,
}

/// Records on disk, read back in the order written.
pub struct Tape<T> {
    file: Option<File>,
    n: u64,
    of: PhantomData<T>,
}

impl<T: Record> Default for TapeWriter<T> {
    fn default() -> Self {
        TapeWriter {
            out: None,
            n: 0,
            of: PhantomData,
        }
    }
}

impl<T: Record> TapeWriter<T> {
    /// Appends `r`.
    pub fn push(&mut self, r: &T) -> io::Result<()> {
        debug_assert!(T::SIZE <= MAX_RECORD);
        let out = match &mut self.out {
            Some(out) => out,
            None => self
                .out
                .insert(BufWriter::with_capacity(BUFFER, tempfile::tempfile()?)),
        };
        let mut rec = [0u8; MAX_RECORD];
        r.put(&mut rec[..T::SIZE]);
        out.write_all(&rec[..T::SIZE])?;
        self.n += 1;
        Ok(())
    }

    /// Ends the writing.
    pub fn finish(self) -> io::Result<Tape<T>> {
        let file = match self.out {
            Some(out) => Some(out.into_inner().map_err(|e| e.into_error())?),
            None => None,
        };
        Ok(Tape {
            file,
            n: self.n,
            of: PhantomData,
        })
    }
}

impl<T: Record> Tape<T> {
    /// How many records were written.
    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The records in the order written. Each iterator keeps its own place
    /// (it seeks before each read), so several may be read in turn on one
    /// thread.
    pub fn iter(&self) -> TapeIter<'_, T> {
        TapeIter {
            file: self.file.as_ref(),
            left: self.n,
            offset: 0,
            buf: Vec::new(),
            at: 0,
            of: PhantomData,
        }
    }
}

/// Reads a [`Tape`] back; an I/O error ends it.
pub struct TapeIter<'a, T> {
    file: Option<&'a File>,
    /// Records not yet returned.
    left: u64,
    /// Where the next read starts in the file.
    offset: u64,
    buf: Vec<u8>,
    at: usize,
    of: PhantomData<T>,
}

impl<T: Record> TapeIter<'_, T> {
    /// Reads the next buffer of whole records.
    fn refill(&mut self) -> io::Result<()> {
        let Some(mut f) = self.file else {
            return Err(io::Error::other("a tape with records has no file"));
        };
        let per = (BUFFER / T::SIZE).max(1) as u64;
        let want = (per.min(self.left) as usize) * T::SIZE;
        self.buf.resize(want, 0);
        f.seek(SeekFrom::Start(self.offset))?;
        f.read_exact(&mut self.buf)?;
        self.offset += want as u64;
        self.at = 0;
        Ok(())
    }
}

impl<T: Record> Iterator for TapeIter<'_, T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.left == 0 {
            return None;
        }
        if self.at >= self.buf.len()
            && let Err(e) = self.refill()
        {
            self.left = 0;
            return Some(Err(e));
        }
        let rec = T::get(&self.buf[self.at..self.at + T::SIZE]);
        self.at += T::SIZE;
        self.left -= 1;
        Some(Ok(rec))
    }
}

const CAUSES: [Cause; 4] = [
    Cause::Error,
    Cause::Overflow,
    Cause::Unexplained,
    Cause::FutureId,
];

/// A miss on its poller's tape: its key (16 bytes, little-endian) and its
/// cause (the poller is the tape's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MissRecord {
    key: u128,
    cause: Cause,
}

impl Record for MissRecord {
    const SIZE: usize = 17;

    fn put(&self, out: &mut [u8]) {
        out[..16].copy_from_slice(&self.key.to_le_bytes());
        out[16] = CAUSES.iter().position(|&c| c == self.cause).unwrap_or(0) as u8;
    }

    fn get(rec: &[u8]) -> Self {
        MissRecord {
            key: u128_at(rec, 0),
            cause: CAUSES[rec[16] as usize % CAUSES.len()],
        }
    }
}

fn u128_at(rec: &[u8], at: usize) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&rec[at..at + 16]);
    u128::from_le_bytes(b)
}

fn u64_at(rec: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&rec[at..at + 8]);
    u64::from_le_bytes(b)
}

/// A leak or late arrival: its key (16 bytes), ID time, first seen,
/// visible, seen by, leaked by, late for and its tick's time (8 bytes
/// each, little-endian), and a byte of flags: which options are present,
/// and how its tick is found.
impl Record for HandedFinding {
    const SIZE: usize = 16 + 7 * 8 + 1;

    fn put(&self, out: &mut [u8]) {
        let (belongs_by_request, belongs_at) = self.belongs.unwrap_or((false, 0));
        let flags = self.first_seen_ms.is_some() as u8
            | (self.visible_ms.is_some() as u8) << 1
            | (self.belongs.is_some() as u8) << 2
            | (belongs_by_request as u8) << 3;
        out[..16].copy_from_slice(&self.key.to_le_bytes());
        let words = [
            self.id_time_ms as u64,
            self.first_seen_ms.unwrap_or(0) as u64,
            self.visible_ms.unwrap_or(0) as u64,
            self.seen_by,
            self.leaked_by,
            self.late_for,
            belongs_at as u64,
        ];
        for (i, w) in words.iter().enumerate() {
            out[16 + 8 * i..24 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        out[16 + 7 * 8] = flags;
    }

    fn get(rec: &[u8]) -> Self {
        let w = |i: usize| u64_at(rec, 16 + 8 * i);
        let flags = rec[16 + 7 * 8];
        let has = |bit: u8| flags & (1 << bit) != 0;
        HandedFinding {
            key: u128_at(rec, 0),
            id_time_ms: w(0) as i64,
            first_seen_ms: has(0).then_some(w(1) as i64),
            visible_ms: has(1).then_some(w(2) as i64),
            seen_by: w(3),
            leaked_by: w(4),
            late_for: w(5),
            belongs: has(2).then_some((has(3), w(6) as i64)),
        }
    }
}

/// A leak or late arrival resolved ([`Spill::finish`]): its key, its ID
/// time and what the report says of it (`finding.status` is 0: it is named
/// by its key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedFinding {
    pub key: u128,
    pub id_time_ms: i64,
    pub finding: Finding,
}

/// On disk: the key (16 bytes); ID time, first seen, visible, seen by,
/// leaked by, late for, id_skew_ms and required_k_ms (8 bytes each,
/// little-endian); a byte of flags, which options are present.
impl Record for KeyedFinding {
    const SIZE: usize = 16 + 8 * 8 + 1;

    fn put(&self, out: &mut [u8]) {
        let f = &self.finding;
        let options = [f.first_seen_ms, f.visible_ms, f.id_skew_ms, f.required_k_ms];
        let flags = options
            .iter()
            .enumerate()
            .fold(0u8, |m, (i, o)| m | (o.is_some() as u8) << i);
        out[..16].copy_from_slice(&self.key.to_le_bytes());
        let words = [
            self.id_time_ms as u64,
            f.first_seen_ms.unwrap_or(0) as u64,
            f.visible_ms.unwrap_or(0) as u64,
            f.seen_by,
            f.leaked_by,
            f.late_for,
            f.id_skew_ms.unwrap_or(0) as u64,
            f.required_k_ms.unwrap_or(0) as u64,
        ];
        for (i, w) in words.iter().enumerate() {
            out[16 + 8 * i..24 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        out[16 + 8 * 8] = flags;
    }

    fn get(rec: &[u8]) -> Self {
        let w = |i: usize| u64_at(rec, 16 + 8 * i);
        let flags = rec[16 + 8 * 8];
        let opt = |bit: u8, i: usize| (flags & (1 << bit) != 0).then_some(w(i) as i64);
        KeyedFinding {
            key: u128_at(rec, 0),
            id_time_ms: w(0) as i64,
            finding: Finding {
                status: 0,
                first_seen_ms: opt(0, 1),
                visible_ms: opt(1, 2),
                seen_by: w(3),
                leaked_by: w(4),
                late_for: w(5),
                id_skew_ms: opt(2, 6),
                required_k_ms: opt(3, 7),
            },
        }
    }
}

/// The misses being written: one tape a poller (misses come per poller by
/// key, the report's order), and the leaks and late arrivals as handed over.
pub struct Spill {
    misses: Vec<TapeWriter<MissRecord>>,
    findings: TapeWriter<HandedFinding>,
}

/// What was written, to be read back in order.
pub struct Spilled {
    /// Per poller that missed any: (poller, its tape).
    misses: Vec<(u8, Tape<MissRecord>)>,
    findings: Tape<KeyedFinding>,
}

impl Spill {
    pub fn new(pollers: usize) -> Spill {
        Spill {
            misses: (0..pollers).map(|_| TapeWriter::default()).collect(),
            findings: TapeWriter::default(),
        }
    }

    /// Appends `m` to its poller's tape.
    pub fn miss(&mut self, m: HandedMiss) -> io::Result<()> {
        self.misses[m.poller as usize].push(&MissRecord {
            key: m.key,
            cause: m.cause,
        })
    }

    /// Appends a leak or late arrival (they come in the report's order).
    pub fn finding(&mut self, f: &HandedFinding) -> io::Result<()> {
        self.findings.push(f)
    }

    /// Ends the writing: each leak and late arrival handed over is read
    /// back once, in order, and written as `resolve` makes it (its ticks
    /// known now) for the report to read.
    pub fn finish(self, mut resolve: impl FnMut(&HandedFinding) -> Finding) -> io::Result<Spilled> {
        let mut misses = Vec::new();
        for (p, w) in self.misses.into_iter().enumerate() {
            let tape = w.finish()?;
            if !tape.is_empty() {
                misses.push((p as u8, tape));
            }
        }
        let handed = self.findings.finish()?;
        let mut findings = TapeWriter::default();
        for f in handed.iter() {
            let f = f?;
            findings.push(&KeyedFinding {
                key: f.key,
                id_time_ms: f.id_time_ms,
                finding: resolve(&f),
            })?;
        }
        Ok(Spilled {
            misses,
            findings: findings.finish()?,
        })
    }
}

impl Spilled {
    /// How many misses were written.
    pub fn misses_len(&self) -> u64 {
        self.misses.iter().map(|(_, t)| t.len()).sum()
    }

    /// The misses in the order written: by poller, then key.
    pub fn misses(&self) -> impl Iterator<Item = io::Result<HandedMiss>> + '_ {
        self.misses.iter().flat_map(|(p, tape)| {
            tape.iter().map(move |m| {
                m.map(|m| HandedMiss {
                    poller: *p,
                    key: m.key,
                    cause: m.cause,
                })
            })
        })
    }

    /// The leaks and late arrivals in the order written (the report's),
    /// resolved.
    pub fn findings(&self) -> TapeIter<'_, KeyedFinding> {
        self.findings.iter()
    }

    /// How many leaks and late arrivals were written.
    pub fn findings_len(&self) -> u64 {
        self.findings.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(i: u64) -> HandedFinding {
        HandedFinding {
            key: (u128::from(i) << 70) | 0xdead_beef,
            id_time_ms: 1_700_000_000_000 + i as i64,
            first_seen_ms: (!i.is_multiple_of(3)).then_some(-(i as i64)),
            visible_ms: (!i.is_multiple_of(5)).then_some(i as i64 * 7),
            seen_by: i % 8,
            leaked_by: u64::MAX - i,
            late_for: i & 1,
            belongs: match i % 3 {
                0 => None,
                1 => Some((true, i as i64 - 40)),
                _ => Some((false, i64::MIN + i as i64)),
            },
        }
    }

    /// What the test's `resolve` makes of a finding: every field from it,
    /// so that a mix-up shows.
    fn resolved(f: &HandedFinding) -> Finding {
        Finding {
            status: 0,
            first_seen_ms: f.first_seen_ms,
            visible_ms: f.visible_ms,
            seen_by: f.seen_by,
            leaked_by: f.leaked_by,
            late_for: f.late_for,
            id_skew_ms: f.belongs.map(|(by_request, t)| t - by_request as i64),
            required_k_ms: f.first_seen_ms.map(|t| t.wrapping_mul(3)),
        }
    }

    /// Leaks and late arrivals come back resolved, in the order written,
    /// every field (options and extremes included), each resolved once, as
    /// often as read, and two readers of one tape keep their own places.
    #[test]
    fn findings_round_trip_in_order() {
        let mut spill = Spill::new(2);
        // More than a buffer's worth, so that the reader refills.
        let written: Vec<HandedFinding> = (0..3000).map(finding).collect();
        for f in &written {
            spill.finding(f).unwrap();
        }
        let mut resolves = 0;
        let spilled = spill
            .finish(|f| {
                resolves += 1;
                resolved(f)
            })
            .unwrap();
        assert_eq!(resolves, 3000);
        assert_eq!(spilled.findings_len(), 3000);
        let expected: Vec<KeyedFinding> = written
            .iter()
            .map(|f| KeyedFinding {
                key: f.key,
                id_time_ms: f.id_time_ms,
                finding: resolved(f),
            })
            .collect();
        let read: Vec<KeyedFinding> = spilled.findings().map(Result::unwrap).collect();
        assert_eq!(read, expected);
        let mut a = spilled.findings();
        let mut b = spilled.findings();
        for f in &expected {
            assert_eq!(&a.next().unwrap().unwrap(), f);
            assert_eq!(&b.next().unwrap().unwrap(), f);
        }
        assert!(a.next().is_none() && b.next().is_none());
        assert_eq!(spilled.misses_len(), 0);
        assert_eq!(spilled.misses().count(), 0);
    }

    /// The misses come back by poller, each poller's in the order written.
    #[test]
    fn misses_round_trip_by_poller() {
        let mut spill = Spill::new(3);
        let m = |poller: u8, key: u128, cause| HandedMiss { poller, key, cause };
        let written = [
            m(2, 5, Cause::Overflow),
            m(0, 1, Cause::Error),
            m(2, 9, Cause::FutureId),
            m(0, u128::MAX, Cause::Unexplained),
        ];
        for x in written {
            spill.miss(x).unwrap();
        }
        let spilled = spill.finish(resolved).unwrap();
        let read: Vec<HandedMiss> = spilled.misses().map(Result::unwrap).collect();
        assert_eq!(read, [written[1], written[3], written[0], written[2]]);
        assert_eq!(spilled.misses_len(), 4);
        assert_eq!(spilled.findings().count(), 0);
    }
}
