//! Pacing: all the pollers of a run share one rate-limit budget.
//!
//! Each API reports its budget in its own headers, which its home file names
//! ([`RateHeaders`]: `mastodon.rs`, `twitter.rs`, `x.rs`, `discord.rs`).
//! [`Pacer`] spreads what is left of the budget evenly over the time
//! until the reset, across all pollers: two pollers at 1 s against 300
//! requests per 5 minutes slow down to one request a second between them
//! instead of running into 429s. It is pure (time is passed in); the shell
//! sleeps until the slot it is given.

use super::common::{Api, RateHeaders};
use reqwest::header::HeaderMap;

/// The rate-limit budget a response reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateInfo {
    pub limit: Option<u64>,
    pub remaining: Option<u64>,
    /// When the window resets, in ms since the Unix epoch.
    pub reset_at_ms: Option<i64>,
}

/// Reads the budget from any API's headers, with `now_ms` the receive time.
pub fn rate_info(headers: &HeaderMap, now_ms: i64) -> RateInfo {
    let families = Api::all()
        .into_iter()
        .filter_map(|api| api.rate_headers.as_ref());
    let get = |pick: fn(&RateHeaders) -> Option<&'static str>| {
        families.clone().filter_map(pick).find_map(|name| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        })
    };
    let number = |pick: fn(&RateHeaders) -> Option<&'static str>| {
        get(pick).and_then(|v| v.parse::<u64>().ok())
    };
    let reset_after = get(|h| h.reset_after)
        .and_then(|v| v.parse::<f64>().ok())
        .map(|secs| now_ms + (secs.max(0.0) * 1000.0) as i64);
    let reset_at = || {
        let reset = get(|h| Some(h.reset))?;
        match reset.parse::<f64>() {
            Ok(epoch_secs) => Some((epoch_secs * 1000.0) as i64),
            Err(_) => chrono::DateTime::parse_from_rfc3339(reset)
                .ok()
                .map(|t| t.timestamp_millis()),
        }
    };
    RateInfo {
        limit: number(|h| Some(h.limit)),
        remaining: number(|h| Some(h.remaining)),
        reset_at_ms: reset_after.or_else(reset_at),
    }
}

/// One run's shared budget.
#[derive(Clone, Debug, Default)]
pub struct Pacer {
    remaining: Option<u64>,
    reset_at_ms: Option<i64>,
    next_free_ms: i64,
    blocked_until_ms: i64,
}

impl Pacer {
    /// Reserves a slot for a request that would go at `now_ms`; returns when
    /// to send it. Without a known budget it goes at once (after any 429 wait).
    pub fn reserve(&mut self, now_ms: i64) -> i64 {
        let mut at = now_ms.max(self.next_free_ms).max(self.blocked_until_ms);
        if let (Some(remaining), Some(reset)) = (self.remaining, self.reset_at_ms) {
            if reset <= at {
                // A new window: the budget is unknown until the next response says.
                self.remaining = None;
                self.reset_at_ms = None;
            } else if remaining == 0 {
                at = reset;
                self.remaining = None;
                self.reset_at_ms = None;
            } else {
                // Spread what is left evenly until the reset. The reservation
                // counts against the budget at once, so that concurrent pollers
                // do not spend the same request twice.
                let spacing = (reset - at) / remaining as i64;
                self.next_free_ms = at + spacing;
                self.remaining = Some(remaining - 1);
                return at;
            }
        }
        self.next_free_ms = at;
        at
    }

