//! The three dialects over real loopback HTTP, in fixed time: the simulator
//! posts nothing (rate 0) and the statuses are injected with known IDs, so
//! every page is exact. The clock handed to the router is a constant.

use crate::model::{SimStatus, Simulator};
use crate::profile::SimConfig;
use crate::server::{RateLimits, RunningServer, router_with_clock};
use serde_json::Value;
use since_id::id::Id;
use std::sync::{Arc, Mutex};

const NOW: i64 = 1_700_000_000_000;
/// Wed Oct 10 20:19:24 UTC 2018.
const POSTED: i64 = 1_539_202_764_000;

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().build().unwrap()
}

struct Fixture {
    server: RunningServer,
    sim: Arc<Mutex<Simulator>>,
    http: reqwest::Client,
}

fn status(id: u128, origin: &str) -> SimStatus {
    SimStatus {
        id: Id(id),
        id_time_ms: 0,
        posted_at_ms: POSTED,
        visible_at_ms: NOW,
        deleted_at_ms: None,
        origin: origin.into(),
        author: 7,
    }
}

/// A server on `profile`'s layout holding exactly `ids` (even IDs local, odd remote).
async fn fixture_with(
    profile: &str,
    ids: &[u128],
    limits: RateLimits,
    retention_ms: u64,
) -> Fixture {
    let mut config = SimConfig::profile(profile).unwrap();
    config.rate_per_s = 0.0;
    config.retention_ms = retention_ms;
    let mut sim = Simulator::new(config, 1, NOW);
    for &id in ids {
        sim.inject(status(id, if id % 2 == 0 { "local" } else { "remote" }));
    }
    let sim = Arc::new(Mutex::new(sim));
    let app = router_with_clock(sim.clone(), limits, Arc::new(|| NOW));
    let server = RunningServer::start(app).await.unwrap();
    Fixture {
        server,
        sim,
        http: client(),
    }
}

async fn fixture(profile: &str, ids: &[u128]) -> Fixture {
    fixture_with(profile, ids, RateLimits::default(), 3_600_000).await
}

impl Fixture {
    async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.server.url(path)).send().await.unwrap()
    }

    async fn get_json(&self, path: &str) -> Value {
        let response = self.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        response.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(self.server.url(path))
            .json(&body)
            .send()
            .await
            .unwrap()
    }
}

