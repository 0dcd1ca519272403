//! A recorded client's pages are stored one value a page
//! (`client_requests.served`, rundb::pages) instead of a row per observation;
//! `analyze` must read them as it reads rows: the same observations, in the
//! same order, and the same report.

mod common;

use analysis::synth::{SimSpec, simulate_to_db};
use common::{analyze, temp_dir};
use rusqlite::Connection;

/// Each request's observed IDs, in order, as the loader gives them.
fn observed(db: &std::path::Path) -> Vec<Vec<String>> {
    let conn = Connection::open(db).unwrap();
    let loaded = analysis::load::load(&conn, 1).unwrap();
    let h = &loaded.history;
    h.requests
        .iter()
        .map(|r| {
            h.observations[r.obs_start as usize..r.obs_end as usize]
                .iter()
                .map(|&i| loaded.status_id(i).into_owned())
                .collect()
        })
        .collect()
}

/// Moves every request's observations from rows into one `served` value.
fn compact(db: &std::path::Path) {
    let conn = Connection::open(db).unwrap();
    let requests: Vec<i64> = conn
        .prepare("SELECT id FROM requests ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for id in requests {
        let ids: Vec<String> = conn
            .prepare("SELECT status_id FROM observations WHERE request_id = ?1 ORDER BY position")
            .unwrap()
            .query_map([id], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let row = rundb::ClientRequestRow {
            request_id: id,
            client: "c".into(),
            method: "GET".into(),
            endpoint: "/api/v1/timelines/home".into(),
            params: "{}".into(),
            scope: "all".into(),
            served: Some(rundb::pages::encode(&ids)),
        };
        rundb::write::side_rows(&conn, 0, &[row]).unwrap();
    }
    conn.execute("DELETE FROM observations", []).unwrap();
}

#[test]
fn pages_stored_as_one_value_are_read_as_their_rows() {
    let dir = temp_dir("pages");
    let (rows, pages) = (dir.join("rows.db"), dir.join("pages.db"));
    let spec = SimSpec {
        late_fraction: 0.2,
        ..SimSpec::default()
    };
    simulate_to_db(&rows, &spec, true).unwrap();
    simulate_to_db(&pages, &spec, true).unwrap();
    compact(&pages);
    let before = observed(&rows);
    assert!(before.iter().map(Vec::len).sum::<usize>() > 1000);
    assert_eq!(observed(&pages), before);
    let count = |db: &std::path::Path| -> i64 {
        Connection::open(db)
            .unwrap()
            .query_row("SELECT count(*) FROM observations", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&pages), 0, "every observation is in a served value");
    // The same report, leaks and verdicts included (not the file's own path).
    let (mut a, mut b) = (analyze(&rows), analyze(&pages));
    // The compacted copy names a client (its `client_requests` rows): only that differs.
    for poller in b["pollers"].as_array_mut().unwrap() {
        assert_eq!(poller["client"], "c");
        poller["client"] = serde_json::Value::Null;
    }
    // A recorded client's run is judged in memory, the plain one streaming,
    // which leaves out the oracle (docs/analysis.md, "Streaming").
    for poller in a["pollers"].as_array_mut().unwrap() {
        assert!(poller["oracle_ratio"].is_null());
    }
    for poller in b["pollers"].as_array_mut().unwrap() {
        poller["oracle_ratio"] = serde_json::Value::Null;
    }
    assert_eq!(a["pollers"], b["pollers"]);
    assert_eq!(a["leaks"], b["leaks"]);
    assert!(a["leaks"].as_array().is_some_and(|l| !l.is_empty()));
}

#[test]
fn a_served_value_analyze_did_not_write_is_a_clear_error() {
    let dir = temp_dir("bad-pages");
    let db = dir.join("run.db");
    simulate_to_db(&db, &SimSpec::default(), true).unwrap();
    compact(&db);
    Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE client_requests SET served = x'0980' WHERE request_id = 3",
            [],
        )
        .unwrap();
    let conn = Connection::open(&db).unwrap();
    let error = analysis::load::load(&conn, 1).err().unwrap();
    assert!(
        error.0.contains("request 3") && error.0.contains("unknown encoding"),
        "{}",
        error.0
    );
}
