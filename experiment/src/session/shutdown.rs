//! The async runtime of a run and the one shutdown handler of every command.

use super::rows::end_reason;
use crate::drive::StopReason;

/// The async runtime of a run: two workers (the machine's pollers and server
/// share them; more buys nothing on loopback).
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// The one shutdown handler of every command: the first Ctrl-C or SIGTERM
/// asks for a clean end (what `on_first` says is logged), a second one exits
/// at once with status 130 and leaves the run marked incomplete.
pub struct Shutdown {
    /// Turns `true` at the first signal.
    pub requested: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Shutdown {
    /// Installs the handlers now, not when a task first runs: tokio keeps an
    /// installed handler for the life of the process, so from here on Ctrl-C
    /// and SIGTERM no longer kill it (and whatever it started is cleaned up).
    /// Must be called inside a runtime.
    pub fn install(on_first: &'static str) -> Shutdown {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let _ = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            );
        }
        let (tx, requested) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            wait_for_signal().await;
            tracing::warn!("stopping: {on_first}");
            let _ = tx.send(true);
            wait_for_signal().await;
            tracing::error!("second signal: exiting now; the run stays marked incomplete");
            std::process::exit(130);
        });
        Shutdown { requested, task }
    }

    /// Whether a signal asked for the end.
    pub fn was_requested(&self) -> bool {
        *self.requested.borrow()
    }

    /// Ends the handling (a second signal kills again) and gives the run's
    /// `end_reason`: `interrupted` if a signal asked for the end, whatever
    /// the poll loop says, else the loop's.
    pub fn end(self, reason: StopReason) -> &'static str {
        end_reason(if self.was_requested() {
            StopReason::Interrupted
        } else {
            reason
        })
    }
}

impl Drop for Shutdown {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Ctrl-C, or SIGTERM on Unix.
pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
