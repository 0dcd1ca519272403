//! # snowleak: does cursor-based polling of a timeline lose items?
//!
//! The library behind the `experiment` and `analyze` binaries. Data flows one way:
//! target → poller → recorder → run.db → analyze → report.
//!
//! Pure core (no I/O, no clock reads; unit- and property-tested):
//! - [`id`]: ID layouts (Snowflake, Misskey, ULID, UUIDv7): `ts(id)`, `min_id_at(t)`.
//! - [`policy`]: cursor policies (`naive`, `compensated:k=1s`).
//! - [`time`]: ms since the Unix epoch, parsed and printed.
//! - [`sim`]: the leaky timeline model (pure) and its HTTP server (shell).

pub mod clock;
pub mod id;
pub mod policy;
pub mod record;
pub mod sim;
pub mod time;
