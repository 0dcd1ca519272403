//! The partitioned schemas of `--target postgres` (`partitioned`, BIGSERIAL;
//! `partitioned-snowflake`, Snowflake IDs) against a poller that lags behind
//! their retention job, on a real throwaway cluster: `analyze` calls the rows
//! dropped before the poller read them `expired`, one by one, and nothing a
//! leak. The MariaDB target's counterpart is
//! `a_paused_poller_loses_exactly_the_rows_dropped_before_it_read_them`
//! (`experiment/tests/mariadb.rs`).

use rusqlite::Connection;
use std::path::Path;

mod common;
use common::temp_dir;

/// One writer (its commits come in ID order, so nothing leaks by commit
/// order) at 50 rows/s, the job adding a partition and dropping the oldest
/// beyond 3 every 500 ms, pollers every 2 s: a cycle's page (about 100 new
/// rows, 150 for k = 1 s) is never full (1,000), and rows are dropped before
/// the next cycle reads them.
fn lagging_run(name: &str, schema: &str, pollers: &[&str]) -> (common::TempDir, String) {
    let dir = temp_dir(name);
    let db = dir.join("run.db");
    let mut args = vec![
        "--target",
        "postgres",
        "--schema",
        schema,
        "--duration",
        "10s",
        "--interval",
        "2s",
        "--writers",
        "1",
        "--write-rate",
        "50",
        "--partition-every",
        "500ms",
        "--retain",
        "3",
        "--limit",
        "1000",
        "--db",
        db.to_str().unwrap(),
    ];
    for p in pollers {
        args.extend(["--poller", p]);
    }
    let out = common::experiment_ok(&args);
    (dir, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The rows our own SQL finds dropped before `poller` read them: in a
/// `partition_drops` range and deleted at that drop, never among its
/// observations, and no request of it that could have returned them (sent
/// once the row was visible, error-free, on a short page, the row inside its
/// since_id and before_id) answered before the drop. By ID.
fn dropped_unread(conn: &Connection, poller: &str) -> Vec<String> {
    let mut st = conn
        .prepare(
            "WITH mine AS (SELECT r.* FROM requests r JOIN pollers p ON p.id = r.poller_id \
                           WHERE r.run_id = 1 AND p.name = ?1) \
             SELECT t.id FROM truth t JOIN partition_drops d ON d.run_id = t.run_id \
               AND CAST(t.id AS INTEGER) >= d.lo_id AND CAST(t.id AS INTEGER) < d.hi_id \
               AND t.deleted_at_ms = d.sent_at_ms \
             WHERE t.run_id = 1 \
               AND NOT EXISTS (SELECT 1 FROM observations o JOIN mine ON mine.id = o.request_id \
                               WHERE o.status_id = t.id) \
               AND NOT EXISTS (SELECT 1 FROM mine WHERE mine.error IS NULL \
                               AND mine.sent_at_ms >= t.visible_at_ms \
                               AND mine.received_at_ms < t.deleted_at_ms \
                               AND mine.items < mine.page_limit \
                               AND (mine.since_id IS NULL \
                                    OR CAST(mine.since_id AS INTEGER) < CAST(t.id AS INTEGER)) \
                               AND (mine.before_id IS NULL \
                                    OR CAST(mine.before_id AS INTEGER) > CAST(t.id AS INTEGER))) \
             ORDER BY CAST(t.id AS INTEGER)",
        )
        .unwrap();
    st.query_map([poller], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The run's partitions and truth as the job left them: the drops are
/// contiguous ranges from 0 in the order they were made, no request failed
/// across them, and every truth row in a dropped range is marked deleted at
/// that drop, and no other.
fn assert_the_drops_are_recorded(conn: &Connection) {
    let one = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    let mut st = conn
        .prepare(
            "SELECT lo_id, hi_id FROM partition_drops WHERE run_id = 1 \
             ORDER BY CAST(substr(partition, 2) AS INTEGER)",
        )
        .unwrap();
    let drops: Vec<(i64, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(drops.len() >= 5, "the job dropped partitions: {drops:?}");
    assert_eq!(
        one("SELECT COUNT(*) FROM requests WHERE run_id = 1 AND error IS NOT NULL"),
        0,
        "a drop fails no poller's request"
    );
    assert_eq!(drops[0].0, 0, "the first partition went first");
    for pair in drops.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "contiguous, oldest first: {drops:?}");
    }
    assert_eq!(
        one(
            "SELECT COUNT(*) FROM truth t WHERE t.run_id = 1 AND t.deleted_at_ms IS NOT \
             (SELECT d.sent_at_ms FROM partition_drops d WHERE d.run_id = 1 \
              AND CAST(t.id AS INTEGER) >= d.lo_id AND CAST(t.id AS INTEGER) < d.hi_id)"
        ),
        0
    );
}

/// `analyze` on `db`: for each poller, its JSON names as `expired` exactly
/// the rows of [`dropped_unread`], counts no leak and no unexplained miss, and
/// its verdict is invalid for the expired rows; the text says it per poller.
/// Returns how many rows expired for all the pollers together.
fn assert_analyze_names_them_expired(dir: &Path, db: &Path, pollers: &[&str]) -> usize {
    let analyze = Path::new(env!("CARGO_BIN_EXE_experiment")).with_file_name("analyze");
    let run = |json: bool| {
        let mut cmd = std::process::Command::new(&analyze);
        cmd.arg(db).arg("--out").arg(dir.join("plots"));
        if json {
            cmd.arg("--json");
        }
        let out = cmd
            .output()
            .expect("analyze runs (cargo builds it for the workspace's tests)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let json: serde_json::Value = serde_json::from_slice(&run(true)).unwrap();
    let text = String::from_utf8_lossy(&run(false)).into_owned();
    let conn = Connection::open(db).unwrap();
    let mut total = 0;
    for &poller in pollers {
        let mut named: Vec<String> = json["expired"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["poller"] == poller)
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect();
        named.sort_by_key(|id| id.parse::<i64>().unwrap());
        assert_eq!(
            named,
            dropped_unread(&conn, poller),
            "{poller}: expired, one by one"
        );
        let report = json["pollers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == poller)
            .unwrap();
        assert_eq!(report["expired"], named.len(), "{poller}");
        assert_eq!(report["leaks"], 0, "{poller}: a drop is no leak");
        assert_eq!(report["misses_unexplained"], 0, "{poller}");
        if !named.is_empty() {
            assert_eq!(report["verdict"], "invalid", "{poller}");
            let why = report["verdict_reason"].as_str().unwrap();
            assert!(
                why.contains(&format!("{} expired", named.len())),
                "{poller}: {why}"
            );
            let line = format!(
                "{} expired (dropped by the retention job before it read them)",
                named.len()
            );
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with(poller) && l.contains(&line)),
                "{poller}: {line} in:\n{text}"
            );
        }
        total += named.len();
    }
    total
}

/// `--schema partitioned` (BIGSERIAL, partitions sized by the IDs the writer
/// took): the naive poller's rows dropped before it read them are expired.
#[test]
fn the_bigserial_partitions_rows_dropped_before_a_lagging_poller_read_them_are_expired() {
    let pollers = ["naive"];
    let (dir, stdout) = lagging_run("pg-retention-bigserial", "partitioned", &pollers);
    assert!(stdout.contains("retention: "), "{stdout}");
    assert!(!stdout.contains("failed (last:"), "{stdout}");
    let db = dir.join("run.db");
    assert_the_drops_are_recorded(&Connection::open(&db).unwrap());
    let expired = assert_analyze_names_them_expired(&dir, &db, &pollers);
    assert!(expired > 0, "the lagging poller met a drop");
}

/// `--schema partitioned-snowflake` (the writer's Snowflake IDs, partitions
/// by ID time): the naive and the compensated poller's rows dropped before
/// they read them are expired, and the partitions are ranges of ID time.
#[test]
fn the_snowflake_partitions_rows_dropped_before_a_lagging_poller_read_them_are_expired() {
    let pollers = ["naive", "compensated:k=1s"];
    let (dir, stdout) = lagging_run("pg-retention-snowflake", "partitioned-snowflake", &pollers);
    assert!(stdout.contains("retention: "), "{stdout}");
    assert!(!stdout.contains("failed (last:"), "{stdout}");
    let db = dir.join("run.db");
    let conn = Connection::open(&db).unwrap();
    assert_the_drops_are_recorded(&conn);
    // Twitter's layout (41 bits of ms since its epoch above 22 bits): each
    // bounded partition's bounds are the first IDs of two ms, and every row
    // of it was made, by its ID, within them.
    let twepoch: i64 = 1_288_834_974_657;
    let mut st = conn
        .prepare("SELECT lo_id, hi_id FROM partition_drops WHERE run_id = 1 AND lo_id > 0")
        .unwrap();
    let ranges: Vec<(i64, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (lo, hi) in ranges {
        assert_eq!(lo & ((1 << 22) - 1), 0, "{lo} is a ms's first ID");
        assert_eq!(hi & ((1 << 22) - 1), 0, "{hi} is a ms's first ID");
        let (from, to) = ((lo >> 22) + twepoch, (hi >> 22) + twepoch);
        let outside: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM truth WHERE run_id = 1 \
                 AND CAST(id AS INTEGER) >= ?1 AND CAST(id AS INTEGER) < ?2 \
                 AND (id_time_ms < ?3 OR id_time_ms >= ?4)",
                rusqlite::params![lo, hi, from, to],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(outside, 0, "rows of [{lo}, {hi}) made in [{from}, {to})");
    }
    let expired = assert_analyze_names_them_expired(&dir, &db, &pollers);
    assert!(expired > 0, "the lagging pollers met a drop");
}
