//! PostgreSQL's `test_decoding` output, read into the judged table's truth.
//! Pure: no I/O, no clock.
//!
//! `test_decoding` (PostgreSQL's contrib/test_decoding/test_decoding.c, the
//! example output plugin every server ships) prints, with the options
//! `include-xids` and `include-timestamp` on, one text row per event of each
//! committed transaction, in commit order:
//!
//! ```text
//! BEGIN 750
//! table public.outbox: INSERT: id[bigint]:2 payload[text]:'it''s'
//! table public.outbox: DELETE: id[bigint]:1
//! COMMIT 750 (at 2026-11-26 20:30:31.123456+00)
//! ```
//!
//! A column is `name[type]:value`: the name as `quote_identifier` writes it
//! (double quotes when it needs them), the type as `format_type_be` names it
//! (it may hold spaces and brackets: `timestamp with time zone`,
//! `integer[]`), the value `null`, `unchanged-toast-datum`, a quoted literal
//! (`'...'`, a quote doubled; `B'0101'` for bits) or, for numbers and
//! booleans, bare. A DELETE shows the old row's replica identity (the primary
//! key by default) or `(no-tuple-data)`. A transaction that rolled back is
//! never decoded, so its rows never reach the truth. A transaction's rows
//! are held until its COMMIT, which gives them its LSN and time.
//!
//! A partitioned table has no storage of its own: its rows live in its leaf
//! partitions, and the log names each change by its leaf (the reorder
//! buffer maps the change's relfilenode to the leaf's relation,
//! `ReorderBufferProcessTXN` in src/backend/replication/logical/
//! reorderbuffer.c; test_decoding prints that relation's name). The reader
//! tells the decoder the judged table's leaves as the catalog lists them
//! (`pg_partition_tree`, PostgreSQL manual 9.27.4) before each drain
//! ([`Decoder::learn_leaves`]); a leaf stays known after it is detached or
//! dropped, since changes made before are still decoded under its name
//! (decoding reads the catalog as of each change). A leaf that leaves the
//! tree takes its rows with it: they are **expired**
//! ([`Decoder::expire_leaves`]), as are the rows a `TRUNCATE` empties.
//! DDL itself is never decoded (PostgreSQL manual, "Logical Replication
//! Restrictions").

use crate::logtruth::Counts;
use crate::logtruth::live_keys::LiveKeys;
use crate::logtruth::names::POSTGRES;
use rundb::LogTruthRow;
use std::collections::{HashMap, HashSet};

/// One decoded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Begin {
        xid: i64,
    },
    Commit {
        xid: i64,
        at_ms: i64,
    },
    Change(Change),
    /// `TRUNCATE` of one or more tables (test_decoding prints them in one
    /// line, `table public.a, public.b: TRUNCATE: (no-flags)`).
    Truncate {
        tables: Vec<(String, String)>,
    },
    /// Anything else the plugin prints (a logical message).
    Other,
}

/// A change to one table's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub schema: String,
    pub table: String,
    /// `INSERT`, `UPDATE`, `DELETE`, `TRUNCATE`.
    pub op: String,
    /// The columns as printed, `None` for NULL (for an UPDATE, the new tuple).
    pub columns: Vec<(String, Option<String>)>,
}

/// `--table T`: `T` is `public.T`; `S.T` names the schema. Either part may
/// be double-quoted, as SQL writes a name that needs it.
pub fn parse_table(spec: &str) -> Result<(String, String), String> {
    POSTGRES.table(spec, "public")
}

/// An identifier at the start of `s` and the rest ([`POSTGRES`]'s quoting).
fn identifier(s: &str) -> Option<(String, &str)> {
    POSTGRES.identifier(s)
}

