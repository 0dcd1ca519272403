//! Every row written by `rundb::write` reads back the same through
//! `rundb::read`, and the file holds exactly the schema's tables.

use rundb::write::{self, OnConflict};
use rundb::{
    ObservationRow, PollerRow, RequestRow, RunRow, SideTable, StatusRow, TruthRow,
    WriterBracketRow, read, schema,
};

fn status(n: u64) -> StatusRow {
    StatusRow {
        id: n.to_string(),
        id_key: format!("{n:032x}"),
        id_time_ms: n as i64,
        created_at: n.is_multiple_of(2).then(|| format!("t{n}")),
        author: n.is_multiple_of(3).then(|| format!("a{n}")),
    }
}

#[test]
fn every_row_reads_back_as_written() {
    let dir = testkit::temp_dir("round-trip");
    let path = dir.join("run.db");
    let conn = write::open(&path, "--db").unwrap();
    let run = RunRow {
        started_at_ms: 1,
        target: "simulator".into(),
        profile: Some("twitter".into()),
        // A u64 seed above i64::MAX keeps its bit pattern.
        seed: Some(u64::MAX as i64),
        clock: "virtual".into(),
        layout: "twitter".into(),
        interval_ms: 1000,
        page_limit: 200,
        config: "{}".into(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let pollers = [
        PollerRow {
            name: "naive".into(),
            policy: "naive".into(),
            ..PollerRow::default()
        },
        PollerRow {
            name: "k".into(),
            policy: "compensated:k=1s".into(),
            k_ms: Some(1000),
            ..PollerRow::default()
        },
    ];
    let (run_id, poller_ids) = write::add_run(&conn, &run, &pollers).unwrap();
    let request = RequestRow {
        poller_id: poller_ids[1],
        cycle: 3,
        page: 1,
        sent_at_ms: 10,
        received_at_ms: 12,
        since_id: Some("5".to_string()),
        since_key: Some(format!("{:032x}", 5)),
        before_id: None,
        before_key: None,
        page_limit: 200,
        retrieved_at_ms: Some(9),
        http_status: Some(200),
        error: None,
        items: 120,
        new_items: 60,
        bytes: Some(4096),
        reordered: true,
        overflow: false,
        wait_ms: 7,
        ..RequestRow::default()
    };
    let request_id = write::insert_request(&conn, run_id, &request).unwrap();
    // More than one batch of each, and a remainder.
    let items: Vec<StatusRow> = (1..=120).map(status).collect();
    let ids: Vec<&str> = items.iter().map(|s| s.id.as_str()).collect();
    write::insert_observations(&conn, request_id, &ids).unwrap();
    let refs: Vec<&StatusRow> = items.iter().chain(&items[..3]).collect();
    write::insert_statuses(&conn, run_id, &refs).unwrap();
    let truth: Vec<TruthRow> = (1..=60)
        .map(|n| TruthRow {
            id: n.to_string(),
            id_key: format!("{n:032x}"),
            id_time_ms: n,
            posted_at_ms: n,
            visible_at_ms: n + 1,
            deleted_at_ms: (n == 7).then_some(99),
            origin: "local".into(),
        })
        .collect();
    write::insert_truth(&conn, run_id, &truth, OnConflict::Ignore).unwrap();
    let mut later = truth[0].clone();
    later.deleted_at_ms = Some(50);
    write::insert_truth(&conn, run_id, &[later.clone()], OnConflict::Ignore).unwrap();
    let bracket = WriterBracketRow {
        id: "1".into(),
        xid: "740".into(),
        xact_start_ms: 1,
        commit_ts_ms: None,
        commit_returned_ms: 3,
        injected_sleep_ms: 0,
    };
    write::side_rows(&conn, run_id, std::slice::from_ref(&bracket)).unwrap();
    write::end_run(&conn, run_id, 20, true, "duration").unwrap();
    write::close(conn).unwrap();

    let conn = read::open(&path).unwrap();
    assert_eq!(read::run_ids(&conn).unwrap(), vec![run_id]);
    let back = read::run(&conn, run_id).unwrap().unwrap();
    assert_eq!(
        back,
        RunRow {
            id: run_id,
            ended_at_ms: Some(20),
            complete: true,
            end_reason: Some("duration".into()),
            ..run
        }
    );
    assert_eq!(back.seed.map(|s| s as u64), Some(u64::MAX));
    assert_eq!(read::run(&conn, run_id + 1).unwrap(), None);
    let read_pollers = read::pollers(&conn, run_id).unwrap();
    assert_eq!(
        read_pollers.iter().map(|p| p.id).collect::<Vec<_>>(),
        poller_ids
    );
    assert_eq!(read_pollers[1].k_ms, Some(1000));
    assert_eq!(read_pollers[0].name, "naive");

    let mut requests = Vec::new();
    read::for_each_request(&conn, run_id, |r| {
        let owned = |s: Option<&str>| s.map(str::to_owned);
        requests.push(RequestRow {
            since_id: owned(r.since_id),
            since_key: owned(r.since_key),
            before_id: owned(r.before_id),
            before_key: owned(r.before_key),
            error: owned(r.error),
            id: r.id,
            poller_id: r.poller_id,
            cycle: r.cycle,
            page: r.page,
            sent_at_ms: r.sent_at_ms,
            received_at_ms: r.received_at_ms,
            page_limit: r.page_limit,
            retrieved_at_ms: r.retrieved_at_ms,
            http_status: r.http_status,
            items: r.items,
            new_items: r.new_items,
            bytes: r.bytes,
            reordered: r.reordered,
            overflow: r.overflow,
            wait_ms: r.wait_ms,
        });
        Ok::<_, rundb::Error>(())
    })
    .unwrap();
    assert_eq!(
        requests,
        vec![RequestRow {
            id: request_id,
            ..request
        }]
    );

    let mut observations: Vec<ObservationRow> = Vec::new();
    read::for_each_observation(&conn, request_id..=request_id, |o| {
        observations.push(ObservationRow {
            request_id: o.request_id,
            position: o.position,
            status_id: o.status_id.to_owned(),
        });
        Ok::<_, rundb::Error>(())
    })
    .unwrap();
    let expected: Vec<ObservationRow> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| ObservationRow {
            request_id,
            position: i as i64,
            status_id: id.to_string(),
        })
        .collect();
    assert_eq!(observations, expected);

    let mut statuses = Vec::new();
    read::for_each_status(&conn, run_id, |s| {
        statuses.push(StatusRow {
            id: s.id.to_owned(),
            id_key: s.id_key.to_owned(),
            id_time_ms: s.id_time_ms,
            created_at: s.created_at.map(str::to_owned),
            author: s.author.map(str::to_owned),
        });
        Ok::<_, rundb::Error>(())
    })
    .unwrap();
    statuses.sort_by_key(|s| s.id_time_ms);
    assert_eq!(statuses, items, "each status once, as first written");

    let mut truth_back = Vec::new();
    read::for_each_truth(&conn, run_id, |t| {
        truth_back.push(TruthRow {
            id: t.id.to_owned(),
            id_key: t.id_key.to_owned(),
            id_time_ms: t.id_time_ms,
            posted_at_ms: t.posted_at_ms,
            visible_at_ms: t.visible_at_ms,
            deleted_at_ms: t.deleted_at_ms,
            origin: t.origin.to_owned(),
        });
        Ok::<_, rundb::Error>(())
    })
    .unwrap();
    truth_back.sort_by_key(|t| t.id_time_ms);
    assert_eq!(truth_back, truth, "Ignore kept the first row");
    drop(conn);

    // Replace takes the later word.
    let conn = write::open(&path, "--db").unwrap();
    write::insert_truth(&conn, run_id, &[later.clone()], OnConflict::Replace).unwrap();
    let deleted: Option<i64> = conn
        .query_row("SELECT deleted_at_ms FROM truth WHERE id = '1'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(deleted, Some(50));
    assert_eq!(
        read::side_rows::<WriterBracketRow>(&conn, run_id).unwrap(),
        vec![bracket]
    );
}

/// A drop marks the truth rows of its range deleted when it was sent, but
/// not a row posted after it returned: that insert went to the partition
/// that took the range over.
#[test]
fn a_partition_drop_deletes_the_rows_of_its_range_posted_before_it_returned() {
    let dir = testkit::temp_dir("drops");
    let conn = write::open(&dir.join("run.db"), "--db").unwrap();
    let run = RunRow {
        target: "mariadb".into(),
        clock: "real".into(),
        layout: "integer".into(),
        config: "{}".into(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let (run_id, _) = write::add_run(&conn, &run, &[]).unwrap();
    let key = |n: i64| format!("{n:032x}");
    // IDs 1..=5 posted at 100, 200, ... 500.
    let truth: Vec<TruthRow> = (1..=5)
        .map(|n| TruthRow {
            id: n.to_string(),
            id_key: key(n),
            id_time_ms: n,
            posted_at_ms: 100 * n,
            visible_at_ms: 100 * n + 10,
            deleted_at_ms: None,
            origin: "local".into(),
        })
        .collect();
    write::insert_truth(&conn, run_id, &truth, OnConflict::Ignore).unwrap();
    write::side_rows(&conn, run_id, &[drop_row()]).unwrap();
    let deleted: Vec<(i64, Option<i64>)> = conn
        .prepare("SELECT CAST(id AS INTEGER), deleted_at_ms FROM truth ORDER BY 1")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        deleted,
        vec![
            (1, Some(250)),
            (2, Some(250)),
            (3, Some(250)),
            (4, None),
            (5, None)
        ],
        "1-3 posted before the drop returned; 4 after it; 5 beyond the range"
    );
    assert_eq!(
        read::side_rows::<rundb::PartitionDropRow>(&conn, run_id).unwrap(),
        vec![drop_row()]
    );
    let mut expired = Vec::new();
    read::for_each_expired(&conn, run_id, |id| {
        expired.push(id.to_string());
        Ok::<_, rundb::Error>(())
    })
    .unwrap();
    expired.sort();
    assert_eq!(expired, ["1", "2", "3"], "the rows the drop deleted");
}

fn drop_row() -> rundb::PartitionDropRow {
    rundb::PartitionDropRow {
        partition: "p0".into(),
        lo_id: 0,
        hi_id: 5,
        sent_at_ms: 250,
        returned_at_ms: 300,
        rows: 3,
    }
}

#[test]
fn side_tables_read_back_whole_and_a_file_without_them_has_none() {
    let dir = testkit::temp_dir("side-tables");
    let conn = write::open(&dir.join("run.db"), "--db").unwrap();
    let run = RunRow {
        target: "misskey-ftt".into(),
        clock: "real".into(),
        layout: "aid".into(),
        config: "{}".into(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let (run_id, _) = write::add_run(&conn, &run, &[]).unwrap();
    assert!(
        read::side_rows::<rundb::FttPushRow>(&conn, run_id)
            .unwrap()
            .is_empty()
    );
    assert!(
        read::side_rows::<rundb::PartitionDropRow>(&conn, run_id)
            .unwrap()
            .is_empty()
    );
    let rows = rundb::FttRows {
        pushes: vec![rundb::FttPushRow {
            id: "a".into(),
            list: "l".into(),
            committed_at_ms: 1,
            pushed_at_ms: None,
            path: "pipeline".into(),
        }],
        trims: vec![rundb::FttTrimRow {
            id: "b".into(),
            list: "l".into(),
            trimmed_at_ms: 2,
        }],
        deletes: vec![rundb::FttDeleteRow {
            id: "c".into(),
            sent_at_ms: 3,
            returned_at_ms: 4,
        }],
    };
    write::insert_ftt(&conn, run_id, &rows).unwrap();
    assert_eq!(
        read::side_rows::<rundb::FttPushRow>(&conn, run_id).unwrap(),
        rows.pushes
    );
    assert_eq!(
        read::side_rows::<rundb::FttTrimRow>(&conn, run_id).unwrap(),
        rows.trims
    );
    assert_eq!(
        read::side_rows::<rundb::FttDeleteRow>(&conn, run_id).unwrap(),
        rows.deletes
    );
    assert!(
        read::side_rows::<rundb::FttPushRow>(&conn, run_id + 1)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        read::table_sizes(&conn, run_id).unwrap(),
        read::TableSizes::default()
    );
}

#[test]
fn a_callback_error_stops_the_read() {
    let dir = testkit::temp_dir("stop");
    let path = dir.join("run.db");
    let conn = write::open(&path, "--db").unwrap();
    let (run_id, _) = write::add_run(&conn, &RunRow::default(), &[]).unwrap();
    let rows: Vec<StatusRow> = (1..=5).map(status).collect();
    let refs: Vec<&StatusRow> = rows.iter().collect();
    write::insert_statuses(&conn, run_id, &refs).unwrap();
    write::close(conn).unwrap();
    let conn = read::open(&path).unwrap();
    let mut seen = 0;
    let err = read::for_each_status(&conn, run_id, |_| {
        seen += 1;
        Err(rundb::Error("enough".into()))
    })
    .unwrap_err();
    assert_eq!((seen, err.0.as_str()), (1, "enough"));
}

#[test]
fn a_failed_add_run_leaves_nothing() {
    let dir = testkit::temp_dir("rollback");
    let path = dir.join("run.db");
    let conn = write::open(&path, "--db").unwrap();
    let twice = PollerRow {
        name: "same".into(),
        policy: "naive".into(),
        ..PollerRow::default()
    };
    // UNIQUE (run_id, name): the second poller fails, and the run goes with it.
    assert!(write::add_run(&conn, &RunRow::default(), &[twice.clone(), twice]).is_err());
    let runs: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 0);
}

/// The file holds the tables of `schema::CREATE` and no other until a
/// database run adds `writer_brackets`.
#[test]
fn a_new_file_holds_exactly_the_schema() {
    let dir = testkit::temp_dir("schema");
    let path = dir.join("run.db");
    let conn = write::open(&path, "--db").unwrap();
    let mut names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    names.sort();
    let mut expected: Vec<String> = schema::TABLES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(names, expected);
    let marker: (i64, i64) = conn
        .query_row(
            "SELECT application_id, user_version FROM pragma_application_id, pragma_user_version",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(marker, (schema::APPLICATION_ID, schema::SCHEMA_VERSION));
    assert_eq!(
        read::side_rows::<WriterBracketRow>(&conn, 1).unwrap(),
        vec![]
    );
}

/// A file begun before the table was renamed holds its first runs' brackets
/// in `pg_truth`; a later run adds `writer_brackets`, and each run reads back
/// its own.
#[test]
fn brackets_read_back_from_the_old_table_and_the_new() {
    let dir = testkit::temp_dir("old-brackets");
    let path = dir.join("run.db");
    let conn = write::open(&path, "--db").unwrap();
    let bracket = |id: &str, xid: &str| WriterBracketRow {
        id: id.into(),
        xid: xid.into(),
        xact_start_ms: 1,
        commit_ts_ms: Some(2),
        commit_returned_ms: 3,
        injected_sleep_ms: 0,
    };
    let (old_run, _) = write::add_run(&conn, &RunRow::default(), &[]).unwrap();
    conn.execute_batch(&WriterBracketRow::CREATE.replace(WriterBracketRow::NAME, "pg_truth"))
        .unwrap();
    conn.execute(
        "INSERT INTO pg_truth VALUES (?1, '1', '740', 1, 2, 3, 0)",
        [old_run],
    )
    .unwrap();
    let (new_run, _) = write::add_run(&conn, &RunRow::default(), &[]).unwrap();
    write::side_rows(&conn, new_run, &[bracket("2", "writer 1")]).unwrap();

    assert_eq!(
        read::side_rows::<WriterBracketRow>(&conn, old_run).unwrap(),
        vec![bracket("1", "740")]
    );
    assert_eq!(
        read::side_rows::<WriterBracketRow>(&conn, new_run).unwrap(),
        vec![bracket("2", "writer 1")]
    );
}

#[test]
fn the_log_truth_and_deliveries_read_back_and_an_older_file_has_none() {
    let dir = testkit::temp_dir("log-truth");
    let path = dir.join("run.db");
    let conn = write::open(&path, "--db").unwrap();
    let run = RunRow {
        target: "postgres-log".into(),
        clock: "real".into(),
        layout: "counter".into(),
        config: "{}".into(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let (run_id, _) = write::add_run(&conn, &run, &[]).unwrap();
    // A file without the tables (written before they existed) reads as none.
    assert!(
        read::side_rows::<rundb::LogTruthRow>(&conn, run_id)
            .unwrap()
            .is_empty()
    );
    assert!(
        read::side_rows::<rundb::DeliveryRow>(&conn, run_id)
            .unwrap()
            .is_empty()
    );
    let truth = vec![
        rundb::LogTruthRow {
            seq: 1,
            key: "2".into(),
            xid: 750,
            commit_lsn: "0/16B3748".into(),
            commit_ms: 100,
            op: "insert".into(),
            read_ms: Some(100_250),
        },
        rundb::LogTruthRow {
            seq: 0,
            key: "it's".into(),
            xid: 749,
            commit_lsn: "0/16B3000".into(),
            commit_ms: 90,
            op: "delete".into(),
            read_ms: None,
        },
    ];
    write::side_rows(&conn, run_id, &truth).unwrap();
    let deliveries = vec![
        rundb::DeliveryRow {
            consumer: "relay".into(),
            line: 2,
            key: None,
            raw: Some("garbage".into()),
            read_at_ms: 7,
        },
        rundb::DeliveryRow {
            consumer: "relay".into(),
            line: 1,
            key: Some("2".into()),
            raw: None,
            read_at_ms: 5,
        },
    ];
    write::side_rows(&conn, run_id, &deliveries).unwrap();
    let mut by_seq = truth.clone();
    by_seq.sort_by_key(|r| r.seq);
    assert_eq!(
        read::side_rows::<rundb::LogTruthRow>(&conn, run_id).unwrap(),
        by_seq
    );
    let mut by_line = deliveries.clone();
    by_line.sort_by_key(|d| d.line);
    assert_eq!(
        read::side_rows::<rundb::DeliveryRow>(&conn, run_id).unwrap(),
        by_line
    );
}

#[test]
fn a_log_truth_made_before_read_ms_reads_without_it_and_gains_it_on_the_next_write() {
    let dir = testkit::temp_dir("log-truth-old");
    let path = dir.join("run.db");
    let conn = write::open(&path, "--db").unwrap();
    let run = RunRow {
        target: "postgres-log".into(),
        clock: "real".into(),
        layout: "key".into(),
        config: "{}".into(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let (run_id, _) = write::add_run(&conn, &run, &[]).unwrap();
    // The table as the first postgres judge made it, with a row.
    conn.execute_batch(
        "CREATE TABLE log_truth (run_id INTEGER NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL, \
         key TEXT NOT NULL, xid INTEGER NOT NULL, commit_lsn TEXT NOT NULL, commit_ms INTEGER NOT NULL, \
         op TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO log_truth VALUES (?1, 0, '1', 7, '0/1', 10, 'insert')",
        [run_id],
    )
    .unwrap();
    let old = read::side_rows::<rundb::LogTruthRow>(&conn, run_id).unwrap();
    assert_eq!(old.len(), 1);
    assert_eq!(old[0].read_ms, None);
    let row = rundb::LogTruthRow {
        seq: 1,
        key: "2".into(),
        xid: 8,
        commit_lsn: "binlog.000001:900".into(),
        commit_ms: 2000,
        op: "insert".into(),
        read_ms: Some(2345),
    };
    write::side_rows(&conn, run_id, std::slice::from_ref(&row)).unwrap();
    let both = read::side_rows::<rundb::LogTruthRow>(&conn, run_id).unwrap();
    assert_eq!(both.len(), 2);
    assert_eq!((both[0].read_ms, &both[1]), (None, &row));
}

#[test]
fn a_pollers_delays_run_from_each_commit_to_its_first_response() {
    let dir = testkit::temp_dir("delays");
    let conn = write::open(&dir.join("run.db"), "--db").unwrap();
    let run = RunRow {
        target: "postgres".into(),
        clock: "real".into(),
        layout: "integer".into(),
        config: "{}".into(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let poller = |name: &str| PollerRow {
        name: name.into(),
        policy: "xmin".into(),
        ..PollerRow::default()
    };
    let (run_id, ids) = write::add_run(&conn, &run, &[poller("xmin"), poller("other")]).unwrap();
    let bracket = |id: &str, commit_ts_ms: Option<i64>| WriterBracketRow {
        id: id.into(),
        xid: "1".into(),
        commit_ts_ms,
        ..WriterBracketRow::default()
    };
    let brackets = [
        bracket("1", Some(100)),
        bracket("2", Some(100)),
        bracket("3", None),
    ];
    write::side_rows(&conn, run_id, &brackets).unwrap();
    // "1" returned at 150 and again at 400, "2" at 400, "3" (no commit
    // timestamp) at 150; the other poller's "2" at 120 is not the xmin's.
    for (poller_id, received_at_ms, items) in [
        (ids[0], 150, vec!["1", "3"]),
        (ids[0], 400, vec!["2", "1"]),
        (ids[1], 120, vec!["2"]),
    ] {
        let request: RequestRow = RequestRow {
            poller_id,
            received_at_ms,
            items: items.len() as i64,
            ..RequestRow::default()
        };
        let request_id = write::insert_request(&conn, run_id, &request).unwrap();
        write::insert_observations(&conn, request_id, &items).unwrap();
    }
    assert_eq!(
        read::delays_after_commit(&conn, run_id, "xmin").unwrap(),
        [50, 300]
    );
    assert_eq!(
        read::delays_after_commit(&conn, run_id, "other").unwrap(),
        [20]
    );
    assert!(
        read::delays_after_commit(&conn, run_id, "none")
            .unwrap()
            .is_empty()
    );
}
