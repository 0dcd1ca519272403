//! The history is built one way ([`analysis::history_builder`]), fed two
//! ways: the records as they are made (`experiment sweep`, statuses in any
//! order, truth rows among the requests) give the history the loader reads
//! back from run.db. experiment/tests/sweep.rs checks the same on the
//! experiment's own runs.

mod common;

use analysis::history::Visibility;
use analysis::history_builder::{HistoryBuilder, StatusRef};
use analysis::synth::{self, SimSpec};
use common::temp_dir;
use since_id::id::{Id, Layout};

#[test]
fn records_as_made_give_what_the_loader_reads() {
    let dir = temp_dir("builder");
    let layout: Layout = "mastodon".parse().unwrap();
    let status = |id: u128| {
        (
            layout.format(Id(id)),
            Id(id).sort_key(),
            layout.ts_ms(Id(id)),
        )
    };
    for seed in [1, 2, 3] {
        let spec = SimSpec {
            seed,
            error_rate: if seed == 3 { 0.05 } else { 0.0 },
            ahead_fraction: 0.01,
            max_ahead_ms: 60_000,
            ..SimSpec::default()
        };
        let db = dir.join(format!("seed-{seed}.db"));
        let run_id = synth::simulate_to_db(&db, &spec, true).unwrap();
        let conn = analysis::load::open(&db).unwrap();
        let stored = analysis::load::load(&conn, run_id).unwrap().history;

        let (requests, truth) = synth::simulate(&spec);
        let mut b = HistoryBuilder::new(layout.clone(), stored.pollers.clone(), spec.interval_ms);
        let add_truth = |b: &mut HistoryBuilder, t: &synth::SynthTruth| {
            let (id, key, id_time_ms) = status(t.id);
            let s = StatusRef {
                id: &id,
                key: &key,
                id_time_ms,
            };
            let v = Visibility {
                visible_at_ms: t.visible_at_ms,
                deleted_at_ms: t.deleted_at_ms,
            };
            b.truth(s, v);
        };
        // Half the truth first, newest first; the rest after the requests.
        let (early, late) = truth.split_at(truth.len() / 2);
        early.iter().rev().for_each(|t| add_truth(&mut b, t));
        for r in &requests {
            let key = |id: u128| Id(id).sort_key();
            let row = rundb::RequestRow {
                cycle: r.cycle,
                page: r.page,
                sent_at_ms: r.sent_at_ms,
                received_at_ms: r.received_at_ms,
                since_key: r.since.map(key),
                before_key: r.before.map(key),
                page_limit: spec.page_limit as i64,
                error: r.error.clone(),
                items: r.ids.len() as i64,
                bytes: r.bytes,
                overflow: r.overflow,
                ..rundb::RequestRow::default()
            };
            let items: Vec<_> = r.ids.iter().map(|&id| status(id)).collect();
            let refs = items.iter().map(|(id, key, t)| StatusRef {
                id,
                key,
                id_time_ms: *t,
            });
            b.request(r.poller, &row, refs);
        }
        late.iter().for_each(|t| add_truth(&mut b, t));
        let memory = b.finish().unwrap();

        assert!(requests.iter().any(|r| r.ids.is_empty()), "seed {seed}");
        assert_eq!(memory.statuses, stored.statuses, "seed {seed}");
        assert_eq!(memory.id_times, stored.id_times, "seed {seed}");
        assert_eq!(memory.truth, stored.truth, "seed {seed}");
        assert_eq!(memory.requests, stored.requests, "seed {seed}");
        assert_eq!(memory.observations, stored.observations, "seed {seed}");
        assert_eq!(memory.pollers, stored.pollers, "seed {seed}");
    }
}

#[test]
fn a_malformed_sort_key_is_refused_at_the_end() {
    let layout: Layout = "mastodon".parse().unwrap();
    let mut b = HistoryBuilder::new(layout, Vec::new(), 1000);
    let s = StatusRef {
        id: "1",
        key: "zz",
        id_time_ms: 0,
    };
    b.truth(
        s,
        Visibility {
            visible_at_ms: 0,
            deleted_at_ms: None,
        },
    );
    assert_eq!(
        b.finish().err().as_deref(),
        Some("malformed sort key 'zz': expected 32 hex digits")
    );
}
