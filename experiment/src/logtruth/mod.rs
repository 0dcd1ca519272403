//! Truth from the database's own log (`experiment judge --log postgres`
//! and `--log mariadb`, docs/log-truth.md): the judged table's committed
//! rows read from PostgreSQL's logical replication slot or MariaDB's binary
//! log, and each consumer's deliveries read from the file it appends to.
//! Below the commands, beside the targets: it imports `servers` and
//! `record`'s rows, never a target or a command.
//!
//! - [`judge`]: `judge --log NAME`'s skeleton: the command run (and
//!   its faults, [`nemesis`]) against a throwaway server, its log and the
//!   delivered files read, the verdicts.
//! - [`watch`]: `watch`'s skeleton: your database's log and the delivered
//!   files read every period, the live line and `/metrics` ([`metrics`]).
//! - [`names`]: SQL names, bare or quoted, as `--table` and the logs write them (pure).
//! - [`source`]: what judge and watch ask of a database's log (`LogSource`),
//!   implemented in each database's folder.
//! - [`tail`]: a delivered file read as it grows.
//! - [`verdict`]: each consumer's verdict from what the run recorded.
//!
//! Each database's own reading of its log lives in its folder:
//! PostgreSQL's slot and `test_decoding` decoder in `targets/postgres/`
//! (`slot.rs`, `decode.rs`), MariaDB's binlog dump and decoder in
//! `targets/mariadb/` (`dump.rs`, `binlog.rs`, `ddl.rs`).

pub mod judge;
pub mod live_keys;
pub mod metrics;
pub mod names;
pub mod nemesis;
pub mod source;
pub mod tail;
pub mod verdict;
pub mod watch;

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

/// A truth row as the decoders' tests compare it: its place, key,
/// transaction, commit position and time, and operation.
#[cfg(test)]
pub fn row_fields(r: &rundb::LogTruthRow) -> (i64, &str, i64, &str, i64, &str) {
    (
        r.seq,
        r.key.as_str(),
        r.xid,
        r.commit_lsn.as_str(),
        r.commit_ms,
        r.op.as_str(),
    )
}
