//! Truth from the database's own log (`experiment judge --backend postgres`
//! and `--backend mariadb`, docs/log-truth.md): the judged table's committed
//! rows read from PostgreSQL's logical replication slot or MariaDB's binary
//! log, and each consumer's deliveries read from the file it appends to.
//! Below the commands, beside the targets: it imports `servers` and
//! `record`'s rows, never a target or a command.
//!
//! - [`decode`]: `test_decoding`'s text into truth rows (pure).
//! - [`slot`]: the slot: made, drained a bounded batch at a time, dropped.
//! - [`binlog`]: MariaDB's binlog events into truth rows (pure).
//! - [`ddl`]: the DDL statements of MariaDB's binlog that touch a table, read (pure).
//! - [`dump`]: MariaDB's binlog read as it grows, as a replica reads it.
//! - [`names`]: SQL names, bare or quoted, as `--table` and the logs write them (pure).
//! - [`tail`]: a delivered file read as it grows.
//! - [`verdict`]: each consumer's verdict from what the run recorded.

pub mod binlog;
pub mod ddl;
pub mod decode;
pub mod dump;
pub mod names;
pub mod slot;
pub mod tail;
pub mod verdict;
