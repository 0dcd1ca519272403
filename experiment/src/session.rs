//! What every target's run shares, below all of them, one job a file: the
//! options and stored configuration of a run (`config`), its pollers and
//! plan (`pollers`), the rows it writes and the summary it returns (`rows`),
//! the async runtime and the one shutdown handler (`shutdown`), the poll
//! loop in real time (`real_time`) and the progress display (`progress`).
//! A leaf: it imports the core, the recorder's row types and the driver's
//! plan, never a target or a command. Its items are re-exported here, so
//! users name them `crate::session::X`.

mod config;
mod pollers;
mod progress;
mod real_time;
mod rows;
mod shutdown;

pub use config::{ClockMode, Common, StoredConfig, default_pollers};
pub use pollers::{build_pollers, plan_of, poller_names};
pub use progress::{Bar, describe};
pub use real_time::{Live, poll_in_real_time};
pub use rows::{RunRowParts, RunSummary, end_reason, poller_infos, poller_row, run_row};
pub use shutdown::{Shutdown, runtime, wait_for_signal};