/// The `key` of every element, as strings.
fn field(body: &Value, key: &str) -> Vec<String> {
    body.as_array()
        .unwrap()
        .iter()
        .map(|v| match &v[key] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn strs(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------- Twitter

const LIST: &str =
    "/1.1/lists/statuses.json?list_id=1&slug=busy&owner_screen_name=x&include_rts=true";

#[tokio::test]
async fn twitter_since_id_exclusive_max_id_inclusive_newest_first() {
    let f = fixture("twitter", &[1, 2, 3, 4, 5, 6]).await;
    let ids = |body: Value| field(&body, "id_str");
    assert_eq!(
        ids(f.get_json(&format!("{LIST}&count=2")).await),
        strs(&["6", "5"])
    );
    assert_eq!(
        ids(f.get_json(&format!("{LIST}&since_id=3")).await),
        strs(&["6", "5", "4"])
    );
    // max_id is inclusive: the tweet with that ID comes back again.
    assert_eq!(
        ids(f.get_json(&format!("{LIST}&max_id=4&count=2")).await),
        strs(&["4", "3"])
    );
    assert_eq!(
        ids(f.get_json(&format!("{LIST}&since_id=2&max_id=4")).await),
        strs(&["4", "3"])
    );
    // Empty page above the newest; count above 200 is capped, not an error.
    assert!(ids(f.get_json(&format!("{LIST}&since_id=6")).await).is_empty());
    assert_eq!(ids(f.get_json(&format!("{LIST}&count=500")).await).len(), 6);
    // Exactly full page, then "max_id = lowest - 1" pages to the end.
    let page = ids(f.get_json(&format!("{LIST}&count=3")).await);
    assert_eq!(page, strs(&["6", "5", "4"]));
    let page = ids(f.get_json(&format!("{LIST}&count=3&max_id=3")).await);
    assert_eq!(page, strs(&["3", "2", "1"]));
    assert!(ids(f.get_json(&format!("{LIST}&count=3&max_id=0")).await).is_empty());
    // A cursor pointing at a deleted tweet still bounds the page.
    f.sim.lock().unwrap().remove(Id(4));
    assert_eq!(
        ids(f.get_json(&format!("{LIST}&since_id=4")).await),
        strs(&["6", "5"])
    );
    assert_eq!(
        ids(f.get_json(&format!("{LIST}&max_id=4")).await),
        strs(&["3", "2", "1"])
    );
}

#[tokio::test]
async fn twitter_tweets_have_exact_ids_and_twitter_dates() {
    let big = u64::MAX as u128;
    let f = fixture("twitter", &[big]).await;
    let response = f.get(LIST).await;
    let remaining = response.headers()["x-rate-limit-remaining"]
        .to_str()
        .unwrap()
        .to_string();
    let reset: i64 = response.headers()["x-rate-limit-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(remaining, "999999");
    assert!(
        reset > NOW / 1000 && reset <= NOW / 1000 + 300,
        "epoch seconds: {reset}"
    );
    let text = response.text().await.unwrap();
    // A JSON integer with every digit, not a float.
    assert!(text.contains("\"id\":18446744073709551615,"), "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    let tweet = &body[0];
    assert_eq!(tweet["id"].as_u64(), Some(u64::MAX));
    assert_eq!(tweet["id_str"], "18446744073709551615");
    assert_eq!(tweet["created_at"], "Wed Oct 10 20:19:24 +0000 2018");
    assert_eq!(tweet["user"]["screen_name"], "user7");
    assert_eq!(tweet["user"]["id_str"], tweet["user"]["id"].to_string());
    assert!(tweet["text"].is_string());
}

#[tokio::test]
async fn twitter_bad_parameters_are_400_with_a_json_error() {
    let f = fixture("twitter", &[1]).await;
    for query in [
        "since_id=abc",
        "max_id=-1",
        "count=0",
        "count=x",
        "since_id=18446744073709551616",
    ] {
        let response = f.get(&format!("{LIST}&{query}")).await;
        assert_eq!(response.status(), 400, "{query}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["errors"][0]["code"], 44, "{query}");
    }
}

#[tokio::test]
async fn twitter_rate_limit_is_429_with_retry_after() {
    let limits = RateLimits {
        per_window: 2,
        window_ms: 60_000,
    };
    let f = fixture_with("twitter", &[1], limits, 3_600_000).await;
    for remaining in ["1", "0"] {
        let r = f.get(LIST).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-rate-limit-remaining"], remaining);
        assert_eq!(r.headers()["x-rate-limit-limit"], "2");
    }
    let r = f.get(LIST).await;
    assert_eq!(r.status(), 429);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry));
    // Each dialect has its own budget, reported in its own headers.
    for remaining in ["1", "0"] {
        let r = f.get(PUBLIC).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-ratelimit-remaining"], remaining);
    }
    let r = f.get(PUBLIC).await;
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    assert!(r.headers().contains_key("x-ratelimit-reset"));
    let body: Value = r.json().await.unwrap();
    assert!(body["error"].is_string());
    for _ in 0..2 {
        assert_eq!(f.post(GTL, serde_json::json!({})).await.status(), 200);
    }
    let r = f.post(GTL, serde_json::json!({})).await;
    assert_eq!(r.status(), 429);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "RATE_LIMIT_EXCEEDED");
}

#[test]
fn rate_limits_parse_from_n_per_window() {
    assert_eq!(
        "300/5m".parse::<RateLimits>(),
        Ok(RateLimits {
            per_window: 300,
            window_ms: 300_000
        })
    );
    for bad in ["300", "0/5m", "x/5m", "300/0s", "300/soon"] {
        assert!(bad.parse::<RateLimits>().is_err(), "{bad}");
    }
}

// ---------------------------------------------------------------- Mastodon

const PUBLIC: &str = "/api/v1/timelines/public";

#[tokio::test]
async fn mastodon_since_id_versus_min_id_as_in_gargrons_example() {
    let f = fixture("mastodon", &[1, 2, 3, 4, 5, 6]).await;
    let ids = |body: Value| field(&body, "id");
    assert_eq!(
        ids(f.get_json(&format!("{PUBLIC}?since_id=3&limit=2")).await),
        strs(&["6", "5"])
    );
    assert_eq!(
        ids(f.get_json(&format!("{PUBLIC}?min_id=3&limit=2")).await),
        strs(&["5", "4"])
    );
    // min_id wins over since_id.
    let both = f
        .get_json(&format!("{PUBLIC}?since_id=1&min_id=3&limit=2"))
        .await;
    assert_eq!(ids(both), strs(&["5", "4"]));
    // max_id is exclusive; min_id with max_id pages forward inside the range.
    assert_eq!(
        ids(f.get_json(&format!("{PUBLIC}?max_id=4")).await),
        strs(&["3", "2", "1"])
    );
    let range = f
        .get_json(&format!("{PUBLIC}?min_id=1&max_id=5&limit=2"))
        .await;
    assert_eq!(ids(range), strs(&["3", "2"]));
    // A cursor at a deleted status.
    f.sim.lock().unwrap().remove(Id(4));
    assert_eq!(
        ids(f.get_json(&format!("{PUBLIC}?min_id=4&limit=1")).await),
        strs(&["5"])
    );
    assert_eq!(
        ids(f.get_json(&format!("{PUBLIC}?max_id=4&limit=1")).await),
        strs(&["3"])
    );
}

fn link_target(link: &str, rel: &str) -> Option<String> {
    link.split(", ")
        .find(|part| part.ends_with(&format!("rel=\"{rel}\"")))
        .and_then(|part| part.split_once('<'))
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(url, _)| url.to_string())
}

#[tokio::test]
async fn mastodon_link_header_pages_through_everything_and_is_absent_when_empty() {
    let f = fixture("mastodon", &[1, 2, 3, 4, 5, 6]).await;
    let first = f.get(&format!("{PUBLIC}?limit=3&local=false")).await;
    let link = first.headers()["link"].to_str().unwrap().to_string();
    let next = link_target(&link, "next").unwrap();
    let prev = link_target(&link, "prev").unwrap();
    assert_eq!(
        next,
        f.server
            .url(&format!("{PUBLIC}?limit=3&local=false&max_id=4"))
    );
    assert_eq!(
        prev,
        f.server
            .url(&format!("{PUBLIC}?limit=3&local=false&min_id=6"))
    );
    let mut seen = field(&first.json().await.unwrap(), "id");
    // Exactly full pages: 6 statuses, 3 per page, then an empty page without Link.
    let mut url = next;
    loop {
        let response = f.http.get(&url).send().await.unwrap();
        let link = response
            .headers()
            .get("link")
            .map(|l| l.to_str().unwrap().to_string());
        let page = field(&response.json().await.unwrap(), "id");
        if page.is_empty() {
            assert_eq!(link, None, "no Link header on an empty page");
            break;
        }
        seen.extend(page);
        url = link_target(&link.unwrap(), "next").unwrap();
    }
    assert_eq!(seen, strs(&["6", "5", "4", "3", "2", "1"]));
    // prev from the newest is empty.
    let response = f.http.get(&prev).send().await.unwrap();
    assert!(response.headers().get("link").is_none());
    assert!(field(&response.json().await.unwrap(), "id").is_empty());
}

#[tokio::test]
async fn mastodon_limits_local_filter_and_entities() {
    let ids: Vec<u128> = (1..=50).collect();
    let f = fixture("mastodon", &ids).await;
    assert_eq!(
        field(&f.get_json(PUBLIC).await, "id").len(),
        20,
        "default 20"
    );
    assert_eq!(
        field(&f.get_json(&format!("{PUBLIC}?limit=100")).await, "id").len(),
        40,
        "max 40"
    );
    // Ruby's to_i.abs: -5 is 5, junk is 0.
    assert_eq!(
        field(&f.get_json(&format!("{PUBLIC}?limit=-5")).await, "id").len(),
        5
    );
    assert!(field(&f.get_json(&format!("{PUBLIC}?limit=x")).await, "id").is_empty());
    let local = field(
        &f.get_json(&format!("{PUBLIC}?local=true&limit=3")).await,
        "id",
    );
    assert_eq!(local, strs(&["50", "48", "46"]));
    let local = field(&f.get_json("/api/v1/timelines/local?limit=3").await, "id");
    assert_eq!(local, strs(&["50", "48", "46"]));
    let remote = field(
        &f.get_json(&format!("{PUBLIC}?remote=true&limit=2")).await,
        "id",
    );
    assert_eq!(remote, strs(&["49", "47"]));
    let tagged = field(
        &f.get_json("/api/v1/timelines/tag/snowleak?limit=2").await,
        "id",
    );
    assert_eq!(tagged, strs(&["50", "49"]));
    assert!(field(&f.get_json("/api/v1/timelines/tag/other").await, "id").is_empty());

    let response = f.get(&format!("{PUBLIC}?limit=1")).await;
    let reset = response.headers()["x-ratelimit-reset"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        chrono::DateTime::parse_from_rfc3339(&reset).is_ok(),
        "{reset}"
    );
    assert_eq!(
        reset.split('.').nth(1).map(str::len),
        Some(7),
        "microseconds and Z: {reset}"
    );
    assert!(response.headers().contains_key("x-ratelimit-limit"));
    assert!(response.headers().contains_key("x-ratelimit-remaining"));
    let body: Value = response.json().await.unwrap();
    let status = &body[0];
    for key in [
        "id",
        "created_at",
        "uri",
        "url",
        "content",
        "visibility",
        "account",
        "sensitive",
        "spoiler_text",
        "media_attachments",
        "mentions",
        "tags",
        "emojis",
        "reblog",
        "in_reply_to_id",
        "replies_count",
        "reblogs_count",
        "favourites_count",
    ] {
        assert!(status.get(key).is_some(), "missing {key}");
    }
    assert_eq!(status["created_at"], "2018-10-10T20:19:24.000Z");
    assert_eq!(status["visibility"], "public");
    assert_eq!(status["account"]["acct"], "user7");
    for key in ["id", "username", "acct", "display_name", "url"] {
        assert!(status["account"][key].is_string(), "account.{key}");
    }
    assert_eq!(f.get(&format!("{PUBLIC}?max_id=x")).await.status(), 400);
    for v in ["/api/v1/instance", "/api/v2/instance"] {
        assert_eq!(f.get_json(v).await["version"], "4.3.0");
    }
}

#[tokio::test]
async fn mastodon_cursor_below_the_served_window_gets_the_oldest_retained() {
    // Retention of 1 s: statuses 1 and 2 are evicted before 3 and 4 appear.
    let f = fixture_with("mastodon", &[1, 2], RateLimits::default(), 1000).await;
    {
        let mut sim = f.sim.lock().unwrap();
        sim.advance(NOW + 5000);
        sim.inject(status(3, "local"));
        sim.inject(status(4, "local"));
    }
    let page = field(
        &f.get_json(&format!("{PUBLIC}?min_id=0&limit=1")).await,
        "id",
    );
    assert_eq!(page, strs(&["3"]));
    let page = field(&f.get_json(&format!("{PUBLIC}?since_id=1")).await, "id");
    assert_eq!(page, strs(&["4", "3"]));
}

// ---------------------------------------------------------------- Misskey

const LTL: &str = "/api/notes/local-timeline";
const GTL: &str = "/api/notes/global-timeline";

fn aidx(n: u128) -> String {
    "misskey-aidx"
        .parse::<since_id::id::Layout>()
        .unwrap()
        .format(Id(n))
}

#[tokio::test]
async fn misskey_since_id_alone_is_ascending() {
    let f = fixture("misskey", &[1, 2, 3, 4, 5, 6]).await;
    let ids = |v: Value| field(&v, "id");
    let post = |body: Value| async { f.post(GTL, body).await.json::<Value>().await.unwrap() };
    let a = |ns: &[u128]| ns.iter().map(|&n| aidx(n)).collect::<Vec<_>>();
    // sinceId alone: the oldest notes after it, ascending.
    let page = ids(post(serde_json::json!({"sinceId": aidx(3), "limit": 2})).await);
    assert_eq!(page, a(&[4, 5]));
    // untilId: descending below it.
    let page = ids(post(serde_json::json!({"untilId": aidx(4)})).await);
    assert_eq!(page, a(&[3, 2, 1]));
    // Both: descending between them.
    let page = ids(post(serde_json::json!({"sinceId": aidx(1), "untilId": aidx(5)})).await);
    assert_eq!(page, a(&[4, 3, 2]));
    // Default limit 10, newest first; the local timeline only has local notes.
    assert_eq!(
        ids(post(serde_json::json!({})).await),
        a(&[6, 5, 4, 3, 2, 1])
    );
    let local = f
        .post(LTL, serde_json::json!({"limit": 2}))
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(ids(local.clone()), a(&[6, 4]));
    // createdAt is derived from the ID.
    let layout = "misskey-aidx".parse::<since_id::id::Layout>().unwrap();
    assert_eq!(
        local[0]["createdAt"],
        since_id::time::rfc3339_ms(layout.ts_ms(Id(6)))
    );
    assert_eq!(local[0]["userId"], local[0]["user"]["id"]);
    assert_eq!(local[0]["user"]["username"], "user7");
    // Empty page after the newest.
    assert!(ids(post(serde_json::json!({"sinceId": aidx(6)})).await).is_empty());
}

#[tokio::test]
async fn misskey_bad_parameters_are_invalid_param() {
    let f = fixture("misskey", &[1]).await;
    for body in [
        serde_json::json!({"limit": 0}),
        serde_json::json!({"limit": 101}),
        serde_json::json!({"sinceId": "nope"}),
        serde_json::json!({"untilId": 5}),
        serde_json::json!([1, 2]),
    ] {
        let response = f.post(GTL, body.clone()).await;
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "INVALID_PARAM", "{body}");
    }
}

// ---------------------------------------------------------------- what client libraries need

/// The `id`s of an X v2 page's `data`.
fn x_ids(body: &Value) -> Vec<String> {
    body.get("data").map_or_else(Vec::new, |d| field(d, "id"))
}

#[tokio::test]
async fn discord_responses_are_exactly_application_json_with_via_in_every_case() {
    let f = fixture_with(
        "discord",
        &[1 << 22, 2 << 22],
        "2/1m".parse().unwrap(),
        3_600_000,
    )
    .await;
    for (path, status) in [
        ("/api/v10/users/@me", 200),
        ("/api/v10/channels/42/messages?limit=0", 400),
        ("/api/v10/channels/42/messages", 429),
        ("/api/v10/no/such/route", 404),
    ] {
        let r = f.get(path).await;
        assert_eq!(r.status(), status, "{path}");
        assert_eq!(r.headers()["content-type"], "application/json", "{path}");
        assert_eq!(r.headers()["via"], "1.1 google", "{path}");
        let body: Value = r.json().await.unwrap();
        if status == 429 {
            assert!(body["retry_after"].as_f64().unwrap() > 0.0);
            assert_eq!(body["global"], false);
        } else if status != 200 {
            assert!(
                body["message"].is_string() && body["code"].is_u64(),
                "{path}"
            );
        }
    }
}

#[tokio::test]
async fn discord_login_channel_and_users_are_consistent_with_messages() {
    let f = fixture("discord", &[1 << 22]).await;
    let me = f.get_json("/api/v10/users/@me").await;
    assert_eq!(
        (me["id"].as_str(), me["bot"].as_bool()),
        (Some("1"), Some(true))
    );
    let app = f.get_json("/api/v10/oauth2/applications/@me").await;
    assert_eq!(app["owner"]["id"], "1");
    assert!(app["verify_key"].is_string() && app["bot_public"].is_boolean());
    let channel = f.get_json("/api/v10/channels/42").await;
    assert_eq!(
        (channel["id"].as_str(), channel["type"].as_u64()),
        (Some("42"), Some(0))
    );
    assert!(channel["guild_id"].is_string());
    let messages = f.get_json("/api/v10/channels/42/messages").await;
    let author = &messages[0]["author"];
    let id = author["id"].as_str().unwrap();
    assert_eq!(&f.get_json(&format!("/api/v10/users/{id}")).await, author);
    let missing = f.get("/api/v10/users/999").await;
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.json::<Value>().await.unwrap()["code"], 10013);
}

