//! The read rules of Misskey's Fanout Timeline, as the code is, as one pure
//! function: from the Redis lists' contents and a request to the IDs served
//! from Redis and the PostgreSQL query to make, if any. No I/O, no clock.
//!
//! Followed line by line (misskey-dev/misskey):
//! - `packages/backend/src/core/FanoutTimelineService.ts` at 0b2dd3a5,
//!   `getMulti`: `LRANGE list 0 -1` of every source; per list, keep
//!   `id < untilId && id > sinceId` (string comparison), sort descending, or
//!   ascending when only `sinceId` is given.
//! - `packages/backend/src/core/FanoutTimelineEndpointService.ts` at
//!   03707e02, `getMiNotes`: the lists' union, deduplicated and sorted
//!   (ascending when `sinceId && !untilId`); `noteIds = slice(0, limit)`;
//!   `oldestNoteId` the first (ascending) or last (descending) of the union;
//!   `shouldFallbackToDb = noteIds.length === 0 || sinceId != null && sinceId
//!   < oldestNoteId`. Without the fallback the IDs are read from the database
//!   in batches of `ceil(remaining * min(1.1 / lastSuccessfulRate, 3))`
//!   (`getAndFilterFromDb`), until `limit` notes are found or the IDs run out;
//!   then `dbFallback` fills the rest beyond the last ID read. With
//!   `useDbFallback` false, `dbFallback` is `() => Promise.resolve([])`.
//!
//! The consequence the code has and its intent (PR #14061) did not: `getMulti`
//! has dropped every ID not above `sinceId`, so `oldestNoteId > sinceId`
//! always, and every request with a `sinceId` takes the fallback; with the
//! fallback off it gets an empty page. Pinned by the tests below.
//!
//! `getAndFilterFromDb`'s filters (mutes, blocks, replies, renotes) do not
//! apply to this target's notes; what remains of it is the lookup itself: an
//! ID no longer in PostgreSQL (a deleted note) is not served. The caller says
//! which IDs PostgreSQL holds (`in_db`).

use std::collections::BTreeSet;

/// A timeline request's cursors and page size, as the endpoint sees them
/// (`sinceDate`/`untilDate` already turned into IDs).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Request {
    pub since_id: Option<String>,
    pub until_id: Option<String>,
    pub limit: usize,
    /// `withFiles`: only notes with files, read from the with-files lists
    /// (`timeline::redis_keys_of`) and, on the fallback, `note.fileIds != '{}'`.
    pub with_files: bool,
}

/// The server's switches (Misskey's meta `enableFanoutTimeline` and
/// `enableFanoutTimelineDbFallback`, both true by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switches {
    pub fanout_timeline: bool,
    pub db_fallback: bool,
}

impl Default for Switches {
    fn default() -> Switches {
        Switches {
            fanout_timeline: true,
            db_fallback: true,
        }
    }
}

/// A query of the notes table: `id < until AND id > since`, ordered
/// ascending when only `since` is given, else descending, `LIMIT limit`
/// (Misskey's `QueryService.makePaginationQuery`, which the endpoints' `dbFallback` use).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbQuery {
    pub until_id: Option<String>,
    pub since_id: Option<String>,
    pub limit: usize,
    /// Only notes with files (the request's `withFiles`).
    pub with_files: bool,
}

impl DbQuery {
    /// Ascending when only a lower bound is given.
    pub fn ascending(&self) -> bool {
        self.since_id.is_some() && self.until_id.is_none()
    }
}

/// Which path answered a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// FTT switched off: the endpoint queries PostgreSQL directly.
    DbDirect,
    /// `shouldFallbackToDb` and the fallback on: PostgreSQL answers.
    DbFallback,
    /// `shouldFallbackToDb` and the fallback off: an empty page.
    EmptyFallback,
    /// Redis's IDs filled the page.
    Redis,
    /// Redis's IDs, then `dbFallback` beyond the last one read (an empty
    /// fill when the fallback is off).
    RedisThenDb,
}

