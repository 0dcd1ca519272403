//! Truth from PostgreSQL's own log (`experiment judge --backend postgres`,
//! docs/log-truth.md): the judged table's committed rows read from a
//! logical replication slot, and each consumer's deliveries read from the
//! file it appends to. Below the commands, beside the targets: it imports
//! `servers` and `record`'s rows, never a target or a command.
//!
//! - [`decode`]: `test_decoding`'s text into truth rows (pure).
//! - [`slot`]: the slot: made, drained a bounded batch at a time, dropped.
//! - [`tail`]: a delivered file read as it grows.

pub mod decode;
pub mod slot;
pub mod tail;
