//! Every side table is declared once (`rundb::tables`): its declaration is
//! consistent with itself and with docs/rundb.md, and every row written by
//! the one generic writer reads back the same through the one generic
//! reader.

use rundb::tables::SIDE_TABLES;
use rundb::{
    ClientRequestRow, CursorFlagRow, PollerRow, RequestRow, RunRow, SideTable, SweepRunRow,
    TruthAuthorRow, read, write,
};
use rusqlite::Connection;

/// The table `T::CREATE` creates is the one `T::NAME` names.
fn creates_its_name<T: SideTable>(conn: &Connection) -> String {
    conn.execute_batch(T::CREATE).unwrap();
    let name: String = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(name, T::NAME, "{}'s CREATE", T::NAME);
    name
}

/// Each declared table creates the table it names, and each has its
/// paragraph in docs/rundb.md (`**name**`): adding a table is its
/// declaration and that paragraph.
#[test]
fn each_side_table_creates_what_it_names_and_is_documented() {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(rundb::schema::CREATE).unwrap();
    let created = [
        creates_its_name::<rundb::WriterBracketRow>(&conn),
        creates_its_name::<rundb::FttPushRow>(&conn),
        creates_its_name::<rundb::FttTrimRow>(&conn),
        creates_its_name::<rundb::FttDeleteRow>(&conn),
        creates_its_name::<rundb::PartitionDropRow>(&conn),
        creates_its_name::<CursorFlagRow>(&conn),
        creates_its_name::<ClientRequestRow>(&conn),
        creates_its_name::<rundb::LogTruthRow>(&conn),
        creates_its_name::<rundb::DeliveryRow>(&conn),
        creates_its_name::<TruthAuthorRow>(&conn),
        creates_its_name::<SweepRunRow>(&conn),
        creates_its_name::<rundb::WatchStateRow>(&conn),
    ];
    assert_eq!(created, SIDE_TABLES);
    let docs = include_str!("../../../docs/rundb.md");
    for name in SIDE_TABLES {
        assert!(
            docs.contains(&format!("**{name}**")),
            "docs/rundb.md has no paragraph for {name}"
        );
    }
}

/// The run database of one run with one poller and one request (cycle 2,
/// page 1, sent at 50); its ids.
fn one_request(conn: &Connection) -> (i64, i64) {
    let poller = PollerRow {
        name: "id".into(),
        policy: "naive".into(),
        ..PollerRow::default()
    };
    let (run_id, pollers) = write::add_run(conn, &RunRow::default(), &[poller]).unwrap();
    let request: RequestRow = RequestRow {
        poller_id: pollers[0],
        cycle: 2,
        page: 1,
        sent_at_ms: 50,
        ..RequestRow::default()
    };
    (
        run_id,
        write::insert_request(conn, run_id, &request).unwrap(),
    )
}

/// A flag names its request by poller and place and reads back so; one
/// whose request is not there is a one-line error, and writes nothing.
#[test]
fn cursor_flags_find_their_request_and_a_lost_one_is_an_error() {
    let dir = testkit::temp_dir("cursor-flags");
    let conn = write::open(&dir.join("run.db"), "--db").unwrap();
    let (run_id, request_id) = one_request(&conn);
    let flag = CursorFlagRow {
        poller: "id".into(),
        cycle: 2,
        page: 1,
        sent_at_ms: 50,
        cursor: 7,
        oldest_kept: 10,
    };
    write::side_rows(&conn, run_id, std::slice::from_ref(&flag)).unwrap();
    assert_eq!(
        read::side_rows::<CursorFlagRow>(&conn, run_id).unwrap(),
        vec![flag.clone()]
    );
    let stored: i64 = conn
        .query_row("SELECT request_id FROM cursor_flags", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, request_id);
    let lost = CursorFlagRow {
        cycle: 3,
        ..flag.clone()
    };
    let err = write::side_rows(&conn, run_id, &[lost]).unwrap_err();
    assert_eq!(
        err.0,
        "cannot write cursor_flags: no request of id at cycle 3 page 1 sent at 50"
    );
    assert_eq!(
        read::side_rows::<CursorFlagRow>(&conn, run_id).unwrap(),
        vec![flag]
    );
}

