//! Cursor policies: given what a poller has seen, which since_id to ask for next.
//!
//! A policy is a value parsed from a string (`naive`, `compensated:k=1s`), so
//! that the command line can run several side by side and new ones can be
//! added without touching the pollers. Pure: the client clock is passed in.

use crate::id::{Id, Layout};
use crate::time::{DurationError, format_duration_ms, parse_duration_ms};
use std::fmt;
use std::str::FromStr;

/// The largest duration accepted when parsing a policy: a run ends k after its
/// duration (the final drain), so k must keep it finite. Measured leaks needed
/// seconds (README); a day is far beyond any useful k.
pub const MAX_K_MS: u64 = 24 * 3600 * 1000;

/// The most pages of one `newest:pages=N` cycle: a hundred pages of a
/// hundred reach deeper than any of Misskey's lists (1000 at most).
pub const MAX_NEWEST_PAGES: u32 = 100;

/// How a poller picks its since_id. Parsed from a spec and printed back the same way.
///
/// ```
/// use since_id::CursorPolicy;
///
/// let p: CursorPolicy = "audit:k=1s,depth=2m,every=1m".parse().unwrap();
/// assert_eq!(p, CursorPolicy::Audit { k_ms: 1000, depth_ms: 120_000, every_ms: 60_000 });
/// assert_eq!(p.to_string(), "audit:k=1s,depth=2m,every=1m");
/// assert_eq!("compensated:k=1500ms".parse::<CursorPolicy>().unwrap().to_string(), "compensated:k=1s500ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CursorPolicy {
    /// since_id = the highest ID seen: skips every late arrival.
    Naive,
    /// since_id held k ms behind the previous request (the final formula of
    /// tesaguri's "Your Timelines Are Leaky", github.com/tesaguri/leaky-snowflake).
    Compensated {
        /// How far behind, in ms.
        k_ms: u64,
    },
    /// The compensated cursor at every tick, and every `every_ms` one deep
    /// request (paged back as needed) covering IDs down to `depth_ms` below the
    /// tick: the "rescan" real clients do (see [`crate::strategy`]).
    Audit {
        /// The compensated cursor's k, in ms.
        k_ms: u64,
        /// How far below the tick an audit reaches, in ms.
        depth_ms: u64,
        /// The audit period, in ms.
        every_ms: u64,
    },
    /// k, depth and audit period estimated from the late arrivals found, within
    /// a request budget of 900 requests in any 15 minutes (see [`crate::strategy`]).
    /// `floor_ms` is the smallest lateness its audits always cover.
    Adaptive {
        /// The smallest lateness its audits always cover, in ms.
        floor_ms: u64,
    },
    /// PostgreSQL targets only: a keyset cursor on (xid, id) below the oldest
    /// running transaction (`crate::pg::xmin`); it has no since_id.
    Xmin,
    /// No cursor: every cycle is one request for the newest page (no
    /// since_id, no upper bound), never paged down; the poller keeps what it
    /// has not returned before. The first approach of tesaguri's "Your
    /// Timelines Are Leaky" (github.com/tesaguri/leaky-snowflake), and what a
    /// client that refreshes its timeline does. It loses whatever a full page
    /// pushes below its end between two ticks; on Misskey every such request
    /// is served from Redis (docs/misskey-ftt.md). `newest:pages=N` also
    /// pages down with an upper bound (`untilId`) below each full page, N
    /// pages a cycle in all, still without a lower bound ("load more").
    Newest {
        /// Pages a cycle, the first included (1: `newest`).
        pages: u32,
    },
}

impl CursorPolicy {
    /// Whether the policy reads by a keyset cursor (`xmin`: `(xid, id)`,
    /// [`crate::keyset`]) rather than by a since_id.
    ///
    /// ```
    /// use since_id::CursorPolicy;
    /// assert!(CursorPolicy::Xmin.is_keyset());
    /// assert!(!"compensated:k=1s".parse::<CursorPolicy>().unwrap().is_keyset());
    /// ```
    pub fn is_keyset(&self) -> bool {
        *self == CursorPolicy::Xmin
    }