/// Reads one row of the plugin's output.
pub fn parse_line(data: &str) -> Result<Event, String> {
    let bad = |why: &str| format!("cannot read the log line '{}': {why}", cut(data));
    if let Some(rest) = data.strip_prefix("BEGIN ") {
        let xid = rest.trim().parse().map_err(|_| bad("no xid after BEGIN"))?;
        return Ok(Event::Begin { xid });
    }
    if let Some(rest) = data.strip_prefix("COMMIT ") {
        let (xid, at) = rest
            .split_once(" (at ")
            .ok_or_else(|| bad("no commit time (include-timestamp)"))?;
        let xid = xid.trim().parse().map_err(|_| bad("no xid after COMMIT"))?;
        let at = at.strip_suffix(')').ok_or_else(|| bad("no ')'"))?;
        let at_ms = timestamp_ms(at).ok_or_else(|| bad("unreadable commit time"))?;
        return Ok(Event::Commit { xid, at_ms });
    }
    let Some(mut rest) = data.strip_prefix("table ") else {
        return Ok(Event::Other);
    };
    let mut tables = Vec::new();
    loop {
        let (schema, after) = identifier(rest).ok_or_else(|| bad("no schema"))?;
        let after = after.strip_prefix('.').ok_or_else(|| bad("no table"))?;
        let (table, after) = identifier(after).ok_or_else(|| bad("no table"))?;
        tables.push((schema, table));
        match after.strip_prefix(", ") {
            Some(next) => rest = next,
            None => {
                rest = after;
                break;
            }
        }
    }
    let rest = rest.strip_prefix(": ").ok_or_else(|| bad("no ': '"))?;
    let (op, mut rest) = rest.split_once(':').ok_or_else(|| bad("no operation"))?;
    if op == "TRUNCATE" {
        return Ok(Event::Truncate { tables });
    }
    let [(schema, table)] = <[_; 1]>::try_from(tables).map_err(|_| bad("several tables"))?;
    // An UPDATE with an old key prints `old-key: ... new-tuple: ...`: the new tuple counts.
    if let Some(at) = rest.find(" new-tuple:") {
        rest = &rest[at + " new-tuple:".len()..];
    }
    let mut columns = Vec::new();
    let mut rest = rest.trim_start();
    if rest.starts_with('(') {
        // `(no-tuple-data)`, TRUNCATE's `(no-flags)`: no columns.
        rest = "";
    }
    while !rest.is_empty() {
        let (name, after) = identifier(rest).ok_or_else(|| bad("a column without a name"))?;
        let after = after
            .strip_prefix('[')
            .ok_or_else(|| bad("a column without its type"))?;
        let end = after
            .find("]:")
            .ok_or_else(|| bad("a column without its type"))?;
        let (value, after) = value(&after[end + 2..]).ok_or_else(|| bad("an unreadable value"))?;
        columns.push((name, value));
        rest = after.trim_start();
    }
    Ok(Event::Change(Change {
        schema,
        table,
        op: op.to_string(),
        columns,
    }))
}

/// A value at the start of `s` and the rest: `None` inside for NULL.
fn value(s: &str) -> Option<(Option<String>, &str)> {
    let quoted = s
        .strip_prefix('\'')
        .or_else(|| s.strip_prefix("B'"))
        .or_else(|| s.strip_prefix("X'"));
    if let Some(body) = quoted {
        let mut out = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if body[i + 1..].starts_with('\'') {
                    out.push('\'');
                    chars.next();
                } else {
                    return Some((Some(out), &body[i + 1..]));
                }
            } else {
                out.push(c);
            }
        }
        return None;
    }
    let end = s.find(' ').unwrap_or(s.len());
    let token = &s[..end];
    Some(((token != "null").then(|| token.to_string()), &s[end..]))
}

/// A `pg_lsn` as PostgreSQL writes it (`16/B374D848`: the high and low 32
/// bits of the 64-bit WAL position in hexadecimal, PostgreSQL manual, "pg_lsn
/// Type") as a number, which orders positions.
pub fn lsn(text: &str) -> Option<u64> {
    let (high, low) = text.trim().split_once('/')?;
    let part = |p: &str| {
        (!p.is_empty() && p.len() <= 8)
            .then(|| u32::from_str_radix(p, 16).ok())
            .flatten()
    };
    Some((u64::from(part(high)?) << 32) | u64::from(part(low)?))
}

/// A WAL position as PostgreSQL writes a `pg_lsn` (the inverse of [`lsn`]).
pub fn lsn_text(at: u64) -> String {
    format!("{:X}/{:X}", at >> 32, at & 0xFFFF_FFFF)
}