async fn x_page(f: &Fixture, query: String) -> Value {
    f.get_json(&format!("/2/users/1/tweets?max_results=5{query}"))
        .await
}

#[tokio::test]
async fn x_previous_token_returns_exactly_the_page_above() {
    let f = fixture("twitter", &(1..=12).collect::<Vec<_>>()).await;
    let first = x_page(&f, String::new()).await;
    assert_eq!(x_ids(&first), strs(&["12", "11", "10", "9", "8"]));
    assert!(
        first["meta"].get("previous_token").is_none(),
        "the first page has none"
    );
    let next = first["meta"]["next_token"].as_str().unwrap().to_string();
    let second = x_page(&f, format!("&pagination_token={next}")).await;
    assert_eq!(x_ids(&second), strs(&["7", "6", "5", "4", "3"]));
    let previous = second["meta"]["previous_token"]
        .as_str()
        .unwrap()
        .to_string();
    let back = x_page(&f, format!("&pagination_token={previous}")).await;
    assert_eq!(
        x_ids(&back),
        x_ids(&first),
        "previous_token goes back to the first page"
    );
    assert_eq!(back["meta"]["next_token"], first["meta"]["next_token"]);
    // The last page: below it nothing, above it the second page.
    let next = second["meta"]["next_token"].as_str().unwrap().to_string();
    let third = x_page(&f, format!("&pagination_token={next}")).await;
    assert_eq!(x_ids(&third), strs(&["2", "1"]));
    assert!(third["meta"].get("next_token").is_none());
    let previous = third["meta"]["previous_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        x_ids(&x_page(&f, format!("&pagination_token={previous}")).await),
        x_ids(&second)
    );
}

