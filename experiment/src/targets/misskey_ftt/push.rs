//! The write side as Misskey runs it (misskey-dev/misskey
//! `packages/backend/src/core/NoteCreateService.ts` at f4bec81f, `create`,
//! `insertNote`, `postNoteCreated`, `pushToTl`; `FanoutTimelineService.ts` at
//! 0b2dd3a5, `push`):
//!
//! 1. `create()`: `createdAt` is now (a local note) or the remote's `published`
//!    time; the aidx ID is made from it (`idService.gen(createdAt)`).
//! 2. `insertNote`: one autocommitted INSERT; the note is visible to
//!    PostgreSQL reads from here on.
//! 3. `pushToTl`, not awaited by `create()`: the followers query, then one
//!    `push` per list into one pipeline, `r.exec()`. `push` LPUSHes at the
//!    head when the ID's date is within 3 minutes of now, and then with
//!    probability 0.1 LTRIMs the list to its cap; an older ID is pushed
//!    outside the pipeline, only if `LINDEX list -1` (the earliest-pushed
//!    survivor) is older, check then push, not atomic.
//!
//! Lists and caps, from `pushToTl` and the meta defaults (misskey-dev/misskey
//! `packages/backend/migration/1696373953614-meta-cache-settings.js`):
//! `homeTimeline:<follower>` and the author's own, 300
//! (`perUserHomeTimelineCacheMax`), `homeTimelineWithFiles:` half of it;
//! `userTimeline:<author>` 300 local, 100 remote
//! (`perLocalUserUserTimelineCacheMax`, `perRemoteUserUserTimelineCacheMax`),
//! `userTimelineWithFiles:` half; `localTimeline` 1000 and
//! `localTimelineWithFiles` 500 for local public notes (hard-coded).
//! Not modelled: replies, renotes, lists, antennas, channels, visibility
//! other than public.
//!
//! One addition, to observe what is trimmed: before each LTRIM the same
//! pipeline reads `LRANGE list cap -1`, the entries the LTRIM is about to cut.
//! Another connection's LPUSH may land between the two commands (a pipeline
//! is not a transaction); then one more entry is cut than observed, and the
//! truth finds it at the end of the run (pushed, not in its list, not seen cut).

use super::aidx;
use rand::Rng;

/// How old an ID's date may be and still be pushed unconditionally (`1000 * 60 * 3`).
pub const RECENT_MS: i64 = 3 * 60 * 1000;
/// `if (Math.random() < 0.1)`: the share of pushes followed by an LTRIM.
pub const TRIM_PROBABILITY: f64 = 0.1;

/// The caps, Misskey's defaults unless a scenario changes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Caps {
    pub home: usize,
    pub local_user: usize,
    pub remote_user: usize,
    pub local_timeline: usize,
    pub local_timeline_with_files: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            home: 300,
            local_user: 300,
            remote_user: 100,
            local_timeline: 1000,
            local_timeline_with_files: 500,
        }
    }
}

/// The Redis key of a user's home timeline (`'list:' + 'homeTimeline:' + id`).
pub fn home_key(user: i32) -> String {
    format!("list:homeTimeline:{user}")
}

/// The Redis key of the local timeline.
pub const LOCAL_KEY: &str = "list:localTimeline";

/// A note as `pushToTl` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub id: String,
    pub user_id: i32,
    pub is_local: bool,
    pub has_files: bool,
}

/// Every list a note goes to, with its cap, in `pushToTl`'s order.
pub fn lists_of(note: &Note, followers: &[i32], caps: &Caps) -> Vec<(String, usize)> {
    let mut out = Vec::with_capacity(followers.len() * 2 + 6);
    let home = |user: i32, out: &mut Vec<(String, usize)>| {
        out.push((home_key(user), caps.home));
        if note.has_files {
            out.push((format!("list:homeTimelineWithFiles:{user}"), caps.home / 2));
        }
    };
    for &f in followers {
        home(f, &mut out);
    }
    // The author's own home timeline.
    home(note.user_id, &mut out);
    let user_cap = if note.is_local {
        caps.local_user
    } else {
        caps.remote_user
    };
    out.push((format!("list:userTimeline:{}", note.user_id), user_cap));
    if note.has_files {
        out.push((
            format!("list:userTimelineWithFiles:{}", note.user_id),
            user_cap / 2,
        ));
    }
    if note.is_local {
        out.push((LOCAL_KEY.to_string(), caps.local_timeline));
        if note.has_files {
            out.push((
                "list:localTimelineWithFiles".to_string(),
                caps.local_timeline_with_files,
            ));
        }
    }
    out
}

