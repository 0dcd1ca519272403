//! `experiment serve --backend misskey-ftt` as a user runs it, on a real
//! Redis and a real PostgreSQL it starts (the test fails, never skips,
//! without them: Debian packages `redis-server` and `postgresql`): three
//! clients, one per timeline, recorded with `--record`; what each was served
//! is what was recorded, is in the truth, and is of its timeline by the
//! truth's authors and origins; Ctrl-C removes both servers. And the refusals.

use rusqlite::Connection;
use std::collections::{BTreeSet, HashMap};
use std::process::Command;

mod common;
use common::temp_dir;

/// A child process killed if the test ends early (a failed assertion), so
/// that no server outlives its test.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `url` as a sinceId poller with credential `token`: a first page
/// without cursor, then `sinceId` = the highest ID seen, until it has been
/// served notes by `wanted` requests with a sinceId. Returns every ID served,
/// in order.
async fn poll(http: &reqwest::Client, url: &str, token: &str, wanted: usize) -> Vec<String> {
    let mut served = Vec::new();
    let mut since: Option<String> = None;
    let mut fruitful = 0;
    while fruitful < wanted {
        let mut body = serde_json::json!({"i": token, "limit": 20, "withFiles": false});
        if let Some(s) = &since {
            body["sinceId"] = serde_json::Value::String(s.clone());
        }
        let page: serde_json::Value = http
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let ids: Vec<String> = page
            .as_array()
            .unwrap_or_else(|| panic!("{url}: {page}"))
            .iter()
            .map(|n| n["id"].as_str().unwrap().to_string())
            .collect();
        if since.is_some() && !ids.is_empty() {
            fruitful += 1;
        }
        // Fixed-length base36: the highest ID is the greatest string.
        since = ids.iter().max().cloned().or(since);
        served.extend(ids);
    }
    served
}

/// Reads one response's head from `reader`; returns its status line.
fn status_line(reader: &mut impl std::io::BufRead) -> String {
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    status.trim_end().to_string()
}

/// `POST path` on one keep-alive connection whose body the client sends
/// only when the server asks for it (`Expect: 100-continue`, which hyper
/// answers once the handler reads the body): a handler that answered
/// without reading it made the server close the connection under the
/// client's next request (Misskey.py's `RemoteDisconnected` after `/api/i`).
/// Deterministic: no timing, the server's own answers order the exchange.
fn a_late_body_keeps_the_connection(addr: &str, path: &str) {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let body = br#"{"i":"late-token"}"#;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    )
    .unwrap();
    assert_eq!(
        status_line(&mut reader),
        "HTTP/1.1 100 Continue",
        "{path} reads its body before it answers"
    );
    stream.write_all(body).unwrap();
    assert!(
        status_line(&mut reader).starts_with("HTTP/1.1 200"),
        "{path}"
    );
    write!(
        stream,
        "POST /api/meta HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 2\r\n\r\n{{}}"
    )
    .unwrap();
    assert!(
        status_line(&mut reader).starts_with("HTTP/1.1 200"),
        "the connection still serves after {path}"
    );
}

