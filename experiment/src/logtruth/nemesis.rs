//! The judge's nemesis (as Jepsen names the faults it injects on purpose):
//! when to kill the command under test and start it again, and when to
//! restart the database server, from `--kill-at`, `--kill-every` and
//! `--restart-server-at`. Pure: the plan is computed from the flags and the
//! seed before the command starts, so the same flags and seed inject the
//! same faults at the same offsets.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What a fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL to the command's process group, then the command started
    /// again with the same arguments and environment (`SNOWLEAK_START`
    /// counts the starts from 0).
    Kill,
    /// The database server stopped fast and started again; the command runs on.
    RestartServer,
}

impl Action {
    /// As `runs.config`'s `nemesis` list names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Kill => "kill",
            Action::RestartServer => "restart-server",
        }
    }
}

/// One fault: its offset from the command's first start, in ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub at_ms: u64,
    pub action: Action,
}

/// `5s,12s`: offsets, each a duration (`since_id::time`), rising or not.
pub fn parse_times(flag: &str, text: &str) -> Result<Vec<u64>, String> {
    text.split(',')
        .map(|t| {
            since_id::time::parse_duration_ms(t.trim())
                .map_err(|e| format!("bad {flag} '{text}': {e}"))
        })
        .collect()
}

/// The faults, in time order. `--kill-every D` draws each gap uniformly
/// from [D/2, 3D/2) (so kills do not fall in step with anything periodic
/// in the command) from `seed`, until `duration_ms`.
pub fn plan(
    kill_at: &[u64],
    kill_every: Option<u64>,
    restart_server_at: &[u64],
    duration_ms: Option<u64>,
    seed: u64,
) -> Result<Vec<Fault>, String> {
    let mut faults: Vec<Fault> = kill_at
        .iter()
        .map(|&at_ms| Fault {
            at_ms,
            action: Action::Kill,
        })
        .chain(restart_server_at.iter().map(|&at_ms| Fault {
            at_ms,
            action: Action::RestartServer,
        }))
        .collect();
    if let Some(every) = kill_every {
        let Some(duration) = duration_ms else {
            return Err("--kill-every needs --duration: the kills go on until then".into());
        };
        if every < 100 {
            return Err(format!(
                "--kill-every {every}ms: at least 100ms, so that the command can start between kills"
            ));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut at = 0u64;
        loop {
            at += rng.random_range(every / 2..every + every / 2);
            if at >= duration {
                break;
            }
            faults.push(Fault {
                at_ms: at,
                action: Action::Kill,
            });
        }
    }
    if let Some(d) = duration_ms
        && let Some(late) = faults.iter().find(|f| f.at_ms >= d)
    {
        return Err(format!(
            "a fault at {} is not before --duration {}: it would never happen",
            since_id::time::format_duration_ms(late.at_ms),
            since_id::time::format_duration_ms(d)
        ));
    }
    faults.sort_by_key(|f| f.at_ms);
    Ok(faults)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_every_is_seeded_spread_and_stops_before_the_duration() {
        let a = plan(&[], Some(10_000), &[], Some(60_000), 1).unwrap();
        assert_eq!(a, plan(&[], Some(10_000), &[], Some(60_000), 1).unwrap());
        assert_ne!(a, plan(&[], Some(10_000), &[], Some(60_000), 2).unwrap());
        let mut last = 0;
        for f in &a {
            assert_eq!(f.action, Action::Kill);
            assert!((5_000..15_000).contains(&(f.at_ms - last)), "{a:?}");
            last = f.at_ms;
        }
        assert!(a.len() >= 3 && last < 60_000, "{a:?}");
    }

    #[test]
    fn given_times_merge_in_order_and_bad_ones_are_one_line() {
        let kills = parse_times("--kill-at", "12s, 5s").unwrap();
        let restarts = parse_times("--restart-server-at", "7s").unwrap();
        let p = plan(&kills, None, &restarts, None, 1).unwrap();
        let got: Vec<(u64, Action)> = p.iter().map(|f| (f.at_ms, f.action)).collect();
        assert_eq!(
            got,
            [
                (5_000, Action::Kill),
                (7_000, Action::RestartServer),
                (12_000, Action::Kill)
            ]
        );
        assert!(
            parse_times("--kill-at", "5s,soon")
                .unwrap_err()
                .starts_with("bad --kill-at '5s,soon': ")
        );
        assert_eq!(
            plan(&[], Some(1_000), &[], None, 1).unwrap_err(),
            "--kill-every needs --duration: the kills go on until then"
        );
        assert_eq!(
            plan(&[20_000], None, &[], Some(15_000), 1).unwrap_err(),
            "a fault at 20s is not before --duration 15s: it would never happen"
        );
    }
}