    /// Whether a `pollers.policy` text names a keyset policy.
    ///
    /// ```
    /// use since_id::CursorPolicy;
    /// assert!(CursorPolicy::text_is_keyset("xmin"));
    /// assert!(!CursorPolicy::text_is_keyset("naive"));
    /// ```
    pub fn text_is_keyset(text: &str) -> bool {
        text.parse::<CursorPolicy>().is_ok_and(|p| p.is_keyset())
    }

    /// The k this policy compensates for; `None` for naive (and for adaptive, whose k
    /// changes during a run, and xmin).
    ///
    /// ```
    /// use since_id::CursorPolicy;
    /// assert_eq!("compensated:k=2s".parse::<CursorPolicy>().unwrap().k_ms(), Some(2000));
    /// assert_eq!(CursorPolicy::Naive.k_ms(), None);
    /// ```
    pub fn k_ms(&self) -> Option<u64> {
        match self {
            CursorPolicy::Naive | CursorPolicy::Xmin | CursorPolicy::Newest { .. } => None,
            CursorPolicy::Compensated { k_ms } | CursorPolicy::Audit { k_ms, .. } => Some(*k_ms),
            // Its k changes during the run; its final cycle is an audit instead.
            CursorPolicy::Adaptive { .. } => None,
        }
    }
}

/// The final formula of tesaguri's article "Your Timelines Are Leaky"
/// (github.com/tesaguri/leaky-snowflake), exactly:
///
/// ```text
/// lower    = latest_id                          if ts(latest_id) <= k   (overflow guard)
///          = min_id_at(ts(latest_id) - k) - 1   otherwise
/// since_id = clamp(min_id_at(retrieved_at - k) - 1, lower, latest_id)
/// ```
///
/// `lower` bounds the result from below when the client clock is behind the
/// server's: the answer is then never worse than "k behind the latest ID".
///
/// ```
/// use since_id::Layout;
/// use since_id::policy::compensated_since_id;
///
/// let twitter = Layout::twitter();
/// let latest = twitter.min_id_at(1_000_000_000_000 + 1_288_834_974_657);
/// // A client clock 10 s ahead: k behind the request's time would be above `latest`...
/// let ahead = twitter.ts_ms(latest) + 10_000;
/// assert_eq!(compensated_since_id(&twitter, latest, ahead, 1000), latest);
/// // ...and 10 s behind: the answer is bounded by k behind the latest ID.
/// let behind = twitter.ts_ms(latest) - 10_000;
/// let lower = twitter.min_id_at(twitter.ts_ms(latest) - 1000).pred();
/// assert_eq!(compensated_since_id(&twitter, latest, behind, 1000), lower);
/// ```
pub fn compensated_since_id(layout: &Layout, latest: Id, retrieved_at_ms: i64, k_ms: u64) -> Id {
    let lower = if layout.ts_since_epoch_ms(latest) <= k_ms as u128 {
        latest
    } else {
        layout.min_id_before(layout.ts_ms(latest), k_ms).pred()
    };
    // min_id_at saturates at ID 0 before the epoch and pred at 0, where the
    // article's arithmetic would give -1; the clamp maps both to `lower`.
    let candidate = layout.min_id_before(retrieved_at_ms, k_ms).pred();
    candidate.clamp(lower, latest)
}