impl Path {
    /// The name stored in run.db and printed in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Path::DbDirect => "db-direct",
            Path::DbFallback => "db-fallback",
            Path::EmptyFallback => "empty-fallback",
            Path::Redis => "redis",
            Path::RedisThenDb => "redis+db",
        }
    }
}

/// What to serve: the Redis IDs first, in order, then the query's rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub path: Path,
    /// IDs from Redis, found in PostgreSQL, in the page's order.
    pub redis_ids: Vec<String>,
    /// The PostgreSQL query whose rows follow them, if any.
    pub db: Option<DbQuery>,
}

/// `getMulti`'s per-list filter and sort, then `getMiNotes`' union: the
/// candidate IDs in the page's order (descending, or ascending when only
/// `sinceId` is given).
pub fn candidates(lists: &[Vec<String>], req: &Request) -> Vec<String> {
    let ascending = req.since_id.is_some() && req.until_id.is_none();
    let keep = |id: &&String| {
        req.until_id.as_ref().is_none_or(|u| *id < u)
            && req.since_id.as_ref().is_none_or(|s| *id > s)
    };
    // Union and dedupe (`new Set(...)`), sorted by string comparison.
    let union: BTreeSet<&String> = lists.iter().flatten().filter(keep).collect();
    let mut ids: Vec<String> = union.into_iter().cloned().collect();
    if !ascending {
        ids.reverse();
    }
    ids
}

/// The whole decision of `getMiNotes`. `in_db(id)` says whether PostgreSQL
/// still holds a note (a lookup the caller made; nothing is read here).
pub fn decide(
    lists: &[Vec<String>],
    req: &Request,
    switches: Switches,
    in_db: impl Fn(&str) -> bool,
) -> Decision {
    let whole = || DbQuery {
        until_id: req.until_id.clone(),
        since_id: req.since_id.clone(),
        limit: req.limit,
        with_files: req.with_files,
    };
    if !switches.fanout_timeline {
        return Decision {
            path: Path::DbDirect,
            redis_ids: Vec::new(),
            db: Some(whole()),
        };
    }
    let ascending = req.since_id.is_some() && req.until_id.is_none();
    let ids = candidates(lists, req);
    // `oldestNoteId = ascending ? ids[0] : ids[ids.length - 1]`.
    let oldest = if ascending { ids.first() } else { ids.last() };
    let should_fallback = ids.is_empty() || req.limit == 0 || {
        // `ps.sinceId < oldestNoteId`: `oldest` passed `id > sinceId` above,
        // so this holds whenever a sinceId is given.
        matches!((&req.since_id, oldest), (Some(s), Some(o)) if s < o)
    };
    if should_fallback {
        return if switches.db_fallback {
            Decision {
                path: Path::DbFallback,
                redis_ids: Vec::new(),
                db: Some(whole()),
            }
        } else {
            Decision {
                path: Path::EmptyFallback,
                redis_ids: Vec::new(),
                db: None,
            }
        };
    }
    // The batched lookups of `getAndFilterFromDb`.
    let mut served: Vec<String> = Vec::new();
    let mut read = 0usize;
    let mut rate = 1.0f64;
    let mut last_batch: &[String] = &[];
    while read < ids.len() {
        let remaining = req.limit - served.len();
        let count = (remaining as f64 * (1.1 / rate).min(3.0)).ceil() as usize;
        let batch = &ids[read..(read + count).min(ids.len())];
        read += batch.len();
        let found: Vec<&String> = batch.iter().filter(|id| in_db(id)).collect();
        rate = found.len() as f64 / batch.len() as f64;
        served.extend(found.into_iter().cloned());
        last_batch = batch;
        if served.len() >= req.limit {
            served.truncate(req.limit);
            return Decision {
                path: Path::Redis,
                redis_ids: served,
                db: None,
            };
        }
    }
    // Short of `limit`: `dbFallback` beyond the last ID read.
    let last = last_batch.last().cloned();
    let (until_id, since_id) = if ascending {
        (req.until_id.clone(), last)
    } else {
        (last, req.since_id.clone())
    };
    Decision {
        path: Path::RedisThenDb,
        db: switches.db_fallback.then(|| DbQuery {
            until_id,
            since_id,
            limit: req.limit - served.len(),
            with_files: req.with_files,
        }),
        redis_ids: served,
    }
}