/// A client's request row reads back beside its request, by run; one
/// written before `served` existed gains the column at the next write and
/// reads as NULL until then.
#[test]
fn client_requests_read_back_by_run_and_an_older_table_gains_served() {
    let dir = testkit::temp_dir("client-requests");
    let conn = write::open(&dir.join("run.db"), "--db").unwrap();
    let (run_id, request_id) = one_request(&conn);
    conn.execute_batch(
        "CREATE TABLE client_requests (request_id INTEGER PRIMARY KEY REFERENCES requests(id), \
         client TEXT NOT NULL, method TEXT NOT NULL, endpoint TEXT NOT NULL, params TEXT NOT NULL, \
         scope TEXT NOT NULL DEFAULT 'all')",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO client_requests VALUES (?1, 'c', 'GET', '/old', '{}', 'all')",
        [request_id],
    )
    .unwrap();
    let old = read::side_rows::<ClientRequestRow>(&conn, run_id).unwrap();
    assert_eq!((old.len(), old[0].served.clone()), (1, None));
    let (_, next) = one_request(&conn);
    let row = ClientRequestRow {
        request_id: next,
        client: "relay".into(),
        method: "GET".into(),
        endpoint: "/api/v1/timelines/public".into(),
        params: "{\"since_id\":\"5\"}".into(),
        scope: "local".into(),
        served: Some(vec![1, 2, 3]),
    };
    write::side_rows(&conn, run_id + 1, std::slice::from_ref(&row)).unwrap();
    assert_eq!(
        read::side_rows::<ClientRequestRow>(&conn, run_id + 1).unwrap(),
        vec![row]
    );
    assert_eq!(
        read::side_rows::<ClientRequestRow>(&conn, run_id).unwrap(),
        old
    );
}

/// A status's first author stays (the recorder's test shows that an empty
/// batch does not create the table).
#[test]
fn truth_authors_keep_the_first_author_and_stream_as_they_read() {
    let dir = testkit::temp_dir("truth-authors");
    let conn = write::open(&dir.join("run.db"), "--db").unwrap();
    let (run_id, _) = write::add_run(&conn, &RunRow::default(), &[]).unwrap();
    let author = |id: &str, author| TruthAuthorRow {
        id: id.into(),
        author,
    };
    write::side_rows(&conn, run_id, &[author("1", 3), author("2", 4)]).unwrap();
    write::side_rows(&conn, run_id, &[author("1", 9)]).unwrap();
    assert_eq!(
        read::side_rows::<TruthAuthorRow>(&conn, run_id).unwrap(),
        vec![author("1", 3), author("2", 4)]
    );
    let mut streamed = Vec::new();
    read::for_each_truth_author(&conn, run_id, |id, a| {
        streamed.push(author(id, a));
        Ok::<_, rundb::Error>(())
    })
    .unwrap();
    assert_eq!(streamed, vec![author("1", 3), author("2", 4)]);
}

/// A planned run's file gets its one `sweep_run` row (a second write
/// replaces it), whether or not it is a run database, and it reads back.
#[test]
fn a_sweep_run_row_replaces_the_one_before_and_reads_back() {
    let dir = testkit::temp_dir("sweep-run");
    let path = dir.join("0.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE other (x)")
        .unwrap();
    assert_eq!(read::sweep_run(&path).unwrap(), None);
    let row = SweepRunRow {
        plan: "plan".into(),
        index: 3,
        combination: "a=1".into(),
        seed: -1,
        experiment: "experiment 0.1".into(),
        machine: "{}".into(),
        started_at_ms: 1,
        ended_at_ms: 2,
        job: None,
        result: Some("{\"rows\":[]}".into()),
    };
    write::sweep_run(&path, &SweepRunRow::default()).unwrap();
    write::sweep_run(&path, &row).unwrap();
    assert_eq!(read::sweep_run(&path).unwrap(), Some(row));
    let journal: String = Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "delete", "the file alone is the run");
}
