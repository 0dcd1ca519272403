//! The pollers of a MariaDB run, both kinds side by side: the core's since_id
//! pollers (`--poller`) and the ID pollers (`--id-poller`), named, with their
//! run.db rows, their tally and the ID pollers' reports. One roster for the
//! throwaway server's run (`driver.rs`) and a user's own table (`own.rs`).

use super::id_pollers::{DropLog, IdMachine, IdPollerSpec, IdReport, IdTarget};
use super::source::MariaTarget;
use crate::drive::{self, StopReason, Tally};
use crate::record::{PollerRow, RecordSender};
use crate::session::{self, Common};
use crate::sim::sync::lock;
use since_id::gaps::IdPoller;
use since_id::id::Layout;
use since_id::poller::Poller;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

pub struct Roster {
    /// The since_id pollers, for `session::plan_of` (which takes them).
    pub pollers: Vec<Poller>,
    /// How many since_id pollers there are: the ID pollers' rows follow theirs.
    since_count: usize,
    id_specs: Vec<IdPollerSpec>,
    layout: Layout,
    /// Every poller's `pollers` row, the since_id ones first.
    pub infos: Vec<PollerRow>,
    /// The ID pollers' names, in the order of their specs.
    pub id_names: Vec<String>,
    /// Every poller's name, as stored in the run's config.
    pub all_names: Vec<String>,
    /// The largest k of the since_id pollers: the wait before the final cycle.
    pub final_wait_ms: u64,
    pub progress: Arc<Mutex<Tally>>,
    /// The ID pollers' reports (gaps, cursors below the oldest ID kept).
    pub reports: Arc<Mutex<Vec<IdReport>>>,
}

impl Roster {
    pub fn new(args: &Common, id_specs: &[IdPollerSpec], layout: &Layout) -> Roster {
        let limit = args.limit as usize;
        let names = session::poller_names(&args.pollers);
        let pollers: Vec<Poller> = names
            .iter()
            .zip(&args.pollers)
            .map(|(name, p)| {
                Poller::new(name.clone(), *p, layout.clone(), limit, args.max_back_pages)
            })
            .collect();
        let mut infos = session::poller_infos(&pollers);
        let id_names = id_poller_names(id_specs, &names);
        for (name, policy) in id_names.iter().zip(id_specs) {
            infos.push(PollerRow {
                name: name.clone(),
                policy: policy.to_string(),
                ..Default::default()
            });
        }
        let mut tally = Tally::new(&pollers);
        for name in &id_names {
            tally.add_poller(name);
        }
        Roster {
            final_wait_ms: args
                .pollers
                .iter()
                .filter_map(|p| p.k_ms())
                .max()
                .unwrap_or(0),
            all_names: names.iter().chain(&id_names).cloned().collect(),
            reports: Arc::new(Mutex::new(vec![IdReport::default(); id_names.len()])),
            progress: Arc::new(Mutex::new(tally)),
            since_count: pollers.len(),
            id_specs: id_specs.to_vec(),
            layout: layout.clone(),
            pollers,
            infos,
            id_names,
        }
    }

    /// The ID pollers' plan; each starts after `start_after` when given (a
    /// table known empty: a row missing below the first one read is a gap).
    pub fn id_plan(
        &self,
        args: &Common,
        start_ms: i64,
        start_after: Option<i64>,
        drops: &Arc<Mutex<DropLog>>,
        flags: &Arc<Mutex<Vec<rundb::CursorFlagRow>>>,
    ) -> drive::Plan<IdMachine> {
        let limit = args.limit as usize;
        drive::Plan {
            layout: self.layout.clone(),
            pollers: self
                .id_names
                .iter()
                .zip(&self.id_specs)
                .enumerate()
                .map(|(slot, (name, spec))| {
                    let poller =
                        IdPoller::new(name.clone(), spec.policy, limit, args.max_back_pages);
                    IdMachine {
                        poller: match start_after {
                            Some(id) => poller.starting_after(id),
                            None => poller,
                        },
                        spec: *spec,
                        start_ms,
                        stats: self.reports.clone(),
                        slot,
                        drops: drops.clone(),
                        flags: flags.clone(),
                    }
                })
                .collect(),
            first_index: self.since_count,
            interval_ms: args.interval_ms,
            duration_ms: args.duration_ms,
            final_wait_ms: self.final_wait_ms,
            tick_jitter: args.tick_jitter(),
        }
    }

    /// Runs both kinds of pollers, each in the one real-time poll loop, until
    /// the end of the run or a stop: `Interrupted` if either was. Takes the
    /// since_id pollers; the future borrows nothing of the roster.
    pub fn poll(
        &mut self,
        args: &Common,
        since_target: MariaTarget,
        id_plan: drive::Plan<IdMachine>,
        id_target: IdTarget,
        recorder: RecordSender,
        stop: watch::Receiver<bool>,
    ) -> impl Future<Output = StopReason> + use<> {
        let plan = session::plan_of(
            args,
            &self.layout,
            std::mem::take(&mut self.pollers),
            self.final_wait_ms,
        );
        let progress = self.progress.clone();
        async move {
            let since_task = drive::run_real(
                plan,
                since_target,
                None,
                recorder.clone(),
                progress.clone(),
                stop.clone(),
            );
            let id_task = drive::run_real(id_plan, id_target, None, recorder, progress, stop);
            match tokio::join!(since_task, id_task) {
                (StopReason::Interrupted, _) | (_, StopReason::Interrupted) => {
                    StopReason::Interrupted
                }
                _ => StopReason::Duration,
            }
        }
    }

    /// The summary lines of the ID pollers: cursors below the oldest ID kept,
    /// and gap tracking's work.
    pub fn id_notes(&self) -> String {
        let mut notes = String::new();
        let reports = lock(&self.reports);
        for (name, report) in self.id_names.iter().zip(reports.iter()) {
            if let Some(at) = report.first_expired_at_ms {
                notes.push_str(&format!(
                    "{name}: cursor below the oldest ID kept at {} requests (the first sent at {}): \
                     rows between were dropped unread\n",
                    report.expired_cursor,
                    since_id::time::rfc3339_ms(at)
                ));
            }
            let s = report.gaps;
            if s.opened > 0 || s.rereads > 0 {
                notes.push_str(&format!(
                    "{name}: {} gaps opened, {} filled, {} given up after the timeout, {} untracked, {} re-reads\n",
                    s.opened, s.filled, s.expired, s.untracked, s.rereads
                ));
            }
        }
        notes
    }
}

/// The ID pollers' names: their policies, numbered when one repeats or
/// clashes with a since_id poller's name.
fn id_poller_names(specs: &[IdPollerSpec], taken: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for policy in specs {
        let base = policy.to_string();
        let mut name = base.clone();
        let mut n = 2;
        while taken.contains(&name) || names.contains(&name) {
            name = format!("{base}#{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}
