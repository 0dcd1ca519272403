//! watch's PostgreSQL source: a logical slot of `test_decoding` on the
//! user's database. One the user made (`--slot NAME`, checked: it exists, is
//! of that plugin on this database and no other consumer holds it; what it
//! held from before is skipped), or, with `--create-slot`, one made here and
//! dropped at the end; a slot watch did not make is never dropped. The
//! session is read-only (`SET SESSION CHARACTERISTICS AS TRANSACTION READ
//! ONLY`), its commit times in UTC, as the decoder reads them.
//!
//! The slot is not consumed: a temporary copy of it is (peeked when the
//! server has no free slot for one), and the slot is confirmed only up to a
//! state committed to run.db ([`Slot::watched`]): a resumed watch reads it
//! from where its state ends (`watch_state`'s `log`, `{"lsn": "0/16B3748"}`).
//! The same holds for a slot watch made, so that its code is the same.
//! A slot watch made stays when watch is killed (SIGKILL, a crash): the
//! session that made it holds an advisory lock on its name
//! (`pg_advisory_lock`, PostgreSQL manual, "Advisory Lock Functions"),
//! which the server releases with the session, so the next `--create-slot`
//! watch with the same flags and `--db` tells a slot left by a killed watch
//! from one another watch still reads, and drops it.

use super::decode::{Decoder, lsn, lsn_text, parse_table};
use super::slot::{self, BATCH, Slot, check_name};
use super::{own, quote_ident};
use crate::logtruth::Counts;
use crate::logtruth::source::{
    Boxed, CONNECT_TIMEOUT_MS, SlotStatus, WatchArgs, WatchOpened, WatchSource, parse_size,
};
use crate::servers::postgres::{connect, db_error};
use rundb::LogTruthRow;
use std::time::Instant;

/// The options, checked before anything connects.
pub(super) struct Checked {
    url: String,
    config: tokio_postgres::Config,
    schema: String,
    table: String,
    slot: String,
    create: bool,
    /// `--max-slot-lag`: the most WAL the slot may keep, in bytes.
    max_lag: Option<u64>,
    /// A watch resumed: the slot is read from where its state ends (`None`
    /// inside: a state without a position, from the slot's confirmed one).
    resume: Option<Option<u64>>,
    /// `--create-slot`, the last watch of `--db` with these flags killed:
    /// its id, if it made the slot.
    killed: Option<i64>,
    /// `--db`, for the message when a slot it left is dropped.
    db: std::path::PathBuf,
}

/// The slot read, and whether watch made it (then it drops it).
pub(super) struct Source {
    slot: Slot,
    made: bool,
    decoder: Decoder,
    /// When the slot was last drained: it is drained every
    /// [`slot::DRAIN_EVERY`], not at every period of the files.
    drained_at: Option<Instant>,
    /// The slot as the last drain left it.
    status: Option<SlotStatus>,
    max_lag: Option<u64>,
    /// Whether the warning at half of `max_lag` was printed.
    warned: bool,
}

/// The URL, the table and the slot's name (MariaDB's flag refused).
pub(super) fn check(url: &str, args: &WatchArgs) -> Result<Checked, String> {
    if args.server_id.is_some() {
        return Err(
            "--server-id is MariaDB's (the binlog reader's id): postgres reads a \
                    slot (--slot NAME)"
                .into(),
        );
    }
    let (schema, table) = parse_table(&args.table)?;
    let slot = args.slot.clone().ok_or(
        "postgres needs --slot NAME: your logical slot of test_decoding, or a new one \
         with --create-slot",
    )?;
    check_name(&slot)?;
    let config = own::config(url, args.token_file.as_deref(), CONNECT_TIMEOUT_MS)?;
    Ok(Checked {
        url: url.into(),
        config,
        schema,
        table,
        slot,
        create: args.create_slot,
        max_lag: args.max_slot_lag.as_deref().map(parse_size).transpose()?,
        resume: args.resume.as_ref().map(saved_lsn).transpose()?,
        killed: args
            .killed
            .as_ref()
            .filter(|k| k.config["slot_made"] == true)
            .map(|k| k.run_id),
        db: args.db.clone(),
    })
}

