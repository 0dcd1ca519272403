//! The push and read rules against a real Redis and a real PostgreSQL (both
//! throwaway, from the system's binaries; the tests fail, never skip, when
//! either cannot start). The interleavings are made explicit, step by step,
//! so that no test depends on timing.

use super::aidx::Aidx;
use super::push::{self, Op};
use super::read::{Path, Request, Switches};
use super::redis::Redis;
use super::store::{self, Source};
use super::timeline::{LiveSwitches, Reader};
use crate::servers::postgres::Cluster;
use rand::SeedableRng;
use std::sync::Arc;

const T0: i64 = 1_764_000_000_000;

struct Servers {
    _redis: Redis,
    _cluster: Cluster,
    runtime: tokio::runtime::Runtime,
    reader: Reader,
}

fn start(follows: &[(i32, i32)]) -> Servers {
    let redis =
        Redis::start().expect("redis-server must start (Debian: apt-get install redis-server)");
    let cluster =
        Cluster::start().expect("PostgreSQL must start (Debian: apt-get install postgresql)");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let reader = runtime.block_on(async {
        let (client, connection) = cluster
            .config()
            .connect(tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        store::create(&client, follows).await.unwrap();
        Reader {
            redis: redis
                .client()
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap(),
            pg: Arc::new(client),
            switches: Arc::new(LiveSwitches::new(Switches::default())),
        }
    });
    Servers {
        _redis: redis,
        _cluster: cluster,
        runtime,
        reader,
    }
}

fn lrange(s: &Servers, key: &str) -> Vec<String> {
    let mut conn = s.reader.redis.clone();
    s.runtime.block_on(async {
        redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap()
    })
}

fn pushes(s: &Servers, id: &str, ops: &[Op]) -> push::Report {
    let mut conn = s.reader.redis.clone();
    s.runtime
        .block_on(push::execute(&mut conn, id, ops, || T0))
        .unwrap()
}

fn into(list: &str) -> Op {
    Op::Push {
        list: list.into(),
        trim_to: None,
    }
}

#[test]
fn a_later_create_pushed_first_leaves_the_list_out_of_id_order() {
    let s = start(&[]);
    // Two processes create in the same ms: the one that started first has
    // the higher node ID ("zzzz"), so its note sorts after the later one's.
    let (mut first, mut second) = (Aidx::with_node("zzzz"), Aidx::with_node("0000"));
    let (a, b) = (first.gen_at(T0), second.gen_at(T0));
    let c = second.gen_at(T0 + 1);
    assert!(b < a && a < c);
    // Pushes land in completion order: a, c, then b (its followers query was slow).
    for id in [&a, &c, &b] {
        pushes(&s, id, &[into("list:localTimeline")]);
    }
    let list = lrange(&s, "list:localTimeline");
    assert_eq!(
        list,
        [b.clone(), c.clone(), a.clone()],
        "LPUSH order, newest push first"
    );
    let mut sorted = list.clone();
    sorted.sort_by(|x, y| y.cmp(x));
    assert_ne!(list, sorted, "push order is not ID order");
}

#[test]
fn ltrim_removes_the_earliest_pushed_entries_not_the_lowest_ids() {
    let s = start(&[]);
    let mut p = Aidx::with_node("abcd");
    let (low, mid, high) = (p.gen_at(T0), p.gen_at(T0 + 1), p.gen_at(T0 + 2));
    pushes(&s, &mid, &[into("list:x")]);
    pushes(&s, &high, &[into("list:x")]);
    let report = pushes(
        &s,
        &low,
        &[Op::Push {
            list: "list:x".into(),
            trim_to: Some(2),
        }],
    );
    assert_eq!(lrange(&s, "list:x"), [low.clone(), high.clone()]);
    assert_eq!(report.trimmed.len(), 1);
    assert_eq!(
        report.trimmed[0].ids,
        std::slice::from_ref(&mid),
        "cut: the earliest pushed, above `low`"
    );
    assert_eq!(report.commands, 3, "LPUSH, LRANGE, LTRIM");
}

#[test]
fn an_old_note_is_pushed_only_if_its_date_is_later_than_the_tail() {
    let s = start(&[]);
    let mut p = Aidx::with_node("abcd");
    let tail = p.gen_at(T0);
    pushes(&s, &tail, &[into("list:x")]);
    let now = T0 + push::RECENT_MS + 10_000;
    // Older than the tail by date: refused.
    let older = p.gen_at(T0 - 1);
    let ops = push::plan(
        &older,
        &[("list:x".into(), 300)],
        now,
        &mut rand_chacha::ChaCha8Rng::seed_from_u64(1),
    );
    assert_eq!(
        ops,
        [Op::IfNewer {
            list: "list:x".into()
        }]
    );
    let report = pushes(&s, &older, &ops);
    assert_eq!(report.pushed[0].pushed_at_ms, None);
    // Newer than the tail but over 3 minutes old: pushed at the head, above
    // notes pushed since with IDs far newer (the list holds `recent` first).
    let recent = p.gen_at(now);
    pushes(&s, &recent, &[into("list:x")]);
    let late = p.gen_at(T0 + 1);
    let report = pushes(
        &s,
        &late,
        &[Op::IfNewer {
            list: "list:x".into(),
        }],
    );
    assert_eq!(report.pushed[0].path, "lindex");
    assert!(report.pushed[0].pushed_at_ms.is_some());
    assert_eq!(report.commands, 2, "LINDEX, LPUSH");
    assert_eq!(
        lrange(&s, "list:x"),
        [late.clone(), recent.clone(), tail.clone()]
    );
    assert!(late < recent, "at the head, below an ID already there");
}

#[test]
fn a_since_id_read_is_answered_by_postgresql_and_one_without_by_redis() {
    // User 0 follows user 1.
    let s = start(&[(1, 0)]);
    let mut p = Aidx::with_node("abcd");
    let ids: Vec<String> = (0..5).map(|i| p.gen_at(T0 + i)).collect();
    // All five committed; the newest not yet pushed (its pushToTl is pending).
    s.runtime.block_on(async {
        for id in &ids {
            store::insert_note(&s.reader.pg, id, 1, true, false)
                .await
                .unwrap();
        }
    });
    for id in &ids[..4] {
        pushes(&s, id, &[into(&push::home_key(0))]);
    }
    let home = Source::Home { me: 0 };
    let read = |req: Request| s.runtime.block_on(s.reader.read(home, &req)).unwrap();
    let newest = read(Request {
        limit: 2,
        ..Request::default()
    });
    assert_eq!(newest.path, Path::Redis);
    assert_eq!(
        newest.ids,
        [ids[3].clone(), ids[2].clone()],
        "Redis lacks the unpushed note"
    );
    let after = read(Request {
        since_id: Some(ids[2].clone()),
        limit: 10,
        ..Request::default()
    });
    assert_eq!(after.path, Path::DbFallback);
    assert_eq!(
        after.ids,
        [ids[3].clone(), ids[4].clone()],
        "PostgreSQL has it, oldest first"
    );
    // The harness's poller sends an untilId too: still PostgreSQL, newest first.
    let both = read(Request {
        since_id: Some(ids[2].clone()),
        until_id: Some("zzzzzzzzzzzzzzzz".into()),
        limit: 10,
        ..Request::default()
    });
    assert_eq!(
        (both.path, both.ids),
        (Path::DbFallback, vec![ids[4].clone(), ids[3].clone()])
    );
    // Fallback off: a sinceId request gets nothing at all.
    s.reader
        .switches
        .db_fallback
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let off = read(Request {
        since_id: Some(ids[0].clone()),
        limit: 10,
        ..Request::default()
    });
    assert_eq!((off.path, off.ids.len()), (Path::EmptyFallback, 0));
}

#[test]
fn a_short_redis_page_is_filled_from_postgresql_below_its_last_id() {
    let s = start(&[(1, 0)]);
    let mut p = Aidx::with_node("abcd");
    let ids: Vec<String> = (0..6).map(|i| p.gen_at(T0 + i)).collect();
    s.runtime.block_on(async {
        for id in &ids {
            store::insert_note(&s.reader.pg, id, 1, true, false)
                .await
                .unwrap();
        }
    });
    // Only the newest two survive in Redis (the rest trimmed).
    for id in &ids[4..] {
        pushes(&s, id, &[into(&push::home_key(0))]);
    }
    let page = s
        .runtime
        .block_on(s.reader.read(
            Source::Home { me: 0 },
            &Request {
                limit: 4,
                ..Request::default()
            },
        ))
        .unwrap();
    assert_eq!(page.path, Path::RedisThenDb);
    let want: Vec<String> = ids[2..].iter().rev().cloned().collect();
    assert_eq!(page.ids, want);
}

#[test]
fn notes_posted_while_ftt_was_off_are_skipped_by_redis_pages_but_served_to_since_id() {
    // misskey-dev/misskey#17547: ON, 5 notes; OFF, 5 notes (no pushToTl);
    // ON again, 5 notes; then `notes/timeline` with limit 20 lacks the middle five.
    let s = start(&[(1, 0)]);
    let mut p = Aidx::with_node("abcd");
    let ids: Vec<String> = (0..15).map(|i| p.gen_at(T0 + i)).collect();
    s.runtime.block_on(async {
        for id in &ids {
            store::insert_note(&s.reader.pg, id, 1, true, false)
                .await
                .unwrap();
        }
    });
    for id in ids[..5].iter().chain(&ids[10..]) {
        pushes(&s, id, &[into(&push::home_key(0))]);
    }
    let home = Source::Home { me: 0 };
    let read = |req: Request| s.runtime.block_on(s.reader.read(home, &req)).unwrap();
    let newest = read(Request {
        limit: 10,
        ..Request::default()
    });
    assert_eq!(newest.path, Path::Redis);
    let mut want: Vec<String> = ids[10..].iter().chain(&ids[..5]).cloned().collect();
    want.sort_by(|a, b| b.cmp(a));
    assert_eq!(newest.ids, want, "the five posted while off are skipped");
    // A page of 20 is short in Redis (10 IDs): the fill starts below the
    // last Redis ID, so the gap stays unfilled, as #17547 reports.
    let twenty = read(Request {
        limit: 20,
        ..Request::default()
    });
    assert_eq!(twenty.path, Path::RedisThenDb);
    assert!(ids[5..10].iter().all(|id| !twenty.ids.contains(id)));
    // A sinceId poller reads PostgreSQL, and gets them.
    let after = read(Request {
        since_id: Some(ids[4].clone()),
        limit: 10,
        ..Request::default()
    });
    assert_eq!(after.path, Path::DbFallback);
    assert_eq!(after.ids, ids[5..15].to_vec());
}

#[test]
fn a_hybrid_page_below_the_home_lists_tail_lacks_the_trimmed_home_notes() {
    // misskey-dev/misskey#13488 (PR #13495): the hybrid timeline merges
    // home (cap 300) and local (cap 1000). User 0 follows remote user 1;
    // local user 2's notes reach the local list only.
    let s = start(&[(1, 0)]);
    let mut p = Aidx::with_node("abcd");
    let mut home = Vec::new();
    let mut local = Vec::new();
    for i in 0..10 {
        home.push(p.gen_at(T0 + 10 * i));
        local.push(p.gen_at(T0 + 10 * i + 5));
    }
    s.runtime.block_on(async {
        for id in &home {
            store::insert_note(&s.reader.pg, id, 1, false, false)
                .await
                .unwrap();
        }
        for id in &local {
            store::insert_note(&s.reader.pg, id, 2, true, false)
                .await
                .unwrap();
        }
    });
    for id in &local {
        pushes(&s, id, &[into(push::LOCAL_KEY)]);
    }
    // The home list keeps its newest two: a real LTRIM to a cap of 2.
    for id in &home {
        pushes(
            &s,
            id,
            &[Op::Push {
                list: push::home_key(0),
                trim_to: Some(2),
            }],
        );
    }
    assert_eq!(
        lrange(&s, &push::home_key(0)),
        [home[9].clone(), home[8].clone()]
    );
    // A cursor below the home list's tail, above the local list's.
    let req = Request {
        until_id: Some(home[8].clone()),
        limit: 5,
        ..Request::default()
    };
    let hybrid = Source::Hybrid { me: 0 };
    let page = s.runtime.block_on(s.reader.read(hybrid, &req)).unwrap();
    assert_eq!(page.path, Path::Redis);
    let want: Vec<String> = local[3..8].iter().rev().cloned().collect();
    assert_eq!(
        page.ids, want,
        "all local: the trimmed home notes are not asked for"
    );
    // PostgreSQL holds the page the timeline should have shown.
    let truth = s
        .runtime
        .block_on(store::page(
            &s.reader.pg,
            hybrid,
            &super::read::DbQuery {
                until_id: req.until_id.clone(),
                since_id: None,
                limit: 5,
                with_files: false,
            },
        ))
        .unwrap();
    assert!(truth.contains(&home[7]) && !page.ids.contains(&home[7]));
}
