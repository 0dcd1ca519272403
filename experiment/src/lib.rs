//! # snowleak: does cursor-based polling of a timeline lose items?
//!
//! The library behind the `experiment` and `analyze` binaries. Data flows one way:
//! target → poller → recorder → run.db → analyze → report.
//!
//! Pure core (no I/O, no clock reads; unit- and property-tested):
//! - [`id`]: ID layouts (Snowflake, Misskey, ULID, UUIDv7): `ts(id)`, `min_id_at(t)`.
//! - [`policy`]: cursor policies (`naive`, `compensated:k=1s`).
//! - [`strategy`]: a policy as a state machine (ticks, audits, adaptive).
//! - [`poller`]: one poller as a state machine: the next request from the last response.
//! - [`sim`]: the leaky timeline model (pure) and its HTTP server (shell).
//! - [`time`]: ms since the Unix epoch, parsed and printed.
//!
//! Thin shell:
//! - [`api`]: each API's client side (one file per API) and the HTTP client.
//! - [`run`]: the drivers, real time over HTTP and virtual time in-process.
//! - [`embedded`]: the simulator as the default target.
//! - [`pg`]: PostgreSQL as a real leak source: a throwaway cluster, writers, pollers over SQL
//!   and HTTP, the `xmin` policy, your own database.
//! - [`record`]: the run database's schema and its writer.
//! - [`app`]: the `experiment` command's wiring; [`clock`]: the one wall-clock read.
//!
//! ## The core in your own poller
//!
//! ```
//! use snowleak::id::Layout;
//! use snowleak::policy::CursorPolicy;
//!
//! let layout: Layout = "mastodon".parse().unwrap();
//! let policy: CursorPolicy = "compensated:k=2s".parse().unwrap();
//! // After each successful request: the highest ID ever seen (never lowered,
//! // even if that status is deleted) and the client time the request was sent.
//! let latest = layout.parse("103206804533200177").unwrap();
//! let sent_at_ms = 1_574_810_861_000; // 2019-11-26T23:27:41Z
//! let since_id = layout.format(policy.since_id(&layout, latest, sent_at_ms));
//! // Two seconds before the request, minus one: statuses up to 2 s late are not skipped.
//! assert_eq!(since_id, layout.format(layout.min_id_at(sent_at_ms - 2000).pred()));
//! ```

pub mod api;
pub mod app;
pub mod clock;
pub mod embedded;
pub use since_id::id;
pub mod pg;
pub use since_id::policy;
pub use since_id::poller;
pub mod record;
pub mod run;
pub use since_id::schedule;
pub mod sim;
pub use since_id::strategy;
pub use since_id::time;