/// A span of a run in ms from its start, `from_ms` included, `to_ms` not:
/// `--ftt-off FROM..TO` (FTT switched off, then on again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Window {
    pub from_ms: u64,
    pub to_ms: u64,
}

/// Whether `enableFanoutTimeline` is on at `since_start_ms` into the run:
/// `base` (the run's switch) unless one of `off` covers that ms. Misskey
/// reads the switch from its meta at each `pushToTl` (`if
/// (!this.meta.enableFanoutTimeline) return;`, misskey-dev/misskey
/// `packages/backend/src/core/NoteCreateService.ts` at f4bec81f) and at each
/// timeline request (`FanoutTimelineEndpointService.getMiNotes`), so both
/// sides ask this at the moment they act.
pub fn fanout_on_at(base: bool, off: &[Window], since_start_ms: i64) -> bool {
    base && !off
        .iter()
        .any(|w| since_start_ms >= w.from_ms as i64 && since_start_ms < w.to_ms as i64)
}

#[cfg(test)]
mod tests {

    #[test]
    fn fanout_is_off_inside_a_window_from_its_start_until_its_end() {
        let off = [
            Window {
                from_ms: 1_000,
                to_ms: 2_000,
            },
            Window {
                from_ms: 5_000,
                to_ms: 5_001,
            },
        ];
        let on = |ms| fanout_on_at(true, &off, ms);
        assert!(on(-1) && on(0) && on(999));
        assert!(!on(1_000) && !on(1_999));
        assert!(on(2_000) && on(4_999));
        assert!(!on(5_000));
        assert!(on(5_001));
        assert!(
            !fanout_on_at(false, &[], 0),
            "switched off for the whole run"
        );
    }
    use super::*;

