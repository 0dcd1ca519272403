//! # since_id: polling a timeline of k-sorted IDs without losing items
//!
//! The pure core of the snowleak harness: no I/O, no clock reads, no async runtime.
//!
//! - [`id`]: ID layouts (Snowflake, Misskey, ULID, UUIDv7): `ts(id)`, `min_id_at(t)`.
//! - [`policy`]: cursor policies (`naive`, `compensated:k=1s`, `audit`, `adaptive`).
//! - [`strategy`]: a policy as a state machine (ticks, audits, adaptive).
//! - [`poller`]: one poller as a state machine: the next request from the last response.
//! - [`schedule`]: when each request is due: cadence, backoff, `Retry-After`, drain.
//! - [`time`]: ms since the Unix epoch, parsed and printed.

pub mod id;
pub mod policy;
pub mod poller;
pub mod schedule;
pub mod strategy;
pub mod time;
