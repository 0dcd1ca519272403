//! # snowleak: does cursor-based polling of a timeline lose items?
//!
//! The library behind the `experiment` binary. Data flows one way:
//! target → poller → recorder → run.db → `analyze` → report. The map of the
//! modules and the rule of which may import which is docs/layout.md.
//!
//! Public, for the binary, the tests and the benchmarks:
//! - [`cmd`]: the commands (`serve`, `sweep`, `judge`, `id`).
//! - [`targets`]: the targets, and a run from the command line:
//!   [`run_experiment`] runs one experiment from its options to its [`RunSummary`].
//! - [`sim`]: crate `leaky-timeline` (model, profiles, faults, HTTP server),
//!   re-exported; embed it in your own tests with that one dependency.
//! - [`api`]: each API's client side, one file per API.
//! - [`record`]: the recorder, the run database's one writer thread.
//! - [`servers`]: what every throwaway server shares, and PostgreSQL's (two targets start it).
//! - [`logtruth`]: truth from a database's log and consumers' delivered files (`judge --log postgres|mariadb`, `watch`); each database's reader is in its target's folder.
//!
//! Private: the drivers (`drive`), the command line below the targets
//! (`options`), what every `serve` backend shares (`serving`), the options
//! and displays every run shares (`session`), the wall clock (`clock`),
//! the machine's load sampled while a real-time run runs (`load`), a
//! campaign's plan (`campaign`).
//!
//! The pure core is crate `since_id` (experiment/core): layouts, policies,
//! the poller state machine and its schedule, with no I/O and no clock.

pub mod api;
mod campaign;
mod clients;
mod clock;
pub mod cmd;
mod drive;
mod load;
pub mod logtruth;
mod options;
pub mod record;
pub mod servers;
mod serving;
mod session;
pub mod targets;
mod workload;

/// The leaky timeline (crate `leaky-timeline`), as the harness uses it.
pub use leaky_timeline as sim;
pub use session::{ClockMode, RunSummary};
pub use targets::{dry_run, run_experiment};
