//! `withFiles` on `experiment serve --backend misskey-ftt` (issue 33): a
//! page asked `withFiles: true` holds only notes with files, from the
//! with-files Redis list (no cursor) and from PostgreSQL's fallback (a
//! `sinceId`), as Misskey's endpoints read them; each of its notes shows its
//! files; and a recording marks such a page `none`, since the truth does not
//! say which notes have files. Checked against the notes table itself, read
//! over the cluster's socket. Real Redis and PostgreSQL (the test fails,
//! never skips, without them).

use rusqlite::Connection;
use serde_json::{Value, json};
use std::collections::BTreeSet;

mod common;
use common::temp_dir;

/// A child process killed if the test ends early, so that no server outlives it.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The IDs of a page, checking each note's files against `with_files`.
fn ids(page: &Value, with_files: bool) -> Vec<String> {
    let notes = page.as_array().unwrap_or_else(|| panic!("{page}"));
    notes
        .iter()
        .map(|n| {
            let files = n["files"].as_array().unwrap();
            let file_ids = n["fileIds"].as_array().unwrap();
            assert_eq!(files.len(), file_ids.len(), "{n}");
            if with_files {
                assert!(!files.is_empty(), "a withFiles note shows its files: {n}");
                assert_eq!(files[0]["id"], file_ids[0]);
            }
            n["id"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn with_files_serves_only_notes_with_files_from_both_paths_and_is_recorded_as_none() {
    let dir = temp_dir("serve-ftt-files");
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
    let (mut local, mut postgres) = (None, None);
    loop {
        let mut line = String::new();
        assert!(
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0,
            "the server ended before it printed its banner"
        );
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["misskey", url] if url.ends_with("/local-timeline") => local = Some(url.to_string()),
            ["postgresql", dir, ..] => postgres = Some(std::path::PathBuf::from(dir)),
            ["Ctrl-C", ..] => break,
            _ => {}
        }
    }
    let (local, postgres) = (local.unwrap(), postgres.unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (plain, from_redis, from_db, with_files_in_db) = runtime.block_on(async {
        let http = snowleak::api::http_client(std::time::Duration::from_secs(10)).unwrap();
        let page = |body: Value| {
            let http = http.clone();
            let local = local.clone();
            async move {
                let r = http.post(&local).json(&body).send().await.unwrap();
                assert_eq!(r.status(), 200);
                r.json::<Value>().await.unwrap()
            }
        };
        // Until the creators have made some notes with files (a fifth of them).
        let mut from_redis = Vec::new();
        for _ in 0..100_000 {
            from_redis = ids(
                &page(json!({"i": "files", "limit": 100, "withFiles": true})).await,
                true,
            );
            if from_redis.len() >= 3 {
                break;
            }
        }
        assert!(from_redis.len() >= 3, "no notes with files were made");
        // A sinceId below them all: PostgreSQL's fallback answers, oldest first.
        let bottom = from_redis.iter().min().unwrap().clone();
        let since = format!("{}0000read0000", &bottom[..4]);
        // The plain page first: a note committed between the two requests
        // can only add to the second.
        let plain = ids(
            &page(json!({"i": "plain", "limit": 100, "withFiles": false, "sinceId": since})).await,
            false,
        );
        let from_db = ids(
            &page(json!({"i": "files", "limit": 100, "withFiles": true, "sinceId": since})).await,
            true,
        );
        let (client, connection) = tokio_postgres::Config::new()
            .host_path(&postgres)
            .port(5432)
            .user("postgres")
            .dbname("postgres")
            .connect(tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let rows = client
            .query("SELECT id FROM note WHERE has_files AND is_local", &[])
            .await
            .unwrap();
        let with_files: BTreeSet<String> = rows.iter().map(|r| r.get(0)).collect();
        (plain, from_redis, from_db, with_files)
    });
    common::signal(&child.0, "-INT");
    assert!(child.0.wait().unwrap().success());

    for (path, served) in [("redis", &from_redis), ("fallback", &from_db)] {
        let without: Vec<&String> = served
            .iter()
            .filter(|id| !with_files_in_db.contains(*id))
            .collect();
        assert!(
            without.is_empty(),
            "{path} served notes without files: {without:?}"
        );
    }
    // The same window without `withFiles` holds both kinds; its notes with
    // files are all in the withFiles page (the oldest above the same cursor).
    let plain_files: Vec<&String> = plain
        .iter()
        .filter(|id| with_files_in_db.contains(*id))
        .collect();
    assert!(
        plain_files.len() < plain.len(),
        "the plain page has notes without files"
    );
    let missing: Vec<&&String> = plain_files
        .iter()
        .filter(|id| !from_db.contains(id))
        .collect();
    assert!(missing.is_empty(), "withFiles left out {missing:?}");

    let conn = Connection::open(&db).unwrap();
    let scopes: Vec<(String, i64)> = conn
        .prepare(
            "SELECT scope, count(*) FROM client_requests
             WHERE endpoint = '/api/notes/local-timeline' GROUP BY scope ORDER BY scope",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let none = scopes.iter().find(|(s, _)| s == "none").map(|(_, n)| *n);
    let local_scope = scopes.iter().find(|(s, _)| s == "local").map(|(_, n)| *n);
    assert_eq!(local_scope, Some(1), "the one plain page: {scopes:?}");
    assert!(
        none.is_some_and(|n| n >= 2),
        "every withFiles page: {scopes:?}"
    );
}
