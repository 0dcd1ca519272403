//! End to end: the `experiment` binary against every real-target kind, over
//! loopback, with the simulator's server standing in for the API (the real
//! APIs are not reachable from the tests). Also: tokens never reach the
//! database or the output, the shared budget paces pollers, `--dry-run`,
//! and bad targets.

use rusqlite::Connection;
use snowleak::sim::model::Simulator;
use snowleak::sim::profile::SimConfig;
use snowleak::sim::server::{RateLimits, RunningServer, router};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

mod common;
use common::{TempDir, temp_dir};

/// The simulator's HTTP server on a loopback port, in real time, busy enough
/// that a two-second run sees statuses. Keep the runtime alive while it serves.
fn serve(profile: &str, limits: RateLimits) -> (tokio::runtime::Runtime, RunningServer) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut config = SimConfig::profile(profile).unwrap();
    config.rate_per_s = 30.0;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // Start a minute in the past so that the first page is already full of statuses.
    let mut sim = Simulator::new(config, 7, now - 60_000);
    sim.advance(now);
    let app = router(Arc::new(Mutex::new(sim)), limits);
    let server = runtime.block_on(RunningServer::start(app)).unwrap();
    (runtime, server)
}

fn experiment(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = common::command(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the experiment binary runs")
}

fn count(db: &Path, sql: &str) -> i64 {
    let conn = Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn text(db: &Path, sql: &str) -> String {
    let conn = Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Runs `target` (plus `extra` flags) for 2 s at 200 ms and checks the run:
/// complete, requests without errors, items recorded, the expected layout. Returns the
/// database and its directory, which lives as long as the caller keeps it.
fn run_ok(name: &str, target: &str, extra: &[&str], layout: &str) -> (TempDir, PathBuf) {
    let dir = temp_dir(name);
    let db = dir.join("run.db");
    let mut args = vec![
        "--target",
        target,
        "--duration",
        "2s",
        "--interval",
        "200ms",
        "--db",
        db.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = experiment(&args, &[]);
    assert!(
        out.status.success(),
        "{target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(count(&db, "SELECT complete FROM runs WHERE id = 1"), 1);
    assert_eq!(text(&db, "SELECT target FROM runs WHERE id = 1"), target);
    assert_eq!(text(&db, "SELECT layout FROM runs WHERE id = 1"), layout);
    let errors = count(&db, "SELECT count(*) FROM requests WHERE error IS NOT NULL");
    assert_eq!(errors, 0, "{target}: requests failed");
    assert!(count(&db, "SELECT count(*) FROM requests WHERE http_status = 200") >= 2 * 5);
    assert!(
        count(&db, "SELECT count(*) FROM observations") > 0,
        "{target}: no items"
    );
    assert!(count(&db, "SELECT count(*) FROM statuses") > 10, "{target}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM truth"),
        0,
        "no truth for real targets"
    );
    (dir, db)
}

#[test]
fn mastodon_end_to_end() {
    let (_rt, server) = serve("mastodon", RateLimits::default());
    let target = format!("mastodon:{}", server.url(""));
    run_ok("mastodon", &target, &[], "mastodon");
    run_ok(
        "mastodon-local",
        &target,
        &["--timeline", "local"],
        "mastodon",
    );
    run_ok(
        "mastodon-tag",
        &target,
        &["--timeline", "tag:snowleak"],
        "mastodon",
    );
}

#[test]
fn x_user_tweets_and_search_end_to_end() {
    let (_rt, server) = serve("twitter", RateLimits::default());
    let base = server.url("");
    run_ok(
        "x-user",
        "x:users/2244994945/tweets",
        &["--base-url", &base],
        "twitter",
    );
    let (_dir, db) = run_ok(
        "x-search",
        "x:search?query=from%3AXDevelopers",
        &["--base-url", &base],
        "twitter",
    );
    assert!(text(&db, "SELECT config FROM runs").contains(&format!("\"base_url\":\"{base}\"")));
}

#[test]
fn twitter_v1_end_to_end() {
    let (_rt, server) = serve("twitter", RateLimits::default());
    let target = format!("twitter-v1:{}", server.url(""));
    run_ok("twitter-v1", &target, &["--list-id", "1"], "twitter");
}

#[test]
fn misskey_end_to_end_detects_the_layout() {
    let (_rt, server) = serve("misskey", RateLimits::default());
    let target = format!("misskey:{}", server.url(""));
    run_ok("misskey", &target, &[], "misskey-aidx");
    run_ok(
        "misskey-global",
        &target,
        &["--timeline", "global", "--layout", "misskey-aidx"],
        "misskey-aidx",
    );
}

#[test]
fn discord_end_to_end() {
    let (_rt, server) = serve("discord", RateLimits::default());
    let base = server.url("/api/v10");
    run_ok(
        "discord",
        "discord:290926798999357250",
        &["--base-url", &base],
        "discord",
    );
}

/// The token, in the environment, is sent (the simulator ignores it) but
/// appears nowhere in the database files or in the output.
#[test]
fn tokens_never_reach_the_database_or_the_output() {
    const SECRET: &str = "tok-3f9a1c-never-store-me";
    let (_rt, server) = serve("mastodon", RateLimits::default());
    let (_rt2, mk_server) = serve("misskey", RateLimits::default());
    let dir = temp_dir("secret");
    let db = dir.join("run.db");
    let db_arg = db.to_str().unwrap();
    let runs = [
        (
            format!("mastodon:{}", server.url("")),
            "MASTODON_ACCESS_TOKEN",
        ),
        (format!("misskey:{}", mk_server.url("")), "MISSKEY_TOKEN"),
    ];
    let mut outputs = Vec::new();
    for (target, var) in &runs {
        let out = experiment(
            &[
                "--target",
                target,
                "--duration",
                "1s",
                "--interval",
                "200ms",
                "--db",
                db_arg,
            ],
            &[(var, SECRET), ("RUST_LOG", "trace")],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push(out);
        let mut dry_args = vec!["--target", target.as_str(), "--dry-run"];
        if target.starts_with("misskey") {
            dry_args.extend(["--layout", "misskey-aidx"]);
        }
        let dry = experiment(&dry_args, &[(var, SECRET)]);
        assert!(
            dry.status.success(),
            "{}",
            String::from_utf8_lossy(&dry.stderr)
        );
        assert!(String::from_utf8_lossy(&dry.stdout).contains("<redacted>"));
        outputs.push(dry);
    }
    for out in &outputs {
        for stream in [&out.stdout, &out.stderr] {
            assert!(!String::from_utf8_lossy(stream).contains(SECRET));
        }
    }
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM runs WHERE config LIKE '%\"token\":\"<redacted>\"%'"
        ),
        2
    );
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        files += 1;
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "the token is in a database file"
        );
    }
    assert!(files >= 1);
    // A token file works the same way and is not stored either.
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{SECRET}\n")).unwrap();
    let out = experiment(
        &[
            "--target",
            &runs[0].0,
            "--dry-run",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Authorization: Bearer <redacted>"),
        "{stdout}"
    );
    assert!(!stdout.contains(SECRET));
}

/// Two pollers at 100 ms against 10 requests per 2 s: the shared budget
/// slows them down (recorded as wait_ms) instead of running into 429s.
#[test]
fn pollers_share_the_rate_limit_and_are_not_refused() {
    let limits: RateLimits = "10/2s".parse().unwrap();
    let (_rt, server) = serve("mastodon", limits);
    let dir = temp_dir("pacing");
    let db = dir.join("run.db");
    let target = format!("mastodon:{}", server.url(""));
    let out = experiment(
        &[
            "--target",
            &target,
            "--duration",
            "4s",
            "--interval",
            "100ms",
            "--db",
            db.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = count(&db, "SELECT count(*) FROM requests WHERE http_status = 429");
    let sent = count(&db, "SELECT count(*) FROM requests");
    assert_eq!(refused, 0, "{sent} requests");
    // 4 s plus the final drain at 5 per second, not 2 x 10 per second.
    assert!(sent <= 35, "{sent} requests");
    assert!(count(&db, "SELECT count(*) FROM requests WHERE wait_ms > 50") > 5);
}

#[test]
fn dry_run_prints_the_first_requests_and_sends_nothing() {
    let dir = temp_dir("dry");
    let db = dir.join("run.db");
    let out = experiment(
        &[
            "--target",
            "mastodon:https://mastodon.example",
            "--timeline",
            "tag:rust",
            "--poller",
            "naive",
            "--poller",
            "compensated:k=5s",
            "--dry-run",
            "--db",
            db.to_str().unwrap(),
        ],
        &[("MASTODON_ACCESS_TOKEN", "x")],
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "naive: GET https://mastodon.example/api/v1/timelines/tag/rust?limit=40\n  Authorization: Bearer <redacted>"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("compensated:k=5s: GET"), "{stdout}");
    assert!(!db.exists(), "a dry run records nothing");
    let out = experiment(
        &["--target", "discord:290926798999357250", "--dry-run"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "GET https://discord.com/api/v10/channels/290926798999357250/messages?limit=100"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("Authorization"));
    let out = experiment(&["--dry-run", "--profile", "mastodon"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("naive: GET http://127.0.0.1:PORT/api/v1/timelines/public?limit=40"),
        "{stdout}"
    );
    let out = experiment(
        &["--target", "misskey:https://misskey.example", "--dry-run"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("layout probe: POST https://misskey.example/api/notes/local-timeline"),
        "{stdout}"
    );
}

#[test]
fn bad_targets_are_one_line_and_exit_2() {
    for (args, needle) in [
        (
            vec!["--target", "bluesky:https://bsky.social"],
            "unknown kind 'bluesky'",
        ),
        (vec!["--target", "mastodon:mastodon.social"], "not a URL"),
        (vec!["--target", "x:lists/1/tweets"], "users/ID/tweets"),
        (vec!["--target", "discord:general"], "snowflake"),
        (
            vec!["--target", "twitter-v1:https://api.twitter.com"],
            "--list-id",
        ),
        (
            vec!["--target", "mastodon:https://h", "--timeline", "global"],
            "--timeline",
        ),
        (
            vec!["--timeline", "local"],
            "--timeline applies to real targets",
        ),
        (
            vec!["--target", "mastodon:https://h", "--clock", "virtual"],
            "real time",
        ),
        (
            vec!["--target", "mastodon:https://h", "--layout", "nope"],
            "nope",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--duration", "1s", "--db", "/nonexistent/never.db"]);
        let out = experiment(&all, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

/// A spent budget makes the pollers wait for the window's reset (minutes);
/// Ctrl-C still ends the run promptly and completely.
#[cfg(unix)]
#[test]
fn a_stop_during_a_long_rate_limit_wait_ends_the_run_promptly() {
    let limits: RateLimits = "3/10m".parse().unwrap();
    let (_rt, server) = serve("mastodon", limits);
    let dir = temp_dir("stop-while-paced");
    let db = dir.join("run.db");
    let mut child = common::command(&[
        "--target",
        &format!("mastodon:{}", server.url("")),
        "--duration",
        "1h",
        "--interval",
        "100ms",
        "--db",
        db.to_str().unwrap(),
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(30) {
        let committed = Connection::open(&db)
            .and_then(|c| c.query_row("SELECT count(*) FROM requests", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(0);
        if committed >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Let the pollers settle into the wait for the reset.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let stopped_at = std::time::Instant::now();
    common::signal(&child, "-INT");
    let status = child.wait().unwrap();
    assert!(status.success());
    // The final drain: k = 1 s, then at most the final cycle's pacing cap (5 s).
    assert!(stopped_at.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(count(&db, "SELECT complete FROM runs"), 1);
    assert_eq!(text(&db, "SELECT end_reason FROM runs"), "interrupted");
}

/// Issue 11.8: a token file others can read, and a token over plain http:// to
/// another machine, are warned about (one line each) but not refused.
#[cfg(unix)]
#[test]
fn unsafe_token_handling_is_warned_about_not_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("token-warnings");
    let file = dir.join("token");
    std::fs::write(&file, "s3cret\n").unwrap();
    let file_arg = file.to_str().unwrap();
    let run = |target: &str, mode: u32| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = experiment(
            &["--target", target, "--token-file", file_arg, "--dry-run"],
            &[],
        );
        assert!(out.status.success(), "{target}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = run("mastodon:http://mastodon.example", 0o644);
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        vec![
            format!("warning: the token file {file_arg} is readable by other users (mode 644); chmod 600 it"),
            "warning: the token is sent over plain http:// to mastodon.example, readable by anyone on the way; use https://".to_string(),
        ]
    );
    assert!(!stderr.contains("s3cret"));
    for quiet in [
        "mastodon:https://mastodon.example",
        "mastodon:http://127.0.0.1:9",
        "mastodon:http://localhost:9",
        "mastodon:http://[::1]:9",
    ] {
        assert_eq!(run(quiet, 0o600), "", "{quiet}");
    }
}
