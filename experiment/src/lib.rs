//! # snowleak: does cursor-based polling of a timeline lose items?
//!
//! The library behind the `experiment` and `analyze` binaries. Data flows one way:
//! target → poller → recorder → run.db → analyze → report.
//!
//! Pure core: crate [`since_id`] (experiment/core; no I/O, no clock reads; unit- and
//! property-tested): ID layouts, cursor policies, strategies, the poller state machine, its
//! schedule, and time parsing. This library uses it directly, it does not re-export it.
//! - [`sim`]: the leaky timeline model (pure) and its HTTP server (shell).
//!
//! Thin shell:
//! - [`api`]: each API's client side (one file per API) and the HTTP client.
//! - [`run`]: the drivers, real time over HTTP and virtual time in-process.
//! - [`embedded`]: the simulator as the default target.
//! - [`pg`]: PostgreSQL as a real leak source: a throwaway cluster, writers, pollers over SQL
//!   and HTTP, the `xmin` policy, your own database.
//! - [`record`]: the run database's schema and its writer.
//! - [`run_experiment`]: one experiment from its [`RunArgs`] to its [`RunSummary`] (what the
//!   `experiment` binary, `sweep` and the tests run); [`clock`]: the one wall-clock read.
//!
//! The `experiment` binary's own wiring (argument parsing, the `id` subcommand, the closing
//! summary) lives in its `main.rs`, not here.
//!
//! ## The core in your own poller
//!
//! ```
//! use since_id::id::Layout;
//! use since_id::policy::CursorPolicy;
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
pub mod clock;
pub mod embedded;
mod experiment;
pub mod pg;
pub mod record;
pub mod run;
pub mod sim;

pub use experiment::{ClockMode, RunArgs, RunSummary, dry_run, run_experiment};
