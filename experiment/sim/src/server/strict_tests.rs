//! The documents real clients parse, parsed by strict models: each API's
//! entities as its own reference describes them, every attribute documented
//! as always present a required field of the right type (a nullable one a
//! [`Nullable`], which must be present, `null` or a value), deserialising
//! the simulator's real HTTP responses. A field the simulator leaves out, or
//! serves with another type, fails here before a client stops at it
//! (issue 33: `KeyError: 'author_id'`, `KeyError: 'description'`, an
//! instance without `configuration.polls`). Unknown fields are accepted, as
//! clients accept them.

// A model's fields are checked by parsing them; the tests read only some.
#![allow(dead_code)]

use crate::model::{SimStatus, Simulator};
use crate::profile::SimConfig;
use crate::server::{RateLimits, RunningServer, router_with_clock};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use since_id::id::Id;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

const NOW: i64 = 1_700_000_000_000;
const POSTED: i64 = NOW - 60_000;

/// A server on `profile` holding statuses by authors 0..40, one each, local
/// and remote alternately, at IDs of increasing time (some of them followed
/// by the reader, so every home timeline has some).
async fn server(profile: &str) -> RunningServer {
    let mut config = SimConfig::profile(profile).unwrap();
    config.rate_per_s = 0.0;
    let layout = config.layout();
    let mut sim = Simulator::new(config, 1, NOW);
    for author in 0..40u32 {
        let id = layout.min_id_at(POSTED + i64::from(author) * 1000);
        sim.inject(SimStatus {
            id: Id(id.0 + 1),
            id_time_ms: 0,
            posted_at_ms: POSTED + i64::from(author) * 1000,
            visible_at_ms: NOW,
            deleted_at_ms: None,
            origin: if author % 2 == 0 { "local" } else { "remote" }.into(),
            author,
        });
    }
    let app = router_with_clock(
        Arc::new(Mutex::new(sim)),
        RateLimits::default(),
        Arc::new(|| NOW),
    );
    RunningServer::start(app).await.unwrap()
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// `GET path`, 200, its body parsed by `T` (the error names the missing or
/// mistyped field).
async fn get<T: DeserializeOwned>(
    s: &RunningServer,
    path: &str,
) -> (T, reqwest::header::HeaderMap) {
    let response = http().get(s.url(path)).send().await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap();
    let parsed = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "{path}: {e}\n{}",
            String::from_utf8_lossy(&body[..body.len().min(2000)])
        )
    });
    (parsed, headers)
}

async fn post<T: DeserializeOwned>(s: &RunningServer, path: &str, body: Value) -> T {
    let response = http().post(s.url(path)).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    let body = response.bytes().await.unwrap();
    serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "{path}: {e}\n{}",
            String::from_utf8_lossy(&body[..body.len().min(2000)])
        )
    })
}

/// An attribute documented as nullable: it must be present, `null` or a `T`.
/// (serde lets an absent `Option` pass as `None`; this does not.)
#[derive(Debug)]
struct Nullable<T>(Option<T>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Nullable<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Nullable<T>, D::Error> {
        // `Value` asks for any value, so an absent field is an error.
        match Value::deserialize(d)? {
            Value::Null => Ok(Nullable(None)),
            v => T::deserialize(v)
                .map(|t| Nullable(Some(t)))
                .map_err(serde::de::Error::custom),
        }
    }
}

/// A date in RFC 3339 (Mastodon's and X's), checked when parsed.
#[derive(Debug)]
struct Rfc3339(chrono::DateTime<chrono::FixedOffset>);

impl<'de> Deserialize<'de> for Rfc3339 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rfc3339, D::Error> {
        let text = String::deserialize(d)?;
        chrono::DateTime::parse_from_rfc3339(&text)
            .map(Rfc3339)
            .map_err(|e| serde::de::Error::custom(format!("{text}: {e}")))
    }
}

/// Twitter v1.1's date, `Wed Oct 10 20:19:24 +0000 2018`.
#[derive(Debug)]
struct TwitterDate(chrono::DateTime<chrono::FixedOffset>);

