//! MariaDB's binary log read as it grows: a connection registered as a
//! replica (`COM_REGISTER_SLAVE`, then `COM_BINLOG_DUMP` from the first
//! binlog file; mysql_async's `Conn::get_binlog_stream`), whose events are
//! read one at a time and turned into [`super::binlog::Event`]s for the
//! pure decoder. A second connection asks the server where its log ends
//! (`SHOW MASTER STATUS`), for the last read.
//!
//! Before the dump, the session says `SET @mariadb_slave_capability=4`
//! (`MARIA_SLAVE_CAPABILITY_GTID` in MariaDB's sql/log_event.h): a replica
//! that does not say so gets each GTID event rewritten as a `BEGIN` query
//! (sql/sql_repl.cc, `send_event_to_slave`), and the transactions' GTIDs
//! are lost. mysql_async sets `@master_binlog_checksum` itself, so the
//! server sends each event with its checksum (CRC32 by default), which the
//! format description event announces and mysql_common strips.

use super::binlog::{Decoder, Event, MARIADB_GTID_EVENT, Op, gtid_event};
use super::server::db_error;
use mysql_async::binlog::events::{EventData, OptionalMetadataField, RowsEventData};
use mysql_async::binlog::value::BinlogValue;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn, Opts, Value};
use std::pin::Pin;

/// The server id the judge's reader registers with: any id but the server's own.
pub const READER_SERVER_ID: u32 = 4242;

/// Where a dump starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// The first binlog the server keeps, from its first event.
    First,
    /// Where the log ends as the dump starts (`SHOW MASTER STATUS`): only
    /// what commits after it is read.
    End,
    /// Where an earlier dump stopped (after the server restarted: the
    /// dump goes on from there into the files written since).
    At(Position),
}

/// Where in the binlog an event ends: the file and the offset after it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub file: String,
    pub pos: u64,
}

/// The binlog being read, and a connection to ask where it ends.
pub struct Dump {
    stream: BinlogStream,
    control: Conn,
    /// The end of the last event read.
    pub at: Position,
    /// Whether an event was read yet: only the dump's first ROTATE is the
    /// fake one naming the file asked for.
    started: bool,
}

impl Dump {
    /// Connects twice with `opts` and starts the dump from the first binlog.
    pub async fn open(opts: Opts) -> Result<Dump, String> {
        Dump::open_with(opts, READER_SERVER_ID, Start::First).await
    }