/// Where a resumed state's log ends: `{"lsn": "X/Y"}` (`None`: a state
/// stored before watch kept one).
fn saved_lsn(r: &crate::logtruth::source::Resumed) -> Result<Option<u64>, String> {
    match r.state["log"]["lsn"].as_str() {
        None => Ok(None),
        Some(text) => lsn(text).map(Some).ok_or_else(|| {
            format!(
                "watch run {}: a bad LSN '{text}' in its stored state",
                r.run_id
            )
        }),
    }
}

/// Takes the advisory lock of slot `name` for the session (held to its
/// end: the slot's maker is alive), waiting at most [`LOCK_WAIT`] for a
/// session that holds it to end (that of a watch just killed, which the
/// server ends once it sees the connection closed); whether it got it.
async fn lock(client: &tokio_postgres::Client, name: &str) -> Result<bool, String> {
    client
        .batch_execute(&format!("SET lock_timeout = {}", LOCK_WAIT.as_millis()))
        .await
        .map_err(|e| db_error(&e))?;
    let taken = client
        .query_one("SELECT pg_advisory_lock($1)", &[&lock_key(name)])
        .await;
    client
        .batch_execute("RESET lock_timeout")
        .await
        .map_err(|e| db_error(&e))?;
    match taken {
        Ok(_) => Ok(true),
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => {
            Ok(false)
        }
        Err(e) => Err(db_error(&e)),
    }
}