impl<'de> Deserialize<'de> for TwitterDate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TwitterDate, D::Error> {
        let text = String::deserialize(d)?;
        chrono::DateTime::parse_from_str(&text, "%a %b %d %H:%M:%S %z %Y")
            .map(TwitterDate)
            .map_err(|e| serde::de::Error::custom(format!("{text}: {e}")))
    }
}

// ---------------------------------------------------------------- X API v2

/// A post (docs.x.com/x-api/fundamentals/data-dictionary, "Post"; the
/// default fields `id`, `text`, `edit_history_tweet_ids`), with the field
/// the `author_id` expansion links through.
#[derive(Deserialize, Debug)]
struct XPostLinked {
    id: String,
    text: String,
    edit_history_tweet_ids: Vec<String>,
    author_id: String,
}

/// A post with every field `tweet.fields` asked for.
#[derive(Deserialize, Debug)]
struct XPostFull {
    id: String,
    text: String,
    edit_history_tweet_ids: Vec<String>,
    author_id: String,
    created_at: Rfc3339,
    conversation_id: String,
    lang: String,
    possibly_sensitive: bool,
    reply_settings: String,
    public_metrics: XPostMetrics,
    edit_controls: XEditControls,
}

#[derive(Deserialize, Debug)]
struct XPostMetrics {
    retweet_count: u64,
    reply_count: u64,
    like_count: u64,
    quote_count: u64,
}

#[derive(Deserialize, Debug)]
struct XEditControls {
    edits_remaining: u64,
    is_edit_eligible: bool,
    editable_until: Rfc3339,
}

/// A user (docs.x.com/x-api/fundamentals/data-dictionary, "User"): `id`,
/// `name`, `username` always; the rest as `user.fields` asks.
#[derive(Deserialize, Debug)]
struct XUser {
    id: String,
    name: String,
    username: String,
}

#[derive(Deserialize, Debug)]
struct XUserFull {
    id: String,
    name: String,
    username: String,
    created_at: Rfc3339,
    description: String,
    protected: bool,
    verified: bool,
    verified_type: String,
    profile_image_url: String,
    url: String,
    public_metrics: XUserMetrics,
}

#[derive(Deserialize, Debug)]
struct XUserMetrics {
    followers_count: u64,
    following_count: u64,
    tweet_count: u64,
    listed_count: u64,
}

/// A timeline response (docs.x.com/x-api/posts/timelines, "GET
/// /2/users/{id}/tweets": `data`, `includes`, `meta`).
#[derive(Deserialize, Debug)]
struct XPage<P, U> {
    data: Vec<P>,
    includes: XIncludes<P, U>,
    meta: XMeta,
}

#[derive(Deserialize, Debug)]
struct XIncludes<P, U> {
    users: Vec<U>,
    #[serde(default = "Vec::new")]
    tweets: Vec<P>,
}

#[derive(Deserialize, Debug)]
struct XMeta {
    newest_id: String,
    oldest_id: String,
    result_count: u64,
}

#[tokio::test]
async fn x_posts_carry_the_field_each_expansion_links_through_and_includes_hold_its_objects() {
    let s = server("twitter").await;
    // No `tweet.fields`: X still puts `author_id` in each post of `data`.
    for path in [
        "/2/users/1/tweets?expansions=author_id",
        "/2/tweets/search/recent?query=snowleak&expansions=author_id,referenced_tweets.id",
        "/2/users/1/timelines/reverse_chronological?expansions=author_id",
    ] {
        let (page, _) = get::<XPage<XPostLinked, XUser>>(&s, path).await;
        assert!(!page.data.is_empty(), "{path}");
        for post in &page.data {
            assert!(!post.text.is_empty() && post.edit_history_tweet_ids == [post.id.clone()]);
            let author = page.includes.users.iter().find(|u| u.id == post.author_id);
            let author =
                author.unwrap_or_else(|| panic!("{path}: {} not included", post.author_id));
            assert_eq!(
                author.username,
                format!("user{}", author.id.parse::<u64>().unwrap() - 1_000_000)
            );
            assert!(!author.name.is_empty());
        }
        assert_eq!(page.meta.result_count as usize, page.data.len());
    }
    // Every field asked for, and each post's edit history (the post itself).
    let path = "/2/users/1/tweets?max_results=5&expansions=author_id,edit_history_tweet_ids\
        &tweet.fields=created_at,author_id,conversation_id,lang,public_metrics,possibly_sensitive,reply_settings,edit_controls\
        &user.fields=created_at,description,protected,verified,verified_type,profile_image_url,url,public_metrics";
    let (page, _) = get::<XPage<XPostFull, XUserFull>>(&s, path).await;
    assert_eq!(page.data.len(), 5);
    let history: Vec<&str> = page.includes.tweets.iter().map(|t| t.id.as_str()).collect();
    let posts: Vec<&str> = page.data.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(history, posts);
    assert_eq!(page.includes.users.len(), 5, "five authors, each once");
    // A look-up serves the same user object as the includes.
    let (me, _) = get::<BTreeMap<String, XUserFull>>(&s, "/2/users/me?user.fields=created_at,description,protected,verified,verified_type,profile_image_url,url,public_metrics").await;
    assert_eq!(me["data"].username, "snowleak");
}

