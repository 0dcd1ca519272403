//! Time as the harness writes and reads it: ms since the Unix epoch, and durations in
//! humantime form (`1s`, `1500ms`). Pure conversions; nothing here reads a clock.
//!
//! RFC 3339 (`rfc3339_ms`, `parse_time`) needs chrono, so it sits behind the
//! `rfc3339` feature: a poller works in ms and need not pay for a calendar.

use std::fmt;

/// A duration that [`parse_duration_ms`] could not read.
///
/// ```
/// let err = since_id::time::parse_duration_ms("soon").unwrap_err();
/// assert_eq!(err.to_string(), "bad duration 'soon': expected a duration such as 1s, 1500ms or 1h");
/// assert_eq!(err.text(), "soon");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    text: String,
}

impl DurationError {
    /// The text as it was given.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad duration '{}': expected a duration such as 1s, 1500ms or 1h",
            self.text
        )
    }
}

impl std::error::Error for DurationError {}

/// A time that `parse_time` (feature `rfc3339`) could not read.
///
/// ```
/// # #[cfg(feature = "rfc3339")] {
/// let err = since_id::time::parse_time("yesterday").unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "bad time 'yesterday': expected RFC 3339 (2016-04-30T11:18:25.796Z) or ms since the Unix epoch"
/// );
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeError {
    text: String,
}

impl TimeError {
    /// The text as it was given, trimmed.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for TimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad time '{}': expected RFC 3339 (2016-04-30T11:18:25.796Z) or ms since the Unix epoch",
            self.text
        )
    }
}

impl std::error::Error for TimeError {}

/// Formats ms since the Unix epoch as RFC 3339 in UTC with milliseconds; times beyond
/// chrono's range print as the raw number. Feature `rfc3339`.
///
/// ```
/// # #[cfg(feature = "rfc3339")] {
/// use since_id::time::rfc3339_ms;
/// assert_eq!(rfc3339_ms(1_462_015_105_796), "2016-04-30T11:18:25.796Z");
/// assert_eq!(rfc3339_ms(i64::MAX), "9223372036854775807ms");
/// # }
/// ```
#[cfg(feature = "rfc3339")]
pub fn rfc3339_ms(unix_ms: i64) -> String {
    use chrono::{DateTime, SecondsFormat, Utc};
    match DateTime::<Utc>::from_timestamp_millis(unix_ms) {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => format!("{unix_ms}ms"),
    }
}

/// Reads a time given as RFC 3339 (any offset) or as ms since the Unix epoch.
/// Feature `rfc3339`.
///
/// ```
/// # #[cfg(feature = "rfc3339")] {
/// use since_id::time::parse_time;
/// assert_eq!(parse_time("2016-04-30T13:18:25.796+02:00"), Ok(1_462_015_105_796));
/// assert_eq!(parse_time("1462015105796"), Ok(1_462_015_105_796));
/// assert!(parse_time("yesterday").is_err());
/// # }
/// ```
#[cfg(feature = "rfc3339")]
pub fn parse_time(text: &str) -> Result<i64, TimeError> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|_| TimeError {
            text: text.to_string(),
        })
}

/// Reads a duration in humantime form (`1s`, `1500ms`, `1h`, `1m 30s`) into whole ms.
///
/// ```
/// use since_id::time::parse_duration_ms;
/// assert_eq!(parse_duration_ms("1s500ms"), Ok(1500));
/// assert_eq!(parse_duration_ms(" 2m "), Ok(120_000));
/// assert!(parse_duration_ms("-1s").is_err());
/// ```
pub fn parse_duration_ms(text: &str) -> Result<u64, DurationError> {
    humantime::parse_duration(text.trim())
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
        .ok_or_else(|| DurationError {
            text: text.to_string(),
        })
}

/// Formats ms as a humantime duration.
///
/// ```
/// assert_eq!(since_id::time::format_duration_ms(1500), "1s 500ms");
/// assert_eq!(since_id::time::format_duration_ms(0), "0s");
/// ```
pub fn format_duration_ms(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
}

// Callers that report errors as one line of text (the harness's `Result<_, String>`)
// keep using `?`.
impl From<DurationError> for String {
    fn from(e: DurationError) -> String {
        e.to_string()
    }
}

impl From<TimeError> for String {
    fn from(e: TimeError) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "rfc3339")]
    #[test]
    fn round_trips() {
        assert_eq!(rfc3339_ms(1_462_015_105_796), "2016-04-30T11:18:25.796Z");
        assert_eq!(
            parse_time("2016-04-30T11:18:25.796Z").unwrap(),
            1_462_015_105_796
        );
        assert_eq!(
            parse_time("2016-04-30T13:18:25.796+02:00").unwrap(),
            1_462_015_105_796
        );
        assert_eq!(parse_time("1462015105796").unwrap(), 1_462_015_105_796);
        assert!(
            parse_time("yesterday")
                .unwrap_err()
                .to_string()
                .contains("'yesterday'")
        );
    }

    #[test]
    fn durations_round_trip() {
        assert_eq!(parse_duration_ms("1500ms").unwrap(), 1500);
        assert_eq!(parse_duration_ms("1s").unwrap(), 1000);
        assert!(parse_duration_ms("-1s").is_err());
        assert_eq!(format_duration_ms(1500), "1s 500ms");
    }
}