/// One list's part of a push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// In the pipeline: LPUSH, then LTRIM to `trim_to` when drawn.
    Push {
        list: String,
        trim_to: Option<usize>,
    },
    /// Outside it: LINDEX list -1, then LPUSH if the ID's date is later.
    IfNewer { list: String },
}

/// `push` for every list: which path, and which pushes trim. Pure: the
/// time is an argument and the draws come from `rng`.
pub fn plan(id: &str, lists: &[(String, usize)], now_ms: i64, rng: &mut impl Rng) -> Vec<Op> {
    let recent = aidx::parse_ms(id).is_some_and(|t| t > now_ms - RECENT_MS);
    lists
        .iter()
        .map(|(list, cap)| {
            if recent {
                Op::Push {
                    list: list.clone(),
                    trim_to: rng.random_bool(TRIM_PROBABILITY).then_some(*cap),
                }
            } else {
                Op::IfNewer { list: list.clone() }
            }
        })
        .collect()
}

/// The `LINDEX -1` rule: push if the list is empty or the ID's date is later
/// than the date of its earliest-pushed survivor (dates, not IDs, compared).
pub fn newer_than_tail(id: &str, tail: Option<&str>) -> bool {
    match tail {
        None => true,
        Some(last) => {
            aidx::parse_ms(id).unwrap_or(i64::MIN) > aidx::parse_ms(last).unwrap_or(i64::MIN)
        }
    }
}

/// What a push did to one list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    pub list: String,
    /// When Redis answered the LPUSH; `None` when the LINDEX rule refused it.
    pub pushed_at_ms: Option<i64>,
    /// `pipeline` or `lindex`.
    pub path: &'static str,
}

/// Entries an LTRIM cut, as observed just before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trimmed {
    pub list: String,
    pub ids: Vec<String>,
    pub at_ms: i64,
}

/// What one `pushToTl` did, and how many Redis commands it sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub pushed: Vec<Pushed>,
    pub trimmed: Vec<Trimmed>,
    pub commands: u64,
}

fn redis_error(e: redis::RedisError) -> String {
    format!("Redis: {e}")
}