#[tokio::test]
async fn x_expansions_that_link_nothing_add_no_field_and_no_includes() {
    let s = server("twitter").await;
    let (page, _) = get::<Value>(
        &s,
        "/2/users/1/tweets?expansions=attachments.media_keys,geo.place_id,in_reply_to_user_id",
    )
    .await;
    assert!(page.get("includes").is_none(), "{page}");
    let post = page["data"][0].as_object().unwrap();
    let mut keys: Vec<&str> = post.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["edit_history_tweet_ids", "id", "text"]);
}

// ---------------------------------------------------------------- Twitter v1.1

/// The user object (developer.x.com/en/docs/x-api/v1/data-dictionary/object-model/user):
/// every attribute not marked deprecated or enterprise-only.
#[derive(Deserialize, Debug)]
struct V1User {
    id: u64,
    id_str: String,
    name: String,
    screen_name: String,
    location: Nullable<String>,
    url: Nullable<String>,
    description: Nullable<String>,
    protected: bool,
    verified: bool,
    followers_count: u64,
    friends_count: u64,
    listed_count: u64,
    favourites_count: u64,
    statuses_count: u64,
    created_at: TwitterDate,
    profile_image_url_https: String,
    default_profile: bool,
    default_profile_image: bool,
}

/// The entities object (developer.x.com/en/docs/x-api/v1/data-dictionary/object-model/entities):
/// its four arrays are always present, empty when the text has none.
#[derive(Deserialize, Debug)]
struct V1Entities {
    hashtags: Vec<Value>,
    symbols: Vec<Value>,
    user_mentions: Vec<Value>,
    urls: Vec<Value>,
}

/// The tweet object (developer.x.com/en/docs/x-api/v1/data-dictionary/object-model/tweet),
/// in the default (compatibility) mode: `text`.
#[derive(Deserialize, Debug)]
struct V1Tweet {
    created_at: TwitterDate,
    id: u64,
    id_str: String,
    text: String,
    source: String,
    truncated: bool,
    in_reply_to_status_id: Nullable<u64>,
    in_reply_to_status_id_str: Nullable<String>,
    in_reply_to_user_id: Nullable<u64>,
    in_reply_to_user_id_str: Nullable<String>,
    in_reply_to_screen_name: Nullable<String>,
    user: V1User,
    coordinates: Nullable<Value>,
    place: Nullable<Value>,
    is_quote_status: bool,
    retweet_count: u64,
    favorite_count: u64,
    entities: V1Entities,
    favorited: Nullable<bool>,
    retweeted: bool,
    lang: Nullable<String>,
}

/// The same under `tweet_mode=extended`: `full_text` and
/// `display_text_range` in place of `text` (developer.x.com, "Tweet
/// updates": docs/x-api/v1/data-dictionary/guides/tweets-with-extended-text).
#[derive(Deserialize, Debug)]
struct V1ExtendedTweet {
    id_str: String,
    full_text: String,
    display_text_range: [usize; 2],
    truncated: bool,
    source: String,
    entities: V1Entities,
    user: V1User,
    text: Option<Value>,
}