#[tokio::test]
async fn x_expansions_fields_and_user_lookups_agree() {
    let f = fixture("twitter", &[1, 2]).await;
    let page = f
        .get_json("/2/users/1/tweets?tweet.fields=conversation_id,lang,public_metrics,author_id,created_at&expansions=author_id&user.fields=created_at")
        .await;
    let tweet = &page["data"][0];
    assert_eq!(tweet["conversation_id"], tweet["id"]);
    assert_eq!(tweet["lang"], "en");
    assert_eq!(tweet["public_metrics"]["like_count"], 0);
    assert_eq!(tweet["author_id"], "1000007");
    let users = page["includes"]["users"].as_array().unwrap();
    assert_eq!(users.len(), 1, "one author, included once");
    let by_id = f.get_json("/2/users/1000007?user.fields=created_at").await;
    let by_name = f
        .get_json("/2/users/by/username/USER7?user.fields=created_at")
        .await;
    assert_eq!((&by_id["data"], &by_name["data"]), (&users[0], &users[0]));
    assert!(users[0]["created_at"].is_string());
    // The author's own timeline holds only its posts; the reader's holds all.
    assert_eq!(
        x_ids(&f.get_json("/2/users/1000008/tweets").await),
        Vec::<String>::new()
    );
    assert_eq!(
        f.get_json("/2/users/me").await["data"]["username"],
        "snowleak"
    );
    let many = f.get_json("/2/users?ids=1000007,5").await;
    assert_eq!(many["data"].as_array().unwrap().len(), 1);
    assert_eq!(many["errors"][0]["resource_id"], "5");
    assert_eq!(f.get("/2/nothing/here").await.status(), 404);
}

