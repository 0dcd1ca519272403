//! A consumer's delivered file (`--delivered NAME=FILE`), read as it grows:
//! each read takes the complete lines appended since the last one, so every
//! delivery is timestamped at most one read period after it was written.
//!
//! A line names one key: a CSV line's first field (quoted or not; a first
//! line whose first field is `id`, `key` or the key column's name is a
//! header), or a JSON object's `"key"` (else `"id"`), a number or a string.
//! A line that names no key is kept as garbage with its text, never a
//! crash; blank lines are skipped. [`parse_line`] is pure; [`Tail`] reads
//! the file.

use rundb::DeliveryRow;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// The longest line kept whole; a longer one is garbage, its text cut.
pub const MAX_LINE: usize = 64 * 1024;

/// The most a read takes from the file, so that memory stays bounded
/// whatever the consumer writes: the rest is the next read's.
pub const MAX_READ: usize = 4 * 1024 * 1024;

/// `NAME=FILE` of `--delivered`, names unique (`experiment judge`'s and
/// `experiment watch`'s).
pub fn parse_delivered(specs: &[String]) -> Result<Vec<(String, PathBuf)>, String> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for spec in specs {
        let (name, file) = spec
            .split_once('=')
            .filter(|(n, f)| !n.is_empty() && !f.is_empty())
            .ok_or_else(|| {
                format!("bad --delivered '{spec}': expected NAME=FILE, such as relay=out.csv")
            })?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("--delivered {name}: two consumers have that name"));
        }
        out.push((name.to_string(), file.into()));
    }
    Ok(out)
}

/// What a line of a delivered file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Key(String),
    /// A header line, or a blank one.
    Skip,
    /// It names no key: its text.
    Garbage(String),
}

/// Reads one line (`first`: it is the file's first line, which may be a
/// header naming `key_column`).
pub fn parse_line(text: &str, first: bool, key_column: &str) -> Line {
    let line = text.trim();
    if line.is_empty() {
        return Line::Skip;
    }
    let garbage = || Line::Garbage(cut(line, 200).to_string());
    if line.starts_with('{') {
        let Ok(serde_json::Value::Object(object)) = serde_json::from_str(line) else {
            return garbage();
        };
        return match object.get("key").or_else(|| object.get("id")) {
            Some(serde_json::Value::Number(n)) if n.is_i64() || n.is_u64() => {
                Line::Key(n.to_string())
            }
            Some(serde_json::Value::String(s)) if !s.is_empty() => Line::Key(s.clone()),
            _ => garbage(),
        };
    }
    let field = match line.strip_prefix('"') {
        Some(body) => {
            // A quoted field: `""` is a quote.
            let mut out = String::new();
            let mut chars = body.chars().peekable();
            let mut closed = false;
            while let Some(c) = chars.next() {
                if c == '"' {
                    if chars.peek() == Some(&'"') {
                        out.push('"');
                        chars.next();
                    } else {
                        closed = true;
                        break;
                    }
                } else {
                    out.push(c);
                }
            }
            if !closed {
                return garbage();
            }
            out
        }
        None => line.split(',').next().unwrap_or("").trim().to_string(),
    };
    if field.is_empty() || field.chars().any(char::is_control) {
        return garbage();
    }
    if first
        && (field.eq_ignore_ascii_case("id")
            || field.eq_ignore_ascii_case("key")
            || field == key_column)
    {
        return Line::Skip;
    }
    Line::Key(field)
}

