//! PostgreSQL as a real leak source: a throwaway cluster, schemas whose IDs
//! are taken at transaction start but become visible at commit, writers that
//! load it, and pollers that read it over SQL.

pub mod cluster;
pub mod driver;
pub mod http;
pub mod own;
pub mod schema;
pub mod source;
pub mod writers;
pub mod xmin;

/// An SQL identifier, quoted (PostgreSQL manual 4.1.1: double quotes, doubled inside).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A database error in one line: the server's message when there is one.
pub fn db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}