#[test]
fn serve_on_misskey_ftt_records_a_client_per_timeline_and_removes_its_servers() {
    let dir = temp_dir("serve-ftt");
    let db = dir.join("rec.db");
    let mut child = Stopped(
        common::command(&["serve", "--backend", "misskey-ftt", "--addr", "127.0.0.1:0"])
            .arg("--record")
            .arg(&db)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = std::io::BufReader::new(child.0.stdout.take().unwrap());
    let (mut urls, mut redis, mut postgres) = (Vec::new(), None, None);
    loop {
        let mut line = String::new();
        assert!(
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0,
            "the server ended before it printed its banner"
        );
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["misskey", url] => urls.push(url.to_string()),
            ["redis", socket, ..] => redis = Some(std::path::PathBuf::from(socket)),
            ["postgresql", dir, ..] => postgres = Some(std::path::PathBuf::from(dir)),
            ["Ctrl-C", ..] => break,
            _ => {}
        }
    }
    let (redis, postgres) = (redis.unwrap(), postgres.unwrap());
    assert!(
        redis.exists() && postgres.exists(),
        "{redis:?} {postgres:?}"
    );
    let endpoint = |name: &str| {
        urls.iter()
            .find(|u| u.ends_with(&format!("/api/notes/{name}")))
            .unwrap_or_else(|| panic!("no {name} in {urls:?}"))
            .clone()
    };
    let (home, local, hybrid) = (
        endpoint("timeline"),
        endpoint("local-timeline"),
        endpoint("hybrid-timeline"),
    );
    let base = home.trim_end_matches("/api/notes/timeline").to_string();
    for path in ["/api/meta", "/api/i"] {
        a_late_body_keeps_the_connection(base.trim_start_matches("http://"), path);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let served: HashMap<&str, Vec<String>> = runtime.block_on(async {
        let http = snowleak::api::http_client(std::time::Duration::from_secs(10)).unwrap();
        // What clients post first: answered, and not recorded as timeline reads.
        for path in ["/api/meta", "/api/i"] {
            let r = http
                .post(format!("{base}{path}"))
                .json(&serde_json::json!({"i": "home-token"}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{path}");
        }
        let me: serde_json::Value = http
            .post(format!("{base}/api/i"))
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(me["id"], "0", "the account the timelines are read as");
        let (h, l, y) = tokio::join!(
            poll(&http, &home, "home-token", 2),
            poll(&http, &local, "local-token", 3),
            poll(&http, &hybrid, "hybrid-token", 3),
        );
        HashMap::from([("home", h), ("local", l), ("hybrid", y)])
    });
    common::signal(&child.0, "-INT");
    assert!(child.0.wait().unwrap().success());
    assert!(
        !redis.exists() && !postgres.exists(),
        "Ctrl-C removes both servers: {redis:?} {postgres:?}"
    );

    let conn = Connection::open(&db).unwrap();
    let (target, complete): (String, i64) = conn
        .query_row("SELECT target, complete FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((target.as_str(), complete), ("misskey-ftt-serve", 1));
    // Each note served, with its author and origin from the truth.
    let truth: HashMap<String, (i64, String)> = conn
        .prepare("SELECT t.id, a.author, t.origin FROM truth t JOIN truth_authors a ON a.id = t.id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let config: String = conn
        .query_row("SELECT config FROM runs", [], |r| r.get(0))
        .unwrap();
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    let local_users = config["load"]["local_users"].as_i64().unwrap();
    // The home timeline's authors, as the recording scoped its requests
    // (`authors:0,...`): user 0 and those it follows.
    let scope: String = conn
        .query_row(
            "SELECT DISTINCT scope FROM client_requests WHERE endpoint = '/api/notes/timeline'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let follows_of_me: BTreeSet<i64> = scope
        .strip_prefix("authors:")
        .unwrap_or_else(|| panic!("home scope {scope}"))
        .split(',')
        .map(|a| a.parse().unwrap())
        .collect();
    assert!(
        follows_of_me.contains(&0) && follows_of_me.len() > 1,
        "{scope}"
    );
    for timeline in ["home", "local", "hybrid"] {
        let served = &served[timeline];
        let endpoint = match timeline {
            "home" => "/api/notes/timeline",
            "local" => "/api/notes/local-timeline",
            _ => "/api/notes/hybrid-timeline",
        };
        let recorded: Vec<String> = conn
            .prepare("SELECT request_id FROM client_requests WHERE endpoint = ?1 ORDER BY request_id")
            .unwrap()
            .query_map([endpoint], |r| r.get(0))
            .unwrap()
            .flat_map(|id| rundb::read::observed(&conn, id.unwrap()).unwrap())
            .collect();
        assert_eq!(
            &recorded, served,
            "{timeline}: recorded exactly what it was served"
        );
        for id in served {
            let (author, origin) = truth
                .get(id)
                .unwrap_or_else(|| panic!("{timeline}: served {id} is not in the truth"));
            let local_note = origin == "local";
            assert_eq!(
                local_note,
                *author < local_users,
                "{id}: origin {origin}, author {author}"
            );
            let belongs = match timeline {
                "home" => follows_of_me.contains(author),
                "local" => local_note,
                _ => local_note || follows_of_me.contains(author),
            };
            assert!(belongs, "{timeline} served {id} by {author} ({origin})");
        }
    }
    let pollers: i64 = conn
        .query_row("SELECT count(*) FROM pollers", [], |r| r.get(0))
        .unwrap();
    assert_eq!(pollers, 3, "one client per credential");
    drop(conn);
    let conn = analysis::load::open(&db).unwrap();
    let run = analysis::load::pick_run(&conn, &db, None).unwrap();
    let loaded = analysis::load::load(&conn, run).unwrap();
    let judged = analysis::diff::analyze(&loaded.history);
    assert_eq!(judged.verdicts.len(), 3, "a verdict for each client");
    drop(conn);

    // The pushes were recorded as a run records them (`ftt_pushes`), for
    // the lists the three timelines read: checked with our own SQL.
    let conn = Connection::open(&db).unwrap();
    let missing = |sql: &str| -> Vec<String> {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    // Every local note was pushed to the local timeline's list (a local
    // note is recent, so by the pipeline, and the LPUSH returned).
    let unpushed = missing(
        "SELECT t.id FROM truth t WHERE t.origin = 'local' AND NOT EXISTS
           (SELECT 1 FROM ftt_pushes f WHERE f.run_id = t.run_id AND f.id = t.id
              AND f.list = 'list:localTimeline' AND f.pushed_at_ms IS NOT NULL)",
    );
    assert!(
        unpushed.is_empty(),
        "local notes without a push: {unpushed:?}"
    );
    // Every note of user 0's home timeline has its row in user 0's home
    // list: pushed, or refused by the 3-minute rule (NULL).
    let home_authors = follows_of_me
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let unrecorded = missing(&format!(
        "SELECT t.id FROM truth t JOIN truth_authors a ON a.run_id = t.run_id AND a.id = t.id
          WHERE a.author IN ({home_authors}) AND NOT EXISTS
           (SELECT 1 FROM ftt_pushes f WHERE f.run_id = t.run_id AND f.id = t.id
              AND f.list = 'list:homeTimeline:0')"
    ));
    assert!(
        unrecorded.is_empty(),
        "home notes without a row: {unrecorded:?}"
    );
    // Each row is a truth note's, with its commit (the truth owes it from
    // the ms after), and an LPUSH that returned after that commit.
    let inconsistent = missing(
        "SELECT f.id FROM ftt_pushes f LEFT JOIN truth t ON t.run_id = f.run_id AND t.id = f.id
          WHERE t.id IS NULL OR f.committed_at_ms != t.visible_at_ms - 1
             OR f.pushed_at_ms < f.committed_at_ms",
    );
    assert!(
        inconsistent.is_empty(),
        "rows against the truth: {inconsistent:?}"
    );
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM ftt_pushes", [], |r| r.get(0))
        .unwrap();
    assert!(rows > 0);
    drop(conn);
    // And analyze gives each client's lost notes a fate, in --json.
    let analyze = std::path::Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let out = Command::new(&analyze)
        .arg(&db)
        .arg("--json")
        .arg("--out")
        .arg(dir.join("plots"))
        .output()
        .expect("analyze runs (cargo builds it for the workspace's tests)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fates = json["ftt"]["pollers"]
        .as_array()
        .unwrap_or_else(|| panic!("no ftt section: {}", json["ftt"]));
    assert_eq!(fates.len(), 3, "a section per client");
    for p in fates {
        let lost = p["lost"].as_array().unwrap().len() as u64;
        let counted: u64 = p["counts"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(lost, counted, "{p}");
    }
}

#[test]
fn simulator_flags_on_the_misskey_ftt_backend_are_refused_in_one_line() {
    for (args, expected) in [
        (
            vec!["serve", "--backend", "misskey-ftt", "--set", "rate_per_s=1"],
            "--set configures the simulator and does not apply to --backend misskey-ftt",
        ),
        (
            vec!["serve", "--backend", "misskey-ftt", "--truth", "t.db"],
            "--truth is the simulator's",
        ),
        (
            vec!["serve", "--backend", "misskey-ftt", "--client", "a=B"],
            "--client names a client of --record",
        ),
        (
            vec!["serve", "--backend", "misskey"],
            "expected simulator, postgres or misskey-ftt",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_experiment"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}