    /// Learns from a response: its budget, and a refusal's wait (`blocked_until_ms`).
    pub fn update(&mut self, info: &RateInfo, blocked_until_ms: Option<i64>) {
        if let (Some(remaining), Some(reset)) = (info.remaining, info.reset_at_ms) {
            // Responses arrive out of order; within one window keep the lower count.
            let same_window = self.reset_at_ms == Some(reset);
            self.remaining = Some(match (same_window, self.remaining) {
                (true, Some(known)) => known.min(remaining),
                _ => remaining,
            });
            self.reset_at_ms = Some(reset);
        }
        if let Some(until) = blocked_until_ms {
            self.blocked_until_ms = self.blocked_until_ms.max(until);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    const NOW: i64 = 1_700_000_000_000;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn reads_each_dialects_headers() {
        // Mastodon: ISO 8601 with microseconds.
        let m = rate_info(
            &headers(&[
                ("x-ratelimit-limit", "300"),
                ("x-ratelimit-remaining", "299"),
                ("x-ratelimit-reset", "2023-11-14T22:15:00.000000Z"),
            ]),
            NOW,
        );
        assert_eq!(
            m,
            RateInfo {
                limit: Some(300),
                remaining: Some(299),
                reset_at_ms: Some(1_700_000_100_000)
            }
        );
        // X: epoch seconds.
        let x = rate_info(
            &headers(&[
                ("x-rate-limit-limit", "900"),
                ("x-rate-limit-remaining", "5"),
                ("x-rate-limit-reset", "1700000900"),
            ]),
            NOW,
        );
        assert_eq!(x.reset_at_ms, Some(1_700_000_900_000));
        assert_eq!(x.remaining, Some(5));
        // Discord: Reset-After (seconds with decimals) wins over the epoch Reset.
        let d = rate_info(
            &headers(&[
                ("x-ratelimit-limit", "5"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1700000099.5"),
                ("x-ratelimit-reset-after", "1.25"),
            ]),
            NOW,
        );
        assert_eq!(d.reset_at_ms, Some(NOW + 1250));
        let d = rate_info(
            &headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1700000001.5"),
            ]),
            NOW,
        );
        assert_eq!(d.reset_at_ms, Some(NOW + 1500));
        assert_eq!(rate_info(&HeaderMap::new(), NOW), RateInfo::default());
    }

    /// Two pollers at 1 s for 20 minutes against a fixed window of 300 per
    /// 5 minutes: the pacer slows them down and the server never refuses.
    #[test]
    fn two_pollers_share_one_budget_and_are_never_refused() {
        let (limit, window) = (300u64, 300_000i64);
        let mut pacer = Pacer::default();
        let mut refused = 0;
        let mut sent = 0;
        let mut used = (0i64, 0u64); // (window start, requests in it)
        // Each poller wants a request at every whole second; it sends when its slot comes.
        let mut next_want = [NOW, NOW];
        let end = NOW + 1_200_000;
        loop {
            let p = if next_want[0] <= next_want[1] { 0 } else { 1 };
            let want = next_want[p];
            if want >= end {
                break;
            }
            let at = pacer.reserve(want);
            // The server: a fixed window; the response comes 50 ms later.
            let start = at.div_euclid(window) * window;
            if used.0 != start {
                used = (start, 0);
            }
            let allowed = used.1 < limit;
            if allowed {
                used.1 += 1;
                sent += 1;
            } else {
                refused += 1;
            }
            let info = RateInfo {
                limit: Some(limit),
                remaining: Some(limit - used.1),
                reset_at_ms: Some(start + window),
            };
            pacer.update(&info, (!allowed).then_some(start + window));
            // The next tick after the request went.
            next_want[p] = (at + 50).div_euclid(1000) * 1000 + 1000;
        }
        assert_eq!(refused, 0);
        // 20 minutes touch 5 windows of 300 (NOW is not window-aligned); the
        // budget is used, not wasted, while 2 pollers at 1 s would want 2,400.
        assert!(sent > 1000 && sent <= 1500, "{sent}");
    }

    #[test]
    fn spent_budget_waits_for_the_reset_and_refusals_block_everyone() {
        let mut pacer = Pacer::default();
        assert_eq!(pacer.reserve(NOW), NOW, "no budget known: go at once");
        pacer.update(
            &RateInfo {
                limit: Some(10),
                remaining: Some(0),
                reset_at_ms: Some(NOW + 5000),
            },
            None,
        );
        assert_eq!(pacer.reserve(NOW + 10), NOW + 5000);
        let mut pacer = Pacer::default();
        pacer.update(&RateInfo::default(), Some(NOW + 3000));
        assert_eq!(pacer.reserve(NOW), NOW + 3000);
    }
}
