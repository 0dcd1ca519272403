//! `client_requests`: what a client the harness did not write asked for,
//! beside its `requests` row (`experiment serve --record`; docs/rundb.md).

use super::SideTable;
use rusqlite::{Row, Statement, params};

/// A row of `client_requests`: what a foreign client asked for, beside its
/// `requests` row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientRequestRow {
    /// The `requests` row it stands beside: set by the writer, which has
    /// just inserted that request.
    pub request_id: i64,
    /// The client's poller name (`--client NAME`, or a short hash of its credential).
    pub client: String,
    pub method: String,
    /// The path, without the query.
    pub endpoint: String,
    /// The cursor and page parameters as sent, a JSON object.
    pub params: String,
    /// The statuses the endpoint serves, in [`crate::scope::Scope`]'s text form.
    pub scope: String,
    /// The IDs the page served, in order, encoded by [`crate::pages::encode`];
    /// `None` when they are rows of `observations`.
    pub served: Option<Vec<u8>>,
}

/// Which client (a name, or a short hash of its credential, never the
/// credential), the method and endpoint, its cursor and page parameters as
/// sent, as a JSON object; the statuses the endpoint serves (its
/// [`crate::scope::Scope`]); and the IDs the page served, in response
/// order, as one value ([`crate::pages`]) where `observations` would hold a
/// row per ID (NULL: the request's observations are rows of
/// `observations`, as a file written before the column was added has them).
/// Created by the first recorded client request; keyed by request, so its
/// rows name no run.
impl SideTable for ClientRequestRow {
    const NAME: &'static str = "client_requests";
    const CREATE: &'static str = "CREATE TABLE IF NOT EXISTS client_requests (
    request_id         INTEGER PRIMARY KEY REFERENCES requests(id),
    client             TEXT NOT NULL,
    method             TEXT NOT NULL,
    endpoint           TEXT NOT NULL,
    params             TEXT NOT NULL,
    scope              TEXT NOT NULL DEFAULT 'all',
    served             BLOB
);";
    const ADDED: &'static [(&'static str, &'static str)] = &[("served", "BLOB")];
    const CREATED_EMPTY: bool = false;
    const INSERT: &'static str = "INSERT INTO client_requests (request_id, client, method, \
         endpoint, params, scope, served) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    const COLUMNS: &'static str = "request_id, client, method, endpoint, params, scope, served";
    const FILTER: &'static str =
        "WHERE request_id IN (SELECT id FROM requests WHERE run_id = ?1) ORDER BY request_id";

    fn insert(&self, st: &mut Statement<'_>, _run_id: i64) -> rusqlite::Result<usize> {
        st.execute(params![
            self.request_id,
            self.client,
            self.method,
            self.endpoint,
            self.params,
            self.scope,
            self.served
        ])
    }

    fn read(r: &Row) -> rusqlite::Result<Self> {
        Ok(ClientRequestRow {
            request_id: r.get(0)?,
            client: r.get(1)?,
            method: r.get(2)?,
            endpoint: r.get(3)?,
            params: r.get(4)?,
            scope: r.get(5)?,
            served: r.get(6)?,
        })
    }
}
