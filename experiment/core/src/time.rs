//! Time as the harness writes and reads it: ms since the Unix epoch, printed as
//! RFC 3339 with milliseconds in UTC. Pure conversions; nothing here reads a clock.

use chrono::{DateTime, SecondsFormat, Utc};

/// `2016-04-30T11:18:25.796Z`; times beyond chrono's range print as the raw number.
pub fn rfc3339_ms(unix_ms: i64) -> String {
    match DateTime::<Utc>::from_timestamp_millis(unix_ms) {
        Some(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
        None => format!("{unix_ms}ms"),
    }
}

/// Reads a time given as RFC 3339 or as ms since the Unix epoch.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|_| {
            format!("bad time '{text}': expected RFC 3339 (2016-04-30T11:18:25.796Z) or ms since the Unix epoch")
        })
}

/// Reads a duration in humantime form (`1s`, `1500ms`, `1h`) into whole ms.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    humantime::parse_duration(text.trim())
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
        .ok_or_else(|| {
            format!("bad duration '{text}': expected a duration such as 1s, 1500ms or 1h")
        })
}

/// Formats ms as a humantime duration (`1s 500ms`).
pub fn format_duration_ms(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(parse_time("yesterday").unwrap_err().contains("'yesterday'"));
        assert_eq!(parse_duration_ms("1500ms").unwrap(), 1500);
        assert_eq!(parse_duration_ms("1s").unwrap(), 1000);
        assert!(parse_duration_ms("-1s").is_err());
        assert_eq!(format_duration_ms(1500), "1s 500ms");
    }
}
