//! Hostile clients against `experiment serve --record` over real HTTP on
//! loopback (issue 33, item 6): 10,000 distinct tokens, 10,000 distinct tag
//! timelines of one token, a query string of a megabyte and one just under
//! the server's limit, all at once as fast as a few connections go, while
//! a well-behaved client polls. The book's memory bound is asserted on its
//! data structures by the unit tests of `experiment/src/clients.rs`; here,
//! what a user sees: the pollers stay within `analyze`'s 64, every timeline
//! request answered is recorded, no credential is in the file, and the
//! well-behaved client is served and recorded as if alone.

use rusqlite::Connection;
use serde_json::Value;
use std::collections::HashSet;

mod common;
use common::temp_dir;

/// The server, killed if a test fails before it stops it.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The concurrent connections of each hostile flood.
const CONNECTIONS: usize = 4;

/// Sends `count` requests, `CONNECTIONS` at a time, the `n`th to `url(n)`
/// with credential `auth(n)`; returns how many were answered 200.
async fn flood(
    http: &reqwest::Client,
    count: usize,
    url: impl Fn(usize) -> String + Clone + Send + 'static,
    auth: impl Fn(usize) -> String + Clone + Send + 'static,
) -> usize {
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let (http, url, auth) = (http.clone(), url.clone(), auth.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0;
            for n in (c..count).step_by(CONNECTIONS) {
                let r = http
                    .get(url(n))
                    .header("Authorization", auth(n))
                    .send()
                    .await
                    .unwrap();
                ok += usize::from(r.status() == 200);
                r.bytes().await.unwrap();
            }
            ok
        }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await.unwrap();
    }
    ok
}

/// `GET target` on a connection of its own, as raw HTTP/1.1; the status
/// of the answer, or `None` when the server closed the connection first.
fn raw_get(host: &str, target: &str, token: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    let head = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    // The server may answer and close before it has read the whole head.
    let _ = stream.write_all(head.as_bytes());
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let status = String::from_utf8_lossy(answer.get(..12)?).into_owned();
    status.strip_prefix("HTTP/1.1 ")?.trim().parse().ok()
}