/// X's time bounds are ID bounds: a post is inside them when the time in
/// its Snowflake ID is, which is its `created_at`.
#[tokio::test]
async fn x_time_bounds_and_recent_searchs_end_time_lag() {
    let layout = since_id::id::Layout::twitter();
    let at = |t: i64| layout.min_id_at(t);
    let (old, recent) = (at(POSTED), at(NOW - 1000));
    let f = fixture("twitter", &[]).await;
    {
        let mut sim = f.sim.lock().unwrap();
        sim.inject(status(old.0, "local"));
        sim.inject(status(recent.0, "local"));
    }
    let (old, recent) = (old.0.to_string(), recent.0.to_string());
    // POSTED is 2018-10-10T20:19:24Z.
    let bounded = "/2/users/1/tweets?start_time=2018-10-10T20:19:24Z&end_time=2018-10-10T20:19:25Z";
    assert_eq!(
        x_ids(&f.get_json(bounded).await),
        std::slice::from_ref(&old)
    );
    let after = "/2/users/1/tweets?start_time=2018-10-10T20:19:25Z";
    assert_eq!(
        x_ids(&f.get_json(after).await),
        std::slice::from_ref(&recent)
    );
    // Search: end_time defaults to 30 s ago, so the post of 1 s ago is not there yet.
    assert_eq!(
        x_ids(&f.get_json("/2/tweets/search/recent?query=a").await),
        std::slice::from_ref(&old)
    );
    let now = since_id::time::rfc3339_ms(NOW);
    let explicit = format!("/2/tweets/search/recent?query=a&end_time={now}");
    assert_eq!(x_ids(&f.get_json(&explicit).await), [recent, old]);
    let both = "/2/tweets/search/recent?query=a&since_id=1&start_time=2018-10-10T20:19:25Z";
    assert_eq!(f.get(both).await.status(), 400);
    assert_eq!(
        f.get("/2/users/1/tweets?end_time=yesterday").await.status(),
        400
    );
}