fn cut(s: &str, bytes: usize) -> &str {
    if s.len() <= bytes {
        return s;
    }
    let mut end = bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// One consumer's file, read from where the last read stopped.
#[derive(Debug)]
pub struct Tail {
    pub name: String,
    pub path: PathBuf,
    key_column: String,
    offset: u64,
    /// Where the line being read starts: the end of the last complete line.
    line_start: u64,
    /// The end of the file not yet ended by a newline.
    partial: Vec<u8>,
    /// The partial line is over [`MAX_LINE`]: garbage, its rest skipped.
    overlong: bool,
    lines: i64,
}

impl Tail {
    pub fn new(name: &str, path: PathBuf, key_column: &str) -> Tail {
        Tail {
            name: name.into(),
            path,
            key_column: key_column.into(),
            offset: 0,
            line_start: 0,
            partial: Vec::new(),
            overlong: false,
            lines: 0,
        }
    }

    /// Starts reading after what the file already holds (`experiment
    /// watch`: the consumer was running before the truth starts): the
    /// complete lines there are counted, so later lines keep their numbers
    /// in the file, and not delivered; an unfinished last line is read from
    /// its start when it ends. A file not there yet is read from its start.
    pub fn skip_existing(&mut self) -> Result<(), String> {
        let shown = self.path.display();
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(format!(
                    "--delivered {}: cannot read {shown}: {e}",
                    self.name
                ));
            }
        };
        let mut reader = std::io::BufReader::new(file);
        let (mut offset, mut end, mut lines) = (0u64, 0u64, 0i64);
        loop {
            let chunk = std::io::BufRead::fill_buf(&mut reader)
                .map_err(|e| format!("--delivered {}: cannot read {shown}: {e}", self.name))?;
            if chunk.is_empty() {
                break;
            }
            for (i, &b) in chunk.iter().enumerate() {
                if b == b'\n' {
                    lines += 1;
                    end = offset + i as u64 + 1;
                }
            }
            let n = chunk.len();
            offset += n as u64;
            std::io::BufRead::consume(&mut reader, n);
        }
        self.offset = end;
        self.line_start = end;
        self.lines = lines;
        Ok(())
    }

    /// Where the next line starts and how many lines came before it: what
    /// [`Tail::resume_at`] takes (a watch resumed).
    pub fn position(&self) -> (u64, i64) {
        (self.line_start, self.lines)
    }

    /// Reads on from `offset`, the start of line `lines + 1`, as
    /// [`Tail::position`] gave it.
    pub fn resume_at(&mut self, offset: u64, lines: i64) {
        self.offset = offset;
        self.line_start = offset;
        self.lines = lines;
        self.partial.clear();
        self.overlong = false;
    }

    /// Lines read so far (blank and header lines too).
    pub fn lines(&self) -> i64 {
        self.lines
    }

    /// Reads what was appended since the last read (at most [`MAX_READ`]
    /// bytes: `more` says whether the file holds more), each complete line a
    /// row read at `now_ms`; with `last`, a final line without its newline
    /// counts too. A file not there yet is no error (the consumer has not
    /// made it); one that shrank is (a delivered file is appended to).
    pub fn read(&mut self, now_ms: i64, last: bool) -> Result<(Vec<DeliveryRow>, bool), String> {
        let shown = self.path.display();
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
            Err(e) => {
                return Err(format!(
                    "--delivered {}: cannot read {shown}: {e}",
                    self.name
                ));
            }
        };
        let len = file
            .metadata()
            .map_err(|e| format!("--delivered {}: cannot read {shown}: {e}", self.name))?
            .len();
        if len < self.offset {
            return Err(format!(
                "--delivered {}: {shown} shrank from {} to {len} bytes: a delivered file must only be appended to",
                self.name, self.offset
            ));
        }
        let want = (len - self.offset).min(MAX_READ as u64);
        let mut bytes = Vec::with_capacity(want as usize);
        file.seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.by_ref().take(want).read_to_end(&mut bytes))
            .map_err(|e| format!("--delivered {}: cannot read {shown}: {e}", self.name))?;
        let mut at = self.offset;
        self.offset += bytes.len() as u64;
        let more = self.offset < len;
        let mut rows = Vec::new();
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            at += piece.len() as u64;
            match piece.strip_suffix(b"\n") {
                Some(end) => {
                    self.push(end);
                    self.finish_line(now_ms, &mut rows);
                    self.line_start = at;
                }
                None => self.push(piece),
            }
        }
        if last && !more && (!self.partial.is_empty() || self.overlong) {
            self.finish_line(now_ms, &mut rows);
            self.line_start = self.offset;
        }
        Ok((rows, more))
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_LINE.saturating_sub(self.partial.len());
        if bytes.len() > room {
            self.overlong = true;
        }
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn finish_line(&mut self, now_ms: i64, rows: &mut Vec<DeliveryRow>) {
        self.lines += 1;
        let text = String::from_utf8_lossy(&self.partial).into_owned();
        let parsed = if self.overlong {
            Line::Garbage(cut(text.trim(), 200).to_string())
        } else {
            parse_line(&text, self.lines == 1, &self.key_column)
        };
        self.partial.clear();
        self.overlong = false;
        let (key, raw) = match parsed {
            Line::Skip => return,
            Line::Key(k) => (Some(k), None),
            Line::Garbage(g) => (None, Some(g)),
        };
        rows.push(DeliveryRow {
            consumer: self.name.clone(),
            line: self.lines,
            key,
            raw,
            read_at_ms: now_ms,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_json_lines_name_their_key_and_garbage_is_kept() {
        let p = |t: &str| parse_line(t, false, "event_id");
        assert_eq!(p("42,2026-11-26T20:00:00Z"), Line::Key("42".into()));
        assert_eq!(p("\"4,2\",x"), Line::Key("4,2".into()));
        assert_eq!(p(r#"{"key": 7, "at": 1}"#), Line::Key("7".into()));
        assert_eq!(p(r#"{"id": "a-1"}"#), Line::Key("a-1".into()));
        assert_eq!(p("   "), Line::Skip);
        assert_eq!(p(",x"), Line::Garbage(",x".into()));
        assert_eq!(
            p(r#"{"other": 1}"#),
            Line::Garbage(r#"{"other": 1}"#.into())
        );
        assert_eq!(p("{not json"), Line::Garbage("{not json".into()));
        assert_eq!(p("\"open"), Line::Garbage("\"open".into()));
        assert_eq!(parse_line("id,delivered_at", true, "id"), Line::Skip);
        assert_eq!(parse_line("event_id", true, "event_id"), Line::Skip);
        assert_eq!(parse_line("id", false, "id"), Line::Key("id".into()));
    }

    #[test]
    fn a_growing_file_is_read_line_by_line_and_a_last_partial_line_at_the_end() {
        let dir = testkit::temp_dir("tail");
        let path = dir.join("out.csv");
        let mut tail = Tail::new("relay", path.clone(), "id");
        assert_eq!(tail.read(1, false).unwrap().0, vec![], "not there yet");
        std::fs::write(&path, "id\n1\n2,x\n3").unwrap();
        let (rows, more) = tail.read(5, false).unwrap();
        assert!(!more);
        let keys: Vec<(i64, Option<&str>, i64)> = rows
            .iter()
            .map(|r| (r.line, r.key.as_deref(), r.read_at_ms))
            .collect();
        assert_eq!(keys, [(2, Some("1"), 5), (3, Some("2"), 5)]);
        std::fs::write(&path, "id\n1\n2,x\n3\n???,\n4").unwrap();
        let (rows, _) = tail.read(9, true).unwrap();
        let keys: Vec<(i64, Option<&str>)> =
            rows.iter().map(|r| (r.line, r.key.as_deref())).collect();
        assert_eq!(keys, [(4, Some("3")), (5, Some("???")), (6, Some("4"))]);
        std::fs::write(&path, "1\n").unwrap();
        let e = tail.read(10, false).unwrap_err();
        assert!(e.contains("shrank"), "{e}");
    }

    #[test]
    fn skipping_what_a_file_holds_keeps_line_numbers_and_an_unfinished_line() {
        let dir = testkit::temp_dir("tail-skip");
        let path = dir.join("out.csv");
        let mut absent = Tail::new("relay", dir.join("none.csv"), "id");
        absent.skip_existing().unwrap();
        assert_eq!(
            absent.lines(),
            0,
            "a file not there yet is read from its start"
        );
        std::fs::write(&path, "id\n1\n2\n3").unwrap();
        let mut tail = Tail::new("relay", path.clone(), "id");
        tail.skip_existing().unwrap();
        assert_eq!(tail.lines(), 3);
        std::fs::write(&path, "id\n1\n2\n33\n4\n").unwrap();
        let (rows, _) = tail.read(7, false).unwrap();
        let keys: Vec<(i64, Option<&str>)> =
            rows.iter().map(|r| (r.line, r.key.as_deref())).collect();
        assert_eq!(keys, [(4, Some("33")), (5, Some("4"))]);
    }

    #[test]
    fn a_tail_resumed_at_its_position_reads_on_from_the_unfinished_line() {
        let dir = testkit::temp_dir("tail-resume");
        let path = dir.join("out.csv");
        std::fs::write(&path, "1\n2\n3").unwrap();
        let mut tail = Tail::new("relay", path.clone(), "id");
        let (rows, _) = tail.read(1, false).unwrap();
        assert_eq!(rows.len(), 2);
        // Where line 3 starts, after two lines: what a resumed watch stored.
        assert_eq!(tail.position(), (4, 2));
        std::fs::write(&path, "1\n2\n33\n4\n").unwrap();
        let mut resumed = Tail::new("relay", path, "id");
        resumed.resume_at(4, 2);
        let (rows, _) = resumed.read(2, false).unwrap();
        let keys: Vec<(i64, Option<&str>)> =
            rows.iter().map(|r| (r.line, r.key.as_deref())).collect();
        assert_eq!(keys, [(3, Some("33")), (4, Some("4"))]);
        assert_eq!(resumed.position(), (9, 4));
    }

    #[test]
    fn a_consumer_faster_than_the_reads_loses_nothing_and_memory_stays_bounded() {
        let dir = testkit::temp_dir("tail-fast");
        let path = dir.join("out.csv");
        // 6 MiB of deliveries at once, more than one read takes, and a line
        // longer than any kept whole.
        let pad = "x".repeat(1000);
        let mut text: String = (1..=6000).map(|k| format!("{k},{pad}\n")).collect();
        text.push_str(&format!("{}\n6001\n", "y".repeat(MAX_LINE + 10)));
        std::fs::write(&path, &text).unwrap();
        let mut tail = Tail::new("relay", path, "id");
        let (first, more) = tail.read(1, false).unwrap();
        assert!(more, "the rest is the next read's");
        assert!(first.len() < 6000 && !first.is_empty());
        let mut rows = first;
        loop {
            let (next, more) = tail.read(2, true).unwrap();
            rows.extend(next);
            if !more {
                break;
            }
        }
        let keys: Vec<String> = rows.iter().filter_map(|r| r.key.clone()).collect();
        let expected: Vec<String> = (1..=6000).chain([6001]).map(|k| k.to_string()).collect();
        assert_eq!(keys, expected, "every key, in order");
        let garbage: Vec<&DeliveryRow> = rows.iter().filter(|r| r.key.is_none()).collect();
        assert_eq!(garbage.len(), 1);
        assert_eq!(garbage[0].line, 6001);
        assert_eq!(garbage[0].raw.as_ref().map(String::len), Some(200));
    }
}
