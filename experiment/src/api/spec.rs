//! `--target KIND:SPEC`: which API to poll, parsed and checked before any
//! request, each mistake a one-line error. Each API's home file parses its
//! own spec and options (`parse_spec`, `resolve`); this file dispatches on
//! KIND (the checks all of them share are in `common.rs`).
//!
//! | kind | spec | dialect | layout |
//! |---|---|---|---|
//! | `simulator` | | the embedded simulator's | the profile's |
//! | `mastodon` | `https://HOST` (+ `--timeline`) | Mastodon | `mastodon` |
//! | `x` | `users/ID/tweets` or `search?query=...` | X API v2 | `twitter` |
//! | `twitter-v1` | `https://HOST` (+ `--list-id`) | Twitter v1.1 `lists/statuses` | `twitter` |
//! | `misskey` | `https://HOST` (+ `--timeline`) | Misskey | `--layout` or detected |
//! | `discord` | `CHANNEL_ID` | Discord v10 | `discord` |

use super::common::{Api, refuse};
pub use super::common::{Resolved, TargetOptions, TargetSpec};
use super::{discord, mastodon, misskey, twitter, x};
use since_id::id::Layout;

/// Every form of `--target` but the simulator.
fn forms() -> Vec<&'static str> {
    Api::all()
        .into_iter()
        .flat_map(|api| api.specs)
        .copied()
        .collect()
}

/// The PostgreSQL targets' forms, which the command line recognises before
/// a spec is parsed (`cmd::run`).
const POSTGRES_FORMS: [&str; 2] = ["postgres", "postgres:postgresql://USER@HOST/DB"];

/// Every form of `--target`, for errors.
fn kinds() -> String {
    let mut kinds = vec!["simulator"];
    kinds.extend(forms());
    kinds.extend(POSTGRES_FORMS);
    kinds.join(", ")
}

/// `--help` of `--target`.
pub fn target_help() -> String {
    let forms: Vec<String> = forms().iter().map(|f| format!("`{f}`")).collect();
    let [cluster, own] = POSTGRES_FORMS;
    format!(
        "What to poll: `simulator` (the embedded leaky timeline), {}, `{cluster}` (a throwaway \
PostgreSQL cluster) or `{own}` (your own table, with --table)",
        forms.join(", ")
    )
}

/// Every API's token variable, in `--help`'s order, each once.
pub fn token_vars() -> Vec<&'static str> {
    let mut vars: Vec<&str> = Api::all().into_iter().map(|api| api.token_env).collect();
    vars.dedup();
    vars
}

/// `--help` of `--timeline`.
pub const TIMELINE_HELP: &str = "Which timeline: mastodon public|local|remote|home|tag:NAME|list:ID \
(default public); misskey local|global|hybrid|home (default local; the simulator's misskey \
profile serves local and global)";
/// `--help` of `--list-id`.
pub const LIST_ID_HELP: &str = "The list polled by `twitter-v1` (lists/statuses)";
/// `--help` of `--base-url`.
pub const BASE_URL_HELP: &str = "Base URL of the API for `x` (default https://api.x.com) and \
`discord` (default https://discord.com/api/v10)";
/// `--help` of `--layout`.
pub const LAYOUT_HELP: &str =
    "The ID layout, overriding the target's (misskey: detected from the first IDs if absent)";
/// `--help` of `--limit`.
pub const LIMIT_HELP: &str = "Page size, fitted to the API's bounds: at most 200 Twitter v1.1 (the \
simulator's twitter and discord profiles), 40 Mastodon (and PostgreSQL --via http), 100 Misskey, X \
and Discord; at least 5 for X user tweets, 10 for X search; PostgreSQL over SQL takes it as given";

impl std::str::FromStr for TargetSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<TargetSpec, String> {
        if text == "simulator" {
            return Ok(TargetSpec::Simulator);
        }
        let bad = |why: &str| format!("bad --target '{text}': {why}; expected one of {}", kinds());
        let (kind, spec) = text.split_once(':').ok_or_else(|| bad("no KIND:"))?;
        let api = Api::all()
            .into_iter()
            .find(|api| api.kind == kind)
            .ok_or_else(|| bad(&format!("unknown kind '{kind}'")))?;
        (api.parse_spec)(spec).map_err(|e| bad(&e))
    }
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
        refuse(
            "--list-id",
            opts.list_id.is_some() && !matches!(self, TargetSpec::TwitterV1 { .. }),
            "these",
        )?;
        match self {
            TargetSpec::Simulator => Err("the simulator is not a real target".into()),
            TargetSpec::Mastodon { base } => mastodon::resolve(base, opts, layout),
            TargetSpec::X { endpoint } => x::resolve(endpoint, opts, layout),
            TargetSpec::TwitterV1 { base } => twitter::resolve(base, opts, layout),
            TargetSpec::Misskey { base } => misskey::resolve(base, opts, layout),
            TargetSpec::Discord { channel_id } => discord::resolve(channel_id, opts, layout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::discord::BASE as DISCORD_BASE;
    use crate::api::{Dialect, XEndpoint};

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
