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
//!   `experiment` binary and the tests run); [`clock`]: the one wall-clock read.
//! - [`sweep`]: `experiment sweep`, many seeds judged in memory by the `analysis` checker.
//!
//! The `experiment` binary's own wiring (argument parsing, the `id` subcommand, the closing
//! summary) lives in its `main.rs`, not here.
//!
//! ## The core in your own poller
//!
//! Depend on crate `since_id` (experiment/core) alone: it has the layouts, the policies and
//! the poller state machine, with one small dependency and an example on every item.

pub mod api;
pub mod clock;
pub mod embedded;
mod experiment;
pub mod pg;
pub mod record;
pub mod run;
pub mod sim;
pub mod sweep;

pub use experiment::{ClockMode, RunArgs, RunSummary, dry_run, run_experiment};
