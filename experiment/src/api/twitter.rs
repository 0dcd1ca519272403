//! Twitter API v1.1's client side [docs/api-facts.md 2.2]: `GET
//! lists/statuses` with `since_id` (exclusive), `max_id` (*inclusive*) and
//! `count` <= 200, a bearer token in `X_BEARER_TOKEN`, tweets as a JSON array
//! whose exact ID is `id_str`, rate limits in `x-rate-limit-*` with an epoch
//! reset [2.3], and `--target twitter-v1:https://HOST` with `--list-id`.

use super::common::{
    Api, Auth, Dialect, HttpRequest, ItemFields, RateHeaders, Resolved, TargetOptions, TargetSpec,
    base_url, refuse, url_in_target,
};
use since_id::id::Layout;
use since_id::poller::PageRequest;

/// Twitter v1.1.
pub const API: Api = Api {
    kind: "twitter-v1",
    specs: &["twitter-v1:https://HOST"],
    // The same app token as X v2.
    token_env: "X_BEARER_TOKEN",
    auth: Auth::Header { scheme: "Bearer" },
    // The largest `count` [2.2].
    max_limit: 200,
    // A tweet's `id` is a JSON number, exact only when read as u64.
    item: ItemFields {
        id: "id_str",
        integer_id: Some("id"),
        created_at: "created_at",
        author: "/user/screen_name",
    },
    rate_headers: Some(RATE_HEADERS),
    // `twitter-v1:https://HOST`.
    parse_spec: |spec| {
        Ok(TargetSpec::TwitterV1 {
            base: base_url(spec)?,
        })
    },
};

/// `x-rate-limit-limit`, `-remaining` and `-reset` (epoch seconds) [2.3]; X v2 sends the same.
pub(super) const RATE_HEADERS: RateHeaders = RateHeaders {
    limit: "x-rate-limit-limit",
    remaining: "x-rate-limit-remaining",
    reset: "x-rate-limit-reset",
    reset_after: None,
};

/// The request for a page of list `list_id`.
pub fn build(list_id: &str, layout: &Layout, req: &PageRequest, limit: usize) -> HttpRequest {
    let mut query = vec![
        ("list_id".to_string(), list_id.to_string()),
        ("count".into(), limit.to_string()),
    ];
    if let Some(since) = req.since {
        query.push(("since_id".into(), layout.format(since)));
    }
    if let Some(before) = req.before {
        // max_id is inclusive: ask for everything up to the ID just below.
        query.push(("max_id".into(), layout.format(before.pred())));
    }
    HttpRequest {
        post: false,
        path: "/1.1/lists/statuses.json".into(),
        query,
        json_body: None,
    }
}

/// The dialect for `--target twitter-v1:HOST` and its options.
pub fn resolve(
    host: &str,
    opts: &TargetOptions,
    layout: Option<Layout>,
) -> Result<Resolved, String> {
    refuse("--timeline", opts.timeline.is_some(), "twitter-v1")?;
    url_in_target(opts, "twitter-v1")?;
    let list_id = opts
        .list_id
        .clone()
        .ok_or("twitter-v1 needs --list-id ID (lists/statuses)")?;
    if list_id.is_empty() || !list_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("bad --list-id '{list_id}': a decimal ID"));
    }
    Ok(Resolved {
        base: host.to_string(),
        dialect: Dialect::TwitterV1 { list_id },
        layout: Some(layout.unwrap_or_else(Layout::twitter)),
    })
}

#[cfg(test)]
mod tests {
    use crate::api::Dialect;
    use since_id::id::{Id, Layout};
    use since_id::poller::PageRequest;

    fn twitter() -> Dialect {
        Dialect::TwitterV1 {
            list_id: "1".into(),
        }
    }

    #[test]
    fn twitter_max_id_is_inclusive() {
        let l = Layout::twitter();
        let req = PageRequest {
            since: Some(Id(10)),
            before: Some(Id(20)),
            limit: 500,
        };
        let http = twitter().build(&l, &req);
        assert!(http.query.contains(&("since_id".into(), "10".into())));
        assert!(http.query.contains(&("max_id".into(), "19".into())));
        assert!(
            http.query.contains(&("count".into(), "200".into())),
            "count capped at 200"
        );
    }

    #[test]
    fn parses_twitter_ids_exactly() {
        let l = Layout::twitter();
        let body = br#"[{"id": 18446744073709551615, "id_str": "18446744073709551615", "created_at": "x", "user": {"screen_name": "a"}},
                        {"id": 1600000000000000001}]"#;
        let items = twitter().parse(&l, body).unwrap();
        assert_eq!(items[0].id, Id(u64::MAX as u128));
        assert_eq!(items[0].author.as_deref(), Some("a"));
        assert_eq!(items[1].id_text, "1600000000000000001");
    }

    #[test]
    fn bad_bodies_are_errors() {
        let l = Layout::twitter();
        for body in [
            &b"<html>502</html>"[..],
            b"",
            b"{\"errors\":[]}",
            b"[{\"text\":\"no id\"}]",
            b"[{\"id_str\":\"-5\"}]",
            b"[{\"id_str\":\"99999999999999999999\"}]",
            b"[{\"id\":1.5}]",
        ] {
            assert!(
                twitter().parse(&l, body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