/// The ID window a response's time bounds left is marked on it for a
/// recording (`Covered`); a response bounded by cursors alone is not marked.
#[tokio::test]
async fn x_responses_are_marked_with_the_id_window_their_time_bounds_left() {
    use crate::server::Covered;
    let layout = since_id::id::Layout::twitter();
    let mut config = SimConfig::profile("twitter").unwrap();
    config.rate_per_s = 0.0;
    let lag = config.search_end_lag_ms as i64;
    let sim = Arc::new(Mutex::new(Simulator::new(config, 1, NOW)));
    // The mark is never sent: a layer, as the recording's, reads it into a header.
    let app = router_with_clock(sim, RateLimits::default(), Arc::new(|| NOW)).layer(
        axum::middleware::from_fn(
            |request: axum::extract::Request, next: axum::middleware::Next| async move {
                let mut response = next.run(request).await;
                let mark = response.extensions().get::<Covered>().copied();
                if let Some(c) = mark {
                    let text = format!("{:?},{:?}", c.after.map(|i| i.0), c.before.map(|i| i.0));
                    response
                        .headers_mut()
                        .insert("x-covered", text.parse().unwrap());
                }
                response
            },
        ),
    );
    let server = RunningServer::start(app).await.unwrap();
    let http = client();
    let covered = |path: &str| {
        let url = server.url(path);
        let http = http.clone();
        async move {
            let response = http.get(url).send().await.unwrap();
            assert_eq!(response.status(), 200);
            response
                .headers()
                .get("x-covered")
                .map(|v| v.to_str().unwrap().to_string())
        }
    };
    let text = |c: Covered| {
        Some(format!(
            "{:?},{:?}",
            c.after.map(|i| i.0),
            c.before.map(|i| i.0)
        ))
    };
    let lagged = Covered {
        after: None,
        before: Some(layout.min_id_at(NOW - lag)),
    };
    assert_eq!(
        covered("/2/tweets/search/recent?query=a&since_id=5").await,
        text(lagged)
    );
    assert_eq!(covered("/2/users/1/tweets?since_id=5").await, None);
    // 2018-10-10T20:19:24Z inclusive, 20:19:25Z exclusive.
    let window = Covered {
        after: Some(Id(layout.min_id_at(POSTED).0 - 1)),
        before: Some(layout.min_id_at(POSTED + 1000)),
    };
    let bounded = "/2/users/1/tweets?start_time=2018-10-10T20:19:24Z&end_time=2018-10-10T20:19:25Z";
    assert_eq!(covered(bounded).await, text(window));
}

#[tokio::test]
async fn nodeinfo_names_the_profiles_software() {
    for (profile, software) in [("mastodon", "mastodon"), ("misskey", "misskey")] {
        let f = fixture(profile, &[]).await;
        let links = f.get_json("/.well-known/nodeinfo").await;
        assert_eq!(
            links["links"][0]["rel"],
            "http://nodeinfo.diaspora.software/ns/schema/2.0"
        );
        let href = links["links"][0]["href"].as_str().unwrap();
        assert_eq!(href, f.server.url("/nodeinfo/2.0"));
        let info = f.get_json("/nodeinfo/2.0").await;
        assert_eq!(info["software"]["name"], software, "{profile}");
        assert_eq!(info["version"], "2.0");
    }
}