/// The smallest k for which [`compensated_since_id`] (with this `latest` and
/// `retrieved_at_ms`) lies below `id`, so that a request with that since_id
/// returns it; `None` if no k does (only near the layout's epoch, where the
/// formula's guard pins since_id to `latest`).
///
/// Answered by asking the formula itself, not a re-derivation of it: since_id
/// never rises as k grows (below the guard), so a binary search finds the
/// edge exactly, whichever of `lower` and the candidate binds and whatever the
/// layout's time unit. The analysis uses it to replay the policy on a run.
///
/// ```
/// use since_id::Layout;
/// use since_id::policy::smallest_k_catching;
///
/// let twitter = Layout::twitter();
/// let sent_at_ms = 1_462_015_105_796;
/// let latest = twitter.min_id_at(sent_at_ms);
/// // An item 1500 ms older than the request, seen only after it: k = 1500 ms catches it.
/// let late = twitter.min_id_at(sent_at_ms - 1500);
/// assert_eq!(smallest_k_catching(&twitter, latest, sent_at_ms, late), Some(1500));
/// ```
pub fn smallest_k_catching(
    layout: &Layout,
    latest: Id,
    retrieved_at_ms: i64,
    id: Id,
) -> Option<u64> {
    let catches = |k: u64| compensated_since_id(layout, latest, retrieved_at_ms, k) < id;
    // Both bounds of the clamp are met at this k, plus a margin for coarse units.
    let newest = retrieved_at_ms.max(layout.ts_ms(latest)) as i128;
    let margin = 2 * layout.unit_ms() as i128 + 1;
    let mut hi = (newest - layout.ts_ms(id) as i128 + margin).clamp(0, u64::MAX as i128) as u64;
    if !catches(hi) {
        return None;
    }
    let mut lo = 0u64;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if catches(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// A duration as policy specs write it (`1s500ms`, no spaces).
fn spec_duration(ms: u64) -> String {
    format_duration_ms(ms).replace(' ', "")
}

impl fmt::Display for CursorPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CursorPolicy::Naive => f.write_str("naive"),
            CursorPolicy::Xmin => f.write_str("xmin"),
            CursorPolicy::Newest { pages: 1 } => f.write_str("newest"),
            CursorPolicy::Newest { pages } => write!(f, "newest:pages={pages}"),
            CursorPolicy::Compensated { k_ms } => {
                write!(f, "compensated:k={}", spec_duration(k_ms))
            }
            CursorPolicy::Audit {
                k_ms,
                depth_ms,
                every_ms,
            } => write!(
                f,
                "audit:k={},depth={},every={}",
                spec_duration(k_ms),
                spec_duration(depth_ms),
                spec_duration(every_ms)
            ),
            CursorPolicy::Adaptive { floor_ms } if floor_ms == ADAPTIVE_FLOOR_MS => {
                f.write_str("adaptive")
            }
            CursorPolicy::Adaptive { floor_ms } => {
                write!(f, "adaptive:floor={}", spec_duration(floor_ms))
            }
        }
    }
}

/// The default smallest lateness adaptive's audits cover (see [`crate::strategy`]): 2 min.
///
/// ```
/// use since_id::CursorPolicy;
/// use since_id::policy::ADAPTIVE_FLOOR_MS;
/// assert_eq!("adaptive".parse(), Ok(CursorPolicy::Adaptive { floor_ms: ADAPTIVE_FLOOR_MS }));
/// ```
pub const ADAPTIVE_FLOOR_MS: u64 = 120_000;

/// Why a policy spec could not be read: the spec as given and what is wrong with it.
///
/// ```
/// use since_id::{CursorPolicy, PolicyError, PolicyErrorKind};
///
/// let err: PolicyError = "compensated:k=2days".parse::<CursorPolicy>().unwrap_err();
/// assert_eq!(err.spec(), "compensated:k=2days");
/// assert!(matches!(err.kind(), PolicyErrorKind::TooLong { key } if key == "k"));
/// assert_eq!(
///     err.to_string(),
///     "bad poller policy 'compensated:k=2days': k is at most 1day (the run's final drain waits k)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    spec: String,
    kind: PolicyErrorKind,
}

/// What is wrong with a policy spec (see [`PolicyError`]).
///
/// ```
/// use since_id::{CursorPolicy, PolicyErrorKind};
///
/// let err = "audit:k=1s,depth=2m".parse::<CursorPolicy>().unwrap_err();
/// assert_eq!(err.kind(), &PolicyErrorKind::Missing { key: "every".into() });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyErrorKind {
    /// Not one of the policy names.
    Unrecognised,
    /// A parameter without `=`.
    NotKeyValue {
        /// The parameter as written.
        part: String,
    },
    /// A parameter the policy does not take.
    UnknownKey {
        /// The key as written, trimmed.
        key: String,
    },
    /// A parameter's value is not a duration.
    BadDuration(DurationError),
    /// A duration above [`MAX_K_MS`].
    TooLong {
        /// The key as written.
        key: String,
    },
    /// A parameter the policy needs is not given.
    Missing {
        /// The missing key.
        key: String,
    },
    /// `newest:pages=` is not a whole number from 1 to [`MAX_NEWEST_PAGES`].
    BadPages {
        /// The value as written.
        value: String,
    },
    /// A parameter that must be above zero is zero.
    Zero {
        /// The key.
        key: String,
    },
}