#[tokio::test]
async fn twitter_tweets_and_users_have_every_attribute_of_the_data_dictionary() {
    let s = server("twitter").await;
    for path in [
        "/1.1/lists/statuses.json?list_id=1&count=200",
        "/1.1/statuses/home_timeline.json?count=200",
    ] {
        let (tweets, _) = get::<Vec<V1Tweet>>(&s, path).await;
        assert!(!tweets.is_empty(), "{path}");
        for t in &tweets {
            assert_eq!(t.id.to_string(), t.id_str);
            assert_eq!(t.user.id.to_string(), t.user.id_str);
            assert_eq!(t.user.screen_name, format!("user{}", t.user.id - 1_000_000));
            assert!(t.source.starts_with("<a href="), "{}", t.source);
            // Whole seconds: the posting times, truncated.
            let posted = t.created_at.0.timestamp_millis();
            assert!((POSTED / 1000 * 1000..NOW).contains(&posted), "{posted}");
        }
    }
    let (tweets, _) =
        get::<Vec<V1ExtendedTweet>>(&s, "/1.1/lists/statuses.json?list_id=1&tweet_mode=extended")
            .await;
    for t in &tweets {
        assert!(t.text.is_none(), "extended mode has no `text`");
        assert_eq!(t.display_text_range, [0, t.full_text.chars().count()]);
        assert!(t.full_text.contains(&t.id_str));
    }
    // The compatibility mode is still served after the extended one (each cached apart).
    let (again, _) = get::<Vec<V1Tweet>>(&s, "/1.1/lists/statuses.json?list_id=1").await;
    assert_eq!(again.len(), tweets.len());
    let (me, _) = get::<V1User>(&s, "/1.1/account/verify_credentials.json").await;
    assert_eq!((me.id, me.screen_name.as_str()), (1, "snowleak"));
    assert!(
        me.friends_count > 0,
        "the reader follows its home timeline's authors"
    );
}

// ---------------------------------------------------------------- Mastodon

/// The Account entity (docs.joinmastodon.org/entities/Account/): every
/// attribute not marked optional.
#[derive(Deserialize, Debug)]
struct Account {
    id: String,
    username: String,
    acct: String,
    url: String,
    display_name: String,
    note: String,
    avatar: String,
    avatar_static: String,
    header: String,
    header_static: String,
    locked: bool,
    fields: Vec<Value>,
    emojis: Vec<Value>,
    bot: bool,
    group: bool,
    discoverable: Nullable<bool>,
    created_at: Rfc3339,
    last_status_at: Nullable<String>,
    statuses_count: u64,
    followers_count: u64,
    following_count: u64,
}

/// The Status entity (docs.joinmastodon.org/entities/Status/): every
/// attribute not marked optional.
#[derive(Deserialize, Debug)]
struct Status {
    id: String,
    uri: String,
    created_at: Rfc3339,
    account: Account,
    content: String,
    visibility: String,
    sensitive: bool,
    spoiler_text: String,
    media_attachments: Vec<Value>,
    mentions: Vec<Value>,
    tags: Vec<Tag>,
    emojis: Vec<Value>,
    reblogs_count: u64,
    favourites_count: u64,
    replies_count: u64,
    url: Nullable<String>,
    in_reply_to_id: Nullable<String>,
    in_reply_to_account_id: Nullable<String>,
    reblog: Nullable<Value>,
    poll: Nullable<Value>,
    card: Nullable<Value>,
    language: Nullable<String>,
    edited_at: Nullable<String>,
}

#[derive(Deserialize, Debug)]
struct Tag {
    name: String,
    url: String,
}

/// `configuration`'s limits, shared by both instance entities
/// (docs.joinmastodon.org/entities/V1_Instance/#configuration and
/// /entities/Instance/#configuration).
#[derive(Deserialize, Debug)]
struct Limits {
    accounts: AccountLimits,
    statuses: StatusLimits,
    media_attachments: MediaLimits,
    polls: PollLimits,
}

#[derive(Deserialize, Debug)]
struct AccountLimits {
    max_featured_tags: u64,
}

#[derive(Deserialize, Debug)]
struct StatusLimits {
    max_characters: u64,
    max_media_attachments: u64,
    characters_reserved_per_url: u64,
}

