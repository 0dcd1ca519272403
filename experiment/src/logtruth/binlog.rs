//! MariaDB's binary log, read into the judged table's truth. Pure: no I/O,
//! no clock (the time each event was read is given with it).
//!
//! With `binlog_format=ROW` (MariaDB KB "Binary Log Formats") each committed
//! transaction is written whole, in commit order, as: a GTID event (type
//! 162, `Gtid_log_event` in MariaDB's sql/log_event.h: `seq_no`, `domain_id`
//! and `flags2` in its post-header, the server id in the event header), then
//! per statement a TABLE_MAP event (the table's id, database and name and,
//! with `binlog_row_metadata=FULL`, MariaDB >= 10.5, its column names) and
//! WRITE_ROWS / UPDATE_ROWS / DELETE_ROWS events (version 1 from MariaDB),
//! and last the XID event of its commit (InnoDB), or a `COMMIT` query for a
//! non-transactional engine. A GTID event flagged standalone (DDL) is
//! followed by one query event and nothing else. A transaction that rolled
//! back is never written (InnoDB keeps its rows in its own cache until
//! commit; MariaDB KB "Binary Log"). Each event header carries its time in
//! whole seconds and `log_pos`, the position in the current binlog file
//! where the event ends; a ROTATE event names the file.
//!
//! [`Decoder::feed`] takes the events in order ([`Event`]: what the
//! judge needs of each, built by the reader from the stream) and returns a
//! transaction's truth rows at its commit: the key as text, the GTID's
//! `seq_no` as the transaction, `FILE:POS` of the commit event as the
//! commit position, the header's time (whole seconds) in ms, and the time
//! the harness read the commit.

use super::decode::Counts;
use rundb::LogTruthRow;
use std::collections::HashMap;

/// MariaDB's GTID event type (`GTID_EVENT` = 162 in sql/log_event.h).
pub const MARIADB_GTID_EVENT: u8 = 162;

/// `Gtid_log_event::FL_STANDALONE`: a statement outside any transaction
/// (DDL), with no XID after it.
const FL_STANDALONE: u8 = 1;

/// What a row event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Insert,
    Update,
    Delete,
}

/// One binlog event, as much of it as the truth needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The binlog file the next events are in.
    Rotate { file: String },
    /// A transaction (or a standalone statement) begins.
    Gtid {
        domain: u32,
        server: u32,
        seq: u64,
        standalone: bool,
    },
    /// A table's id, names and (with `binlog_row_metadata=FULL`) its columns.
    TableMap {
        table_id: u64,
        schema: String,
        table: String,
        columns: Option<Vec<String>>,
    },
    /// Rows of a table: each row's values in column order (`None` for NULL;
    /// for an update, the row after).
    Rows {
        table_id: u64,
        op: Op,
        rows: Vec<Vec<Option<String>>>,
    },
    /// The commit of a transactional engine's transaction.
    Xid { at_s: u32, log_pos: u64 },
    /// A statement as text: `BEGIN`, `COMMIT` and `ROLLBACK` bracket a
    /// transaction without GTIDs or of a non-transactional engine; any query
    /// ends a standalone GTID's group.
    Query {
        sql: String,
        at_s: u32,
        log_pos: u64,
    },
    /// Anything else (format description, annotate rows, checkpoints, heartbeats).
    Other,
}

/// Reads a MariaDB GTID event's post-header (`data`: the event without its
/// 19-byte common header and its checksum): `seq_no` (8 bytes, little
/// endian), `domain_id` (4) and `flags2` (1); `server` is the header's.
pub fn gtid_event(data: &[u8], server: u32) -> Option<Event> {
    let seq = u64::from_le_bytes(data.get(0..8)?.try_into().ok()?);
    let domain = u32::from_le_bytes(data.get(8..12)?.try_into().ok()?);
    let flags = *data.get(12)?;
    Some(Event::Gtid {
        domain,
        server,
        seq,
        standalone: flags & FL_STANDALONE != 0,
    })
}

/// `--table T` on MariaDB: `T` is `DATABASE.T` in the judge's database
/// `default_db`; `DB.T` names the database. Either part may be in
/// backquotes, as SQL writes a name that needs them (a backquote doubled).
pub fn parse_table(spec: &str, default_db: &str) -> Result<(String, String), String> {
    super::names::MARIADB.table(spec, default_db)
}