impl PolicyError {
    fn new(spec: &str, kind: PolicyErrorKind) -> PolicyError {
        PolicyError {
            spec: spec.to_string(),
            kind,
        }
    }

    /// The spec as it was given.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// What is wrong with it.
    pub fn kind(&self) -> &PolicyErrorKind {
        &self.kind
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad poller policy '{}': ", self.spec)?;
        match &self.kind {
            PolicyErrorKind::Unrecognised => f.write_str(
                "expected 'naive', 'compensated:k=DURATION' (for example compensated:k=1s), \
                 'audit:k=1s,depth=2m,every=1m', 'adaptive', 'newest', 'newest:pages=N' or 'xmin' (PostgreSQL targets)",
            ),
            PolicyErrorKind::NotKeyValue { part } => {
                write!(f, "expected KEY=DURATION, not '{part}'")
            }
            PolicyErrorKind::UnknownKey { key } => write!(f, "unknown key '{key}'"),
            PolicyErrorKind::BadDuration(e) => write!(f, "{e}"),
            PolicyErrorKind::TooLong { key } => {
                write!(f, "{key} is at most 1day (the run's final drain waits k)")
            }
            PolicyErrorKind::Missing { key } => write!(f, "{key}= is missing"),
            PolicyErrorKind::Zero { key } => write!(f, "{key} must be above 0"),
            PolicyErrorKind::BadPages { value } => write!(
                f,
                "pages must be a whole number from 1 to {MAX_NEWEST_PAGES}, not '{value}'"
            ),
        }
    }
}

impl std::error::Error for PolicyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            PolicyErrorKind::BadDuration(e) => Some(e),
            _ => None,
        }
    }
}

// The harness reports errors as one line of text and keeps using `?`.
impl From<PolicyError> for String {
    fn from(e: PolicyError) -> String {
        e.to_string()
    }
}

/// Parses `key=DURATION,...` with exactly the keys given, each at most [`MAX_K_MS`].
fn parse_params(s: &str, body: &str, keys: &[&str]) -> Result<Vec<u64>, PolicyError> {
    let bad = |kind| PolicyError::new(s, kind);
    let mut values: Vec<Option<u64>> = vec![None; keys.len()];
    for part in body.split(',') {
        let (key, value) = part.split_once('=').ok_or_else(|| {
            bad(PolicyErrorKind::NotKeyValue {
                part: part.to_string(),
            })
        })?;
        let at = keys.iter().position(|k| *k == key.trim()).ok_or_else(|| {
            bad(PolicyErrorKind::UnknownKey {
                key: key.trim().to_string(),
            })
        })?;
        let ms =
            parse_duration_ms(value.trim()).map_err(|e| bad(PolicyErrorKind::BadDuration(e)))?;
        if ms > MAX_K_MS {
            return Err(bad(PolicyErrorKind::TooLong {
                key: key.to_string(),
            }));
        }
        values[at] = Some(ms);
    }
    keys.iter()
        .zip(values)
        .map(|(key, v)| {
            v.ok_or_else(|| {
                bad(PolicyErrorKind::Missing {
                    key: key.to_string(),
                })
            })
        })
        .collect()
}

impl FromStr for CursorPolicy {
    type Err = PolicyError;