#[derive(Deserialize, Debug)]
struct MediaLimits {
    supported_mime_types: Vec<String>,
    image_size_limit: u64,
    image_matrix_limit: u64,
    video_size_limit: u64,
    video_frame_rate_limit: u64,
    video_matrix_limit: u64,
}

#[derive(Deserialize, Debug)]
struct PollLimits {
    max_options: u64,
    max_characters_per_option: u64,
    min_expiration: u64,
    max_expiration: u64,
}

/// The V1::Instance entity (docs.joinmastodon.org/entities/V1_Instance/).
#[derive(Deserialize, Debug)]
struct InstanceV1 {
    uri: String,
    title: String,
    short_description: String,
    description: String,
    email: String,
    version: String,
    urls: UrlsV1,
    stats: Stats,
    thumbnail: Nullable<String>,
    languages: Vec<String>,
    registrations: bool,
    approval_required: bool,
    invites_enabled: bool,
    configuration: Limits,
    contact_account: Nullable<Account>,
    rules: Vec<Value>,
}

#[derive(Deserialize, Debug)]
struct UrlsV1 {
    streaming_api: String,
}

#[derive(Deserialize, Debug)]
struct Stats {
    user_count: u64,
    status_count: u64,
    domain_count: u64,
}

/// The Instance entity (docs.joinmastodon.org/entities/Instance/), as 4.3
/// serves it (`api_versions`: 4.3.0).
#[derive(Deserialize, Debug)]
struct InstanceV2 {
    domain: String,
    title: String,
    version: String,
    source_url: String,
    description: String,
    usage: Value,
    thumbnail: Thumbnail,
    languages: Vec<String>,
    configuration: ConfigurationV2,
    registrations: Registrations,
    api_versions: ApiVersions,
    contact: Contact,
    rules: Vec<Value>,
}

#[derive(Deserialize, Debug)]
struct Thumbnail {
    url: String,
}

#[derive(Deserialize, Debug)]
struct ConfigurationV2 {
    urls: UrlsV2,
    vapid: Vapid,
    #[serde(flatten)]
    limits: Limits,
    translation: Translation,
}

#[derive(Deserialize, Debug)]
struct UrlsV2 {
    streaming: String,
}

#[derive(Deserialize, Debug)]
struct Vapid {
    public_key: String,
}

#[derive(Deserialize, Debug)]
struct Translation {
    enabled: bool,
}

#[derive(Deserialize, Debug)]
struct Registrations {
    enabled: bool,
    approval_required: bool,
    message: Nullable<String>,
}

#[derive(Deserialize, Debug)]
struct ApiVersions {
    mastodon: u64,
}

#[derive(Deserialize, Debug)]
struct Contact {
    email: String,
    account: Nullable<Account>,
}

/// The Notification entity (docs.joinmastodon.org/entities/Notification/).
#[derive(Deserialize, Debug)]
struct Notification {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    group_key: String,
    created_at: Rfc3339,
    account: Account,
}

/// The Preferences entity (docs.joinmastodon.org/entities/Preferences/).
#[derive(Deserialize, Debug)]
struct Preferences {
    #[serde(rename = "posting:default:visibility")]
    visibility: String,
    #[serde(rename = "posting:default:sensitive")]
    sensitive: bool,
    #[serde(rename = "posting:default:language")]
    language: Nullable<String>,
    #[serde(rename = "reading:expand:media")]
    expand_media: String,
    #[serde(rename = "reading:expand:spoilers")]
    expand_spoilers: bool,
}

