//! The logical replication slot the truth is read from: made with the
//! built-in `test_decoding` plugin before the command under test starts, so
//! that every transaction the command commits is in it; drained through
//! SQL (`pg_logical_slot_get_changes`, PostgreSQL manual, 9.28.6
//! "Replication Management Functions"), a bounded batch at a time; dropped
//! at the end, so that the server keeps no WAL for it.
//!
//! Draining consumes: what a call returns is gone from the slot, so each
//! batch is decoded at once ([`super::decode::Decoder`]) and handed on.
//!
//! `experiment watch` reads a slot on the user's own database instead: one
//! the user made ([`Slot::open`], checked in `pg_replication_slots` first:
//! its plugin, its database, whether another consumer holds it), or one
//! it makes and drops itself. Watch does not consume that slot as it reads
//! ([`Slot::watched`]): it consumes a temporary copy of it
//! (`pg_copy_logical_replication_slot`, made on the session that reads it,
//! dropped by the server when that session ends, a killed watch's too) and
//! confirms the slot itself (`pg_replication_slot_advance`) only up to a
//! position whose rows are in a state committed to run.db
//! ([`Slot::confirm`]), so that a watch killed at any moment finds in the
//! slot everything its last state lacks. When the server has no free slot
//! for the copy (`max_replication_slots`), watch peeks at the slot instead
//! (`pg_logical_slot_peek_changes`, which leaves the slot where it was):
//! as exact, but each peek decodes again what was read since the last
//! confirmation.

use super::decode::{Decoder, lsn, lsn_text};
use crate::servers::postgres::db_error;
use rundb::LogTruthRow;
use std::sync::atomic::{AtomicBool, Ordering};

/// Changes asked for in one call. The server stops after the transaction
/// during which it reached this many rows (a transaction is never split),
/// so a call returns this many or a little more; fewer means the slot is
/// drained up to where the call began.
pub const BATCH: i32 = 10_000;

/// How often the slot is drained. Each call of
/// `pg_logical_slot_get_changes` decodes the log again from the slot's
/// `restart_lsn`, not from where the last call stopped, and `restart_lsn`
/// moves only when the log holds a record of the running transactions,
/// which the server writes at a checkpoint and about every 15 s otherwise
/// (`LOG_SNAPSHOT_INTERVAL_MS` in PostgreSQL's `bgwriter.c`; on demand with
/// `pg_log_standby_snapshot()` from version 16). So every call re-decodes
/// up to 15 s of log: at five calls a second that was most of the reader's
/// cost to the writers (docs/log-truth.md, "What reading the log costs").
/// Draining less often costs nothing in the verdicts: each commit's time
/// comes from the log itself, not from when it was drained.
pub const DRAIN_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A slot and the connection that drains it.
pub struct Slot {
    client: tokio_postgres::Client,
    name: String,
    /// A call failed because the server went away (its shutdown ended our
    /// backend): the connection is as good as closed, though the client may
    /// not have seen the socket close yet.
    gone: AtomicBool,
    /// `None`: the slot is consumed as it is read (the judge's own slot).
    peek: Option<Peek>,
    /// The temporary copy of the slot that is consumed in its place (a
    /// watched slot's, [`Slot::watched`]); `None` with `peek`: the slot is
    /// peeked.
    copy: Option<String>,
}

/// A slot read without consuming it ([`Slot::watched`]): through its
/// temporary copy, or peeked. Each peek decodes from the slot's confirmed
/// position again, so what was handed on since is returned again until the
/// slot is confirmed past it; the copy starts at that position too, once.
#[derive(Clone, Copy, Debug)]
struct Peek {
    /// Every transaction whose commit ends at or before this WAL position
    /// was handed on, and no other: a peek skips them (by the end of their
    /// COMMIT, the LSN test_decoding gives its COMMIT row).
    covered: u64,
    /// The slot's `confirmed_flush_lsn`, as watch last set or read it.
    confirmed: u64,
    /// How many rows a peek returns before its first transaction not
    /// handed on yet (learnt from each peek; 0 after a confirmation, then
    /// learnt again): a batch asks for that many more than [`BATCH`].
    prefix: i64,
}

/// Whether `e` says the server went away: the connection closed, or the
/// server ended our backend as it shut down (`57P01` admin_shutdown, as a
/// fast shutdown or restart does; `57P02` crash_shutdown; `57P03`
/// cannot_connect_now: PostgreSQL manual, Appendix A "PostgreSQL Error
/// Codes").
fn went_away(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.is_closed()
        || e.code().is_some_and(|c| {
            [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(c)
        })
}

/// A slot name as PostgreSQL accepts one: lower-case letters, digits and
/// underscores, at most 63 characters (PostgreSQL manual, 26.2.6
/// "Replication Slots", and `ReplicationSlotValidateName`).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad --slot '{name}': a slot name is 1 to 63 lower-case letters, digits and underscores"
        ))
    }
}

