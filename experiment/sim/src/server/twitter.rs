//! The simulator in Twitter API v1.1's dialect [docs/api-facts.md 2.2]:
//! `GET /1.1/lists/statuses.json` and `/1.1/statuses/home_timeline.json` (the
//! reader's follow set), `/1.1/account/verify_credentials.json`; `since_id` exclusive, `max_id`
//! *inclusive*, `count` default 20, at most 200, newest first, rate limits in
//! `x-rate-limit-*` (epoch seconds) [2.3], errors as `{"errors": [{"code",
//! "message"}]}`.
//!
//! Tweets and users carry every attribute of v1.1's data dictionary that is
//! not deprecated or conditional (developer.x.com,
//! x-api/v1/data-dictionary/object-model/tweet, /user and /entities):
//! nullable ones as `null` (`in_reply_to_*`, `coordinates`, `place`, a
//! user's `url` and `location`), conditional ones absent (`quoted_status_id`,
//! `retweeted_status`, `possibly_sensitive`: the simulated tweets quote,
//! retweet and link nothing). `tweet_mode=extended` renders `full_text` and
//! `display_text_range` in place of `text` (developer.x.com, "Tweet
//! updates", x-api/v1/data-dictionary/guides/tweets-with-extended-text).

use super::{
    Allowance, AppState, READER_ID, READER_NAME, Scope, ServedApi, header_value, json_response,
    param, params, parse_id, retry_after, to_json, with_scope, with_served_spans,
};
use crate::model::Query;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use since_id::id::Id;
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/1.1/lists/statuses.json", get(twitter_list))
        .route("/1.1/statuses/home_timeline.json", get(twitter_home))
        .route(
            "/1.1/account/verify_credentials.json",
            get(verify_credentials),
        )
}

/// `GET /1.1/account/verify_credentials.json`, which clients call to learn who
/// they are: every token is the reader, a user object like any other
/// (developer.x.com, x-api/v1/accounts-and-users/manage-account-settings,
/// "GET account/verify_credentials"), following the authors of its home timeline.
async fn verify_credentials(State(app): State<AppState>) -> Response {
    let (follows, _) = app.home();
    let reader = TwitterUser {
        id: READER_ID,
        id_str: Shown(Numbered("", READER_ID)),
        name: Shown(Numbered("snowleak reader", u64::MAX)),
        screen_name: Shown(Numbered(READER_NAME, u64::MAX)),
        friends_count: follows.len() as u64,
        ..TwitterUser::PROFILE
    };
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&reader))
}

async fn twitter_list(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    twitter_timeline(app, raw, None)
}

/// `GET /1.1/statuses/home_timeline.json`: the tweets of the users the reader
/// follows, paged as a list is.
async fn twitter_home(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let home = app.home();
    twitter_timeline(app, raw, Some(home))
}

/// A value written straight into the JSON output through its `Display`
/// (serde's `collect_str`), so a page of 200 tweets does not allocate a string
/// per field.
struct Shown<T: std::fmt::Display>(T);

impl<T: std::fmt::Display> Serialize for Shown<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// A prefix and a number: `user7`, `User 7`, `1000007`; the prefix alone
/// with `u64::MAX`.
struct Numbered(&'static str, u64);

impl std::fmt::Display for Numbered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            u64::MAX => f.write_str(self.0),
            n => write!(f, "{}{n}", self.0),
        }
    }
}

/// The text of a simulated tweet.
struct StatusText<'a> {
    id: &'a str,
    origin: &'a str,
}

impl std::fmt::Display for StatusText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Status {} from the snowleak simulator ({})",
            self.id, self.origin
        )
    }
}