#[tokio::test]
async fn mastodon_statuses_accounts_and_instances_parse_as_the_entities() {
    let s = server("mastodon").await;
    for path in [
        "/api/v1/timelines/public?limit=40",
        "/api/v1/timelines/home",
        "/api/v1/timelines/tag/snowleak?local=true",
    ] {
        let (statuses, _) = get::<Vec<Status>>(&s, path).await;
        assert!(!statuses.is_empty(), "{path}");
        for status in &statuses {
            assert_eq!(status.tags[0].name, "snowleak");
            let posted = status.created_at.0.timestamp_millis();
            assert!((POSTED..NOW).contains(&posted), "{posted}");
        }
    }
    let (me, _) = get::<Account>(&s, "/api/v1/accounts/verify_credentials").await;
    assert_eq!(me.username, "snowleak");
    for path in ["/api/v1/instance", "/api/v1/instance/"] {
        let (v1, _) = get::<InstanceV1>(&s, path).await;
        assert_eq!(v1.version, super::mastodon::VERSION);
        assert!(v1.configuration.polls.max_options >= 2);
    }
    let (v2, _) = get::<InstanceV2>(&s, "/api/v2/instance").await;
    assert_eq!(v2.api_versions.mastodon, 2, "Mastodon 4.3's API version");
    assert!(v2.configuration.urls.streaming.starts_with("ws://"));
    let (prefs, _) = get::<Preferences>(&s, "/api/v1/preferences").await;
    assert_eq!(prefs.visibility, "public");
}

/// The `Link` header's target for `rel`.
fn link(headers: &reqwest::header::HeaderMap, rel: &str) -> Option<String> {
    let link = headers.get("link")?.to_str().unwrap().to_string();
    link.split(", ")
        .find(|part| part.ends_with(&format!("rel=\"{rel}\"")))
        .map(|part| part[1..part.find('>').unwrap()].to_string())
}

#[tokio::test]
async fn mastodon_notifications_are_paged_and_linked_as_a_timeline_is() {
    let s = server("mastodon").await;
    let (all, headers) = get::<Vec<Notification>>(&s, "/api/v1/notifications").await;
    let ids: Vec<&str> = all.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["3", "2", "1"], "newest first");
    assert!(
        all.iter()
            .all(|n| n.kind == "follow" && n.group_key == format!("ungrouped-{}", n.id))
    );
    // Paging down with `next`, to the end.
    let next = link(&headers, "next").unwrap();
    assert!(next.ends_with("max_id=1"), "{next}");
    let (page, _) = get::<Vec<Notification>>(&s, "/api/v1/notifications?limit=2").await;
    let (rest, headers) = get::<Vec<Notification>>(
        &s,
        &link_path(
            &link(
                &{
                    let r = http()
                        .get(s.url("/api/v1/notifications?limit=2"))
                        .send()
                        .await
                        .unwrap();
                    r.headers().clone()
                },
                "next",
            )
            .unwrap(),
        ),
    )
    .await;
    assert_eq!(page.len() + rest.len(), 3);
    assert_eq!(rest[0].id, "1");
    assert!(link(&headers, "prev").unwrap().ends_with("min_id=1"));
    // Polling above the newest: empty, and no Link (Mastodon sends none on an empty page).
    let (none, headers) = get::<Vec<Notification>>(&s, "/api/v1/notifications?since_id=3").await;
    assert!(none.is_empty() && headers.get("link").is_none());
    // `min_id` pages forward: the oldest above it; a type filter excludes.
    let (forward, _) = get::<Vec<Notification>>(&s, "/api/v1/notifications?min_id=1&limit=1").await;
    assert_eq!(forward[0].id, "2");
    let (mentions, _) = get::<Vec<Notification>>(&s, "/api/v1/notifications?types[]=mention").await;
    assert!(mentions.is_empty());
    let (excluded, _) =
        get::<Vec<Notification>>(&s, "/api/v1/notifications?exclude_types[]=follow").await;
    assert!(excluded.is_empty());
}

/// The path and query of an absolute URL.
fn link_path(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    rest[rest.find('/').unwrap()..].to_string()
}

// ---------------------------------------------------------------- Misskey

/// A packed note (misskey-dev/misskey
/// `packages/backend/src/models/json-schema/note.ts`, `packedNoteSchema`):
/// every property marked `optional: false`; the optional ones read here are
/// `Option`s, and `uri`, optional and not nullable, is a string when present.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Note {
    id: String,
    created_at: Rfc3339,
    text: Nullable<String>,
    user_id: String,
    user: UserLite,
    visibility: String,
    reaction_acceptance: Nullable<String>,
    reaction_emojis: BTreeMap<String, String>,
    reactions: BTreeMap<String, u64>,
    reaction_count: u64,
    renote_count: u64,
    replies_count: u64,
    file_ids: Option<Vec<String>>,
    uri: Option<String>,
}

