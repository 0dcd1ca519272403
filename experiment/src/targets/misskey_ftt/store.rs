//! The PostgreSQL side of the Misskey model: a `note` table and a `following`
//! table on the throwaway cluster (`crate::servers::postgres`), the insert of
//! `NoteCreateService.create`, the followers query of `pushToTl`, and the
//! timeline queries the endpoints' `dbFallback` make.
//!
//! Misskey's `note.id` is a `varchar(32)` primary key compared as a string;
//! the column here is `COLLATE "C"` so that PostgreSQL's order is the byte
//! order Redis's readers use in JavaScript (`id < untilId`), whatever the
//! cluster's default collation.

use super::read::DbQuery;
use crate::servers::postgres::db_error;
use tokio_postgres::Client;

/// The tables, created once per run.
pub const DDL: &str = "
CREATE TABLE note (
    id text COLLATE \"C\" PRIMARY KEY,
    user_id integer NOT NULL,
    is_local boolean NOT NULL,
    has_files boolean NOT NULL
);
CREATE TABLE following (
    followee_id integer NOT NULL,
    follower_id integer NOT NULL,
    PRIMARY KEY (followee_id, follower_id)
);
CREATE INDEX following_follower ON following (follower_id);
";

/// Creates the tables and stores the follow graph (`(followee, follower)` pairs).
pub async fn create(client: &Client, follows: &[(i32, i32)]) -> Result<(), String> {
    client
        .batch_execute(DDL)
        .await
        .map_err(|e| format!("cannot create the Misskey tables: {}", db_error(&e)))?;
    let (followees, followers): (Vec<i32>, Vec<i32>) = follows.iter().copied().unzip();
    client
        .execute(
            "INSERT INTO following SELECT * FROM unnest($1::int[], $2::int[])",
            &[&followees, &followers],
        )
        .await
        .map_err(|e| format!("cannot store the follow graph: {}", db_error(&e)))?;
    Ok(())
}

/// `notesRepository.insert(...)`: one autocommitted INSERT (Misskey opens a
/// transaction only for a note with a poll).
pub async fn insert_note(
    client: &Client,
    id: &str,
    user_id: i32,
    is_local: bool,
    has_files: bool,
) -> Result<(), String> {
    client
        .execute(
            "INSERT INTO note (id, user_id, is_local, has_files) VALUES ($1, $2, $3, $4)",
            &[&id, &user_id, &is_local, &has_files],
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot insert a note: {}", db_error(&e)))
}

/// `notesRepository.delete({ id: note.id, userId: user.id })`, the last step
/// of `NoteDeleteService.delete` (misskey-dev/misskey, at 01035434): one
/// autocommitted DELETE.
pub async fn delete_note(client: &Client, id: &str) -> Result<(), String> {
    client
        .execute("DELETE FROM note WHERE id = $1", &[&id])
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot delete a note: {}", db_error(&e)))
}

/// `followingsRepository.find({ followeeId: user.id, followerHost: IsNull() })`:
/// the author's followers (all local in this model).
pub async fn followers(client: &Client, user_id: i32) -> Result<Vec<i32>, String> {
    let rows = client
        .query(
            "SELECT follower_id FROM following WHERE followee_id = $1",
            &[&user_id],
        )
        .await
        .map_err(|e| format!("cannot read followers: {}", db_error(&e)))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Which notes a timeline shows, as its `dbFallback` selects them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `notes/timeline`: notes of the users `me` follows, and `me`'s own.
    Home { me: i32 },
    /// `notes/local-timeline`: local notes.
    Local,
    /// `notes/hybrid-timeline`: both.
    Hybrid { me: i32 },
}

/// The IDs PostgreSQL holds among `ids` (`getAndFilterFromDb`'s lookup).
pub async fn existing(client: &Client, ids: &[String]) -> Result<Vec<String>, String> {
    let rows = client
        .query("SELECT id FROM note WHERE id = ANY($1)", &[&ids])
        .await
        .map_err(|e| format!("cannot look notes up: {}", db_error(&e)))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// `notes/global-timeline`'s query: every note between the bounds (Misskey
/// reads the global timeline from the database alone, with no Fanout
/// Timeline: packages/backend/src/server/api/endpoints/notes/global-timeline.ts,
/// `makePaginationQuery` on `note` where it is public; every note here is),
/// in the same order as [`page`], at most `limit`.
pub async fn global_page(client: &Client, q: &DbQuery) -> Result<Vec<String>, String> {
    let order = if q.ascending() { "ASC" } else { "DESC" };
    let files = if q.with_files { "AND n.has_files" } else { "" };
    let sql = format!(
        "SELECT n.id FROM note n WHERE ($1::text IS NULL OR n.id < $1) \
         AND ($2::text IS NULL OR n.id > $2) {files} ORDER BY n.id {order} LIMIT $3"
    );
    let limit = q.limit as i64;
    let rows = client
        .query(&sql, &[&q.until_id, &q.since_id, &limit])
        .await
        .map_err(|e| {
            format!(
                "cannot read the global timeline from PostgreSQL: {}",
                db_error(&e)
            )
        })?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// A `dbFallback` query: the timeline's notes between the bounds, in the
/// order of `makePaginationQuery`, at most `limit`.
pub async fn page(client: &Client, source: Source, q: &DbQuery) -> Result<Vec<String>, String> {
    let (who, me) = match source {
        Source::Home { me } => (
            "(n.user_id = $4 OR n.user_id IN (SELECT followee_id FROM following WHERE follower_id = $4))",
            me,
        ),
        Source::Local => ("(n.is_local AND $4::int IS NOT NULL)", 0),
        Source::Hybrid { me } => (
            "(n.is_local OR n.user_id = $4 OR n.user_id IN \
             (SELECT followee_id FROM following WHERE follower_id = $4))",
            me,
        ),
    };
    let order = if q.ascending() { "ASC" } else { "DESC" };
    // `withFiles`: `query.andWhere('note.fileIds != \'{}\'')` in each endpoint's getFromDb.
    let files = if q.with_files { "AND n.has_files" } else { "" };
    let sql = format!(
        "SELECT n.id FROM note n WHERE ($1::text IS NULL OR n.id < $1) \
         AND ($2::text IS NULL OR n.id > $2) AND {who} {files} ORDER BY n.id {order} LIMIT $3"
    );
    let limit = q.limit as i64;
    let rows = client
        .query(&sql, &[&q.until_id, &q.since_id, &limit, &me])
        .await
        .map_err(|e| format!("cannot read the timeline from PostgreSQL: {}", db_error(&e)))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
