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

use super::names::POSTGRES;
use rundb::LogTruthRow;

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
    /// Anything else the plugin prints (a logical message, TRUNCATE).
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
    let Some(rest) = data.strip_prefix("table ") else {
        return Ok(Event::Other);
    };
    let (schema, rest) = identifier(rest).ok_or_else(|| bad("no schema"))?;
    let rest = rest.strip_prefix('.').ok_or_else(|| bad("no table"))?;
    let (table, rest) = identifier(rest).ok_or_else(|| bad("no table"))?;
    let rest = rest.strip_prefix(": ").ok_or_else(|| bad("no ': '"))?;
    let (op, mut rest) = rest.split_once(':').ok_or_else(|| bad("no operation"))?;
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

/// What the decoder has read so far, beyond the truth rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Transactions committed (every one the log gave, the judged table's or not).
    pub transactions: u64,
    /// Rows of the judged table inserted and deleted (in the truth).
    pub inserts: u64,
    pub deletes: u64,
    /// Updates of the judged table (not in the truth: a key stays committed).
    pub updates: u64,
    /// Deletes whose old row the log does not show with the key (the
    /// table's replica identity lacks it).
    pub deletes_without_key: u64,
}

/// Reads the plugin's rows, in order, into the truth of one table: each
/// insert and delete of the table with its key, its transaction's xid, and
/// its COMMIT's LSN and time. Rows are returned when their COMMIT is read.
#[derive(Clone, Debug)]
pub struct Decoder {
    schema: String,
    table: String,
    key: String,
    /// The open transaction's changes: (key, op).
    pending: Vec<(String, &'static str)>,
    next_seq: i64,
    pub counts: Counts,
}

impl Decoder {
    pub fn new(schema: &str, table: &str, key: &str) -> Decoder {
        Decoder {
            schema: schema.into(),
            table: table.into(),
            key: key.into(),
            pending: Vec::new(),
            next_seq: 0,
            counts: Counts::default(),
        }
    }

    /// The table's name as SQL would write it, for messages.
    pub fn table_name(&self) -> String {
        format!("{}.{}", self.schema, self.table)
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
            Event::Commit { xid, at_ms } => {
                self.counts.transactions += 1;
                let rows = self
                    .pending
                    .drain(..)
                    .map(|(key, op)| {
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
                    })
                    .collect();
                Ok(rows)
            }
            Event::Change(change) if change.schema == self.schema && change.table == self.table => {
                let key = change
                    .columns
                    .iter()
                    .find(|(name, _)| *name == self.key)
                    .map(|(_, v)| v.clone());
                match change.op.as_str() {
                    "INSERT" => {
                        let Some(key) = key else {
                            let names: Vec<&str> =
                                change.columns.iter().map(|(n, _)| n.as_str()).collect();
                            return Err(format!(
                                "table {} has no column '{}' (its columns: {}): name the key with --key COLUMN",
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
                        self.counts.inserts += 1;
                        self.pending.push((key, "insert"));
                    }
                    "DELETE" => match key.flatten() {
                        Some(key) => {
                            self.counts.deletes += 1;
                            self.pending.push((key, "delete"));
                        }
                        None => self.counts.deletes_without_key += 1,
                    },
                    "UPDATE" => self.counts.updates += 1,
                    _ => {}
                }
                Ok(Vec::new())
            }
            Event::Change(_) | Event::Other => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let rows: Vec<(i64, &str, i64, &str, i64, &str)> = out
            .iter()
            .map(|r| {
                (
                    r.seq,
                    r.key.as_str(),
                    r.xid,
                    r.commit_lsn.as_str(),
                    r.commit_ms,
                    r.op.as_str(),
                )
            })
            .collect();
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
}
