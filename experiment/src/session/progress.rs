//! The progress display: a bar on a terminal, log lines elsewhere, and the
//! line of live counters they show.

use crate::drive::Progress;
use crate::sim::sync::lock;
use indicatif::{ProgressBar, ProgressStyle};
use since_id::time::format_duration_ms;
use std::sync::{Arc, Mutex};

/// One line of live counters.
pub fn describe(p: &Progress) -> String {
    let late: Vec<String> = p
        .late_arrivals
        .iter()
        .map(|(n, c)| format!("{n} {c}"))
        .collect();
    format!(
        "{} requests ({} failed), {} statuses, late arrivals: {}",
        p.requests,
        p.failed,
        p.statuses,
        late.join(", ")
    )
}

/// A progress bar on a terminal; plain log lines every `log_every_ms` elsewhere.
#[derive(Clone)]
pub struct Bar {
    bar: Option<ProgressBar>,
    log_every_ms: u64,
    last_log_ms: Arc<Mutex<u64>>,
}

impl Bar {
    /// A bar over `duration_ms` on a terminal, log lines elsewhere. The bar
    /// is indicatif's on stderr, which indicatif hides off a terminal and
    /// when `TERM` is unset or `dumb` (`ProgressDrawTarget::term`,
    /// https://docs.rs/indicatif/0.18/indicatif/struct.ProgressDrawTarget.html);
    /// a hidden bar is dropped, so the log lines show there instead.
    pub fn new(duration_ms: u64, log_every_ms: u64) -> Bar {
        let bar = Some(ProgressBar::new(duration_ms.div_ceil(1000)))
            .filter(|bar| !bar.is_hidden())
            .inspect(|bar| {
                bar.set_style(
                    ProgressStyle::with_template(
                        "{elapsed_precise} [{bar:30}] {pos}/{len}s (eta {eta}) {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
            });
        Bar {
            bar,
            log_every_ms,
            last_log_ms: Arc::new(Mutex::new(0)),
        }
    }

    /// No bar and no log lines.
    pub fn silent() -> Bar {
        Bar {
            bar: None,
            log_every_ms: u64::MAX,
            last_log_ms: Arc::new(Mutex::new(0)),
        }
    }

    pub fn tick_to(&self, elapsed_ms: u64, message: impl FnOnce() -> String) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(elapsed_ms / 1000);
                bar.set_message(message());
            }
            None => {
                let mut last = lock(&self.last_log_ms);
                if elapsed_ms >= last.saturating_add(self.log_every_ms) {
                    *last = elapsed_ms;
                    tracing::info!(
                        "{} elapsed: {}",
                        format_duration_ms(elapsed_ms / 1000 * 1000),
                        message()
                    );
                }
            }
        }
    }

    /// Prints `line` on stderr: above the bar on a terminal (indicatif's
    /// `ProgressBar::println`, so the bar is drawn again below it), as is
    /// elsewhere.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
