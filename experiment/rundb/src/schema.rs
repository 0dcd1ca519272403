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

/// The side tables, each created by the first write that needs it and
/// declared in one place ([`crate::tables`]).
pub use crate::tables::SIDE_TABLES;