#[tokio::test]
async fn misskey_meta_and_404s_in_each_apis_shape() {
    let f = fixture("misskey", &[]).await;
    let meta = f.post("/api/meta", serde_json::json!({})).await;
    assert_eq!(meta.status(), 200);
    let meta: Value = meta.json().await.unwrap();
    assert!(meta["version"].is_string() && meta["features"]["localTimeline"] == true);
    let unknown = f.post("/api/no-such-endpoint", serde_json::json!({})).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.json::<Value>().await.unwrap()["error"]["code"],
        "UNKNOWN_API_ENDPOINT"
    );
    let mastodon = f.get("/api/v1/no/such/thing").await;
    assert_eq!(mastodon.status(), 404);
    assert_eq!(
        mastodon.json::<Value>().await.unwrap()["error"],
        "Record not found"
    );
}

/// Every field of `fixture` is in `served`, with the same JSON type (null
/// matches anything: the documented example may have a value where the
/// simulator has none, or the other way round); arrays compare first elements.
fn assert_shape(fixture: &Value, served: &Value, at: &str) {
    match (fixture, served) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, value) in want {
                let Some(other) = got.get(key) else {
                    panic!("{at}.{key} is missing from the simulator's answer");
                };
                assert_shape(value, other, &format!("{at}.{key}"));
            }
        }
        (Value::Array(want), Value::Array(got)) => {
            if let (Some(a), Some(b)) = (want.first(), got.first()) {
                assert_shape(a, b, &format!("{at}[0]"));
            }
        }
        (Value::Null, _) | (_, Value::Null) => {}
        (a, b) => assert_eq!(
            std::mem::discriminant(a),
            std::mem::discriminant(b),
            "{at}: {a} versus {b}"
        ),
    }
}

fn fixture_json(path: &str) -> Value {
    // The API documentation's examples, shared with the client side's tests.
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(path);
    serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap()
}

#[tokio::test]
async fn fixtures_have_the_served_shape() {
    let x = fixture("twitter", &(1..=12).collect::<Vec<_>>()).await;
    let fields = "tweet.fields=author_id,created_at,conversation_id,lang,public_metrics";
    let expanded = format!(
        "/2/users/1/tweets?max_results=5&pagination_token=p9&{fields}&expansions=author_id&user.fields=created_at"
    );
    for (file, path) in [
        ("x/timeline.json", "/2/users/1/tweets?max_results=5"),
        ("x/empty.json", "/2/users/1/tweets?since_id=12"),
        ("x/timeline_expanded.json", expanded.as_str()),
        ("x/user_by_username.json", "/2/users/by/username/user7"),
        ("x/user_missing.json", "/2/users/by/username/nosuchuser"),
    ] {
        assert_shape(&fixture_json(file), &x.get_json(path).await, file);
    }
    let discord = fixture_with("discord", &[1 << 22], "2/1m".parse().unwrap(), 3_600_000).await;
    for (file, path) in [
        ("discord/user.json", "/api/v10/users/1000007"),
        ("discord/channel.json", "/api/v10/channels/42"),
    ] {
        assert_shape(&fixture_json(file), &discord.get_json(path).await, file);
    }
    let limited = discord.get("/api/v10/users/@me").await;
    assert_eq!(limited.status(), 429);
    let body = limited.json().await.unwrap();
    assert_shape(
        &fixture_json("discord/rate_limited.json"),
        &body,
        "discord/rate_limited.json",
    );
    let mastodon = fixture("mastodon", &[]).await;
    for (file, path) in [
        ("mastodon/nodeinfo_links.json", "/.well-known/nodeinfo"),
        ("mastodon/nodeinfo.json", "/nodeinfo/2.0"),
    ] {
        assert_shape(&fixture_json(file), &mastodon.get_json(path).await, file);
    }
    let misskey = fixture("misskey", &[]).await;
    let meta = misskey.post("/api/meta", serde_json::json!({})).await;
    let meta = meta.json().await.unwrap();
    assert_shape(
        &fixture_json("misskey/meta.json"),
        &meta,
        "misskey/meta.json",
    );
}

/// Each account ID of a page, with the account object it stands for: one object per ID.
fn accounts_by_id(
    items: &Value,
    id_key: &str,
    object_key: &str,
) -> std::collections::BTreeMap<String, Value> {
    let mut accounts = std::collections::BTreeMap::new();
    for item in items.as_array().unwrap() {
        let id = item[id_key].as_str().unwrap().to_string();
        let account = item[object_key].clone();
        let known = accounts
            .entry(id.clone())
            .or_insert_with(|| account.clone());
        assert_eq!(known, &account, "account {id} has two objects");
    }
    accounts
}

