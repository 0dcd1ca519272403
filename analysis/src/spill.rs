//! The misses that are not leaks of a run judged streaming, kept in
//! temporary files rather than in memory (issue 52, item 1): a run with
//! heavy overflow has one per missed (status, poller), 9.9 million in the
//! hour at 3,000/s (docs/benchmarks.md), so a day would hold 24 times as
//! many. They arrive in the report's order, per poller by key
//! ([`Checker::misses_in_order`](crate::stream::Checker::misses_in_order)),
//! one file a poller, and are read back each time the report lists them.
//!
//! Each file is made already unlinked (`tempfile::tempfile`): it is gone when the process
//! ends, however it ends.

use crate::diff::Cause;
use crate::stream::HandedMiss;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// A miss on disk: its key (16 bytes, little-endian) and its cause.
const RECORD: usize = 17;

const CAUSES: [Cause; 4] = [
    Cause::Error,
    Cause::Overflow,
    Cause::Unexplained,
    Cause::FutureId,
];

/// The misses being written.
pub struct Spill {
    /// Per poller, its file (made on its first miss) and its count.
    files: Vec<(Option<BufWriter<File>>, u64)>,
}

/// The misses written, to be read back in order.
pub struct Misses {
    /// Per poller that missed any: (poller, its file, its count).
    files: Vec<(u8, File, u64)>,
}

impl Spill {
    pub fn new(pollers: usize) -> Spill {
        Spill {
            files: (0..pollers).map(|_| (None, 0)).collect(),
        }
    }

    /// Appends `m` to its poller's file (misses come per poller by key).
    pub fn write(&mut self, m: HandedMiss) -> io::Result<()> {
        let (file, n) = &mut self.files[m.poller as usize];
        let out = match file {
            Some(out) => out,
            None => file.insert(BufWriter::with_capacity(1 << 16, tempfile::tempfile()?)),
        };
        let mut rec = [0u8; RECORD];
        rec[..16].copy_from_slice(&m.key.to_le_bytes());
        rec[16] = CAUSES.iter().position(|&c| c == m.cause).unwrap_or(0) as u8;
        out.write_all(&rec)?;
        *n += 1;
        Ok(())
    }

    /// Ends the writing.
    pub fn finish(self) -> io::Result<Misses> {
        let mut files = Vec::new();
        for (p, (file, n)) in self.files.into_iter().enumerate() {
            if let Some(out) = file {
                files.push((p as u8, out.into_inner().map_err(|e| e.into_error())?, n));
            }
        }
        Ok(Misses { files })
    }
}

impl Misses {
    /// How many misses were written.
    pub fn len(&self) -> u64 {
        self.files.iter().map(|&(_, _, n)| n).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The misses in the order written: by poller, then key.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            files: &self.files,
            at: 0,
            reader: None,
            left: 0,
        }
    }
}

/// Reads [`Misses`] back; an I/O error ends it.
pub struct Iter<'a> {
    files: &'a [(u8, File, u64)],
    at: usize,
    reader: Option<BufReader<&'a File>>,
    left: u64,
}

impl Iterator for Iter<'_> {
    type Item = io::Result<HandedMiss>;

    fn next(&mut self) -> Option<io::Result<HandedMiss>> {
        while self.left == 0 {
            let (_, file, n) = self.files.get(self.at)?;
            let mut f: &File = file;
            if let Err(e) = f.seek(SeekFrom::Start(0)) {
                self.files = &[];
                return Some(Err(e));
            }
            self.reader = Some(BufReader::with_capacity(1 << 16, f));
            self.left = *n;
            self.at += 1;
        }
        let reader = self.reader.as_mut()?;
        let mut rec = [0u8; RECORD];
        if let Err(e) = reader.read_exact(&mut rec) {
            self.files = &[];
            self.left = 0;
            return Some(Err(e));
        }
        self.left -= 1;
        let mut key = [0u8; 16];
        key.copy_from_slice(&rec[..16]);
        Some(Ok(HandedMiss {
            poller: self.files[self.at - 1].0,
            key: u128::from_le_bytes(key),
            cause: CAUSES[rec[16] as usize % CAUSES.len()],
        }))
    }
}
