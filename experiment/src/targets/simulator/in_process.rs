//! The embedded simulator as a target: in-process for virtual time, or served
//! over real HTTP on 127.0.0.1 for real time, with its truth streamed to the
//! recorder either way.

use crate::api::Dialect;
use crate::drive::Fetched;
use crate::drive::VirtualTarget;
use crate::record::TruthRow;
use crate::sim::faults::{Fault, FaultPlan, mangle_list};
use crate::sim::model::{Query, SimStatus, Simulator};
use since_id::poller::{Item, PageRequest};
use since_id::time::rfc3339_ms;
use std::sync::{Arc, Mutex};

use crate::sim::sync::lock;
use crate::sim::truth_row;

/// Which statuses a status filter keeps.
pub type Serves = fn(&SimStatus) -> bool;

/// The statuses the polled endpoint serves. The truth a poller is judged
/// against is exactly these, in both clocks: a local timeline (Misskey's, as
/// the simulator's route serves it) serves local statuses only, the other
/// endpoints the embedded target polls serve every status.
pub fn serves(dialect: &Dialect) -> Serves {
    if dialect.local_only() {
        SimStatus::is_local
    } else {
        |_| true
    }
}

/// Takes the truth produced since the last call, as rows, keeping the
/// statuses the polled endpoint serves.
pub fn take_truth(sim: &mut Simulator, serves: Serves) -> Vec<TruthRow> {
    let layout = sim.layout().clone();
    sim.take_truth()
        .iter()
        .filter(|s| serves(s))
        .map(|s| truth_row(&layout, s))
        .collect()
}

/// [`Simulator::with_backlog`], built a second at a time with each second's
/// truth sent to the records (the recorder, or a sweep's memory) as it is made. The model's output does not
/// depend on how its advance is chunked (`experiment/sim/src/model.rs`, "chunking
/// invariance"), so the statuses and the truth rows, in their order, are the
/// same; but its queues of pending statuses and the truth in memory now hold
/// a second of the backlog, not all of it (five minutes at 3,000/s is 900,000
/// statuses, several hundred MiB at once).
pub fn with_backlog_streamed(
    config: crate::sim::model::SimConfig,
    seed: u64,
    start_ms: i64,
    backlog_ms: u64,
    serves: Serves,
    records: &dyn crate::drive::Records,
) -> Simulator {
    let mut sim = Simulator::new(config, seed, start_ms.saturating_sub_unsigned(backlog_ms));
    let mut t = sim.now_ms();
    while t < start_ms {
        t = t.saturating_add(1000).min(start_ms);
        sim.advance(t);
        records.truth(take_truth(&mut sim, serves));
    }
    sim.advance(start_ms);
    sim
}

/// The simulator reached in-process, at simulated times, with the same
/// faults the HTTP server would inject, as the client would see them.
pub struct InProcess {
    pub sim: Simulator,
    pub max_limit: usize,
    pub faults: Option<FaultPlan>,
    /// What the polled endpoint serves ([`serves`]): the same timeline as over HTTP.
    pub serves: Serves,
    /// Items carry `created_at` and `author` (run.db stores them; `experiment
    /// sweep`, which judges in memory and reads neither, leaves them out:
    /// they were a tenth of its time).
    pub details: bool,
}

impl VirtualTarget for InProcess {
    fn fetch_at(&mut self, server_time_ms: i64, req: &PageRequest) -> Fetched {
        self.sim.advance(server_time_ms);
        let (fault, salt) = self.faults.as_mut().map_or((None, 0), FaultPlan::draw);
        let failure = |status: Option<u16>, error: &str, retry_after_ms: Option<u64>| Fetched {
            http_status: status,
            bytes: None,
            result: Err(error.to_string()),
            retry_after_ms,
        };
        match fault {
            Some(Fault::ServerError) => {
                return failure(Some(503), "HTTP 503: injected fault", None);
            }
            Some(Fault::RateLimited) => {
                return failure(Some(429), "HTTP 429: injected fault", Some(1000));
            }
            Some(Fault::Timeout) => return failure(None, "timed out", None),
            Some(Fault::Reset) => return failure(Some(200), "body failed: connection reset", None),
            Some(Fault::Truncate) => {
                return failure(Some(200), "response is not JSON: EOF while parsing", None);
            }
            _ => {}
        }
        let query = Query {
            after: req.since,
            before: req.before,
            limit: req.limit.min(self.max_limit),
            oldest_first: false,
        };
        let layout = self.sim.layout().clone();
        let mut items: Vec<Item> = self
            .sim
            .query_filtered(&query, self.serves)
            .into_iter()
            .map(|s| Item {
                id: s.id,
                id_text: layout.format(s.id),
                created_at: self.details.then(|| rfc3339_ms(s.posted_at_ms)),
                author: self.details.then(|| format!("user{}", s.author)),
            })
            .collect();
        if let Some(fault) = fault {
            // Reorder and duplicate reach the poller; slow costs nothing in virtual time.
            mangle_list(fault, &mut items, salt);
        }
        Fetched {
            http_status: Some(200),
            bytes: None,
            result: Ok(items),
            retry_after_ms: None,
        }
    }

    fn take_truth(&mut self) -> Vec<TruthRow> {
        take_truth(&mut self.sim, self.serves)
    }
}

/// A truth source for a simulator shared with its HTTP server.
pub fn shared_truth(sim: Arc<Mutex<Simulator>>, serves: Serves) -> crate::drive::TruthSource {
    Box::new(move || {
        let mut sim = lock(&sim);
        take_truth(&mut sim, serves)
    })
}