    fn list(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn req(since: Option<&str>, until: Option<&str>, limit: usize) -> Request {
        Request {
            since_id: since.map(str::to_string),
            until_id: until.map(str::to_string),
            limit,
            with_files: false,
        }
    }

    const ON: Switches = Switches {
        fanout_timeline: true,
        db_fallback: true,
    };
    const NO_FALLBACK: Switches = Switches {
        fanout_timeline: true,
        db_fallback: false,
    };

    fn all(_: &str) -> bool {
        true
    }

    #[test]
    fn the_newest_page_is_served_from_redis_in_id_order_not_push_order() {
        // Pushed (LPUSH: newest push first) out of ID order.
        let home = list(&["c", "e", "d", "b", "a"]);
        let d = decide(&[home], &req(None, None, 3), ON, all);
        assert_eq!(d.path, Path::Redis);
        assert_eq!(d.redis_ids, list(&["e", "d", "c"]));
        assert_eq!(d.db, None);
    }

    #[test]
    fn every_request_with_a_since_id_goes_to_the_database() {
        // Plenty above the cursor in Redis, and a cursor inside the list:
        // the intent was a Redis answer, the code falls back.
        let home = list(&["h", "g", "f", "e", "d", "c", "b", "a"]);
        for since in ["a", "c", "f", "0"] {
            let d = decide(
                std::slice::from_ref(&home),
                &req(Some(since), None, 2),
                ON,
                all,
            );
            assert_eq!(d.path, Path::DbFallback, "sinceId {since}");
            assert!(d.redis_ids.is_empty());
            assert_eq!(
                d.db,
                Some(DbQuery {
                    until_id: None,
                    since_id: Some(since.into()),
                    limit: 2,
                    with_files: false,
                })
            );
            assert!(d.db.unwrap().ascending());
        }
        // With an untilId too (descending): the oldest of the union is still above sinceId.
        let d = decide(&[home], &req(Some("b"), Some("g"), 2), ON, all);
        assert_eq!(d.path, Path::DbFallback);
        assert!(!d.db.unwrap().ascending());
    }

    #[test]
    fn with_the_fallback_off_a_since_id_gets_an_empty_page() {
        let home = list(&["h", "g", "f", "e"]);
        let d = decide(&[home], &req(Some("e"), None, 10), NO_FALLBACK, all);
        assert_eq!(d.path, Path::EmptyFallback);
        assert!(d.redis_ids.is_empty());
        assert_eq!(d.db, None);
    }

    #[test]
    fn empty_lists_fall_back() {
        let d = decide(&[Vec::new()], &req(None, None, 10), ON, all);
        assert_eq!(d.path, Path::DbFallback);
        assert_eq!(d.db.unwrap().since_id, None);
        let d = decide(&[list(&["a"])], &req(None, Some("a"), 10), NO_FALLBACK, all);
        assert_eq!(d.path, Path::EmptyFallback);
    }

    #[test]
    fn a_short_list_is_filled_from_the_database_beyond_its_last_id() {
        let home = list(&["f", "e", "d"]);
        let d = decide(&[home], &req(None, Some("f"), 5), ON, all);
        assert_eq!(d.path, Path::RedisThenDb);
        assert_eq!(d.redis_ids, list(&["e", "d"]));
        assert_eq!(
            d.db,
            Some(DbQuery {
                until_id: Some("d".into()),
                since_id: None,
                limit: 3,
                with_files: false,
            })
        );
        let d = decide(&[list(&["f", "e"])], &req(None, None, 5), NO_FALLBACK, all);
        assert_eq!((d.path, d.db), (Path::RedisThenDb, None));
    }

    #[test]
    fn until_id_paging_is_answered_by_redis_when_the_list_reaches_far_enough() {
        let home = list(&["f", "e", "d", "c", "b", "a"]);
        let d = decide(&[home], &req(None, Some("e"), 2), ON, all);
        assert_eq!((d.path, d.redis_ids), (Path::Redis, list(&["d", "c"])));
    }

    #[test]
    fn sources_of_different_depth_answer_from_redis_without_the_trimmed_notes() {
        // Hybrid: home keeps only "x9".."x8" (trimmed below), local reaches back
        // to "a". A page below home's tail is all local, and complete enough
        // that no database fill runs: the trimmed home notes ("x1", say) are
        // never asked for (misskey-dev/misskey#13488).
        let home = list(&["x9", "x8"]);
        let local = list(&["e", "d", "c", "b", "a"]);
        let d = decide(&[home, local], &req(None, Some("x8"), 3), ON, all);
        assert_eq!((d.path, d.redis_ids), (Path::Redis, list(&["e", "d", "c"])));
    }

    #[test]
    fn the_union_is_deduplicated() {
        let d = decide(
            &[list(&["c", "b"]), list(&["c", "a"])],
            &req(None, None, 10),
            NO_FALLBACK,
            all,
        );
        assert_eq!(d.redis_ids, list(&["c", "b", "a"]));
    }

    #[test]
    fn ids_gone_from_the_database_are_skipped_in_batches() {
        let home = list(&["j", "i", "h", "g", "f", "e", "d", "c", "b", "a"]);
        // First batch: ceil(3 * 1.1) = 4 IDs, two found (rate 0.5); then
        // ceil(1 * min(2.2, 3)) = 3 more.
        let d = decide(&[home], &req(None, None, 3), ON, |id| {
            !["j", "h"].contains(&id)
        });
        assert_eq!((d.path, d.redis_ids), (Path::Redis, list(&["i", "g", "f"])));
    }

    #[test]
    fn with_ftt_off_the_database_answers_every_request() {
        let off = Switches {
            fanout_timeline: false,
            db_fallback: true,
        };
        let d = decide(&[list(&["b", "a"])], &req(None, None, 2), off, all);
        assert_eq!(d.path, Path::DbDirect);
        assert_eq!(d.db.unwrap().limit, 2);
    }
}