    /// Connects twice with `opts` and starts the dump at `start`, registered
    /// as replica `server_id` (a server drops an older dump of the same id:
    /// MariaDB KB "Replication Overview", each replica needs its own id).
    pub async fn open_with(opts: Opts, server_id: u32, start: Start) -> Result<Dump, String> {
        let connect = |what: &'static str| {
            let opts = opts.clone();
            async move {
                Conn::new(opts)
                    .await
                    .map_err(|e| format!("cannot connect to MariaDB for {what}: {}", db_error(&e)))
            }
        };
        let mut control = connect("the log's end").await?;
        // The binlog file, named in the request: the fake ROTATE event a
        // dump begins with comes before the format description, so its name
        // cannot be told from the checksum after it.
        let at = match start {
            Start::First => {
                // Log_name, File_size.
                let first: Option<mysql_async::Row> = control
                    .query_first("SHOW BINARY LOGS")
                    .await
                    .map_err(|e| format!("cannot list MariaDB's binlogs: {}", db_error(&e)))?;
                let file: String = first
                    .and_then(|row| row.get(0))
                    .ok_or("the server keeps no binlog (log_bin is off)")?;
                Position { file, pos: 4 }
            }
            Start::End => end_of(&mut control).await?,
            Start::At(at) => at,
        };
        let mut conn = connect("the binlog").await?;
        conn.query_drop("SET @mariadb_slave_capability=4")
            .await
            .map_err(|e| format!("cannot ask for GTID events: {}", db_error(&e)))?;
        let request = BinlogStreamRequest::new(server_id)
            .with_filename(at.file.as_bytes())
            .with_pos(at.pos);
        let stream = conn.get_binlog_stream(request).await.map_err(|e| {
            format!(
                "cannot read MariaDB's binlog (a dump needs REPLICATION SLAVE): {}",
                db_error(&e)
            )
        })?;
        Ok(Dump {
            stream,
            control,
            at,
            started: false,
        })
    }

    /// Whether the server still answers on the dump's second connection
    /// (after a failed read: a server that went away, or a bad event).
    pub async fn server_answers(&mut self) -> bool {
        self.control.ping().await.is_ok()
    }

    /// Where the server's binlog ends now (`SHOW MASTER STATUS`: the file
    /// and the offset after its last event).
    pub async fn end(&mut self) -> Result<Position, String> {
        end_of(&mut self.control).await
    }

    /// Reads the next event (waiting for it) and converts it for `decoder`:
    /// only the rows of the tables it wants are decoded.
    pub async fn next(&mut self, decoder: &Decoder) -> Result<Event, String> {
        let stream = &mut self.stream;
        let read =
            std::future::poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut *stream), cx))
                .await;
        let event = match read {
            Some(Ok(event)) => event,
            Some(Err(e)) => return Err(format!("cannot read MariaDB's binlog: {}", db_error(&e))),
            None => return Err("MariaDB ended the binlog stream".into()),
        };
        let header = event.header();
        let log_pos = u64::from(header.log_pos());
        let first = !std::mem::replace(&mut self.started, true);
        let bad = |e: std::io::Error| format!("cannot decode a binlog event at {log_pos}: {e}");
        let converted = if header.event_type_raw() == MARIADB_GTID_EVENT {
            gtid_event(event.data(), header.server_id())
                .ok_or_else(|| format!("a GTID event at {log_pos} is too short"))?
        } else {
            match event.read_data().map_err(bad)? {
                // The dump's first, fake, ROTATE (log_pos 0) names the file
                // asked for; the position stays the one asked for. A later
                // fake one (the dump moving on to the next file, as after a
                // restart) names the new file, read after the format
                // description, so its name is whole.
                Some(EventData::RotateEvent(_)) if log_pos == 0 && first => {
                    return Ok(Event::Rotate {
                        file: self.at.file.clone(),
                    });
                }
                Some(EventData::RotateEvent(r)) => Event::Rotate {
                    file: r.name().into_owned(),
                },
                Some(EventData::TableMapEvent(t)) => {
                    let mut columns = None;
                    for field in t.iter_optional_meta() {
                        if let Ok(OptionalMetadataField::ColumnName(names)) = field {
                            let names: Result<Vec<String>, _> = names
                                .iter_names()
                                .map(|n| n.map(|n| n.name().into_owned()))
                                .collect();
                            columns = Some(names.map_err(bad)?);
                        }
                    }
                    Event::TableMap {
                        table_id: t.table_id(),
                        schema: t.database_name().into_owned(),
                        table: t.table_name().into_owned(),
                        columns,
                    }
                }
                Some(EventData::RowsEvent(rows)) => {
                    let table_id = rows.table_id();
                    let op =
                        match rows {
                            RowsEventData::WriteRowsEventV1(_)
                            | RowsEventData::WriteRowsEvent(_) => Op::Insert,
                            RowsEventData::DeleteRowsEventV1(_)
                            | RowsEventData::DeleteRowsEvent(_) => Op::Delete,
                            _ => Op::Update,
                        };
                    let mut out = Vec::new();
                    if decoder.wants(table_id)
                        && let Some(tme) = self.stream.get_tme(table_id)
                    {
                        for row in rows.rows(tme) {
                            let (before, after) = row.map_err(bad)?;
                            let image = if op == Op::Delete { before } else { after };
                            let Some(image) = image else { continue };
                            out.push(
                                (0..image.len())
                                    .map(|i| image.as_ref(i).and_then(text))
                                    .collect(),
                            );
                        }
                    }
                    Event::Rows {
                        table_id,
                        op,
                        rows: out,
                    }
                }
                Some(EventData::XidEvent(_)) => Event::Xid {
                    at_s: header.timestamp(),
                    log_pos,
                },
                Some(EventData::QueryEvent(q)) => Event::Query {
                    sql: q.query().into_owned(),
                    schema: q.schema().into_owned(),
                    at_s: header.timestamp(),
                    log_pos,
                },
                _ => Event::Other,
            }
        };
        if let Event::Rotate { file } = &converted {
            self.at = Position {
                file: file.clone(),
                pos: 4,
            };
        } else if log_pos > self.at.pos {
            // Positions only grow within a file; a dump that starts inside
            // one first gets the file's format description again, with its
            // own (earlier) end or 0 (sql/sql_repl.cc): not a step back.
            self.at.pos = log_pos;
        }
        Ok(converted)
    }

    /// Ends the dump and the control connection.
    pub async fn close(self) {
        let _ = self.stream.close().await;
        let _ = self.control.disconnect().await;
    }
}

/// Where the server's binlog ends now (`SHOW MASTER STATUS`: the file and
/// the offset after its last event; needs BINLOG MONITOR, formerly
/// REPLICATION CLIENT).
async fn end_of(control: &mut Conn) -> Result<Position, String> {
    // File, Position, Binlog_Do_DB, Binlog_Ignore_DB.
    let row: Option<mysql_async::Row> = control
        .query_first("SHOW MASTER STATUS")
        .await
        .map_err(|e| format!("cannot read where MariaDB's binlog ends: {}", db_error(&e)))?;
    let row = row.ok_or("the server keeps no binlog (log_bin is off)")?;
    match (row.get::<String, _>(0), row.get::<u64, _>(1)) {
        (Some(file), Some(pos)) => Ok(Position { file, pos }),
        _ => Err("SHOW MASTER STATUS gave no file and position".into()),
    }
}

/// A column's value as text, `None` for NULL.
fn text(value: &BinlogValue<'_>) -> Option<String> {
    match value {
        BinlogValue::Value(v) => match v {
            Value::NULL => None,
            Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Int(i) => Some(i.to_string()),
            Value::UInt(u) => Some(u.to_string()),
            Value::Float(f) => Some(f.to_string()),
            Value::Double(f) => Some(f.to_string()),
            Value::Date(y, mo, d, h, mi, s, us) => Some(format!(
                "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}{}",
                if *us > 0 {
                    format!(".{us:06}")
                } else {
                    String::new()
                }
            )),
            Value::Time(neg, d, h, mi, s, us) => Some(format!(
                "{}{}:{mi:02}:{s:02}{}",
                if *neg { "-" } else { "" },
                u32::from(*h) + d * 24,
                if *us > 0 {
                    format!(".{us:06}")
                } else {
                    String::new()
                }
            )),
        },
        other => Some(format!("{other:?}")),
    }
}