/// `2026-11-26 20:30:31.123456+00` (ISO, as `timestamptz_to_str` writes,
/// offset in hours, maybe `:MM`) in ms since the epoch, rounded down.
pub fn timestamp_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    // The offset's sign is the last '+' or '-' after the time of day.
    let sign_at = text.get(19..)?.rfind(['+', '-'])? + 19;
    let local =
        chrono::NaiveDateTime::parse_from_str(&text[..sign_at], "%Y-%m-%d %H:%M:%S%.f").ok()?;
    let offset = &text[sign_at + 1..];
    let mut parts = offset.split(':');
    let hours: i64 = parts.next()?.parse().ok()?;
    let minutes: i64 = parts.next().map_or(Some(0), |m| m.parse().ok())?;
    let seconds: i64 = parts.next().map_or(Some(0), |s| s.parse().ok())?;
    let mut offset_s = hours * 3600 + minutes * 60 + seconds;
    if text.as_bytes()[sign_at] == b'-' {
        offset_s = -offset_s;
    }
    let utc = local.and_utc().timestamp_micros() - offset_s * 1_000_000;
    Some(utc.div_euclid(1000))
}

fn cut(s: &str) -> &str {
    match s.char_indices().nth(120) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Reads the plugin's rows, in order, into the truth of one table: each
/// insert and delete of the table with its key, its transaction's xid, and
/// its COMMIT's LSN and time. Rows are returned when their COMMIT is read.
#[derive(Clone, Debug)]
pub struct Decoder {
    schema: String,
    table: String,
    key: String,
    /// The relations whose changes are the table's: the table itself, and
    /// every leaf partition of it ever listed. Each holds the keys its
    /// committed rows have now (what a TRUNCATE or a dropped leaf expires).
    places: HashMap<(String, String), LiveKeys>,
    /// When each leaf was last listed: the earliest a leaf no longer listed
    /// can have gone.
    listed_ms: HashMap<Relation, i64>,
    /// The open transaction's changes: (key, op, relation).
    pending: Vec<(String, &'static str, (String, String))>,
    next_seq: i64,
    pub counts: Counts,
}

/// A relation's name: (schema, name).
pub type Relation = (String, String);

impl Decoder {
    pub fn new(schema: &str, table: &str, key: &str) -> Decoder {
        let mut places = HashMap::new();
        places.insert((schema.to_string(), table.to_string()), LiveKeys::default());
        Decoder {
            schema: schema.into(),
            table: table.into(),
            key: key.into(),
            places,
            listed_ms: HashMap::new(),
            pending: Vec::new(),
            next_seq: 0,
            counts: Counts::default(),
        }
    }

    /// The table's leaf partitions as the catalog lists them at `at_ms`
    /// (none for a table that is not partitioned). Returns the leaves known
    /// before that are no longer listed: detached or dropped since, their
    /// rows to be expired ([`Decoder::expire_leaves`]) once the log is read
    /// up to where the list was taken.
    pub fn learn_leaves(&mut self, leaves: &[Relation], at_ms: i64) -> Vec<Relation> {
        for leaf in leaves {
            self.places.entry(leaf.clone()).or_default();
            self.listed_ms.insert(leaf.clone(), at_ms);
        }
        let root = (self.schema.clone(), self.table.clone());
        let mut gone: Vec<Relation> = self
            .places
            .keys()
            .filter(|p| **p != root && !leaves.contains(p))
            .cloned()
            .collect();
        gone.sort();
        gone
    }

    /// The rows still in `leaves` expire at `lsn` (where the catalog no
    /// longer listed them), and the leaves are forgotten. Each row's time is
    /// when its leaf was last listed: the leaf went after it, and before
    /// `lsn`; a consumer is said to have passed a row before it expired
    /// only if it did so before that time (analysis::consumers). The rows
    /// come in key order within each leaf.
    pub fn expire_leaves(&mut self, leaves: &[Relation], lsn: &str) -> Vec<LogTruthRow> {
        let mut rows = Vec::new();
        for leaf in leaves {
            let at_ms = self.listed_ms.remove(leaf).unwrap_or(0);
            if let Some(live) = self.places.remove(leaf) {
                for key in live.sorted() {
                    rows.push(self.row(key, 0, lsn, at_ms, "expire"));
                }
            }
        }
        rows
    }

    fn row(&mut self, key: String, xid: i64, lsn: &str, at_ms: i64, op: &str) -> LogTruthRow {
        let seq = self.next_seq;
        self.next_seq += 1;
        LogTruthRow {
            seq,
            key,
            xid,
            commit_lsn: lsn.to_string(),
            commit_ms: at_ms,
            op: op.into(),
            read_ms: None,
        }
    }

    /// The table's name as SQL would write it, for messages.
    pub fn table_name(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }

    /// The table's name quoted for `to_regclass` (which reads it as SQL does).
    pub fn table_regclass(&self) -> String {
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        format!("{}.{}", quote(&self.schema), quote(&self.table))
    }

    /// Reads one row (`lsn` as PostgreSQL writes it, `data` the plugin's
    /// text); returns the truth rows a COMMIT completes. An insert of the
    /// table without the key column is an error (bad input: `--key`).
    pub fn feed(&mut self, lsn: &str, data: &str) -> Result<Vec<LogTruthRow>, String> {
        match parse_line(data)? {
            Event::Begin { .. } => {
                self.pending.clear();
                Ok(Vec::new())
            }
            Event::Commit { xid, at_ms } => Ok(self.commit(xid, lsn, at_ms)),
            Event::Change(change) => {
                let place = (change.schema, change.table);
                if self.places.contains_key(&place) {
                    self.change(place, &change.op, &change.columns)?;
                }
                Ok(Vec::new())
            }
            Event::Truncate { tables } => {
                // Emptied in this transaction: each row still there expires at its commit.
                for place in tables {
                    if let Some(live) = self.places.get(&place) {
                        let keys = live.sorted();
                        self.pending
                            .extend(keys.into_iter().map(|k| (k, "expire", place.clone())));
                    }
                }
                Ok(Vec::new())
            }
            Event::Other => Ok(Vec::new()),
        }
    }

    /// A change of the table (or of one of its leaves, `place`) in the open transaction.
    fn change(
        &mut self,
        place: Relation,
        op: &str,
        columns: &[(String, Option<String>)],
    ) -> Result<(), String> {
        let key = columns
            .iter()
            .find(|(name, _)| *name == self.key)
            .map(|(_, v)| v.clone());
        match op {
            "INSERT" => {
                let Some(key) = key else {
                    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
                    let of = if place.0 == self.schema && place.1 == self.table {
                        String::new()
                    } else {
                        format!(" (partition {}.{} of it)", place.0, place.1)
                    };
                    return Err(format!(
                        "table {}{of} has no column '{}' (its columns: {}): name the key with --key COLUMN",
                        self.table_name(),
                        self.key,
                        names.join(", ")
                    ));
                };
                let Some(key) = key else {
                    return Err(format!(
                        "a row of {} was inserted with a NULL {}: the key must never be NULL",
                        self.table_name(),
                        self.key
                    ));
                };
                self.pending.push((key, "insert", place));
            }
            "DELETE" => match key.flatten() {
                Some(key) => self.pending.push((key, "delete", place)),
                None => self.counts.deletes_without_key += 1,
            },
            "UPDATE" => self.counts.updates += 1,
            _ => {}
        }
        Ok(())
    }

    /// The open transaction's rows, at its commit. An UPDATE that moves a
    /// row to another partition is logged as a DELETE from one leaf and an
    /// INSERT of the same key into another: the pair is a move, not a
    /// delete and a new row, and is counted as an update.
    fn commit(&mut self, xid: i64, lsn: &str, at_ms: i64) -> Vec<LogTruthRow> {
        self.counts.transactions += 1;
        let pending = std::mem::take(&mut self.pending);
        // Where each key was last inserted: a delete before it is half a move.
        let last_insert: HashMap<&str, usize> = pending
            .iter()
            .enumerate()
            .filter(|(_, (_, op, _))| *op == "insert")
            .map(|(i, (k, _, _))| (k.as_str(), i))
            .collect();
        let mut moved: HashSet<String> = HashSet::new();
        let mut rows = Vec::new();
        for (i, (key, op, place)) in pending.iter().enumerate() {
            match *op {
                "delete" if last_insert.get(key.as_str()).is_some_and(|&at| at > i) => {
                    moved.insert(key.clone());
                    self.counts.updates += 1;
                }
                "insert" if moved.remove(key) => {}
                "insert" => {
                    self.counts.inserts += 1;
                    rows.push(self.row(key.clone(), xid, lsn, at_ms, op));
                }
                "delete" => {
                    self.counts.deletes += 1;
                    rows.push(self.row(key.clone(), xid, lsn, at_ms, op));
                }
                _ => rows.push(self.row(key.clone(), xid, lsn, at_ms, op)),
            }
            if let Some(live) = self.places.get_mut(place) {
                if *op == "insert" {
                    live.insert(key);
                } else {
                    live.remove(key);
                }
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_lsn_reads_as_its_number_and_back() {
        assert_eq!(lsn("0/0"), Some(0));
        assert_eq!(lsn("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(lsn("FFFFFFFF/FFFFFFFF"), Some(u64::MAX));
        assert_eq!(lsn_text(0x16_B374_D848), "16/B374D848");
        assert_eq!(lsn_text(0), "0/0");
        // Positions order as numbers, not as text.
        assert!(lsn("0/9").unwrap() < lsn("0/10").unwrap());
        assert!(lsn("1/0").unwrap() > lsn("0/FFFFFFFF").unwrap());
        for bad in ["", "0", "0/", "/1", "G/1", "0/1/2", "100000000/0"] {
            assert_eq!(lsn(bad), None, "{bad}");
        }
    }

    fn change(line: &str) -> Change {
        match parse_line(line).unwrap() {
            Event::Change(c) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_row_reads_with_quoted_strings_nulls_and_types_with_spaces() {
        let c = change(
            "table public.outbox: INSERT: id[bigint]:42 payload[text]:'it''s a ''test'' x[y]:z' \
             note[character varying]:null at[timestamp with time zone]:'2026-11-26 20:30:31+00' \
             tags[integer[]]:'{1,2}' \"Odd \"\"Col\"\"\"[boolean]:true bits[bit(3)]:B'101'",
        );
        assert_eq!((c.schema.as_str(), c.table.as_str()), ("public", "outbox"));
        assert_eq!(c.op, "INSERT");
        let cols: Vec<(&str, Option<&str>)> = c
            .columns
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_deref()))
            .collect();
        assert_eq!(
            cols,
            [
                ("id", Some("42")),
                ("payload", Some("it's a 'test' x[y]:z")),
                ("note", None),
                ("at", Some("2026-11-26 20:30:31+00")),
                ("tags", Some("{1,2}")),
                ("Odd \"Col\"", Some("true")),
                ("bits", Some("101")),
            ]
        );
        let c = change("table \"My Schema\".\"Out: Box\": DELETE: (no-tuple-data)");
        assert_eq!(
            (c.schema.as_str(), c.table.as_str(), c.op.as_str()),
            ("My Schema", "Out: Box", "DELETE")
        );
        assert!(c.columns.is_empty());
        let c = change(
            "table public.t: UPDATE: old-key: id[integer]:1 new-tuple: id[integer]:2 v[text]:'a'",
        );
        assert_eq!(c.columns[0], ("id".to_string(), Some("2".to_string())));
    }

    #[test]
    fn begin_and_commit_read_their_xid_and_time() {
        assert_eq!(parse_line("BEGIN 750").unwrap(), Event::Begin { xid: 750 });
        // 2026-11-26T20:30:31.123Z is 1795725031123 ms.
        assert_eq!(
            parse_line("COMMIT 750 (at 2026-11-26 20:30:31.123456+00)").unwrap(),
            Event::Commit {
                xid: 750,
                at_ms: 1_795_725_031_123
            }
        );
        assert_eq!(
            timestamp_ms("2026-11-26 22:30:31.123999+02"),
            Some(1_795_725_031_123)
        );
        assert_eq!(
            timestamp_ms("2026-11-26 15:00:31-05:30"),
            Some(1_795_725_031_000)
        );
        assert!(parse_line("COMMIT 750").is_err(), "no time: refused");
        assert_eq!(
            parse_line("message: transactional: 1 prefix: p, sz: 1 content:x").unwrap(),
            Event::Other
        );
    }

    #[test]
    fn a_transactions_rows_get_its_commit_and_other_tables_are_ignored() {
        let mut d = Decoder::new("public", "outbox", "id");
        let mut out = Vec::new();
        for (lsn, line) in [
            ("0/10", "BEGIN 7"),
            (
                "0/11",
                "table public.outbox: INSERT: id[bigint]:2 body[text]:'a'",
            ),
            ("0/12", "table public.other: INSERT: id[bigint]:99"),
            ("0/13", "table audit.outbox: INSERT: id[bigint]:98"),
            (
                "0/14",
                "table public.outbox: UPDATE: id[bigint]:2 body[text]:'b'",
            ),
            ("0/15", "COMMIT 7 (at 2026-11-26 20:30:31.5+00)"),
            ("0/20", "BEGIN 8"),
            (
                "0/21",
                "table public.outbox: INSERT: id[bigint]:1 body[text]:null",
            ),
            ("0/22", "table public.outbox: DELETE: id[bigint]:2"),
            ("0/23", "table public.outbox: DELETE: (no-tuple-data)"),
            ("0/24", "COMMIT 8 (at 2026-11-26 20:30:31.600+00)"),
        ] {
            out.extend(d.feed(lsn, line).unwrap());
        }
        let rows: Vec<_> = out.iter().map(crate::logtruth::row_fields).collect();
        assert_eq!(
            rows,
            [
                (0, "2", 7, "0/15", 1_795_725_031_500, "insert"),
                (1, "1", 8, "0/24", 1_795_725_031_600, "insert"),
                (2, "2", 8, "0/24", 1_795_725_031_600, "delete"),
            ]
        );
        assert_eq!(
            d.counts,
            Counts {
                transactions: 2,
                inserts: 2,
                deletes: 1,
                updates: 1,
                deletes_without_key: 1
            }
        );
    }

    #[test]
    fn an_insert_without_the_key_column_is_refused_in_one_line() {
        let mut d = Decoder::new("public", "outbox", "event_id");
        d.feed("0/1", "BEGIN 1").unwrap();
        let e = d
            .feed(
                "0/2",
                "table public.outbox: INSERT: id[bigint]:1 body[text]:'x'",
            )
            .unwrap_err();
        assert_eq!(
            e,
            "table public.outbox has no column 'event_id' (its columns: id, body): name the key with --key COLUMN"
        );
    }

    #[test]
    fn table_names_read_as_sql_writes_them() {
        assert_eq!(
            parse_table("outbox").unwrap(),
            ("public".into(), "outbox".into())
        );
        assert_eq!(
            parse_table("app.outbox").unwrap(),
            ("app".into(), "outbox".into())
        );
        assert_eq!(
            parse_table("\"My App\".\"Out.Box\"").unwrap(),
            ("My App".into(), "Out.Box".into())
        );
        assert!(parse_table("").is_err());
        assert!(parse_table("a.b.c").is_err());
    }

    fn feed_all(d: &mut Decoder, lines: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (lsn, line) in lines {
            out.extend(d.feed(lsn, line).unwrap());
        }
        out.into_iter().map(|r| (r.key, r.op)).collect()
    }

    fn rel(s: &str, t: &str) -> Relation {
        (s.into(), t.into())
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_partitioned_tables_leaves_are_its_rows_and_a_leaf_that_goes_expires_its_rows() {
        let mut d = Decoder::new("public", "parts", "id");
        // Before the leaves are known, a leaf's change is another table's.
        assert!(
            d.learn_leaves(&[rel("public", "parts_0"), rel("public", "parts_1")], 1)
                .is_empty()
        );
        let c = "COMMIT 7 (at 2026-11-26 20:30:31.5+00)";
        let rows = feed_all(
            &mut d,
            &[
                ("0/1", "BEGIN 7"),
                (
                    "0/2",
                    "table public.parts_0: INSERT: id[bigint]:1 p[integer]:0",
                ),
                (
                    "0/3",
                    "table public.parts_1: INSERT: id[bigint]:2 p[integer]:1",
                ),
                (
                    "0/4",
                    "table public.parts_0: INSERT: id[bigint]:3 p[integer]:0",
                ),
                ("0/5", "table public.other: INSERT: id[bigint]:9"),
                ("0/6", c),
                // An UPDATE moving 3 to the other leaf: a move, not a delete.
                ("0/7", "BEGIN 8"),
                ("0/8", "table public.parts_0: DELETE: id[bigint]:3"),
                (
                    "0/9",
                    "table public.parts_1: INSERT: id[bigint]:3 p[integer]:1",
                ),
                (
                    "0/a",
                    "table public.parts_0: INSERT: id[bigint]:4 p[integer]:0",
                ),
                ("0/b", "table public.parts_0: DELETE: id[bigint]:4"),
                ("0/c", "COMMIT 8 (at 2026-11-26 20:30:32+00)"),
            ],
        );
        assert_eq!(
            rows,
            pairs(&[
                ("1", "insert"),
                ("2", "insert"),
                ("3", "insert"),
                ("4", "insert"),
                ("4", "delete")
            ])
        );
        assert_eq!(
            (d.counts.inserts, d.counts.deletes, d.counts.updates),
            (4, 1, 1)
        );
        // parts_1 is dropped (or detached): 2 and 3 (moved there) expire; a new leaf comes.
        let gone = d.learn_leaves(&[rel("public", "parts_0"), rel("public", "parts_2")], 9);
        assert_eq!(gone, [rel("public", "parts_1")]);
        // Each at the time its leaf was last listed (1), not when it was missed (9).
        let expired: Vec<(String, String, String, i64)> = d
            .expire_leaves(&gone, "0/d")
            .into_iter()
            .map(|r| (r.key, r.op, r.commit_lsn, r.commit_ms))
            .collect();
        assert_eq!(
            expired,
            [
                ("2".into(), "expire".into(), "0/d".into(), 1),
                ("3".into(), "expire".into(), "0/d".into(), 1)
            ]
        );
        // A forgotten leaf's later changes (a detached table) are not the table's.
        let rows = feed_all(
            &mut d,
            &[
                ("1/1", "BEGIN 9"),
                (
                    "1/2",
                    "table public.parts_1: INSERT: id[bigint]:5 p[integer]:1",
                ),
                (
                    "1/3",
                    "table public.parts_2: INSERT: id[bigint]:6 p[integer]:2",
                ),
                ("1/4", "COMMIT 9 (at 2026-11-26 20:30:33+00)"),
            ],
        );
        assert_eq!(rows, pairs(&[("6", "insert")]));
    }

    #[test]
    fn a_truncate_expires_the_rows_still_there_and_reads_with_several_tables() {
        assert_eq!(
            parse_line("table public.a, \"S\".\"b c\": TRUNCATE: restart_seqs cascade").unwrap(),
            Event::Truncate {
                tables: vec![rel("public", "a"), rel("S", "b c")]
            }
        );
        let mut d = Decoder::new("public", "outbox", "id");
        let rows = feed_all(
            &mut d,
            &[
                ("0/1", "BEGIN 1"),
                ("0/2", "table public.outbox: INSERT: id[bigint]:1"),
                ("0/3", "table public.outbox: INSERT: id[bigint]:2"),
                ("0/4", "COMMIT 1 (at 2026-11-26 20:30:31+00)"),
                ("0/5", "BEGIN 2"),
                ("0/6", "table public.outbox: DELETE: id[bigint]:1"),
                ("0/7", "COMMIT 2 (at 2026-11-26 20:30:31+00)"),
                ("0/8", "BEGIN 3"),
                (
                    "0/9",
                    "table public.other, public.outbox: TRUNCATE: (no-flags)",
                ),
                ("0/a", "table public.outbox: INSERT: id[bigint]:3"),
                ("0/b", "COMMIT 3 (at 2026-11-26 20:30:32+00)"),
            ],
        );
        assert_eq!(
            rows,
            pairs(&[
                ("1", "insert"),
                ("2", "insert"),
                ("1", "delete"),
                ("2", "expire"),
                ("3", "insert")
            ])
        );
    }

    #[test]
    fn a_leaf_without_the_key_column_is_named_in_the_one_line() {
        let mut d = Decoder::new("public", "parts", "event_id");
        d.learn_leaves(&[rel("public", "parts_0")], 1);
        d.feed("0/1", "BEGIN 1").unwrap();
        let e = d
            .feed("0/2", "table public.parts_0: INSERT: id[bigint]:1")
            .unwrap_err();
        assert_eq!(
            e,
            "table public.parts (partition public.parts_0 of it) has no column 'event_id' \
             (its columns: id): name the key with --key COLUMN"
        );
    }
}
