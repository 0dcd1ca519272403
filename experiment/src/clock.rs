//! The one place the shell reads the wall clock. The pure core never calls
//! this: time is passed in, so the same code runs in real and virtual time.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time in ms since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
