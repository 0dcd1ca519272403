//! # analysis: reads a run of the snowleak harness and judges it
//!
//! The `analyze` binary is a thin CLI over this library, which is also what
//! the tests and the benchmark drive:
//!
//! - [`history`]: what the checker judges: statuses, truth, pollers, requests.
//! - [`load`]: run.db (read-only) → [`history::History`]; [`load_stream`]: run.db read in time order into [`stream`].
//! - [`diff`]: the pure checker: misses, leaks, late arrivals, skews, verdicts.
//! - [`stream`]: the same check on records fed in time order, memory bounded by the horizon.
//! - [`spill`]: a streamed run's misses that are not leaks, leaks and late arrivals, in temporary files, not in memory.
//! - [`oracle`]: the oracle's cost (the floor of duplicates) and detection delays.
//! - [`report`]: the text report; [`json`]: the `--json` output; [`plot`]: PNG and SVG plots.
//! - [`history_builder`]: a run's records → [`history::History`], the one way it is built ([`load`] and `experiment sweep`).
//! - [`sweep`]: `experiment sweep`'s judging: one row per seed and poller, the summary;
//!   [`sweep_plot`]: its frontier and lateness survival plots.
//! - [`campaign`]: `experiment sweep --target postgres|mariadb|misskey-ftt`: each run's
//!   database judged, the loss over runs per combination and poller.
//! - [`halves`]: a run cut at the middle of its time, its rows and each poller's lost rows by half.
//! - [`ticks`]: the writers' transactions in flight at the pollers' ticks, against any instant.
//! - [`delivered`]: `--delivered`: a consumer judged from the IDs it delivered.
//! - [`consumers`]: a consumer's verdict against the truth of PostgreSQL's log (`judge --log postgres`);
//!   [`settle`]: the same judge kept up to date row by row in flat memory (`experiment watch`).
//! - [`machine`]: the machine's load during a real-time run (`runs.config`'s `machine_load`).
//! - [`ftt`]: a misskey-ftt run's lost notes by their fate in Redis (leak, trimmed, never pushed).
//! - [`interval`]: a loss rate over runs with its quasi-Poisson 95 % interval;
//!   a difference between two cells with its intervals and p value.
//! - [`cli`]: the binaries' one-line usage errors.
//! - [`progress`]: the progress bar on stderr (a terminal only) for long work.
//! - [`synth`]: writes synthetic run databases (for tests and the benchmark).

pub mod campaign;
pub mod cli;
pub mod consumers;
pub mod delivered;
pub mod delivery;
pub mod diff;
pub mod ftt;
pub mod halves;
pub mod history;
pub mod history_builder;
pub mod html;
pub mod interval;
pub mod json;
pub mod load;
pub mod load_stream;
pub mod machine;
pub mod oracle;
pub mod plot;
pub mod progress;
pub mod report;
pub mod settle;
pub mod spill;
pub mod stream;
pub mod sweep;
pub mod sweep_plot;
pub mod synth;
pub mod ticks;