    /// Parses `naive`, `compensated:k=DURATION`,
    /// `audit:k=DURATION,depth=DURATION,every=DURATION`, `adaptive`,
    /// `adaptive:floor=DURATION`, `newest`, `newest:pages=N` or `xmin`; every
    /// duration at most [`MAX_K_MS`].
    fn from_str(s: &str) -> Result<CursorPolicy, PolicyError> {
        let zero = |key: &str| {
            PolicyError::new(
                s,
                PolicyErrorKind::Zero {
                    key: key.to_string(),
                },
            )
        };
        match s.trim() {
            "naive" => Ok(CursorPolicy::Naive),
            "xmin" => Ok(CursorPolicy::Xmin),
            "newest" => Ok(CursorPolicy::Newest { pages: 1 }),
            other if other.starts_with("newest:") => {
                let body = &other["newest:".len()..];
                let pages = body.strip_prefix("pages=").ok_or_else(|| {
                    PolicyError::new(
                        s,
                        PolicyErrorKind::UnknownKey {
                            key: body.split('=').next().unwrap_or("").trim().to_string(),
                        },
                    )
                })?;
                match pages.trim().parse::<u32>() {
                    Ok(0) => Err(zero("pages")),
                    Ok(n) if n <= MAX_NEWEST_PAGES => Ok(CursorPolicy::Newest { pages: n }),
                    _ => Err(PolicyError::new(
                        s,
                        PolicyErrorKind::BadPages {
                            value: pages.to_string(),
                        },
                    )),
                }
            }
            "adaptive" => Ok(CursorPolicy::Adaptive {
                floor_ms: ADAPTIVE_FLOOR_MS,
            }),
            other if other.starts_with("adaptive:") => {
                let v = parse_params(s, &other["adaptive:".len()..], &["floor"])?;
                if v[0] == 0 {
                    return Err(zero("floor"));
                }
                Ok(CursorPolicy::Adaptive { floor_ms: v[0] })
            }
            other if other.starts_with("audit:") => {
                let v = parse_params(s, &other["audit:".len()..], &["k", "depth", "every"])?;
                if v[2] == 0 {
                    return Err(zero("every"));
                }
                Ok(CursorPolicy::Audit {
                    k_ms: v[0],
                    depth_ms: v[1],
                    every_ms: v[2],
                })
            }
            other => {
                let k = other
                    .strip_prefix("compensated:k=")
                    .ok_or_else(|| PolicyError::new(s, PolicyErrorKind::Unrecognised))?;
                let k_ms = parse_duration_ms(k)
                    .map_err(|e| PolicyError::new(s, PolicyErrorKind::BadDuration(e)))?;
                if k_ms > MAX_K_MS {
                    return Err(PolicyError::new(
                        s,
                        PolicyErrorKind::TooLong { key: "k".into() },
                    ));
                }
                Ok(CursorPolicy::Compensated { k_ms })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The article's pseudocode transcribed literally for shift layouts, in i128
    /// so that its `- 1` may go negative as in Ruby.
    fn article_pseudocode(epoch: i64, shift: u32, latest: u64, retrieved_at: i64, k: i64) -> u128 {
        let time2sf = |unix_ms: i64| ((unix_ms as i128 - epoch as i128).max(0)) << shift;
        let latest = latest as i128;
        let timestamp = latest >> shift;
        let lower = if timestamp <= k as i128 {
            latest
        } else {
            ((timestamp - k as i128) << shift) - 1
        };
        (time2sf(retrieved_at - k) - 1).clamp(lower, latest) as u128
    }

    #[test]
    fn parses_and_prints() {
        assert_eq!(
            "naive".parse::<CursorPolicy>().unwrap(),
            CursorPolicy::Naive
        );
        let p: CursorPolicy = "compensated:k=1s".parse().unwrap();
        assert_eq!(p, CursorPolicy::Compensated { k_ms: 1000 });
        assert_eq!(p.to_string(), "compensated:k=1s");
        assert_eq!(
            "compensated:k=1500ms"
                .parse::<CursorPolicy>()
                .unwrap()
                .to_string(),
            "compensated:k=1s500ms"
        );
        let newest: CursorPolicy = "newest".parse().unwrap();
        assert_eq!(
            (newest, newest.to_string()),
            (CursorPolicy::Newest { pages: 1 }, "newest".into())
        );
        let deep: CursorPolicy = "newest:pages=5".parse().unwrap();
        assert_eq!(
            (deep, deep.to_string()),
            (CursorPolicy::Newest { pages: 5 }, "newest:pages=5".into())
        );
        assert_eq!("newest:pages=1".parse(), Ok(newest));
        assert_eq!((newest.k_ms(), newest.is_keyset()), (None, false));
        for bad in [
            "",
            "newest:k=1s",
            "newest:pages=0",
            "newest:pages=x",
            "newest:pages=101",
            "compensated",
            "compensated:k=",
            "compensated:k=fast",
            "adaptive:",
            "adaptive:floor=0s",
            "audit:k=1s",
            "audit:k=1s,depth=2m,every=0s",
            "audit:k=1s,depth=2m,every=1m,x=1s",
            "audit:k=1s,depth=2d,every=1m",
        ] {
            assert!(bad.parse::<CursorPolicy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn audit_and_adaptive_parse_and_print() {
        let a: CursorPolicy = "audit:k=1s,depth=2m,every=1m".parse().unwrap();
        assert_eq!(
            a,
            CursorPolicy::Audit {
                k_ms: 1000,
                depth_ms: 120_000,
                every_ms: 60_000
            }
        );
        assert_eq!(a.to_string(), "audit:k=1s,depth=2m,every=1m");
        assert_eq!(a.k_ms(), Some(1000));
        let d: CursorPolicy = "adaptive".parse().unwrap();
        assert_eq!(d.to_string(), "adaptive");
        assert_eq!(d.k_ms(), None);
        let f: CursorPolicy = "adaptive:floor=30s".parse().unwrap();
        assert_eq!(f, CursorPolicy::Adaptive { floor_ms: 30_000 });
        assert_eq!(f.to_string(), "adaptive:floor=30s");
    }

    #[test]
    fn worked_example() {
        // latest seen 100 ms before the previous request: since_id = k before that request.
        let l = Layout::twitter();
        let request = 1_700_000_000_000;
        let latest = l.min_id_at(request - 100);
        let since = compensated_since_id(&l, Id(latest.0 + 5), request, 1000);
        assert_eq!(since, l.min_id_at(request - 1000).pred());
        // Latest older than k before the request: since_id = latest_id.
        let old = Id(l.min_id_at(request - 5000).0 + 7);
        assert_eq!(compensated_since_id(&l, old, request, 1000), old);
        // Client clock far behind: never lower than k below the latest ID.
        let since = compensated_since_id(&l, Id(latest.0 + 5), request - 60_000, 1000);
        assert_eq!(since, l.min_id_at(request - 1100).pred());
    }

    #[test]
    fn smallest_k_catching_honours_the_lower_clamp() {
        // The latest ID runs 3 s ahead of the client's clock (a generator
        // whose clock is fast): an item 500 ms before the previous request
        // needs k = 3.5 s, not 500 ms, because `lower` is k below the latest ID.
        let l = Layout::twitter();
        let request = 1_700_000_000_000;
        let latest = l.min_id_at(request + 3000);
        let item = l.min_id_at(request - 500);
        assert_eq!(smallest_k_catching(&l, latest, request, item), Some(3500));
        // With the latest ID behind the clock, the candidate binds: k = 500 ms.
        let latest = l.min_id_at(request - 100);
        assert_eq!(smallest_k_catching(&l, latest, request, item), Some(500));
        // Above the latest ID any k catches it.
        assert_eq!(
            smallest_k_catching(&l, latest, request, Id(latest.0 + 1)),
            Some(0)
        );
    }

    fn numeric_layouts() -> Vec<(Layout, i64, u32)> {
        vec![
            ("twitter".parse().unwrap(), crate::id::TWITTER_EPOCH_MS, 22),
            ("discord".parse().unwrap(), crate::id::DISCORD_EPOCH_MS, 22),
            ("mastodon".parse().unwrap(), 0, 16),
            (
                "instagram".parse().unwrap(),
                crate::id::INSTAGRAM_EPOCH_MS,
                23,
            ),
            ("custom:epoch=5,shift=3".parse().unwrap(), 5, 3),
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_the_article_pseudocode(
            which in 0usize..5,
            latest in any::<u64>(),
            offset in -10_000_000i64..10_000_000,
            k in 0i64..100_000,
        ) {
            let (l, epoch, shift) = &numeric_layouts()[which];
            let latest_id = Id(latest as u128);
            let retrieved_at = l.ts_ms(latest_id).saturating_add(offset);
            // The article shifts in unbounded integers; compare where they stay in u64.
            let expected = article_pseudocode(*epoch, *shift, latest, retrieved_at, k);
            let time_bits_fit = ((retrieved_at as i128 - *epoch as i128 - k as i128).max(0) << shift) < (1i128 << 64);
            prop_assume!(time_bits_fit);
            prop_assert_eq!(compensated_since_id(l, latest_id, retrieved_at, k as u64).0, expected);
        }

        #[test]
        fn bounded_by_lower_and_latest(
            which in 0usize..5,
            latest in any::<u64>(),
            retrieved_at in any::<i64>(),
            k in any::<u64>(),
        ) {
            let (l, _, _) = &numeric_layouts()[which];
            let latest = Id(latest as u128);
            let since = compensated_since_id(l, latest, retrieved_at, k);
            prop_assert!(since <= latest);
            let lower = if l.ts_since_epoch_ms(latest) <= k as u128 { latest } else { l.min_id_before(l.ts_ms(latest), k).pred() };
            prop_assert!(since >= lower);
        }

        #[test]
        fn no_leak_within_k(
            which in 0usize..5,
            latest in any::<u64>(),
            offset in -100_000i64..100_000,
            k in 1u64..100_000,
            above in 0i64..1_000_000,
            seq in any::<u64>(),
        ) {
            let (l, _, _) = &numeric_layouts()[which];
            let latest = Id(latest as u128);
            prop_assume!(l.ts_since_epoch_ms(latest) > k as u128);
            let retrieved_at = l.ts_ms(latest) + offset;
            let since = compensated_since_id(l, latest, retrieved_at, k);
            // Any ID whose timestamp is at least max(retrieved_at, ts(latest)) - k is above since_id.
            let floor = retrieved_at.max(l.ts_ms(latest)) - k as i64;
            let t = floor + above;
            let base = l.min_id_at(t);
            prop_assume!(l.ts_ms(base) == t);
            let id = Id((base.0 + seq as u128 % l.multiplier()).min(l.max_id().0));
            prop_assert!(id > since, "id {:?} since {:?}", id, since);
        }

        #[test]
        fn larger_k_never_raises_since_id(
            which in 0usize..5,
            latest in any::<u64>(),
            offset in -100_000i64..100_000,
            k1 in 0u64..100_000,
            dk in 0u64..100_000,
        ) {
            let (l, _, _) = &numeric_layouts()[which];
            let latest = Id(latest as u128);
            let k2 = k1 + dk;
            prop_assume!(l.ts_since_epoch_ms(latest) > k2 as u128);
            let retrieved_at = l.ts_ms(latest) + offset;
            prop_assert!(compensated_since_id(l, latest, retrieved_at, k2) <= compensated_since_id(l, latest, retrieved_at, k1));
        }

        #[test]
        fn smallest_k_catching_is_the_edge(
            which in 0usize..5,
            latest_ms in 100_000i64..10_000_000,
            seq in 0u128..64,
            retrieved_offset in -20_000i64..20_000,
            below in 0i64..30_000,
        ) {
            // IDs well past each layout's epoch, the item below the latest ID,
            // and a client clock on either side of the latest ID's time: both
            // bounds of the clamp get their turn to bind.
            let (l, _, _) = &numeric_layouts()[which];
            let t_latest = l.epoch_ms() + latest_ms;
            let latest = Id(l.min_id_at(t_latest).0 + seq % l.multiplier());
            let retrieved_at = t_latest + retrieved_offset;
            let id = Id(l.min_id_at(t_latest - below).0 + seq / 2 % l.multiplier());
            prop_assume!(id < latest);
            let k = smallest_k_catching(l, latest, retrieved_at, id).expect("far from the epoch");
            prop_assert!(compensated_since_id(l, latest, retrieved_at, k) < id);
            if k > 0 {
                prop_assert!(compensated_since_id(l, latest, retrieved_at, k - 1) >= id);
            }
            // It is at least what each bound alone asks for.
            let unit = l.unit_ms() as i64;
            prop_assert!(k as i64 + unit > (retrieved_at - l.ts_ms(id)).max(l.ts_ms(latest) - l.ts_ms(id)));
        }

        #[test]
        fn no_underflow_before_the_epoch(which in 0usize..5, latest in any::<u64>(), k in any::<u64>()) {
            let (l, _, _) = &numeric_layouts()[which];
            let latest = Id(latest as u128);
            // retrieved_at - k far before the epoch: the clamp gives lower, no panic.
            let since = compensated_since_id(l, latest, l.epoch_ms(), k.max(1));
            prop_assert!(since <= latest);
        }
    }
}