#[test]
fn hostile_clients_leave_the_recording_bounded_whole_and_free_of_credentials() {
    let dir = temp_dir("hostile");
    let db = dir.join("rec.db");
    let good_token = "the-good-clients-token";
    let mut server = Server(
        common::command(&[
            "serve",
            "--profile",
            "mastodon",
            "--addr",
            "127.0.0.1:0",
            "--backlog",
            "60s",
            "--set",
            "rate_per_s=50",
            "--client",
            "good=SNOWLEAK_GOOD_TOKEN",
            "--record",
            db.to_str().unwrap(),
        ])
        .env("SNOWLEAK_GOOD_TOKEN", good_token)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap(),
    );
    // Kept open until the server ends: it prints a last line.
    let mut stdout = std::io::BufReader::new(server.0.stdout.take().unwrap());
    let base = common::read_banner(&mut stdout);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (tokens_ok, tags_ok, good, megabyte, near_limit) = runtime.block_on(async {
        let http = snowleak::api::http_client(std::time::Duration::from_secs(60)).unwrap();
        let public = format!("{base}/api/v1/timelines/public?limit=2");
        let tag = format!("{base}/api/v1/timelines/tag");
        let tokens = flood(
            &http,
            10_000,
            move |_| public.clone(),
            |n| format!("Bearer hostile-token-{n}"),
        );
        let tags = flood(
            &http,
            10_000,
            move |n| format!("{tag}/t{n}?limit=2"),
            |_| "Bearer hostile-tags-token".to_string(),
        );
        // The well-behaved client: since_id = the newest ID seen, 50 polls.
        let good = async {
            let mut served: Vec<String> = Vec::new();
            let mut since: Option<String> = None;
            for _ in 0..50 {
                let mut req = http
                    .get(format!("{base}/api/v1/timelines/public"))
                    .bearer_auth(good_token)
                    .query(&[("limit", "40")]);
                if let Some(s) = &since {
                    req = req.query(&[("since_id", s.as_str())]);
                }
                let r = req.send().await.unwrap();
                assert_eq!(r.status(), 200, "the good client is served");
                let page: Value = r.json().await.unwrap();
                let ids: Vec<String> = page
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["id"].as_str().unwrap().to_string())
                    .collect();
                since = ids.first().cloned().or(since);
                served.extend(ids);
                tokio::task::yield_now().await;
            }
            served
        };
        // A megabyte of query: refused by the server before any handler
        // (431), or the connection closed while it was still being sent.
        // Sent raw: an HTTP client library refuses such a URL itself.
        let host = base.trim_start_matches("http://").to_string();
        let huge = tokio::task::spawn_blocking({
            let host = host.clone();
            move || {
                let target = format!("/api/v1/timelines/public?since_id={}", "9".repeat(1 << 20));
                raw_get(&host, &target, "hostile-huge-token")
            }
        });
        // Under the server's limit: served, and bounded by the recorder.
        let near = tokio::task::spawn_blocking(move || {
            let target = format!("/api/v1/timelines/tag/{}", "x".repeat(60_000));
            raw_get(&host, &target, "hostile-long-token")
        });
        let huge = async { huge.await.unwrap() };
        let near = async { near.await.unwrap() };
        tokio::join!(tokens, tags, good, huge, near)
    });
    common::signal(&server.0, "-INT");
    assert!(
        server.0.wait().unwrap().success(),
        "the server stops cleanly"
    );
    drop(stdout);

    assert_eq!(
        (tokens_ok, tags_ok),
        (10_000, 10_000),
        "every flood request served"
    );
    assert!(
        megabyte.is_none() || megabyte.is_some_and(|s| [414, 431].contains(&s)),
        "a megabyte of query is refused: {megabyte:?}"
    );
    assert_eq!(
        near_limit,
        Some(200),
        "a long path under the limit is served"
    );
    assert!(!good.is_empty());

    let conn = Connection::open(&db).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    // No record lost: every timeline request answered is a request row.
    assert_eq!(
        count("SELECT count(*) FROM requests"),
        10_000 + 10_000 + 50 + 1
    );
    assert_eq!(count("SELECT count(*) FROM client_requests"), 20_051);
    let pollers: Vec<(i64, String)> = conn
        .prepare("SELECT id, name FROM pollers ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(pollers.len() <= 64, "{} pollers", pollers.len());
    let names: HashSet<&str> = pollers.iter().map(|(_, n)| n.as_str()).collect();
    assert!(names.contains("other clients"), "{names:?}");
    assert!(
        pollers.iter().all(|(_, n)| n.len() < 200),
        "every name is bounded"
    );
    // The well-behaved client: its own poller, exactly what it was served.
    let (good_id, _) = pollers
        .iter()
        .find(|(_, n)| n == "good public")
        .unwrap_or_else(|| panic!("the good client is named: {names:?}"));
    let observed: Vec<String> = conn
        .prepare("SELECT id FROM requests WHERE poller_id = ?1 ORDER BY id")
        .unwrap()
        .query_map([good_id], |r| r.get(0))
        .unwrap()
        .flat_map(|id| rundb::read::observed(&conn, id.unwrap()).unwrap())
        .collect();
    assert_eq!(observed, good, "recorded exactly what the good client got");
    let good_requests: i64 = conn
        .query_row(
            "SELECT count(*) FROM requests WHERE poller_id = ?1",
            [good_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(good_requests, 50);
    for column in ["params", "endpoint", "client"] {
        let longest = count(&format!(
            "SELECT max(length({column})) FROM client_requests"
        ));
        assert!(longest < 1_000, "{column} is bounded: {longest}");
    }
    drop(conn);
    // No credential anywhere in the file.
    for file in [db.clone(), dir.join("rec.db-wal")] {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        for token in [
            "hostile-token",
            "hostile-tags-token",
            "hostile-huge-token",
            "hostile-long-token",
            good_token,
        ] {
            assert!(
                !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                "{token} is in {}",
                file.display()
            );
        }
    }
}
