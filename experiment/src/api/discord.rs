//! Discord's client side [docs/api-facts.md 4]: `GET /channels/{id}/messages`
//! with `before` *or* `after` and `limit` 1-100, `Authorization: Bot TOKEN`
//! from `DISCORD_BOT_TOKEN`, messages as a JSON array, rate limits in
//! `X-RateLimit-*` with an epoch reset and `X-RateLimit-Reset-After`, and
//! `--target discord:CHANNEL_ID` against `https://discord.com/api/v10` (or
//! `--base-url`).

use super::common::{
    Api, Auth, Dialect, HttpRequest, ItemFields, RateHeaders, Resolved, TargetOptions, TargetSpec,
    base_or, refuse,
};
use since_id::id::{Id, Layout};
use since_id::poller::PageRequest;

/// Discord.
pub const API: Api = Api {
    kind: "discord",
    specs: &["discord:CHANNEL_ID"],
    token_env: "DISCORD_BOT_TOKEN",
    auth: Auth::Header { scheme: "Bot" },
    max_limit: 100,
    item: ItemFields {
        id: "id",
        integer_id: None,
        created_at: "timestamp",
        author: "/author/username",
    },
    // The reset is epoch seconds with decimals; Reset-After (seconds) wins.
    rate_headers: Some(RateHeaders {
        limit: "x-ratelimit-limit",
        remaining: "x-ratelimit-remaining",
        reset: "x-ratelimit-reset",
        reset_after: Some("x-ratelimit-reset-after"),
    }),
    parse_spec,
};
/// The default base URL of Discord's API (`--base-url` overrides it).
pub const BASE: &str = "https://discord.com/api/v10";

/// The request for a page of channel `channel_id`.
pub fn build(channel_id: &str, layout: &Layout, req: &PageRequest, limit: usize) -> HttpRequest {
    // `before`, `after` and `around` are mutually exclusive, and `after`
    // returns the messages *immediately after* the cursor (the oldest
    // ones), not the newest [docs/api-facts.md 4]. A full `after` page would cut
    // the window at the top, where back-paging cannot reach. So every
    // request asks for the newest page below `before` (none on page 0),
    // and the items at or below `since` are dropped locally
    // (`Dialect::parse_page`): the page is "full" only if all of it is
    // above the cursor, and then the poller pages back with `before`,
    // exactly as with Mastodon's since_id. The price is bytes (old
    // messages are sent again each tick), not requests.
    let mut query = vec![("limit".to_string(), limit.to_string())];
    if let Some(before) = req.before {
        query.push(("before".into(), layout.format(before)));
    }
    HttpRequest {
        post: false,
        path: format!("/channels/{channel_id}/messages"),
        query,
        json_body: None,
    }
}

/// Whether an item of the answer to `req` is inside its window (`since < id
/// < before`): the request cannot say `since`, so the page is cut on arrival ([`build`]).
pub fn in_window(req: &PageRequest, id: Id) -> bool {
    req.since.is_none_or(|s| id > s) && req.before.is_none_or(|b| id < b)
}

/// `discord:CHANNEL_ID`.
fn parse_spec(spec: &str) -> Result<TargetSpec, String> {
    if spec.is_empty() || !spec.bytes().all(|b| b.is_ascii_digit()) {
        return Err("a Discord channel ID is a decimal snowflake".into());
    }
    Ok(TargetSpec::Discord {
        channel_id: spec.to_string(),
    })
}

/// The dialect for `--target discord:CHANNEL_ID` and its options.
pub fn resolve(
    channel_id: &str,
    opts: &TargetOptions,
    layout: Option<Layout>,
) -> Result<Resolved, String> {
    refuse("--timeline", opts.timeline.is_some(), "discord")?;
    Ok(Resolved {
        base: base_or(opts, BASE)?,
        dialect: Dialect::Discord {
            channel_id: channel_id.to_string(),
        },
        layout: Some(layout.unwrap_or_else(|| "discord".parse().expect("known layout"))),
    })
}

#[cfg(test)]
mod tests {
    use crate::api::Dialect;
    use since_id::id::{Id, Layout};
    use since_id::poller::{Item, PageRequest};

    #[test]
    fn discord_never_combines_after_and_before_and_filters_the_window_locally() {
        let l: Layout = "discord".parse().unwrap();
        let d = Dialect::Discord {
            channel_id: "7".into(),
        };
        let page0 = PageRequest {
            since: Some(Id(100)),
            before: None,
            limit: 50,
        };
        let http = d.build(&l, &page0);
        assert_eq!(http.path, "/channels/7/messages");
        assert_eq!(http.query, vec![("limit".to_string(), "50".to_string())]);
        let back = PageRequest {
            before: Some(Id(300)),
            ..page0.clone()
        };
        let http = d.build(&l, &back);
        assert_eq!(
            http.query,
            vec![
                ("limit".to_string(), "50".to_string()),
                ("before".to_string(), "300".to_string())
            ]
        );
        let body = br#"[{"id":"301"},{"id":"250"},{"id":"101"},{"id":"100"},{"id":"99"}]"#;
        let ids = |items: Vec<Item>| items.into_iter().map(|i| i.id.0).collect::<Vec<_>>();
        assert_eq!(
            ids(d.parse_page(&l, &page0, body).unwrap()),
            vec![301, 250, 101]
        );
        assert_eq!(ids(d.parse_page(&l, &back, body).unwrap()), vec![250, 101]);
        // Other dialects trust the server's window.
        let m = Dialect::Mastodon {
            timeline: "public".into(),
        };
        assert_eq!(ids(m.parse_page(&l, &page0, body).unwrap()).len(), 5);
    }
}