/// `packedUserLiteSchema` (`packages/backend/src/models/json-schema/user.ts`):
/// every property marked `optional: false`.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct UserLite {
    id: String,
    name: Nullable<String>,
    username: String,
    host: Nullable<String>,
    avatar_url: Nullable<String>,
    avatar_blurhash: Nullable<String>,
    avatar_decorations: Vec<Value>,
    emojis: BTreeMap<String, String>,
    online_status: String,
}

/// `packedMeDetailedSchema` (the same file): `UserLite`'s properties and the
/// detailed ones clients read first.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Me {
    #[serde(flatten)]
    lite: UserLite,
    created_at: Rfc3339,
    is_bot: bool,
    is_locked: bool,
    followers_count: u64,
    following_count: u64,
    notes_count: u64,
}

#[tokio::test]
async fn misskey_notes_parse_as_packed_notes_and_with_files_is_an_empty_page() {
    let s = server("misskey").await;
    for endpoint in ["local-timeline", "global-timeline", "timeline"] {
        let path = format!("/api/notes/{endpoint}");
        let notes: Vec<Note> = post(&s, &path, serde_json::json!({"limit": 100})).await;
        assert!(!notes.is_empty(), "{endpoint}");
        for n in &notes {
            assert_eq!(n.user_id, n.user.id);
            assert_eq!(
                n.uri.is_some(),
                n.user.host.0.is_some(),
                "uri only for a remote note"
            );
            assert!(n.file_ids.as_ref().is_none_or(Vec::is_empty));
        }
        // `withFiles: true` serves only notes with files: the simulator's have none.
        let with_files: Vec<Note> = post(
            &s,
            &path,
            serde_json::json!({"limit": 100, "withFiles": true}),
        )
        .await;
        assert!(with_files.is_empty(), "{endpoint} withFiles");
        let without: Vec<Note> = post(
            &s,
            &path,
            serde_json::json!({"limit": 100, "withFiles": false}),
        )
        .await;
        assert_eq!(without.len(), notes.len(), "{endpoint} withFiles false");
    }
    let me: Me = post(&s, "/api/i", serde_json::json!({})).await;
    assert_eq!(me.lite.username, "snowleak");
}

// ---------------------------------------------------------------- Mastodon accounts