/// The user object (developer.x.com, x-api/v1/data-dictionary/object-model/user):
/// its attributes, nullable ones as `null`; not those it lists as deprecated
/// (`utc_offset`, `time_zone`, `lang`, `geo_enabled`, `following`,
/// `profile_background_color`, the `http` `profile_image_url`...), which it
/// tells clients not to rely on, nor `profile_banner_url`, absent for a user
/// without a banner.
#[derive(Serialize)]
struct TwitterUser {
    id: u64,
    id_str: Shown<Numbered>,
    name: Shown<Numbered>,
    screen_name: Shown<Numbered>,
    location: Option<&'static str>,
    description: &'static str,
    /// Nullable: none of the simulated users links a site.
    url: Option<&'static str>,
    entities: UserEntities,
    protected: bool,
    verified: bool,
    followers_count: u64,
    friends_count: u64,
    listed_count: u64,
    favourites_count: u64,
    statuses_count: u64,
    created_at: &'static str,
    profile_image_url_https: &'static str,
    default_profile: bool,
    default_profile_image: bool,
    withheld_in_countries: [&'static str; 0],
}

/// A user's entities: its description holds no URL.
#[derive(Serialize, Clone, Copy)]
struct UserEntities {
    description: NoUrls,
}

#[derive(Serialize, Clone, Copy)]
struct NoUrls {
    urls: [(); 0],
}

impl TwitterUser {
    /// What every simulated user's profile holds besides its name: a new
    /// account with the default profile, no followers and no site.
    const PROFILE: TwitterUser = TwitterUser {
        id: 0,
        id_str: Shown(Numbered("", 0)),
        name: Shown(Numbered("", 0)),
        screen_name: Shown(Numbered("", 0)),
        location: None,
        description: "",
        url: None,
        entities: UserEntities {
            description: NoUrls { urls: [] },
        },
        protected: false,
        verified: false,
        followers_count: 0,
        friends_count: 0,
        listed_count: 0,
        favourites_count: 0,
        statuses_count: 0,
        created_at: "Mon Jan 01 00:00:00 +0000 2024",
        profile_image_url_https: "https://abs.twimg.com/sticky/default_profile_images/default_profile_normal.png",
        default_profile: true,
        default_profile_image: true,
        withheld_in_countries: [],
    };

    /// Author `n`: user `1000000 + n`, `@user{n}`.
    fn author(n: u32) -> TwitterUser {
        let id = 1_000_000 + u64::from(n);
        TwitterUser {
            id,
            id_str: Shown(Numbered("", id)),
            name: Shown(Numbered("User ", u64::from(n))),
            screen_name: Shown(Numbered("user", u64::from(n))),
            ..TwitterUser::PROFILE
        }
    }
}

/// A tweet's entities: the simulated texts mention, tag and link nothing.
#[derive(Serialize)]
struct TweetEntities {
    hashtags: [(); 0],
    symbols: [(); 0],
    user_mentions: [(); 0],
    urls: [(); 0],
}

/// The client that posted every simulated tweet, as `source` writes it: an
/// HTML anchor.
const SOURCE: &str =
    "<a href=\"https://example.com/snowleak\" rel=\"nofollow\">snowleak simulator</a>";

/// The tweet object (developer.x.com, x-api/v1/data-dictionary/object-model/tweet).
#[derive(Serialize)]
struct Tweet<'a> {
    created_at: Shown<TwitterTime>,
    /// The exact integer, never a float (serde_json writes u128 digits).
    id: u128,
    id_str: &'a str,
    /// `text` in the default (compatibility) mode ...
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    /// ... `full_text` and `display_text_range` under `tweet_mode=extended`.
    #[serde(skip_serializing_if = "Option::is_none")]
    full_text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_text_range: Option<[usize; 2]>,
    truncated: bool,
    entities: TweetEntities,
    source: &'static str,
    in_reply_to_status_id: Option<u64>,
    in_reply_to_status_id_str: Option<&'static str>,
    in_reply_to_user_id: Option<u64>,
    in_reply_to_user_id_str: Option<&'static str>,
    in_reply_to_screen_name: Option<&'static str>,
    user: TwitterUser,
    coordinates: Option<()>,
    place: Option<()>,
    is_quote_status: bool,
    retweet_count: u64,
    favorite_count: u64,
    favorited: bool,
    retweeted: bool,
    lang: &'static str,
}

/// `Wed Oct 10 20:19:24 +0000 2018`, written field by field: chrono's
/// strftime parses its pattern on every call, which was the server's largest
/// cost at 200 tweets a page.
struct TwitterTime(i64);