/// A transaction's changes held until its commit.
#[derive(Debug, Default)]
struct Open {
    /// The GTID's seq_no (0 before the first GTID: a log without GTIDs).
    seq: u64,
    standalone: bool,
    changes: Vec<(String, &'static str)>,
}

/// Reads the events, in order, into the truth of one table.
///
/// Memory: one entry per table id of the judged table (a table's id changes
/// only when the server reopens it), and the judged table's keys of the one
/// open transaction (the binlog writes transactions whole, never
/// interleaved): a transaction of n rows of the table holds n keys until
/// its commit.
#[derive(Debug)]
pub struct Decoder {
    schema: String,
    table: String,
    key: String,
    /// Table ids of the judged table, each with the key's column index.
    key_at: HashMap<u64, usize>,
    file: String,
    open: Open,
    next_seq: i64,
    pub counts: Counts,
}

impl Decoder {
    pub fn new(schema: &str, table: &str, key: &str) -> Decoder {
        Decoder {
            schema: schema.into(),
            table: table.into(),
            key: key.into(),
            key_at: HashMap::new(),
            file: String::new(),
            open: Open::default(),
            next_seq: 0,
            counts: Counts::default(),
        }
    }

    /// The table's name as SQL would write it, for messages.
    pub fn table_name(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }

    /// Whether rows of table id `table_id` are wanted (the judged table's):
    /// the reader converts only those rows' values.
    pub fn wants(&self, table_id: u64) -> bool {
        self.key_at.contains_key(&table_id)
    }

    /// Reads one event, read by the harness at `read_ms`; returns the truth
    /// rows a commit completes. A table map of the judged table without the
    /// key column is an error (bad input: `--key`), as is one without column
    /// names (the server was not started with `binlog_row_metadata=FULL`).
    pub fn feed(&mut self, event: Event, read_ms: i64) -> Result<Vec<LogTruthRow>, String> {
        match event {
            Event::Rotate { file } => {
                self.file = file;
                Ok(Vec::new())
            }
            Event::Gtid {
                seq, standalone, ..
            } => {
                self.open = Open {
                    seq,
                    standalone,
                    changes: Vec::new(),
                };
                Ok(Vec::new())
            }
            Event::TableMap {
                table_id,
                schema,
                table,
                columns,
            } => {
                if schema != self.schema || table != self.table {
                    return Ok(Vec::new());
                }
                let Some(columns) = columns else {
                    return Err(format!(
                        "the binlog's table map of {} names no columns: the server needs \
                         binlog_row_metadata=FULL",
                        self.table_name()
                    ));
                };
                let Some(at) = columns.iter().position(|c| *c == self.key) else {
                    return Err(format!(
                        "table {} has no column '{}' (its columns: {}): name the key with --key COLUMN",
                        self.table_name(),
                        self.key,
                        columns.join(", ")
                    ));
                };
                self.key_at.insert(table_id, at);
                Ok(Vec::new())
            }
            Event::Rows { table_id, op, rows } => {
                let Some(&at) = self.key_at.get(&table_id) else {
                    return Ok(Vec::new());
                };
                for row in rows {
                    let key = row.get(at).cloned().flatten();
                    match op {
                        Op::Insert => {
                            let Some(key) = key else {
                                return Err(format!(
                                    "a row of {} was inserted with a NULL {}: the key must never be NULL",
                                    self.table_name(),
                                    self.key
                                ));
                            };
                            self.counts.inserts += 1;
                            self.open.changes.push((key, "insert"));
                        }
                        Op::Delete => match key {
                            Some(key) => {
                                self.counts.deletes += 1;
                                self.open.changes.push((key, "delete"));
                            }
                            None => self.counts.deletes_without_key += 1,
                        },
                        Op::Update => self.counts.updates += 1,
                    }
                }
                Ok(Vec::new())
            }
            Event::Xid { at_s, log_pos } => Ok(self.commit(at_s, log_pos, read_ms)),
            Event::Query { sql, at_s, log_pos } => {
                let word = sql.trim().trim_end_matches(';').trim();
                if self.open.standalone || word.eq_ignore_ascii_case("COMMIT") {
                    Ok(self.commit(at_s, log_pos, read_ms))
                } else if word.eq_ignore_ascii_case("BEGIN")
                    || word.eq_ignore_ascii_case("ROLLBACK")
                {
                    self.open.changes.clear();
                    Ok(Vec::new())
                } else {
                    Ok(Vec::new())
                }
            }
            Event::Other => Ok(Vec::new()),
        }
    }