impl Slot {
    /// Makes the slot `name` on the server `client` is connected to.
    pub async fn create(client: tokio_postgres::Client, name: &str) -> Result<Slot, String> {
        check_name(name)?;
        client
            .query_one(
                "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'test_decoding')",
                &[&name],
            )
            .await
            .map_err(|e| {
                format!(
                    "cannot make the replication slot '{name}': {}",
                    db_error(&e)
                )
            })?;
        Ok(Slot {
            client,
            name: name.into(),
            gone: AtomicBool::new(false),
            peek: None,
            copy: None,
        })
    }

    /// The slot `name` the user made, on the database `client` is
    /// connected to: it must exist, be a logical slot of `test_decoding`
    /// on this database, and be free (no other consumer streaming it:
    /// `active` in the system view `pg_replication_slots`, PostgreSQL
    /// manual, "System Views"). With `skip`, what it holds from before is
    /// skipped (`pg_replication_slot_advance` to the current WAL position):
    /// the truth starts now; without (a watch resumed), it is read from its
    /// confirmed position. Nobody else should read it while it is drained.
    pub async fn open(
        client: tokio_postgres::Client,
        name: &str,
        skip: bool,
    ) -> Result<Slot, String> {
        check_name(name)?;
        let Some(found) = find(&client, name).await? else {
            return Err(format!(
                "no replication slot '{name}' on this server: make one with \
                 SELECT pg_create_logical_replication_slot('{name}', 'test_decoding'), \
                 or give --create-slot"
            ));
        };
        if found.plugin.as_deref() != Some("test_decoding") {
            return Err(format!(
                "replication slot '{name}' is {}: watch reads a logical slot of test_decoding",
                match &found.plugin {
                    Some(plugin) => format!("a logical slot of plugin {plugin}"),
                    None => "a physical slot".into(),
                }
            ));
        }
        if !found.this_database {
            return Err(format!(
                "replication slot '{name}' decodes database {}, not the one --target names",
                found.database.as_deref().unwrap_or("?")
            ));
        }
        if let Some(pid) = found.active_pid {
            return Err(format!(
                "replication slot '{name}' is in use by another consumer (process {pid}): \
                 a slot has one reader at a time; make one for watch (or give --create-slot \
                 and another --slot name)"
            ));
        }
        if skip {
            client
                .query_one(
                    "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())::text",
                    &[&name],
                )
                .await
                .map_err(|e| {
                    format!(
                        "cannot skip what replication slot '{name}' held: {}",
                        db_error(&e)
                    )
                })?;
        }
        Ok(Slot {
            client,
            name: name.into(),
            gone: AtomicBool::new(false),
            peek: None,
            copy: None,
        })
    }

    /// The judge's own slot again, on a new connection (after the server
    /// restarted: a slot survives a restart).
    pub fn resume(client: tokio_postgres::Client, name: &str) -> Slot {
        Slot {
            client,
            name: name.into(),
            gone: AtomicBool::new(false),
            peek: None,
            copy: None,
        }
    }

    /// Reads the slot without consuming it from now on: through a
    /// temporary copy of it, consumed, or (no free slot for the copy)
    /// peeked, and the slot moves only at [`Slot::confirm`]. `from` is
    /// where a resumed watch's state ends (a WAL position: the transactions
    /// committed up to it were taken, the slot still holds those after);
    /// `None`, a new watch: from the slot's confirmed position. A slot
    /// confirmed past `from` lost what the state lacks: refused.
    ///
    /// The copy (`pg_copy_logical_replication_slot(src, dst, true)`,
    /// PostgreSQL manual, 9.28.6) is made on this session, which alone may
    /// use it, and starts at the slot's confirmed position; the server
    /// drops it when the session ends. Its name, [`copy_name`], holds this
    /// session's server process id, which no other live session has.
    pub async fn watched(self, from: Option<u64>) -> Result<Slot, String> {
        let mut slot = self.peeking(from).await?;
        let pid: i32 = slot
            .client
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .map_err(|e| db_error(&e))?
            .get(0);
        let copy = copy_name(&slot.name, pid);
        let made = slot
            .client
            .query_one(
                "SELECT slot_name::text FROM pg_copy_logical_replication_slot($1, $2, true)",
                &[&slot.name, &copy],
            )
            .await;
        match made {
            Ok(_) => slot.copy = Some(copy),
            Err(e)
                if e.code()
                    == Some(&tokio_postgres::error::SqlState::CONFIGURATION_LIMIT_EXCEEDED) =>
            {
                eprintln!(
                    "watch: no free replication slot for a temporary copy of '{}' \
                     (max_replication_slots): peeking at it instead, which makes the server \
                     decode again, every drain, what was read since the last stored state \
                     (about twice to four times its CPU a commit)",
                    slot.name
                );
            }
            Err(e) => {
                return Err(format!(
                    "cannot copy the replication slot '{}' to '{copy}': {}",
                    slot.name,
                    db_error(&e)
                ));
            }
        }
        Ok(slot)
    }