#[tokio::test]
async fn one_account_object_per_id_for_local_and_remote_authors() {
    // Author 7 posts everything; even IDs are local, odd ones remote.
    let ids: Vec<u128> = (1..=6).map(|n| (n << 16) | (n & 1)).collect();
    let f = fixture("mastodon", &ids).await;
    let page = f.get_json("/api/v1/timelines/public").await;
    let statuses: Vec<Value> = page
        .as_array()
        .unwrap()
        .iter()
        .map(|s| serde_json::json!({"account_id": s["account"]["id"], "account": s["account"]}))
        .collect();
    let accounts = accounts_by_id(&Value::Array(statuses), "account_id", "account");
    assert_eq!(accounts.len(), 2, "the local and the remote user7");
    let misskey_ids: Vec<u128> = (1..=6).map(|n| (n << 30) | (n & 1)).collect();
    let m = fixture("misskey", &misskey_ids).await;
    let notes = m
        .post(
            "/api/notes/global-timeline",
            serde_json::json!({"limit": 100}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(accounts_by_id(&notes, "userId", "user").len(), 2);
}

// ---------------------------------------------------------------- login and home (issue 23, item 8)

/// A server on `profile` holding one local status by each of authors 0..40,
/// status `i + 1` (in ID order) by author `i`; and the reader's follow set.
async fn authored(profile: &str) -> (Fixture, std::collections::BTreeSet<u32>) {
    let f = fixture(profile, &[]).await;
    let layout = SimConfig::profile(profile).unwrap().layout();
    {
        let mut sim = f.sim.lock().unwrap();
        for author in 0..40u32 {
            let mut s = status(0, "local");
            s.id = layout.min_id_at(POSTED + i64::from(author) * 1000);
            s.author = author;
            sim.inject(s);
        }
    }
    let follows = f.sim.lock().unwrap().follows();
    let follows: std::collections::BTreeSet<u32> =
        follows.iter().copied().filter(|&a| a < 40).collect();
    (f, follows)
}

/// The author numbers of a page, from `user{n}` usernames at `path`.
fn authors_of(page: &[Value], path: &[&str]) -> std::collections::BTreeSet<u32> {
    page.iter()
        .map(|item| {
            let name = path.iter().fold(item, |v, key| &v[*key]);
            name.as_str()
                .unwrap()
                .trim_start_matches("user")
                .parse()
                .unwrap()
        })
        .collect()
}

#[tokio::test]
async fn login_and_home_endpoints_serve_the_reader_and_its_follow_set() {
    // Mastodon: verify_credentials, then the home timeline.
    let (f, follows) = authored("mastodon").await;
    assert!(!follows.is_empty() && follows.len() < 40, "{follows:?}");
    let me = f.get_json("/api/v1/accounts/verify_credentials").await;
    assert_eq!(
        (me["id"].as_str(), me["username"].as_str()),
        (Some("1"), Some("snowleak"))
    );
    let home = f.get_json("/api/v1/timelines/home?limit=40").await;
    assert_eq!(
        authors_of(home.as_array().unwrap(), &["account", "username"]),
        follows
    );
    let public = f.get_json("/api/v1/timelines/public?limit=40").await;
    assert_eq!(
        public.as_array().unwrap().len(),
        40,
        "public serves everyone"
    );

    // Misskey: `i`, then notes/timeline.
    let (f, follows) = authored("misskey").await;
    let me: Value = f
        .post("/api/i", serde_json::json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["username"], "snowleak");
    let home: Value = f
        .post("/api/notes/timeline", serde_json::json!({"limit": 100}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        authors_of(home.as_array().unwrap(), &["user", "username"]),
        follows
    );

    // Twitter v1.1 and X v2 (one profile serves both).
    let (f, follows) = authored("twitter").await;
    let me = f.get_json("/1.1/account/verify_credentials.json").await;
    assert_eq!(
        (me["id_str"].as_str(), me["screen_name"].as_str()),
        (Some("1"), Some("snowleak"))
    );
    let home = f
        .get_json("/1.1/statuses/home_timeline.json?count=200")
        .await;
    assert_eq!(
        authors_of(home.as_array().unwrap(), &["user", "screen_name"]),
        follows
    );
    let home = f
        .get_json("/2/users/1/timelines/reverse_chronological?max_results=100&expansions=author_id")
        .await;
    assert_eq!(
        authors_of(home["includes"]["users"].as_array().unwrap(), &["username"]),
        follows
    );
    assert_eq!(home["data"].as_array().unwrap().len(), follows.len());
    let other = f
        .get("/2/users/1000003/timelines/reverse_chronological")
        .await;
    assert_eq!(other.status(), 403, "only the reader has a home timeline");

    // Discord: the guilds, the guild and its channels lead to a channel's messages.
    let f = fixture("discord", &[1 << 22]).await;
    let guilds = f.get_json("/api/v10/users/@me/guilds").await;
    let guild = guilds[0]["id"].as_str().unwrap().to_string();
    assert_eq!(
        f.get_json(&format!("/api/v10/guilds/{guild}")).await["id"],
        guild.as_str()
    );
    let channels = f
        .get_json(&format!("/api/v10/guilds/{guild}/channels"))
        .await;
    let channel = channels[0]["id"].as_str().unwrap();
    let messages = f
        .get_json(&format!("/api/v10/channels/{channel}/messages"))
        .await;
    assert_eq!(messages.as_array().unwrap().len(), 1);
    let unknown = f.get("/api/v10/guilds/99/channels").await;
    assert_eq!(unknown.status(), 404);
}
