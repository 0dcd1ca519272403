//! The one place the server reads the wall clock (the model never does: time
//! is passed in).

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time in ms since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
