//! Progress on stderr for long work, one place to make it: a bar with an
//! estimate where the count is known ([`counted`]), a spinner naming the
//! phase where it is not ([`phases`]).
//!
//! Both draw to indicatif's default target, `ProgressDrawTarget::stderr()`,
//! which indicatif hides when stderr is not a terminal or `TERM` is unset or
//! `dumb` (indicatif 0.18, `ProgressDrawTarget::term`,
//! <https://docs.rs/indicatif/0.18/indicatif/struct.ProgressDrawTarget.html>):
//! piped output, a CI log and `--json` get no progress lines. On a hidden bar
//! `println` prints nothing, so a line that must always show goes through
//! [`ProgressBar::suspend`] and `eprintln!` instead. A bar dropped
//! unfinished (an error returned early) clears itself, so the error's line
//! is not printed after a stale bar.

pub use indicatif::ProgressBar;
use indicatif::{ProgressFinish, ProgressStyle};

/// A bar over `total` items called `unit` ("seeds", "runs", "rows"): how
/// many are done, the rate and indicatif's estimate of the time left.
pub fn counted(total: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(total).with_finish(ProgressFinish::AndClear);
    let template = format!(
        "{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit} done (eta {{eta}}) {{msg}}"
    );
    bar.set_style(
        ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.tick();
    bar
}

/// A spinner that names the phase under way (`set_message`) and how long
/// it has taken; for work whose count is not known.
pub fn phases() -> ProgressBar {
    let bar = ProgressBar::new_spinner().with_finish(ProgressFinish::AndClear);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} {spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}
