//! End to end on a real PostgreSQL (no mock): writers load a throwaway
//! cluster with an injected tail of long transactions, three pollers read it
//! over SQL, and every claim is checked twice, by `analyze --json` and by an
//! independent SQL query over run.db. A machine without PostgreSQL fails
//! these tests with the cluster's message; they never skip.

mod common;

use common::{analyze, experiment, poller, temp_dir};
use rusqlite::Connection;

/// The k of the compensated poller: the tail's sleeps (up to 1.5 s) are far beyond it.
const K_MS: i64 = 300;

#[test]
fn naive_leaks_compensated_leaks_only_beyond_k_xmin_misses_nothing() {
    let dir = temp_dir("postgres");
    let db = dir.join("run.db");
    experiment(&[
        "--target",
        "postgres",
        "--duration",
        "6s",
        "--writers",
        "8",
        "--write-rate",
        "150",
        "--pg-tail",
        "10%:1500ms",
        "--poller",
        "naive",
        "--poller",
        "compensated:k=300ms",
        "--poller",
        "xmin",
        "--db",
        db.to_str().unwrap(),
    ]);
    let report = analyze(&db);
    assert_eq!(report["reference"], "truth");
    let text = common::run_bin(env!("CARGO_BIN_EXE_analyze"), &[db.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("rows committed in PostgreSQL"), "{text}");
    let conn = Connection::open(&db).unwrap();
    let truth: i64 = conn
        .query_row("SELECT count(*) FROM truth", [], |r| r.get(0))
        .unwrap();
    assert!(truth > 100, "the writers committed ({truth} rows)");
    let brackets: i64 = conn
        .query_row(
            "SELECT count(*) FROM writer_brackets g JOIN truth t ON t.id = g.id
             WHERE g.commit_ts_ms IS NOT NULL AND g.commit_ts_ms <= g.commit_returned_ms
               AND t.visible_at_ms = g.commit_returned_ms + 1 AND g.xact_start_ms <= g.commit_ts_ms",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(brackets, truth, "every row has its bracket, in order");

    // Rows a poller owed (COMMIT returned before one of its requests was sent)
    // and never returned: computed here from the raw tables, not by analyze.
    let never_returned = |name: &str| -> Vec<(String, i64)> {
        let mut st = conn
            .prepare(
                "SELECT t.id, t.visible_at_ms - t.id_time_ms FROM truth t
                 WHERE t.visible_at_ms <= (SELECT max(r.sent_at_ms) FROM requests r
                                           JOIN pollers p ON p.id = r.poller_id WHERE p.name = ?1)
                   AND t.id NOT IN (SELECT o.status_id FROM observations o
                                    JOIN requests r ON r.id = o.request_id
                                    JOIN pollers p ON p.id = r.poller_id WHERE p.name = ?1)",
            )
            .unwrap();
        st.query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };

    // Naive leaks under long transactions, by analyze and by SQL.
    let naive = poller(&report, "naive");
    assert!(naive["leaks"].as_u64().unwrap() > 0, "{naive}");
    assert!(!never_returned("naive").is_empty());

    // Compensated: whatever it misses became visible more than k after its ID time.
    let comp = poller(&report, "compensated:k=300ms");
    assert_eq!(comp["misses_unexplained"], 0, "{comp}");
    let comp_missed = never_returned("compensated:k=300ms");
    assert!(
        !comp_missed.is_empty(),
        "sleeps of up to 1.5 s beat k = 300 ms: the check below is not vacuous"
    );
    for (id, lateness) in comp_missed {
        assert!(lateness > K_MS, "{id} was {lateness} ms late, within k");
    }
    for leak in report["leaks"].as_array().unwrap() {
        if leak["missed_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "compensated:k=300ms")
        {
            let lateness: i64 = conn
                .query_row(
                    "SELECT visible_at_ms - id_time_ms FROM truth WHERE id = ?1",
                    [leak["id"].as_str().unwrap()],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(lateness > K_MS, "{leak}: {lateness} ms");
        }
    }

    // xmin misses nothing: every committed row was returned.
    let xmin = poller(&report, "xmin");
    assert_eq!(xmin["missed"], 0, "{xmin}");
    assert_eq!(xmin["verdict"], "valid");
    let returned: i64 = conn
        .query_row(
            "SELECT count(DISTINCT o.status_id) FROM observations o
             JOIN requests r ON r.id = o.request_id JOIN pollers p ON p.id = r.poller_id
             WHERE p.name = 'xmin' AND o.status_id IN (SELECT id FROM truth)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(returned, truth, "xmin returned every committed row");
    // The injected tail is an assumption of the run, and says so.
    let config: String = conn
        .query_row("SELECT config FROM runs", [], |r| r.get(0))
        .unwrap();
    assert!(
        config.contains("injected tail"),
        "the assumption is stored: {config}"
    );
}