impl std::fmt::Display for TwitterTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use chrono::{Datelike, Timelike};
        const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let Some(t) = DateTime::<Utc>::from_timestamp_millis(self.0) else {
            return Ok(());
        };
        write!(
            f,
            "{} {} {:02} {:02}:{:02}:{:02} +0000 {}",
            DAYS[t.weekday().num_days_from_monday() as usize],
            MONTHS[t.month0() as usize],
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.year()
        )
    }
}

fn twitter_error(status: StatusCode, code: u32, message: &str, headers: HeaderMap) -> Response {
    let body = json!({"errors": [{"code": code, "message": message}]});
    json_response(status, headers, to_json(&body))
}

fn twitter_rate_headers(a: &Allowance) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-rate-limit-limit", header_value(&a.limit.to_string()));
    h.insert(
        "x-rate-limit-remaining",
        header_value(&a.remaining.to_string()),
    );
    h.insert(
        "x-rate-limit-reset",
        header_value(&a.reset_ms.div_euclid(1000).to_string()),
    );
    h
}

/// A timeline of v1.1: the whole list, or a home timeline (its follow set
/// and the scope a recording gives it).
fn twitter_timeline(
    app: AppState,
    raw: Option<String>,
    home: Option<(Arc<BTreeSet<u32>>, Scope)>,
) -> Response {
    let allowance = app.limiter.check(ServedApi::Twitter, (app.clock)());
    let mut headers = twitter_rate_headers(&allowance);
    if !allowance.allowed {
        retry_after(&allowance, &mut headers);
        return twitter_error(
            StatusCode::TOO_MANY_REQUESTS,
            88,
            "Rate limit exceeded",
            headers,
        );
    }
    let params = params(&raw);
    let layout = app.layout();
    let invalid = |name: &str| {
        let message = format!("{name} parameter is invalid.");
        twitter_error(StatusCode::BAD_REQUEST, 44, &message, headers.clone())
    };
    let count = match param(&params, "count").map(|c| c.trim().parse::<u64>()) {
        None => 20,
        Some(Ok(n)) if n >= 1 => n.min(200) as usize,
        Some(_) => return invalid("count"),
    };
    let Ok(since) = parse_id(&layout, param(&params, "since_id")) else {
        return invalid("since_id");
    };
    let Ok(max) = parse_id(&layout, param(&params, "max_id")) else {
        return invalid("max_id");
    };
    // max_id is inclusive: "IDs lower than or equal to" [2.2].
    let query = Query {
        after: since,
        before: max.map(|m| Id(m.0.saturating_add(1))),
        limit: count,
        oldest_first: false,
    };
    let follows = home.as_ref().map(|(f, _)| f.clone());
    let (statuses, layout, _) = app.query(&query, |s| {
        follows.as_ref().is_none_or(|f| f.contains(&s.author))
    });
    let extended = param(&params, "tweet_mode") == Some("extended");
    let cache = if extended {
        &app.extended_tweets
    } else {
        &app.tweets
    };
    let (body, spans) = cache.page(&statuses, |s| {
        let id_str = layout.format(s.id);
        let text = StatusText {
            id: &id_str,
            origin: &s.origin,
        }
        .to_string();
        to_json(&Tweet {
            created_at: Shown(TwitterTime(s.posted_at_ms)),
            id: s.id.0,
            id_str: &id_str,
            text: (!extended).then_some(text.as_str()),
            full_text: extended.then_some(text.as_str()),
            // Indices count code points; the text is ASCII.
            display_text_range: extended.then_some([0, text.len()]),
            truncated: false,
            entities: TweetEntities {
                hashtags: [],
                symbols: [],
                user_mentions: [],
                urls: [],
            },
            source: SOURCE,
            in_reply_to_status_id: None,
            in_reply_to_status_id_str: None,
            in_reply_to_user_id: None,
            in_reply_to_user_id_str: None,
            in_reply_to_screen_name: None,
            user: TwitterUser::author(s.author),
            coordinates: None,
            place: None,
            is_quote_status: false,
            retweet_count: 0,
            favorite_count: 0,
            favorited: false,
            retweeted: false,
            lang: "en",
        })
    });
    let response = with_served_spans(
        json_response(StatusCode::OK, headers, body),
        &statuses,
        spans,
    );
    match home {
        Some((_, scope)) => with_scope(response, scope),
        None => response,
    }
}
