//! `experiment serve`: one backend's server alone, for any client to poll,
//! until Ctrl-C or SIGTERM: the leaky simulator (the default), or with
//! `--backend postgres` or `misskey-ftt` that target's server. A backend is
//! its target's server face (`targets/*/serve.rs`), parsed and started by
//! the target; what they share (where they listen, the recording of every
//! client) is `crate::serving`'s.

pub use crate::targets::ServeArgs;
use std::collections::HashMap;

/// Serves until Ctrl-C or SIGTERM, then stops the backend and flushes what it records.
pub async fn serve_command(args: ServeArgs) -> Result<(), String> {
    crate::targets::serve(
        args,
        HashMap::new(),
        crate::session::wait_for_signal(),
        None,
    )
    .await
}