/// Sends a plan to Redis: the pipeline (LPUSH, LRANGE+LTRIM when drawn),
/// then the LINDEX checks and their LPUSHes. `now` reads the clock.
pub async fn execute(
    conn: &mut redis::aio::MultiplexedConnection,
    id: &str,
    ops: &[Op],
    now: impl Fn() -> i64,
) -> Result<Report, String> {
    let mut report = Report::default();
    let mut pipe = redis::pipe();
    // Which pipeline replies are whose: (list, index of its LRANGE reply).
    let mut pushes: Vec<(&str, Option<usize>)> = Vec::new();
    let mut replies = 0usize;
    let mut checks: Vec<&str> = Vec::new();
    for op in ops {
        match op {
            Op::Push { list, trim_to } => {
                pipe.cmd("LPUSH").arg(list).arg(id);
                replies += 1;
                let observed = trim_to.map(|cap| {
                    pipe.cmd("LRANGE").arg(list).arg(cap).arg(-1);
                    pipe.cmd("LTRIM").arg(list).arg(0).arg(cap as i64 - 1);
                    replies += 2;
                    replies - 2
                });
                pushes.push((list, observed));
            }
            Op::IfNewer { list } => checks.push(list),
        }
    }
    if !pushes.is_empty() {
        let values: Vec<redis::Value> = pipe.query_async(conn).await.map_err(redis_error)?;
        let at = now();
        report.commands += replies as u64;
        for (list, observed) in pushes {
            report.pushed.push(Pushed {
                list: list.to_string(),
                pushed_at_ms: Some(at),
                path: "pipeline",
            });
            if let Some(i) = observed {
                let ids: Vec<String> =
                    redis::from_redis_value_ref(&values[i]).map_err(|e| format!("Redis: {e}"))?;
                if !ids.is_empty() {
                    report.trimmed.push(Trimmed {
                        list: list.to_string(),
                        ids,
                        at_ms: at,
                    });
                }
            }
        }
    }
    if !checks.is_empty() {
        // The LINDEXes go out together (one connection keeps their order),
        // each LPUSH after its answer: another creator may push in between.
        let mut pipe = redis::pipe();
        for list in &checks {
            pipe.cmd("LINDEX").arg(*list).arg(-1);
        }
        let tails: Vec<Option<String>> = pipe.query_async(conn).await.map_err(redis_error)?;
        report.commands += checks.len() as u64;
        for (list, tail) in checks.iter().zip(tails) {
            let pushed_at_ms = if newer_than_tail(id, tail.as_deref()) {
                let _: i64 = redis::cmd("LPUSH")
                    .arg(*list)
                    .arg(id)
                    .query_async(conn)
                    .await
                    .map_err(redis_error)?;
                report.commands += 1;
                Some(now())
            } else {
                None
            };
            report.pushed.push(Pushed {
                list: list.to_string(),
                pushed_at_ms,
                path: "lindex",
            });
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn note(local: bool, files: bool) -> Note {
        Note {
            id: "x".into(),
            user_id: 7,
            is_local: local,
            has_files: files,
        }
    }

    #[test]
    fn a_local_note_goes_to_followers_own_home_user_and_local_lists() {
        let lists = lists_of(&note(true, false), &[1, 2], &Caps::default());
        let names: Vec<&str> = lists.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            names,
            [
                "list:homeTimeline:1",
                "list:homeTimeline:2",
                "list:homeTimeline:7",
                "list:userTimeline:7",
                "list:localTimeline"
            ]
        );
        assert_eq!(lists[0].1, 300);
        assert_eq!(lists[4].1, 1000);
    }

    #[test]
    fn a_remote_note_skips_the_local_timeline_and_files_add_half_caps() {
        let lists = lists_of(&note(false, true), &[1], &Caps::default());
        assert!(!lists.iter().any(|(l, _)| l.contains("localTimeline")));
        assert!(lists.contains(&("list:homeTimelineWithFiles:1".to_string(), 150)));
        assert!(lists.contains(&("list:userTimeline:7".to_string(), 100)));
    }

    #[test]
    fn a_recent_id_is_pushed_and_about_a_tenth_trim() {
        let mut a = aidx::Aidx::with_node("abcd");
        let now = 1_764_000_000_000;
        let id = a.gen_at(now - RECENT_MS + 1);
        let lists: Vec<(String, usize)> = (0..10_000).map(|i| (format!("l{i}"), 300)).collect();
        let ops = plan(
            &id,
            &lists,
            now,
            &mut rand_chacha::ChaCha8Rng::seed_from_u64(1),
        );
        let trims = ops
            .iter()
            .filter(|op| {
                matches!(
                    op,
                    Op::Push {
                        trim_to: Some(300),
                        ..
                    }
                )
            })
            .count();
        assert!(ops.iter().all(|op| matches!(op, Op::Push { .. })));
        assert!((900..1100).contains(&trims), "{trims} trims in 10,000");
    }

    #[test]
    fn an_id_three_minutes_old_takes_the_lindex_path() {
        let mut a = aidx::Aidx::with_node("abcd");
        let now = 1_764_000_000_000;
        let id = a.gen_at(now - RECENT_MS);
        let ops = plan(
            &id,
            &[("l".into(), 300)],
            now,
            &mut rand_chacha::ChaCha8Rng::seed_from_u64(1),
        );
        assert_eq!(ops, [Op::IfNewer { list: "l".into() }]);
    }

    #[test]
    fn the_lindex_rule_compares_dates_not_ids() {
        let (mut a, mut b) = (aidx::Aidx::with_node("zzzz"), aidx::Aidx::with_node("0000"));
        let t = 1_764_000_000_000;
        let tail = a.gen_at(t);
        // Same ms, lower ID: not newer by date, so not pushed.
        assert!(!newer_than_tail(&b.gen_at(t), Some(&tail)));
        assert!(newer_than_tail(&b.gen_at(t + 1), Some(&tail)));
        assert!(newer_than_tail(&b.gen_at(0), None));
    }
}