    fn commit(&mut self, at_s: u32, log_pos: u64, read_ms: i64) -> Vec<LogTruthRow> {
        self.counts.transactions += 1;
        let open = std::mem::take(&mut self.open);
        let position = format!("{}:{log_pos}", self.file);
        open.changes
            .into_iter()
            .map(|(key, op)| {
                let seq = self.next_seq;
                self.next_seq += 1;
                LogTruthRow {
                    seq,
                    key,
                    xid: open.seq as i64,
                    commit_lsn: position.clone(),
                    commit_ms: i64::from(at_s) * 1000,
                    op: op.into(),
                    read_ms: Some(read_ms),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gtid(seq: u64) -> Event {
        Event::Gtid {
            domain: 0,
            server: 1,
            seq,
            standalone: false,
        }
    }

    fn map(table_id: u64, table: &str, columns: &[&str]) -> Event {
        Event::TableMap {
            table_id,
            schema: "app".into(),
            table: table.into(),
            columns: Some(columns.iter().map(|c| c.to_string()).collect()),
        }
    }

    fn rows(table_id: u64, op: Op, values: &[&[Option<&str>]]) -> Event {
        Event::Rows {
            table_id,
            op,
            rows: values
                .iter()
                .map(|r| r.iter().map(|v| v.map(str::to_string)).collect())
                .collect(),
        }
    }

    #[test]
    fn a_gtid_event_reads_its_seq_domain_and_flags() {
        // seq_no 42, domain 7, flags2 FL_STANDALONE | FL_TRANSACTIONAL... as
        // MariaDB writes the post-header, then 6 bytes of padding.
        let mut data = 42u64.to_le_bytes().to_vec();
        data.extend(7u32.to_le_bytes());
        data.push(1 | 4);
        data.extend([0; 6]);
        assert_eq!(
            gtid_event(&data, 3),
            Some(Event::Gtid {
                domain: 7,
                server: 3,
                seq: 42,
                standalone: true
            })
        );
        data[12] = 4;
        assert!(matches!(
            gtid_event(&data, 3),
            Some(Event::Gtid {
                standalone: false,
                ..
            })
        ));
        assert_eq!(gtid_event(&data[..10], 3), None, "too short: not read");
    }

    #[test]
    fn a_transactions_rows_get_its_commit_and_other_tables_are_ignored() {
        let mut d = Decoder::new("app", "outbox", "id");
        let mut out = Vec::new();
        let events = [
            Event::Rotate {
                file: "binlog.000001".into(),
            },
            Event::Other,
            // DDL: a standalone GTID and its query, no rows.
            Event::Gtid {
                domain: 0,
                server: 1,
                seq: 1,
                standalone: true,
            },
            Event::Query {
                sql: "CREATE TABLE outbox (body text, id bigint)".into(),
                at_s: 1_795_725_030,
                log_pos: 400,
            },
            gtid(2),
            map(70, "outbox", &["body", "id"]),
            rows(
                70,
                Op::Insert,
                &[&[Some("a"), Some("2")], &[None, Some("3")]],
            ),
            map(71, "other", &["id"]),
            rows(71, Op::Insert, &[&[Some("99")]]),
            rows(70, Op::Update, &[&[Some("b"), Some("2")]]),
            Event::Xid {
                at_s: 1_795_725_031,
                log_pos: 900,
            },
            gtid(3),
            map(70, "outbox", &["body", "id"]),
            rows(70, Op::Insert, &[&[Some("c"), Some("1")]]),
            rows(
                70,
                Op::Delete,
                &[&[Some("a"), Some("2")], &[Some("x"), None]],
            ),
            Event::Xid {
                at_s: 1_795_725_032,
                log_pos: 1300,
            },
        ];
        for (i, e) in events.into_iter().enumerate() {
            out.extend(d.feed(e, 5000 + i as i64).unwrap());
        }
        type Got<'a> = (i64, &'a str, i64, &'a str, i64, &'a str, Option<i64>);
        let got: Vec<Got> = out
            .iter()
            .map(|r| {
                (
                    r.seq,
                    r.key.as_str(),
                    r.xid,
                    r.commit_lsn.as_str(),
                    r.commit_ms,
                    r.op.as_str(),
                    r.read_ms,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    0,
                    "2",
                    2,
                    "binlog.000001:900",
                    1_795_725_031_000,
                    "insert",
                    Some(5010)
                ),
                (
                    1,
                    "3",
                    2,
                    "binlog.000001:900",
                    1_795_725_031_000,
                    "insert",
                    Some(5010)
                ),
                (
                    2,
                    "1",
                    3,
                    "binlog.000001:1300",
                    1_795_725_032_000,
                    "insert",
                    Some(5015)
                ),
                (
                    3,
                    "2",
                    3,
                    "binlog.000001:1300",
                    1_795_725_032_000,
                    "delete",
                    Some(5015)
                ),
            ]
        );
        assert_eq!(
            d.counts,
            Counts {
                transactions: 3,
                inserts: 3,
                deletes: 1,
                updates: 1,
                deletes_without_key: 1
            }
        );
    }

    #[test]
    fn a_non_transactional_commit_and_a_rollback_query_close_the_group() {
        let mut d = Decoder::new("app", "t", "id");
        let mut out = Vec::new();
        for e in [
            Event::Rotate {
                file: "binlog.000002".into(),
            },
            Event::Query {
                sql: "BEGIN".into(),
                at_s: 10,
                log_pos: 100,
            },
            map(5, "t", &["id"]),
            rows(5, Op::Insert, &[&[Some("1")]]),
            Event::Query {
                sql: "ROLLBACK".into(),
                at_s: 10,
                log_pos: 200,
            },
            gtid(9),
            map(5, "t", &["id"]),
            rows(5, Op::Insert, &[&[Some("2")]]),
            Event::Query {
                sql: "COMMIT".into(),
                at_s: 11,
                log_pos: 300,
            },
        ] {
            out.extend(d.feed(e, 1).unwrap());
        }
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].key.as_str(), out[0].xid, out[0].commit_lsn.as_str()),
            ("2", 9, "binlog.000002:300")
        );
        assert!(d.wants(5) && !d.wants(6));
    }

