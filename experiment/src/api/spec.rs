//! `--target KIND:SPEC`: which API to poll, parsed and checked before any
//! request, each mistake a one-line error.
//!
//! | kind | spec | dialect | layout |
//! |---|---|---|---|
//! | `simulator` | | the embedded simulator's | the profile's |
//! | `mastodon` | `https://HOST` (+ `--timeline`) | Mastodon | `mastodon` |
//! | `x` | `users/ID/tweets` or `search?query=...` | X API v2 | `twitter` |
//! | `twitter-v1` | `https://HOST` (+ `--list-id`) | Twitter v1.1 `lists/statuses` | `twitter` |
//! | `misskey` | `https://HOST` (+ `--timeline`) | Misskey | `--layout` or detected |
//! | `discord` | `CHANNEL_ID` | Discord v10 | `discord` |

use super::{Dialect, XEndpoint};
use crate::id::Layout;

/// The default base URL of X's API v2 (`--base-url` overrides it).
pub const X_BASE: &str = "https://api.x.com";
/// The default base URL of Discord's API (`--base-url` overrides it).
pub const DISCORD_BASE: &str = "https://discord.com/api/v10";

/// A parsed `--target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    Simulator,
    Mastodon { base: String },
    X { endpoint: XEndpoint },
    TwitterV1 { base: String },
    Misskey { base: String },
    Discord { channel_id: String },
}

/// The options that refine a real target.
#[derive(Clone, Debug, Default)]
pub struct TargetOptions {
    pub timeline: Option<String>,
    pub list_id: Option<String>,
    pub base_url: Option<String>,
    pub layout: Option<String>,
}

/// A real target, ready to be polled.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub base: String,
    pub dialect: Dialect,
    /// None: detect it from the first IDs seen (Misskey without `--layout`).
    pub layout: Option<Layout>,
}

const KINDS: &str = "simulator, mastodon:https://HOST, x:users/ID/tweets, x:search?query=..., twitter-v1:https://HOST, misskey:https://HOST, discord:CHANNEL_ID";

impl std::str::FromStr for TargetSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<TargetSpec, String> {
        if text == "simulator" {
            return Ok(TargetSpec::Simulator);
        }
        let bad = |why: &str| format!("bad --target '{text}': {why}; expected one of {KINDS}");
        let (kind, spec) = text.split_once(':').ok_or_else(|| bad("no KIND:"))?;
        match kind {
            "mastodon" => Ok(TargetSpec::Mastodon {
                base: base_url(spec).map_err(|e| bad(&e))?,
            }),
            "twitter-v1" => Ok(TargetSpec::TwitterV1 {
                base: base_url(spec).map_err(|e| bad(&e))?,
            }),
            "misskey" => Ok(TargetSpec::Misskey {
                base: base_url(spec).map_err(|e| bad(&e))?,
            }),
            "discord" => {
                if spec.is_empty() || !spec.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad("a Discord channel ID is a decimal snowflake"));
                }
                Ok(TargetSpec::Discord {
                    channel_id: spec.to_string(),
                })
            }
            "x" => {
                if let Some(user) = spec
                    .strip_prefix("users/")
                    .and_then(|s| s.strip_suffix("/tweets"))
                {
                    if user.is_empty() || !user.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(bad("an X user ID is decimal"));
                    }
                    return Ok(TargetSpec::X {
                        endpoint: XEndpoint::UserTweets {
                            user_id: user.to_string(),
                        },
                    });
                }
                if let Some(qs) = spec.strip_prefix("search?") {
                    let url = reqwest::Url::parse(&format!("http://x/?{qs}"))
                        .map_err(|_| bad("the search query string does not parse"))?;
                    let query = url
                        .query_pairs()
                        .find(|(k, _)| k == "query")
                        .map(|(_, v)| v.into_owned())
                        .filter(|q| !q.trim().is_empty())
                        .ok_or_else(|| bad("search needs query=..."))?;
                    return Ok(TargetSpec::X {
                        endpoint: XEndpoint::SearchRecent { query },
                    });
                }
                Err(bad("X targets are users/ID/tweets or search?query=..."))
            }
            _ => Err(bad(&format!("unknown kind '{kind}'"))),
        }
    }
}

/// `https://HOST[:PORT][/PREFIX]`, without a trailing slash.
fn base_url(spec: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(spec).map_err(|e| format!("'{spec}' is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("'{spec}' is not an http(s) URL"));
    }
    if url.query().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "'{spec}' must not carry a query or credentials (tokens come from the environment)"
        ));
    }
    Ok(spec.trim_end_matches('/').to_string())
}