    /// The slot peeked from its confirmed position, or `from`
    /// ([`Slot::watched`]).
    async fn peeking(mut self, from: Option<u64>) -> Result<Slot, String> {
        let confirmed: Option<String> = self
            .client
            .query_opt(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.name],
            )
            .await
            .map_err(|e| format!("cannot read pg_replication_slots: {}", db_error(&e)))?
            .ok_or_else(|| format!("the replication slot '{}' is gone", self.name))?
            .get(0);
        let confirmed = confirmed.as_deref().and_then(lsn).ok_or_else(|| {
            format!(
                "the replication slot '{}' has no confirmed position",
                self.name
            )
        })?;
        let covered = match from {
            Some(from) if confirmed > from => {
                return Err(format!(
                    "replication slot '{}' was confirmed up to {}, past {} where the \
                     stored state of watch ends: what committed between is gone from it \
                     (read by another consumer?); give another --db to start anew",
                    self.name,
                    lsn_text(confirmed),
                    lsn_text(from)
                ));
            }
            Some(from) => from,
            None => confirmed,
        };
        self.peek = Some(Peek {
            covered,
            confirmed,
            prefix: 0,
        });
        Ok(self)
    }

    /// Where the transactions handed on end (a peeked slot's): the WAL
    /// position a state of them holds.
    pub fn covered(&self) -> Option<u64> {
        self.peek.map(|p| p.covered)
    }

    /// Confirms a peeked slot up to `at` (`pg_replication_slot_advance`,
    /// PostgreSQL manual, 9.28.6: the server may then drop the WAL before
    /// it, and a peek starts there), once the rows before `at` are in a
    /// committed state. Nothing when the slot is there already (the
    /// function refuses to move a slot back).
    pub async fn confirm(&mut self, at: u64) -> Result<(), String> {
        let Some(peek) = self.peek.as_mut() else {
            return Ok(());
        };
        if at <= peek.confirmed {
            return Ok(());
        }
        let reached: String = self
            .client
            .query_one(
                "SELECT end_lsn::text FROM pg_replication_slot_advance($1, $2::text::pg_lsn)",
                &[&self.name, &lsn_text(at)],
            )
            .await
            .map_err(|e| {
                format!(
                    "cannot confirm the replication slot '{}' up to {}: {}",
                    self.name,
                    lsn_text(at),
                    db_error(&e)
                )
            })?
            .get(0);
        peek.confirmed = lsn(&reached).unwrap_or(at);
        peek.prefix = 0;
        Ok(())
    }

    /// Whether its connection closed, or a call failed because the server
    /// went away (`went_away`): a fast shutdown ends the backend with an
    /// error before the client sees the socket close, and the reader must
    /// reconnect then too, not fail.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed() || self.gone.load(Ordering::Relaxed)
    }

    /// The one-line message of a failed read of the slot; notes whether
    /// the server went away.
    fn read_error(&self, e: tokio_postgres::Error) -> String {
        if went_away(&e) {
            self.gone.store(true, Ordering::Relaxed);
        }
        format!(
            "cannot read the replication slot '{}': {}",
            self.name,
            db_error(&e)
        )
    }

    /// Takes one batch of changes, up to `upto` (an LSN), from the slot
    /// through `decoder`: the truth rows of the transactions it completed,
    /// and whether the batch was full (so more may wait).
    async fn drain_batch(
        &mut self,
        decoder: &mut Decoder,
        upto: &str,
    ) -> Result<(Vec<LogTruthRow>, bool), String> {
        if let (Some(peek), None) = (self.peek, &self.copy) {
            return self.peek_batch(decoder, upto, peek).await;
        }
        let read = self.copy.as_deref().unwrap_or(&self.name);
        let rows = self
            .client
            .query(
                "SELECT lsn::text, data FROM pg_logical_slot_get_changes($1, $2::text::pg_lsn, $3, \
                 'include-xids', 'on', 'include-timestamp', 'on', 'skip-empty-xacts', 'on')",
                &[&read, &upto, &BATCH],
            )
            .await
            .map_err(|e| self.read_error(e))?;
        let full = rows.len() >= BATCH as usize;
        let rows: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut start = 0;
        if let Some(peek) = self.peek.as_mut() {
            // A copy: its first transactions, those whose COMMIT ends at or
            // before `covered` (a resumed watch's state holds them), are
            // skipped, as a peek does; the rest move `covered`.
            for (n, (at, data)) in rows.iter().enumerate() {
                if data.starts_with("COMMIT") {
                    let at = lsn(at).ok_or_else(|| format!("a bad LSN '{at}' in the slot"))?;
                    if at <= peek.covered {
                        start = n + 1;
                    } else {
                        peek.covered = at;
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (lsn, data) in &rows[start..] {
            out.extend(decoder.feed(lsn, data)?);
        }
        Ok((out, full))
    }

    /// [`Slot::drain_batch`] of a peeked slot. A peek returns the
    /// transactions from the slot's confirmed position on, in commit order,
    /// each whole (test_decoding writes a transaction's rows at its
    /// commit), so those already handed on are its first rows: the server
    /// drops them (up to the last COMMIT row at or before `covered`) and
    /// sends the rest, and is asked for [`BATCH`] rows beyond them.
    async fn peek_batch(
        &mut self,
        decoder: &mut Decoder,
        upto: &str,
        peek: Peek,
    ) -> Result<(Vec<LogTruthRow>, bool), String> {
        let asked = i32::try_from(peek.prefix.saturating_add(i64::from(BATCH))).unwrap_or(i32::MAX);
        // The CTE, named twice, is computed once (PostgreSQL manual,
        // "WITH Queries"); WITH ORDINALITY numbers the rows in the order
        // the function returns them ("Table Functions").
        let rows = self
            .client
            .query(
                "WITH c AS (SELECT t.lsn, t.data, t.n \
                   FROM pg_logical_slot_peek_changes($1, $2::text::pg_lsn, $3, \
                   'include-xids', 'on', 'include-timestamp', 'on', 'skip-empty-xacts', 'on') \
                   WITH ORDINALITY AS t(lsn, xid, data, n)), \
                 s AS (SELECT count(*) AS total, coalesce(max(n) FILTER (WHERE \
                   data LIKE 'COMMIT %' AND lsn <= $4::text::pg_lsn), 0) AS skip FROM c) \
                 SELECT s.total, c.lsn::text, c.data FROM s LEFT JOIN c ON c.n > s.skip \
                 ORDER BY c.n",
                &[&self.name, &upto, &asked, &lsn_text(peek.covered)],
            )
            .await
            .map_err(|e| self.read_error(e))?;
        let total: i64 = rows.first().map_or(0, |r| r.get(0));
        let mut out = Vec::new();
        let mut covered = peek.covered;
        for row in rows {
            let (Some(at), Some(data)) = (
                row.get::<_, Option<String>>(1),
                row.get::<_, Option<String>>(2),
            ) else {
                continue;
            };
            out.extend(decoder.feed(&at, &data)?);
            if data.starts_with("COMMIT") {
                covered =
                    covered.max(lsn(&at).ok_or_else(|| format!("a bad LSN '{at}' in the slot"))?);
            }
        }
        self.peek = Some(Peek {
            covered,
            prefix: total,
            ..peek
        });
        Ok((out, total >= i64::from(asked)))
    }

    /// Takes batches from the slot until one is not full, handing each
    /// batch's truth rows, if any, to `record` (which may wait for room in
    /// the recorder's bounded queue).
    ///
    /// First it notes where the log ends and then lists the table's leaf
    /// partitions (`pg_partition_tree`; none for a table that is not
    /// partitioned, or not yet made): every leaf a change up to that LSN
    /// names existed when it was listed, unless it was made and gone
    /// between two drains. Then the slot is drained up to that LSN only,
    /// and the leaves no longer listed expire there (module docs of
    /// [`super::decode`]).
    pub async fn drain_all(
        &mut self,
        decoder: &mut Decoder,
        mut record: impl FnMut(Vec<LogTruthRow>),
    ) -> Result<(), String> {
        let read = |e: tokio_postgres::Error| self.read_error(e);
        // The flushed end: decoding reads no further (the SQL functions
        // stop at the WAL flushed when called, `GetFlushRecPtr`), so a
        // drain that reaches it has read every transaction before it.
        let end = self
            .client
            .query_one(
                "SELECT pg_current_wal_flush_lsn()::text, \
                 (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
                &[],
            )
            .await
            .map_err(read)?;
        let (upto, at_ms): (String, i64) = (end.get(0), end.get(1));
        let leaves: Vec<(String, String)> = self
            .client
            .query(
                "SELECT n.nspname::text, c.relname::text \
                 FROM pg_partition_tree(to_regclass($1)) t \
                 JOIN pg_class c ON c.oid = t.relid \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE t.isleaf AND t.level > 0",
                &[&decoder.table_regclass()],
            )
            .await
            .map_err(read)?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let gone = decoder.learn_leaves(&leaves, at_ms);
        loop {
            let (rows, full) = self.drain_batch(decoder, &upto).await?;
            if !rows.is_empty() {
                record(rows);
            }
            if !full {
                break;
            }
        }
        // Read to `upto`: a transaction whose commit ends later starts
        // after it (one that straddles it was read, and ends `covered`).
        if let (Some(peek), Some(upto)) = (self.peek.as_mut(), lsn(&upto)) {
            peek.covered = peek.covered.max(upto);
        }
        if !gone.is_empty() {
            let rows = decoder.expire_leaves(&gone, &upto);
            if !rows.is_empty() {
                record(rows);
            }
        }
        Ok(())
    }

    /// The slot's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The WAL the slot keeps, in bytes
    /// (`pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)`: `restart_lsn`
    /// is the oldest WAL the slot's consumer may still need, PostgreSQL
    /// manual, "pg_replication_slots"), and its `confirmed_flush_lsn` (up
    /// to where it was read) as a number of bytes.
    pub async fn status(&self) -> Result<(i64, i64), String> {
        let row = self
            .client
            .query_opt(
                "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint, \
                 coalesce(pg_wal_lsn_diff(confirmed_flush_lsn, '0/0'), 0)::bigint \
                 FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.name],
            )
            .await
            .map_err(|e| format!("cannot read pg_replication_slots: {}", db_error(&e)))?
            .ok_or_else(|| format!("the replication slot '{}' is gone", self.name))?;
        Ok((row.get(0), row.get(1)))
    }

    /// Drops the temporary copy, if any, at once (the server would when the
    /// session ends, but not before the next look at its slots).
    pub async fn drop_copy(&mut self) -> Result<(), String> {
        let Some(copy) = self.copy.take() else {
            return Ok(());
        };
        self.client
            .execute("SELECT pg_drop_replication_slot($1)", &[&copy])
            .await
            .map(|_| ())
            .map_err(|e| {
                format!(
                    "cannot drop the replication slot '{copy}' (watch's copy of '{}'): {}",
                    self.name,
                    db_error(&e)
                )
            })
    }

    /// Drops the slot (and its copy): the server keeps no WAL for it any
    /// more.
    pub async fn drop_slot(mut self) -> Result<(), String> {
        self.drop_copy().await?;
        self.client
            .execute("SELECT pg_drop_replication_slot($1)", &[&self.name])
            .await
            .map(|_| ())
            .map_err(|e| {
                format!(
                    "cannot drop the replication slot '{}': {}",
                    self.name,
                    db_error(&e)
                )
            })
    }
}

/// The name of watch's temporary copy of slot `name`, made by server
/// process `pid`: `NAME_watch_PID`, `NAME` cut so that it fits in the 63
/// characters of a slot name.
pub fn copy_name(name: &str, pid: i32) -> String {
    let tail = format!("_watch_{pid}");
    let keep = name.len().min(63usize.saturating_sub(tail.len()));
    // A slot name is ASCII (`check_name`): any cut is a character boundary.
    format!("{}{tail}", &name[..keep])
}

/// A slot as `pg_replication_slots` shows it.
struct Found {
    /// `NULL` for a physical slot.
    plugin: Option<String>,
    database: Option<String>,
    this_database: bool,
    active_pid: Option<i32>,
}

/// Whether the slot `name` exists on the server, and what it is.
pub async fn exists(client: &tokio_postgres::Client, name: &str) -> Result<bool, String> {
    Ok(find(client, name).await?.is_some())
}

async fn find(client: &tokio_postgres::Client, name: &str) -> Result<Option<Found>, String> {
    let row = client
        .query_opt(
            "SELECT plugin::text, database::text, database = current_database(), \
             CASE WHEN active THEN coalesce(active_pid, 0) END \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .map_err(|e| format!("cannot read pg_replication_slots: {}", db_error(&e)))?;
    Ok(row.map(|r| Found {
        plugin: r.get(0),
        database: r.get(1),
        this_database: r.get::<_, Option<bool>>(2).unwrap_or(false),
        active_pid: r.get(3),
    }))
}
