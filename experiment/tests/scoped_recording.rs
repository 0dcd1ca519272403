//! `experiment serve --record` for clients of endpoints that serve less than
//! the whole timeline (issue 33): X's recent search, whose newest
//! `search_end_lag_ms` are not searchable yet, and Mastodon's statuses of
//! one account. Each is recorded over real HTTP and judged by the checker,
//! which must owe the client only what the server could serve it: no
//! unexplained miss, and every loss one the client's own output confirms.

use analysis::load::Loaded;
use serde_json::Value;
use std::collections::BTreeSet;

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

/// Starts `experiment serve ARGS` on a free port, with the client named
/// `client` holding `token`; returns it and its base URL.
fn serve(args: &[&str], client: &str, token: &str) -> (Server, String) {
    let named = format!("{client}=SNOWLEAK_SCOPED_TOKEN");
    let mut all = vec!["serve", "--addr", "127.0.0.1:0", "--client", &named];
    all.extend_from_slice(args);
    let mut server = Server(
        common::command(&all)
            .env("SNOWLEAK_SCOPED_TOKEN", token)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = std::io::BufReader::new(server.0.stdout.take().unwrap());
    let base = common::read_banner(&mut stdout);
    // The rest of its output is not read: it prints a line or two at the end.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    (server, base)
}

/// Stops the server as Ctrl-C does; it must end cleanly.
fn stop(mut server: Server) {
    common::signal(&server.0, "-INT");
    assert!(
        server.0.wait().unwrap().success(),
        "the server stops cleanly"
    );
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    since.as_millis() as i64
}

/// What a client's loop saw: each request's send time and the IDs served.
#[derive(Default)]
struct Output {
    pages: Vec<(i64, Vec<String>)>,
}

impl Output {
    fn received(&self) -> BTreeSet<String> {
        self.pages.iter().flat_map(|(_, ids)| ids.clone()).collect()
    }
}

/// The recording, loaded and judged; the index of poller `name`.
fn judged(db: &std::path::Path, name: &str) -> (Loaded, analysis::diff::Analysis, usize) {
    let conn = analysis::load::open(db).unwrap();
    let run = analysis::load::pick_run(&conn, db, None).unwrap();
    let loaded = analysis::load::load(&conn, run).unwrap();
    let analysis = analysis::diff::analyze(&loaded.history);
    let names: Vec<&str> = loaded.pollers.iter().map(|p| p.name.as_str()).collect();
    let p = names
        .iter()
        .position(|n| *n == name)
        .unwrap_or_else(|| panic!("no poller {name} in {names:?}"));
    (loaded, analysis, p)
}

/// The statuses the checker says poller `p` lost: its leaks and other misses.
fn judged_lost(loaded: &Loaded, analysis: &analysis::diff::Analysis, p: usize) -> BTreeSet<String> {
    let leaks = analysis
        .leaks()
        .filter(|f| f.leaked_by & (1 << p) != 0)
        .map(|f| f.status);
    let misses = analysis
        .other_misses
        .iter()
        .filter(|m| m.poller as usize == p)
        .map(|m| m.status);
    leaks
        .chain(misses)
        .map(|s| loaded.status_id(s).into_owned())
        .collect()
}

/// The truth: each status's ID, the time in its ID, when it became visible, its origin.
fn truth(db: &std::path::Path) -> Vec<(String, i64, i64, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.prepare("SELECT id, id_time_ms, visible_at_ms, origin FROM truth")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A naive `since_id` loop on X's recent search, with the end lag on (1 s
/// here, 30 s on X): the newest second is never in a page, so at every
/// request some visible statuses above the cursor are not served. The
/// server marks each response with the IDs its end lag left, the recording
/// narrows the request's window to them, and the checker owes the client
/// only those: nothing unexplained (before, the statuses still inside the
/// lag at the last requests were "unexplained" misses), and what it judges
/// lost is what the client's own output says it lost.
#[test]
fn recent_search_with_since_id_and_the_end_lag_is_owed_only_what_was_searchable() {
    let dir = temp_dir("scoped-search");
    let db = dir.join("rec.db");
    let lag_ms = 1000;
    let token = "the-searchers-token";
    let (server, base) = serve(
        &[
            "--profile",
            "twitter",
            "--backlog",
            "10s",
            "--set",
            "rate_per_s=50",
            "--set",
            &format!("search_end_lag_ms={lag_ms}"),
            "--record",
            db.to_str().unwrap(),
        ],
        "searcher",
        token,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let output = runtime.block_on(async {
        let http = snowleak::api::http_client(std::time::Duration::from_secs(30)).unwrap();
        let mut output = Output::default();
        let mut since: Option<String> = None;
        // Three seconds of polls, ten a second: the lag is crossed many times.
        for _ in 0..30 {
            let mut req = http
                .get(format!("{base}/2/tweets/search/recent"))
                .bearer_auth(token)
                .query(&[("query", "snowleak"), ("max_results", "100")]);
            if let Some(s) = &since {
                req = req.query(&[("since_id", s.as_str())]);
            }
            let sent = now_ms();
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 200);
            let page: Value = r.json().await.unwrap();
            let ids: Vec<String> = page["data"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .map(|t| t["id"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default();
            if let Some(newest) = page["meta"]["newest_id"].as_str() {
                since = Some(newest.to_string());
            }
            output.pages.push((sent, ids));
            // The client's cadence, not a synchronisation.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        output
    });
    stop(server);

    let (loaded, analysis, p) = judged(&db, "searcher search:snowleak");
    let stats = &analysis.pollers[p];
    assert_eq!(stats.requests, 30);
    assert_eq!(
        stats.misses_unexplained, 0,
        "nothing owed that was not searchable"
    );

    // Every request's window ends where the lag did.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let open_above: i64 = conn
        .query_row(
            "SELECT count(*) FROM requests r JOIN pollers p ON p.id = r.poller_id
              WHERE p.name = 'searcher search:snowleak' AND r.before_id IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(open_above, 0, "each window is narrowed to the lag's bound");

    // The client's own account: the newest ID it asked above last, what it received.
    let received = output.received();
    let final_since: u128 = received.iter().map(|id| id.parse().unwrap()).max().unwrap();
    let (first_sent, last_sent) = (output.pages[0].0, output.pages.last().unwrap().0);
    let first_low: u128 = output.pages[0]
        .1
        .iter()
        .map(|id| id.parse().unwrap())
        .min()
        .unwrap();
    let truth = truth(&db);
    // Held back by the lag: visible before the last request, never received,
    // above the final cursor. Owed to nobody yet, so lost by nobody.
    let held_back: BTreeSet<String> = truth
        .iter()
        .filter(|(id, _, visible, _)| {
            *visible < last_sent
                && !received.contains(id)
                && id.parse::<u128>().unwrap() > final_since
        })
        .map(|(id, ..)| id.clone())
        .collect();
    assert!(
        !held_back.is_empty(),
        "at 50 statuses a second, the last second was visible and not yet searchable"
    );
    let judged = judged_lost(&loaded, &analysis, p);
    assert!(
        judged.is_disjoint(&held_back),
        "{:?}",
        judged.intersection(&held_back)
    );
    // Lost by its own output: settled (visible and searchable well before
    // its last request), never received, below the cursor it ended with,
    // and not the backlog below its first, full, page.
    let margin_ms = 300;
    let settled = |visible: i64, id_time: i64| {
        visible <= last_sent - margin_ms && id_time <= last_sent - lag_ms - margin_ms
    };
    let lost: BTreeSet<String> = truth
        .iter()
        .filter(|(id, id_time, visible, _)| {
            let key: u128 = id.parse().unwrap();
            settled(*visible, *id_time)
                && !received.contains(id)
                && key < final_since
                && !(key < first_low && *visible <= first_sent)
        })
        .map(|(id, ..)| id.clone())
        .collect();
    let settled_judged: BTreeSet<String> = truth
        .iter()
        .filter(|(id, id_time, visible, _)| judged.contains(id) && settled(*visible, *id_time))
        .map(|(id, ..)| id.clone())
        .collect();
    assert_eq!(
        settled_judged, lost,
        "the checker's losses are the client's own"
    );
    // And no loss the client's cursor had not passed: it can still be served.
    for id in &judged {
        assert!(
            id.parse::<u128>().unwrap() < final_since,
            "{id} judged lost above the cursor"
        );
    }
}

/// A client reading one account's statuses with `min_id` (ws-mastodump's and
/// mastodon-archive's loop) is a poller of `account:ID`, recorded with that
/// account's scope: it is owed that account's statuses only, not another
/// author's nor the same author's on another server.
#[test]
fn an_account_timeline_client_is_owed_that_accounts_statuses_only() {
    let dir = temp_dir("scoped-account");
    let db = dir.join("rec.db");
    let token = "the-archivers-token";
    let (server, base) = serve(
        &[
            "--profile",
            "mastodon",
            "--backlog",
            "20s",
            "--set",
            "rate_per_s=50",
            "--set",
            "authors=4",
            "--record",
            db.to_str().unwrap(),
        ],
        "archiver",
        token,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (account, output) = runtime.block_on(async {
        let http = snowleak::api::http_client(std::time::Duration::from_secs(30)).unwrap();
        let account: Value = http
            .get(format!("{base}/api/v1/accounts/lookup?acct=user3"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = account["id"].as_str().unwrap().to_string();
        let url = format!("{base}/api/v1/accounts/{id}/statuses");
        let mut output = Output::default();
        let mut min_id: Option<String> = None;
        for _ in 0..20 {
            let mut req = http.get(&url).bearer_auth(token).query(&[("limit", "40")]);
            if let Some(m) = &min_id {
                req = req.query(&[("min_id", m.as_str())]);
            }
            let sent = now_ms();
            let page: Vec<Value> = req.send().await.unwrap().json().await.unwrap();
            let ids: Vec<String> = page
                .iter()
                .map(|s| {
                    assert_eq!(s["account"]["id"], id.as_str(), "only that account's");
                    s["id"].as_str().unwrap().to_string()
                })
                .collect();
            if let Some(newest) = ids.first() {
                min_id = Some(newest.clone());
            }
            output.pages.push((sent, ids));
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        (id, output)
    });
    stop(server);
    assert_eq!(account, "1000003");
    assert!(!output.received().is_empty());

    let conn = rusqlite::Connection::open(&db).unwrap();
    let scopes: Vec<String> = conn
        .prepare("SELECT DISTINCT scope FROM client_requests")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        scopes,
        ["account:local:3"],
        "the look-up is not a timeline request"
    );
    let authors: std::collections::HashMap<String, i64> = conn
        .prepare("SELECT id, author FROM truth_authors")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();

    let (loaded, analysis, p) = judged(&db, "archiver account:1000003");
    let h = &loaded.history;
    let truth = truth(&db);
    let index: std::collections::HashMap<String, usize> = (0..h.statuses.len())
        .map(|su| (loaded.status_id(su as u32).into_owned(), su))
        .collect();
    let mut owed = 0;
    for (id, _, _, origin) in &truth {
        let su = index[id];
        let mine = authors.get(id) == Some(&3) && !origin.starts_with("remote");
        assert_eq!(
            h.unserved_to(su) & (1 << p) == 0,
            mine,
            "status {id} ({origin})"
        );
        owed += usize::from(mine);
    }
    assert!(owed > 0 && owed < truth.len());
    let stats = &analysis.pollers[p];
    assert_eq!(stats.misses_unexplained, 0);
    // Every status of the account visible well before the last request was
    // received (a forward loop from the oldest, 40 at a time, reads the
    // backlog up): no loss but a leak the client's cursor passed.
    let received = output.received();
    for id in judged_lost(&loaded, &analysis, p) {
        assert!(!received.contains(&id));
        assert_eq!(authors.get(&id), Some(&3), "{id} is not the account's");
    }
}