impl TargetSpec {
    pub fn is_simulator(&self) -> bool {
        *self == TargetSpec::Simulator
    }

    /// Checks the options against the kind and builds the dialect.
    pub fn resolve(&self, opts: &TargetOptions) -> Result<Resolved, String> {
        let layout = match &opts.layout {
            Some(name) => Some(name.parse::<Layout>().map_err(|e| e.to_string())?),
            None => None,
        };
        let timeline_for = |kind: &str, allowed: &[&str]| -> Result<(), String> {
            match &opts.timeline {
                Some(t) if !allowed.contains(&t.as_str()) => Err(format!(
                    "bad --timeline '{t}' for {kind}: expected one of {}",
                    allowed.join(", ")
                )),
                _ => Ok(()),
            }
        };
        let no = |flag: &str, given: bool, kind: &str| {
            if given {
                Err(format!("{flag} does not apply to {kind} targets"))
            } else {
                Ok(())
            }
        };
        no(
            "--list-id",
            opts.list_id.is_some() && !matches!(self, TargetSpec::TwitterV1 { .. }),
            "these",
        )?;
        let base = |default: &str| {
            opts.base_url
                .as_deref()
                .map(base_url)
                .transpose()
                .map(|b| b.unwrap_or_else(|| default.to_string()))
        };
        let resolved = match self {
            TargetSpec::Simulator => return Err("the simulator is not a real target".into()),
            TargetSpec::Mastodon { base: host } => {
                let timeline = opts.timeline.clone().unwrap_or_else(|| "public".into());
                let named = ["public", "local", "remote", "home"].contains(&timeline.as_str());
                let tagged = timeline
                    .strip_prefix("tag:")
                    .or(timeline.strip_prefix("list:"))
                    .is_some_and(|rest| !rest.is_empty() && !rest.contains(['/', '?', '#', '&']));
                if !named && !tagged {
                    return Err(format!(
                        "bad --timeline '{timeline}' for mastodon: expected public, local, remote, home, tag:NAME or list:ID"
                    ));
                }
                no(
                    "--base-url",
                    opts.base_url.is_some(),
                    "mastodon (the URL is in --target)",
                )?;
                Resolved {
                    base: host.clone(),
                    dialect: Dialect::Mastodon { timeline },
                    layout: Some(
                        layout.unwrap_or_else(|| "mastodon".parse().expect("known layout")),
                    ),
                }
            }
            TargetSpec::X { endpoint } => {
                no("--timeline", opts.timeline.is_some(), "x")?;
                Resolved {
                    base: base(X_BASE)?,
                    dialect: Dialect::X {
                        endpoint: endpoint.clone(),
                    },
                    layout: Some(layout.unwrap_or_else(Layout::twitter)),
                }
            }
            TargetSpec::TwitterV1 { base: host } => {
                no("--timeline", opts.timeline.is_some(), "twitter-v1")?;
                no(
                    "--base-url",
                    opts.base_url.is_some(),
                    "twitter-v1 (the URL is in --target)",
                )?;
                let list_id = opts
                    .list_id
                    .clone()
                    .ok_or("twitter-v1 needs --list-id ID (lists/statuses)")?;
                if list_id.is_empty() || !list_id.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("bad --list-id '{list_id}': a decimal ID"));
                }
                Resolved {
                    base: host.clone(),
                    dialect: Dialect::TwitterV1 { list_id },
                    layout: Some(layout.unwrap_or_else(Layout::twitter)),
                }
            }
            TargetSpec::Misskey { base: host } => {
                timeline_for("misskey", &["local", "global", "hybrid", "home"])?;
                no(
                    "--base-url",
                    opts.base_url.is_some(),
                    "misskey (the URL is in --target)",
                )?;
                let endpoint = match opts.timeline.as_deref().unwrap_or("local") {
                    "global" => "global-timeline",
                    "hybrid" => "hybrid-timeline",
                    "home" => "timeline",
                    _ => "local-timeline",
                };
                Resolved {
                    base: host.clone(),
                    dialect: Dialect::Misskey {
                        endpoint: endpoint.into(),
                    },
                    layout,
                }
            }
            TargetSpec::Discord { channel_id } => {
                no("--timeline", opts.timeline.is_some(), "discord")?;
                Resolved {
                    base: base(DISCORD_BASE)?,
                    dialect: Dialect::Discord {
                        channel_id: channel_id.clone(),
                    },
                    layout: Some(
                        layout.unwrap_or_else(|| "discord".parse().expect("known layout")),
                    ),
                }
            }
        };
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Result<TargetSpec, String> {
        text.parse()
    }

    #[test]
    fn parses_every_kind() {
        assert_eq!(spec("simulator"), Ok(TargetSpec::Simulator));
        assert_eq!(
            spec("mastodon:https://mastodon.social/"),
            Ok(TargetSpec::Mastodon {
                base: "https://mastodon.social".into()
            })
        );
        assert_eq!(
            spec("x:users/2244994945/tweets"),
            Ok(TargetSpec::X {
                endpoint: XEndpoint::UserTweets {
                    user_id: "2244994945".into()
                }
            })
        );
        assert_eq!(
            spec("x:search?query=from%3AXDevelopers+-is%3Aretweet"),
            Ok(TargetSpec::X {
                endpoint: XEndpoint::SearchRecent {
                    query: "from:XDevelopers -is:retweet".into()
                }
            })
        );
        assert_eq!(
            spec("twitter-v1:https://api.twitter.com"),
            Ok(TargetSpec::TwitterV1 {
                base: "https://api.twitter.com".into()
            })
        );
        assert_eq!(
            spec("misskey:http://127.0.0.1:8080"),
            Ok(TargetSpec::Misskey {
                base: "http://127.0.0.1:8080".into()
            })
        );
        assert_eq!(
            spec("discord:290926798999357250"),
            Ok(TargetSpec::Discord {
                channel_id: "290926798999357250".into()
            })
        );
    }

    #[test]
    fn malformed_specs_are_one_line_errors() {
        for bad in [
            "",
            "bluesky:https://bsky.social",
            "mastodon",
            "mastodon:",
            "mastodon:mastodon.social",
            "mastodon:ftp://host",
            "mastodon:https://user:pw@host",
            "mastodon:https://host/?access_token=x",
            "x:users/abc/tweets",
            "x:lists/1/tweets",
            "x:search?q=nope",
            "discord:general",
            "discord:",
        ] {
            let e = spec(bad).expect_err(bad);
            assert!(!e.contains('\n'), "{e}");
            assert!(e.contains("--target"), "{e}");
        }
    }

    #[test]
    fn options_are_checked_against_the_kind() {
        let opts = |timeline: Option<&str>, list: Option<&str>| TargetOptions {
            timeline: timeline.map(Into::into),
            list_id: list.map(Into::into),
            ..TargetOptions::default()
        };
        let m = spec("mastodon:https://h").unwrap();
        for t in ["public", "local", "remote", "home", "tag:rust", "list:42"] {
            assert!(m.resolve(&opts(Some(t), None)).is_ok(), "{t}");
        }
        for t in ["global", "tag:", "list:1/x"] {
            assert!(m.resolve(&opts(Some(t), None)).is_err(), "{t}");
        }
        let r = m.resolve(&opts(None, None)).unwrap();
        assert_eq!(r.layout.unwrap().name(), "mastodon");
        let mk = spec("misskey:https://h").unwrap();
        let r = mk.resolve(&opts(Some("home"), None)).unwrap();
        assert_eq!(
            r.dialect,
            Dialect::Misskey {
                endpoint: "timeline".into()
            }
        );
        assert!(r.layout.is_none(), "detected at run time");
        assert!(mk.resolve(&opts(Some("public"), None)).is_err());
        let tw = spec("twitter-v1:https://api.twitter.com").unwrap();
        assert!(tw.resolve(&opts(None, None)).is_err(), "needs --list-id");
        assert!(tw.resolve(&opts(None, Some("123"))).is_ok());
        assert!(m.resolve(&opts(None, Some("123"))).is_err());
        let d = spec("discord:1")
            .unwrap()
            .resolve(&TargetOptions::default())
            .unwrap();
        assert_eq!(d.base, DISCORD_BASE);
        let x = spec("x:users/1/tweets")
            .unwrap()
            .resolve(&TargetOptions {
                base_url: Some("http://127.0.0.1:9".into()),
                layout: Some("twitter".into()),
                ..TargetOptions::default()
            })
            .unwrap();
        assert_eq!(x.base, "http://127.0.0.1:9");
    }
}