/// How long `--create-slot` waits for the advisory lock of its slot's name.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The advisory lock the session of a watch that made its slot holds: a
/// number of the slot's name (FNV-1a, 64 bits, of `snowleak watch slot
/// NAME`), the same in every watch.
fn lock_key(slot: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in b"snowleak watch slot ".iter().chain(slot.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash as i64
}

/// Connects, checks the table's key column, and opens (or makes) the slot.
pub(super) async fn open(c: Checked, key: String) -> Result<WatchOpened, String> {
    let key = key.as_str();
    let Checked {
        url,
        config,
        schema,
        table,
        slot: name,
        create,
        max_lag,
        resume,
        killed,
        db,
    } = c;
    let client = connect(&config)
        .await
        .map_err(|e| format!("--target {url}: {e}"))?;
    client
        .batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY; SET TimeZone = 'UTC'")
        .await
        .map_err(|e| db_error(&e))?;
    let probe = format!(
        "SELECT {} FROM {}.{} LIMIT 0",
        quote_ident(key),
        quote_ident(&schema),
        quote_ident(&table)
    );
    client
        .query(&probe, &[])
        .await
        .map_err(|e| format!("table {schema}.{table}, key column {key}: {}", db_error(&e)))?;
    let (slot, made) = if create {
        let free = lock(&client, &name).await?;
        if slot::exists(&client, &name).await? {
            match killed {
                Some(run) if free => {
                    client
                        .execute("SELECT pg_drop_replication_slot($1)", &[&name])
                        .await
                        .map_err(|e| {
                            format!(
                                "cannot drop the replication slot '{name}' that killed watch \
                                 run {run} left: {}",
                                db_error(&e)
                            )
                        })?;
                    eprintln!(
                        "watch: dropped replication slot '{name}', made by watch run {run} of \
                         {} and left when that watch was killed; making it again",
                        db.display()
                    );
                }
                _ => {
                    return Err(format!(
                        "replication slot '{name}' exists already: watch drops only a slot it \
                         made; to read that one, leave out --create-slot"
                    ));
                }
            }
        }
        (Slot::create(client, &name).await?, true)
    } else {
        (Slot::open(client, &name, resume.is_none()).await?, false)
    };
    let slot = slot.watched(resume.flatten()).await?;
    Ok(WatchOpened {
        source: Box::new(Source {
            slot,
            made,
            decoder: Decoder::new(&schema, &table, key),
            drained_at: None,
            status: None,
            max_lag,
            warned: false,
        }),
        table: format!("{schema}.{table}"),
        from: format!(
            "through slot '{name}'{}",
            if made { " (made by watch)" } else { "" }
        ),
        target: analysis::consumers::TARGET,
        config: vec![
            ("url", url.into()),
            ("slot", name.into()),
            ("slot_made", made.into()),
            (
                "drain_every_ms",
                (slot::DRAIN_EVERY.as_millis() as i64).into(),
            ),
        ],
        batch: i64::from(BATCH),
    })
}

impl Source {
    /// Takes batches from the slot until one is not full, their truth rows
    /// added to `into`, when [`slot::DRAIN_EVERY`] has passed since the
    /// last time, or `last`; whether it did.
    pub(super) async fn drain(
        &mut self,
        into: &mut Vec<LogTruthRow>,
        last: bool,
    ) -> Result<bool, String> {
        if !last
            && self
                .drained_at
                .is_some_and(|at| at.elapsed() < slot::DRAIN_EVERY)
        {
            return Ok(false);
        }
        self.drained_at = Some(Instant::now());
        self.slot
            .drain_all(&mut self.decoder, |rows| into.extend(rows))
            .await?;
        let (retained, position) = self.slot.status().await?;
        self.status = Some(SlotStatus { retained, position });
        self.guard(retained).map(|()| true)
    }

    /// `--max-slot-lag`: a warning once past half of it; past it, an
    /// error (so watch ends with exit 2, dropping the slot if it made it)
    /// before the WAL the slot keeps fills the server's disk.
    fn guard(&mut self, retained: i64) -> Result<(), String> {
        let Some(max) = self.max_lag else {
            return Ok(());
        };
        let retained = retained.max(0) as u64;
        let name = self.slot.name();
        if retained > max {
            return Err(if self.made {
                format!(
                    "replication slot '{name}' keeps {retained} bytes of WAL, more than \
                     --max-slot-lag {max}: watch drops the slot it made and stops"
                )
            } else {
                format!(
                    "replication slot '{name}' keeps {retained} bytes of WAL, more than \
                     --max-slot-lag {max}: watch stops; your slot is left as it was \
                     (drop it with pg_drop_replication_slot if nothing reads it)"
                )
            });
        }
        if retained > max / 2 && !self.warned {
            self.warned = true;
            eprintln!(
                "watch: replication slot '{name}' keeps {retained} bytes of WAL, more than \
                 half of --max-slot-lag {max}"
            );
        }
        Ok(())
    }

    /// The slot as the last drain left it.
    pub(super) fn status(&self) -> Option<SlotStatus> {
        self.status
    }

    /// Drops the slot if watch made it; leaves the user's. The temporary
    /// copy read is dropped either way.
    pub(super) async fn release(mut self) -> Result<(), String> {
        if self.made {
            self.slot.drop_slot().await
        } else {
            self.slot.drop_copy().await
        }
    }
}

impl WatchSource for Source {
    fn drain<'a>(
        &'a mut self,
        into: &'a mut Vec<LogTruthRow>,
        last: bool,
    ) -> Boxed<'a, Result<bool, String>> {
        Box::pin(Source::drain(self, into, last))
    }

    /// The slot is only read when drained.
    fn wait(&mut self, period: std::time::Duration) -> Boxed<'_, Result<(), String>> {
        Box::pin(async move {
            tokio::time::sleep(period).await;
            Ok(())
        })
    }

    /// `{"lsn": "X/Y"}`: the transactions committed up to X/Y were handed on.
    fn position(&self) -> serde_json::Value {
        serde_json::json!({"lsn": self.slot.covered().map(lsn_text)})
    }

    /// Confirms the slot up to the position of a committed state.
    fn confirm<'a>(&'a mut self, position: &'a serde_json::Value) -> Boxed<'a, Result<(), String>> {
        Box::pin(async move {
            match position["lsn"].as_str().and_then(lsn) {
                Some(at) => self.slot.confirm(at).await,
                None => Ok(()),
            }
        })
    }

    fn release(self: Box<Self>) -> Boxed<'static, Result<(), String>> {
        Box::pin(Source::release(*self))
    }

    fn slot_status(&self) -> Option<SlotStatus> {
        self.status()
    }

    fn counts(&self) -> &Counts {
        &self.decoder.counts
    }
}
