//! A run cut in two at the middle of its time: the rows that became visible
//! in each half, and each poller's lost rows by the half they became
//! visible in. A campaign compares the halves of its runs (the second
//! against the first, paired by run: docs/campaigns.md, "The halves of a
//! run") to see whether a run's loss drifts within it, a warm-up or a
//! server that slows as its tables grow, which a mean over whole runs
//! hides. Pure: no I/O, no clock.

use crate::diff::Analysis;
use crate::history::History;

/// A run's rows and each poller's lost rows (`missed` + `expired` of the
/// report, as [`crate::campaign::PollerLoss::lost`] counts them), before
/// and from the middle of its time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Halves {
    /// The middle: halfway between the first and the last row's
    /// visibility (ms); a row visible before it is in the first half.
    pub middle_ms: i64,
    pub rows: [u64; 2],
    /// Per poller, in the history's order.
    pub lost: Vec<[u64; 2]>,
}

/// The halves of the run `h` judged as `a`; `None` without truth rows (the
/// halves are those of the rows the target committed).
pub fn of(h: &History, a: &Analysis) -> Option<Halves> {
    let truth = h.truth.as_ref()?;
    let (first, last) = truth
        .iter()
        .flatten()
        .map(|v| v.visible_at_ms)
        .fold(None, |span: Option<(i64, i64)>, t| {
            Some(span.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))))
        })?;
    let middle_ms = first + (last - first) / 2;
    let half = |t: i64| usize::from(t >= middle_ms);
    // A status's time: when it became visible; its ID's time where the
    // truth has no row for it (a row that was never committed is lost by
    // no one, so this is only for completeness).
    let time = |su: usize| {
        h.truth_of(su)
            .map_or_else(|| h.id_time_ms(su), |v| v.visible_at_ms)
    };
    let mut rows = [0u64; 2];
    for v in truth.iter().flatten() {
        rows[half(v.visible_at_ms)] += 1;
    }
    let mut lost = vec![[0u64; 2]; h.pollers.len()];
    for item in &a.items {
        let t = half(time(item.status as usize));
        for (p, l) in lost.iter_mut().enumerate() {
            if item.leaked_by & (1 << p) != 0 {
                l[t] += 1;
            }
        }
    }
    for m in &a.other_misses {
        lost[m.poller as usize][half(time(m.status as usize))] += 1;
    }
    for u in &a.expired {
        lost[u.poller as usize][half(time(u.status as usize))] += 1;
    }
    Some(Halves {
        middle_ms,
        rows,
        lost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::analyze;
    use crate::diff::tests::{history_of, late_item_history};
    use crate::synth::{SimSpec, simulate};
    use proptest::prelude::*;

    /// Rows visible at 1900, 2500 and 3100: the middle is 2500, so the
    /// first half holds one row and the second two, among them the late
    /// row naive leaks.
    #[test]
    fn a_lost_row_counts_in_the_half_it_became_visible_in() {
        let (b, ..) = late_item_history(true);
        let a = analyze(&b.h);
        let halves = of(&b.h, &a).unwrap();
        assert_eq!(halves.middle_ms, 2500);
        assert_eq!(halves.rows, [1, 2]);
        assert_eq!(halves.lost, vec![[0, 1], [0, 0]]);
    }

    #[test]
    fn a_run_without_truth_has_no_halves() {
        let (b, ..) = late_item_history(false);
        assert_eq!(of(&b.h, &analyze(&b.h)), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

        /// The halves add up to what the report counts: every row in one
        /// half, every lost row (leak, miss with a cause, expired) of each
        /// poller in one half.
        #[test]
        fn the_halves_add_up_to_the_run(seed in any::<u64>(), late in 0.0f64..0.3, errors in 0.0f64..0.1, deleted in 0.0f64..0.1) {
            let spec = SimSpec {
                seed,
                ticks: 40,
                late_fraction: late,
                error_rate: errors,
                delete_fraction: deleted,
                max_pages: 2,
                policies: vec!["naive".into(), "compensated:k=500ms".into()],
                ..SimSpec::default()
            };
            let (requests, truth) = simulate(&spec);
            let h = history_of(&spec, &requests, &truth);
            let a = analyze(&h);
            let halves = of(&h, &a).unwrap();
            let rows = h.truth.as_ref().unwrap().iter().flatten().count() as u64;
            prop_assert_eq!(halves.rows[0] + halves.rows[1], rows);
            for (p, s) in a.pollers.iter().enumerate() {
                prop_assert_eq!(halves.lost[p][0] + halves.lost[p][1], s.missed() + s.expired);
            }
        }
    }
}
