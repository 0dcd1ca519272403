//! The run database's schema: an interface as much as the command line is.
//! People open run.db in sqlite3, Datasette or pandas, so every table and
//! column is documented in the README, and `PRAGMA user_version` says which
//! version of this schema a file holds.
//!
//! Conventions: times are integers in ms since the Unix epoch (`*_ms`); IDs are
//! stored exactly as the API gave them (`TEXT`), with `*_key` beside them, 32
//! hex digits that sort like the ID, and `id_time_ms`, the time decoded from
//! the ID, so that SQL alone can order IDs and compute skews.

/// The version written to `PRAGMA user_version`. Bump it on any change.
pub const SCHEMA_VERSION: i64 = 1;

/// A marker so that `analyze` can tell our databases from another program's.
pub const APPLICATION_ID: i64 = 0x534e_4f57; // "SNOW"

pub const CREATE: &str = r#"
CREATE TABLE IF NOT EXISTS runs (
    id              INTEGER PRIMARY KEY,
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER,
    complete        INTEGER NOT NULL DEFAULT 0,
    end_reason      TEXT,
    target          TEXT NOT NULL,
    profile         TEXT,
    seed            INTEGER,
    clock           TEXT NOT NULL,
    layout          TEXT NOT NULL,
    interval_ms     INTEGER NOT NULL,
    page_limit      INTEGER NOT NULL,
    config          TEXT NOT NULL,
    version         TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pollers (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    name            TEXT NOT NULL,
    policy          TEXT NOT NULL,
    k_ms            INTEGER,
    UNIQUE (run_id, name)
);
CREATE TABLE IF NOT EXISTS requests (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    poller_id       INTEGER NOT NULL REFERENCES pollers(id),
    cycle           INTEGER NOT NULL,
    page            INTEGER NOT NULL,
    sent_at_ms      INTEGER NOT NULL,
    received_at_ms  INTEGER NOT NULL,
    since_id        TEXT,
    since_key       TEXT,
    before_id       TEXT,
    before_key      TEXT,
    page_limit      INTEGER NOT NULL,
    retrieved_at_ms INTEGER,
    http_status     INTEGER,
    error           TEXT,
    items           INTEGER NOT NULL DEFAULT 0,
    new_items       INTEGER NOT NULL DEFAULT 0,
    bytes           INTEGER,
    reordered       INTEGER NOT NULL DEFAULT 0,
    overflow        INTEGER NOT NULL DEFAULT 0,
    wait_ms         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS requests_by_poller ON requests (poller_id, sent_at_ms);
CREATE TABLE IF NOT EXISTS statuses (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    id              TEXT NOT NULL,
    id_key          TEXT NOT NULL,
    id_time_ms      INTEGER NOT NULL,
    created_at      TEXT,
    author          TEXT,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS observations (
    request_id      INTEGER NOT NULL REFERENCES requests(id),
    position        INTEGER NOT NULL,
    status_id       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS truth (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    id              TEXT NOT NULL,
    id_key          TEXT NOT NULL,
    id_time_ms      INTEGER NOT NULL,
    posted_at_ms    INTEGER NOT NULL,
    visible_at_ms   INTEGER NOT NULL,
    deleted_at_ms   INTEGER,
    origin          TEXT NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
"#;

/// The tables of [`CREATE`], which every run database has.
pub const TABLES: [&str; 6] = [
    "runs",
    "pollers",
    "requests",
    "statuses",
    "observations",
    "truth",
];

/// The table of the writers' transaction brackets of the database targets
/// (PostgreSQL's and MariaDB's; docs/rundb.md), created by the first such run
/// that writes to a file, so that the other runs' files keep exactly the
/// tables of [`CREATE`]. Files written before the rename hold the same
/// columns in a table named [`OLD_WRITER_BRACKETS`].
pub const WRITER_BRACKETS: &str = "CREATE TABLE IF NOT EXISTS writer_brackets (
    run_id             INTEGER NOT NULL REFERENCES runs(id),
    id                 TEXT NOT NULL,
    xid                TEXT NOT NULL,
    xact_start_ms      INTEGER NOT NULL,
    commit_ts_ms       INTEGER,
    commit_returned_ms INTEGER NOT NULL,
    injected_sleep_ms  INTEGER NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;";

/// The name [`WRITER_BRACKETS`]'s table had before it was named for what it
/// holds; [`crate::read::writer_brackets`] still reads it.
pub const OLD_WRITER_BRACKETS: &str = "pg_truth";

/// Misskey's Fanout Timeline (`--target misskey-ftt`): for each note and each
/// Redis list the polled endpoint reads, when the note was committed and when
/// its LPUSH returned (NULL: the 3-minute rule refused it), and by which path
/// (`pipeline` or `lindex`); the entries LTRIM cut; the notes the creators
/// deleted (`--delete-share`). Created by the first such run, so that the
/// other runs' files keep the tables of [`CREATE`].
pub const FTT_PUSHES: &str = "CREATE TABLE IF NOT EXISTS ftt_pushes (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    id              TEXT NOT NULL,
    list            TEXT NOT NULL,
    committed_at_ms INTEGER NOT NULL,
    pushed_at_ms    INTEGER,
    path            TEXT NOT NULL,
    PRIMARY KEY (run_id, id, list)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ftt_trims (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    id              TEXT NOT NULL,
    list            TEXT NOT NULL,
    trimmed_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (run_id, id, list)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ftt_deletes (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    id              TEXT NOT NULL,
    sent_at_ms      INTEGER NOT NULL,
    returned_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;";

/// The partitions a retention job dropped during a run (MariaDB targets):
/// which ID range (`lo_id <= id < hi_id`), when the `DROP PARTITION` was sent
/// and when it returned, and how many rows it held. Created by the first run
/// that drops one, so that other runs' files keep the tables of [`CREATE`].
pub const PARTITION_DROPS: &str = "CREATE TABLE IF NOT EXISTS partition_drops (
    run_id             INTEGER NOT NULL REFERENCES runs(id),
    partition          TEXT NOT NULL,
    lo_id              INTEGER NOT NULL,
    hi_id              INTEGER NOT NULL,
    sent_at_ms         INTEGER NOT NULL,
    returned_at_ms     INTEGER NOT NULL,
    rows               INTEGER NOT NULL,
    PRIMARY KEY (run_id, partition)
) WITHOUT ROWID;";

/// The requests of an ID poller whose cursor lay below the oldest ID the
/// retention job kept when they were sent (MariaDB targets): the IDs between
/// were dropped before that poller read them, and its `id > cursor` query
/// answered with the next partition's rows as if nothing were missing. The
/// oldest ID kept is the upper bound of the last range whose `DROP
/// PARTITION` was sent before the request (`partition_drops`). Created by the
/// first run that flags one, so that other runs' files keep the tables of
/// [`CREATE`].
pub const CURSOR_FLAGS: &str = "CREATE TABLE IF NOT EXISTS cursor_flags (
    request_id         INTEGER PRIMARY KEY REFERENCES requests(id),
    run_id             INTEGER NOT NULL REFERENCES runs(id),
    poller_id          INTEGER NOT NULL REFERENCES pollers(id),
    sent_at_ms         INTEGER NOT NULL,
    cursor             INTEGER NOT NULL,
    oldest_kept        INTEGER NOT NULL
);";

/// What a client the harness did not write asked for, beside its request
/// row (`experiment serve --record`): which client (a name, or a short hash
/// of its credential, never the credential), the method and endpoint, and its
/// cursor and page parameters as sent, as a JSON object; and the statuses
/// the endpoint serves (its [`crate::scope::Scope`]); and the IDs the page
/// served, in response order, as one value ([`crate::pages`]) where
/// `observations` would hold a row per ID (NULL: the request's observations
/// are rows of `observations`, as a file written before the column was added
/// has them). Created by the first recorded client request, so that other
/// runs' files keep the tables of [`CREATE`].
pub const CLIENT_REQUESTS: &str = "CREATE TABLE IF NOT EXISTS client_requests (
    request_id         INTEGER PRIMARY KEY REFERENCES requests(id),
    client             TEXT NOT NULL,
    method             TEXT NOT NULL,
    endpoint           TEXT NOT NULL,
    params             TEXT NOT NULL,
    scope              TEXT NOT NULL DEFAULT 'all',
    served             BLOB
);";

/// The author of each status of a recording's truth (`experiment serve
/// --record`), for the scopes that serve some authors only (one author's
/// timeline, a home timeline). Created with the first rows.
pub const TRUTH_AUTHORS: &str = "CREATE TABLE IF NOT EXISTS truth_authors (
    run_id             INTEGER NOT NULL REFERENCES runs(id),
    id                 TEXT NOT NULL,
    author             INTEGER NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;";

/// The truth of `experiment judge --log postgres` (docs/log-truth.md),
/// read from PostgreSQL's logical decoding: one row per change to the judged
/// table that a committed transaction made, in the order the log gave them
/// (`seq`, commit order): the row's key as text, its transaction, the LSN and
/// time of its COMMIT, and `op` (`insert` or `delete`). A rolled-back
/// transaction is never in the log. Created by the first such run, so that
/// other runs' files keep the tables of [`CREATE`].
///
/// `read_ms` (NULL unless set; added by `judge --log mariadb`, and to a
/// file written before it existed): when the harness read the row's commit
/// from the log, for a log whose commit times are in whole seconds (MariaDB's
/// binlog); the consumers' lags are then measured on it.
pub const LOG_TRUTH: &str = "CREATE TABLE IF NOT EXISTS log_truth (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    seq             INTEGER NOT NULL,
    key             TEXT NOT NULL,
    xid             INTEGER NOT NULL,
    commit_lsn      TEXT NOT NULL,
    commit_ms       INTEGER NOT NULL,
    op              TEXT NOT NULL,
    read_ms         INTEGER,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;";

/// What each consumer of `experiment judge --log postgres` delivered
/// (`--delivered NAME=FILE`), in the file's order: the consumer's name, the
/// line's number in the file, the key it names (NULL for a line that names
/// none, whose text is in `raw`, cut at 200 bytes), and when the harness read
/// the line (ms; the delivery happened at most one read period before).
/// Created by the first such run.
pub const LOG_DELIVERIES: &str = "CREATE TABLE IF NOT EXISTS log_deliveries (
    run_id          INTEGER NOT NULL REFERENCES runs(id),
    consumer        TEXT NOT NULL,
    line            INTEGER NOT NULL,
    key             TEXT,
    raw             TEXT,
    read_at_ms      INTEGER NOT NULL,
    PRIMARY KEY (run_id, consumer, line)
) WITHOUT ROWID;";
