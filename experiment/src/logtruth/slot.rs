//! The logical replication slot the truth is read from: made with the
//! built-in `test_decoding` plugin before the command under test starts, so
//! that every transaction the command commits is in it; drained through
//! SQL (`pg_logical_slot_get_changes`, PostgreSQL manual, 9.28.6
//! "Replication Management Functions"), a bounded batch at a time; dropped
//! at the end, so that the server keeps no WAL for it.
//!
//! Draining consumes: what a call returns is gone from the slot, so each
//! batch is decoded at once ([`super::decode::Decoder`]) and handed on.

use super::decode::Decoder;
use crate::servers::postgres::db_error;
use rundb::LogTruthRow;

/// Changes asked for in one call. The server stops after the transaction
/// during which it reached this many rows (a transaction is never split),
/// so a call returns this many or a little more; fewer means the slot is
/// drained up to where the call began.
pub const BATCH: i32 = 10_000;

/// A slot and the connection that drains it.
pub struct Slot {
    client: tokio_postgres::Client,
    name: String,
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
        })
    }

    /// Takes one batch of changes from the slot through `decoder`: the
    /// truth rows of the transactions it completed, and whether the batch
    /// was full (so more may wait).
    pub async fn drain_batch(
        &self,
        decoder: &mut Decoder,
    ) -> Result<(Vec<LogTruthRow>, bool), String> {
        let rows = self
            .client
            .query(
                "SELECT lsn::text, data FROM pg_logical_slot_get_changes($1, NULL, $2, \
                 'include-xids', 'on', 'include-timestamp', 'on', 'skip-empty-xacts', 'on')",
                &[&self.name, &BATCH],
            )
            .await
            .map_err(|e| {
                format!(
                    "cannot read the replication slot '{}': {}",
                    self.name,
                    db_error(&e)
                )
            })?;
        let full = rows.len() >= BATCH as usize;
        let mut out = Vec::new();
        for row in rows {
            let lsn: String = row.get(0);
            let data: String = row.get(1);
            out.extend(decoder.feed(&lsn, &data)?);
        }
        Ok((out, full))
    }

    /// Drops the slot: the server keeps no WAL for it any more.
    pub async fn drop_slot(self) -> Result<(), String> {
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
