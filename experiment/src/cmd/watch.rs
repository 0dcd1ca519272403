//! `experiment watch --target postgres:URL|mariadb:URL --table T [--key COL]
//! [--delivered NAME=FILE]... [--expect-all] [--duration D] [--db FILE]
//! [--metrics ADDR] [--max-slot-lag SIZE] [--settle-after D]`: records the truth of the user's
//! own database while their own system runs (docs/log-truth.md, "Your own
//! database"). The command only dispatches: `--target NAME:URL` picks the
//! line of `targets::LOGS` that reads that database's log (its options
//! checked there), and `logtruth::watch` runs the one skeleton (the files
//! and the log read every period, the live line and `/metrics`
//! (`logtruth::metrics`), the verdicts).

pub use crate::logtruth::source::WatchArgs;
use crate::logtruth::source::WatchOpening;
pub use crate::logtruth::watch::Watched;

/// Watches the table until `--duration` or a signal and judges its
/// consumers; `Err` is bad input or a failure (exit 2), with a slot watch
/// made dropped.
pub fn watch_command(mut args: WatchArgs) -> Result<Watched, String> {
    fix_mmap_threshold();
    args.resume = crate::logtruth::watch::resumable(&args)?;
    args.killed = crate::logtruth::watch::killed(&args)?;
    let target = check(&args)?;
    crate::logtruth::watch::watch(args, target)
}

/// Gives the heap's large blocks back to the kernel when freed, for as
/// long as the process lives. glibc raises its mmap threshold each time a
/// block it mapped is freed (up to 32 MiB on 64-bit: mallopt(3),
/// M_MMAP_THRESHOLD), after which blocks of that size come from the heap,
/// where freeing them leaves holes the process keeps. watch frees such a
/// block every checkpoint (the checker's state as text, about 11 MB at 300
/// commits a second), and its RSS grew in steps over an hour because of it
/// (docs/benchmarks.md, "watch for weeks"). Setting the threshold also
/// turns its raising off (the same page of mallopt(3)). Only watch, which
/// runs for weeks: the serving commands allocate a page of more than
/// 128 KiB per request and would pay a mapping for each.
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of glibc's allocator; it is
    // called before watch starts any thread of its own.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Which database `--target` names (a line of `targets::LOGS`), its
/// options checked by it; everything checked before anything connects.
fn check(args: &WatchArgs) -> Result<WatchOpening, String> {
    for log in crate::targets::LOGS {
        if let Some(url) = args
            .target
            .strip_prefix(log.name())
            .and_then(|t| t.strip_prefix(':'))
        {
            return log.watch_check(url, args);
        }
    }
    let examples: Vec<&str> = crate::targets::LOGS
        .iter()
        .map(|l| l.watch_example())
        .collect();
    Err(format!(
        "bad --target '{}': watch reads PostgreSQL or MariaDB: {}",
        args.target,
        examples.join(" or ")
    ))
}