/// One account's statuses, paged and linked as a timeline is
/// (docs.joinmastodon.org/methods/accounts/#statuses), and the look-ups a
/// client makes to find the account's ID (#lookup, #get), each parsed as the
/// entity. Local `user4` and remote `user4@remote.example` are two accounts.
#[tokio::test]
async fn mastodon_account_statuses_are_that_accounts_paged_and_linked() {
    let mut config = SimConfig::profile("mastodon").unwrap();
    config.rate_per_s = 0.0;
    let layout = config.layout();
    let mut sim = Simulator::new(config, 1, NOW);
    // (author, origin) of each status, one a second from POSTED.
    let posts = [
        (4, "local"),
        (5, "local"),
        (4, "remote"),
        (4, "local"),
        (4, "local"),
        (5, "local"),
        (4, "remote"),
        (4, "local"),
        (4, "local"),
    ];
    let mut ids = Vec::new();
    for (k, (author, origin)) in posts.into_iter().enumerate() {
        let id = Id(layout.min_id_at(POSTED + k as i64 * 1000).0 + 1);
        ids.push((layout.format(id), author, origin));
        sim.inject(SimStatus {
            id,
            id_time_ms: 0,
            posted_at_ms: POSTED + k as i64 * 1000,
            visible_at_ms: NOW,
            deleted_at_ms: None,
            origin: origin.into(),
            author,
        });
    }
    let of = |author: u32, origin: &str| -> Vec<String> {
        let mut mine: Vec<String> = ids
            .iter()
            .filter(|(_, a, o)| *a == author && *o == origin)
            .map(|(id, _, _)| id.clone())
            .collect();
        mine.reverse(); // newest first
        mine
    };
    let app = router_with_clock(
        Arc::new(Mutex::new(sim)),
        RateLimits::default(),
        Arc::new(|| NOW),
    );
    let s = RunningServer::start(app).await.unwrap();

    let (local, _) = get::<Account>(&s, "/api/v1/accounts/lookup?acct=user4").await;
    assert_eq!(
        (local.id.as_str(), local.acct.as_str()),
        ("1000004", "user4")
    );
    let (remote, _) =
        get::<Account>(&s, "/api/v1/accounts/lookup?acct=@user4@remote.example").await;
    assert_eq!(
        (remote.id.as_str(), remote.acct.as_str()),
        ("2000004", "user4@remote.example")
    );
    let (me, _) = get::<Account>(&s, "/api/v1/accounts/lookup?acct=snowleak").await;
    assert_eq!(me.id, "1");
    let (by_id, _) = get::<Account>(&s, "/api/v1/accounts/2000004").await;
    assert_eq!(by_id.acct, "user4@remote.example");
    for missing in [
        "/api/v1/accounts/lookup?acct=nobody",
        "/api/v1/accounts/lookup?acct=user4@elsewhere.example",
        "/api/v1/accounts/lookup",
        "/api/v1/accounts/999",
        "/api/v1/accounts/01000004",
        "/api/v1/accounts/1000004000/statuses",
    ] {
        let response = http().get(s.url(missing)).send().await.unwrap();
        assert_eq!(response.status(), 404, "{missing}");
    }

    // Paged down with `next`, two at a time: exactly the account's statuses, newest first.
    let mut path = "/api/v1/accounts/1000004/statuses?limit=2".to_string();
    let mut served = Vec::new();
    loop {
        let (page, headers) = get::<Vec<Status>>(&s, &path).await;
        if page.is_empty() {
            assert!(headers.get("link").is_none(), "no Link on an empty page");
            break;
        }
        assert!(page.iter().all(|st| st.account.id == "1000004"));
        served.extend(page.iter().map(|st| st.id.clone()));
        path = link_path(&link(&headers, "next").unwrap());
        assert!(
            path.starts_with("/api/v1/accounts/1000004/statuses?"),
            "{path}"
        );
    }
    let local4 = of(4, "local");
    assert_eq!(served, local4);
    // since_id: the newest above it; min_id: the oldest above it, listed newest first.
    let (above, _) = get::<Vec<Status>>(
        &s,
        &format!(
            "/api/v1/accounts/1000004/statuses?since_id={}&limit=2",
            local4[4]
        ),
    )
    .await;
    let above: Vec<&str> = above.iter().map(|st| st.id.as_str()).collect();
    assert_eq!(above, [local4[0].as_str(), local4[1].as_str()]);
    let (forward, headers) = get::<Vec<Status>>(
        &s,
        &format!(
            "/api/v1/accounts/1000004/statuses?min_id={}&limit=2",
            local4[4]
        ),
    )
    .await;
    let forward: Vec<&str> = forward.iter().map(|st| st.id.as_str()).collect();
    assert_eq!(forward, [local4[2].as_str(), local4[3].as_str()]);
    assert!(
        link(&headers, "prev")
            .unwrap()
            .ends_with(&format!("min_id={}", local4[2]))
    );
    let (theirs, _) = get::<Vec<Status>>(&s, "/api/v1/accounts/2000004/statuses").await;
    let theirs: Vec<String> = theirs.into_iter().map(|st| st.id).collect();
    assert_eq!(theirs, of(4, "remote"));
    for nothing in [
        "/api/v1/accounts/1000004/statuses?pinned=true",
        "/api/v1/accounts/1000004/statuses?only_media=true",
        "/api/v1/accounts/1000004/statuses?tagged=rust",
        "/api/v1/accounts/1/statuses",
    ] {
        let (page, _) = get::<Vec<Status>>(&s, nothing).await;
        assert!(page.is_empty(), "{nothing}");
    }
    let (tagged, _) = get::<Vec<Status>>(
        &s,
        "/api/v1/accounts/1000004/statuses?tagged=snowleak&exclude_replies=true",
    )
    .await;
    assert_eq!(tagged.len(), local4.len());
}
