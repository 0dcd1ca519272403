//! A run's pollers and plan: their names, the pollers built from the common
//! options, and the plan the drivers run.

use super::config::Common;
use crate::drive::Plan;
use since_id::id::Layout;
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;

/// The pollers' names: each policy's text, `#2`, `#3`... for repeats.
pub fn poller_names(policies: &[CursorPolicy]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in policies {
        let base = p.to_string();
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}#{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

/// The pollers of a run, their names, and the largest k (the final drain's wait).
pub fn build_pollers(
    common: &Common,
    layout: &Layout,
    limit: usize,
) -> (Vec<Poller>, Vec<String>, u64) {
    let names = poller_names(&common.pollers);
    let final_wait_ms = common
        .pollers
        .iter()
        .filter_map(|p| p.k_ms())
        .max()
        .unwrap_or(0);
    let pollers = names
        .iter()
        .zip(&common.pollers)
        .map(|(name, policy)| {
            Poller::new(
                name.clone(),
                *policy,
                layout.clone(),
                limit,
                common.max_back_pages,
            )
        })
        .collect();
    (pollers, names, final_wait_ms)
}

/// The plan of a run: the common cadence and duration, the pollers, and the
/// wait before the final cycle.
pub fn plan_of(common: &Common, layout: &Layout, pollers: Vec<Poller>, final_wait_ms: u64) -> Plan {
    Plan {
        layout: layout.clone(),
        pollers,
        interval_ms: common.interval_ms,
        duration_ms: common.duration_ms,
        final_wait_ms,
        first_index: 0,
        tick_jitter: common.tick_jitter(),
    }
}