    #[test]
    fn a_table_without_the_key_column_or_without_names_is_refused_in_one_line() {
        let mut d = Decoder::new("app", "outbox", "event_id");
        d.feed(gtid(1), 0).unwrap();
        let e = d.feed(map(3, "outbox", &["id", "body"]), 0).unwrap_err();
        assert_eq!(
            e,
            "table app.outbox has no column 'event_id' (its columns: id, body): name the key with --key COLUMN"
        );
        let e = d
            .feed(
                Event::TableMap {
                    table_id: 3,
                    schema: "app".into(),
                    table: "outbox".into(),
                    columns: None,
                },
                0,
            )
            .unwrap_err();
        assert!(e.contains("binlog_row_metadata=FULL"), "{e}");
        let mut d = Decoder::new("app", "t", "id");
        d.feed(map(3, "t", &["id"]), 0).unwrap();
        let e = d.feed(rows(3, Op::Insert, &[&[None]]), 0).unwrap_err();
        assert!(e.contains("NULL id"), "{e}");
    }

    #[test]
    fn table_names_read_as_sql_writes_them() {
        assert_eq!(
            parse_table("outbox", "app").unwrap(),
            ("app".into(), "outbox".into())
        );
        assert_eq!(
            parse_table("shop.outbox", "app").unwrap(),
            ("shop".into(), "outbox".into())
        );
        assert_eq!(
            parse_table("`my db`.`out.box`", "app").unwrap(),
            ("my db".into(), "out.box".into())
        );
        assert!(parse_table("", "app").is_err());
        assert!(parse_table("a.b.c", "app").is_err());
        assert!(parse_table("``", "app").is_err());
    }
}
