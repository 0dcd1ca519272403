//! `analyze --delivered NAME=FILE.csv`: a consumer the server cannot see (an
//! outbox relay or an event-store reader on the PostgreSQL backend, reading
//! the table itself) judged from the IDs it delivered, one `id,delivered_at`
//! row per line, as one more client of the run.
//!
//! Its requests are not known, so they are read from its deliveries: each
//! distinct delivery time is one request of a consumer that asks for the IDs
//! above the highest it delivered before (the relay's `WHERE id > cursor`),
//! sent when it delivered the previous batch and answered with this one.
//! With that mapping the checker judges it by the same definitions as every
//! poller (README, "Definitions"): a status visible before one of those
//! requests and below its cursor, never delivered, is a leak. A status above
//! the highest ID it delivered is not owed: the consumer had not got there
//! (it stopped, or the run ended first), which no list of deliveries can
//! tell from losing it.
//!
//! [`parse`] is pure; [`add`] appends the consumer to a loaded run in memory,
//! never to the database.

use crate::history::{PollerSpec, Request};
use crate::load::Loaded;
use since_id::id::Id;
use std::collections::HashMap;

/// The `pollers.policy` shown for a delivered list.
pub const DELIVERED_POLICY: &str = "delivered";

/// One line of a delivered file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: String,
    pub delivered_at_ms: i64,
}

/// `NAME=FILE` of `--delivered`.
pub fn parse_arg(text: &str) -> Result<(String, std::path::PathBuf), String> {
    match text.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => {
            Ok((name.to_string(), file.into()))
        }
        _ => Err(format!(
            "bad --delivered '{text}': expected NAME=FILE.csv, such as relay=delivered.csv"
        )),
    }
}

/// Reads a delivered file: `id,delivered_at` per line, the time in ISO 8601
/// (RFC 3339, with its UTC offset) or epoch ms; an optional header line
/// `id,delivered_at`; blank lines skipped. A bad line is an error naming its
/// number (1-based).
pub fn parse(text: &str) -> Result<Vec<Delivery>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (n == 0 && line.eq_ignore_ascii_case("id,delivered_at")) {
            continue;
        }
        let bad = |why: String| format!("line {}: {why}", n + 1);
        let Some((id, at)) = line.split_once(',') else {
            return Err(bad(format!(
                "'{line}' is not 'id,delivered_at' (two fields separated by a comma)"
            )));
        };
        let id = id.trim().trim_matches('"');
        if id.is_empty() {
            return Err(bad("the id is empty".into()));
        }
        let at = at.trim().trim_matches('"');
        let delivered_at_ms = since_id::time::parse_time(at).map_err(|_| {
            bad(format!(
                "delivered_at '{at}' is neither ISO 8601 with a UTC offset \
                 (2026-11-25T10:00:00.123Z) nor epoch ms"
            ))
        })?;
        out.push(Delivery {
            id: id.to_string(),
            delivered_at_ms,
        });
    }
    Ok(out)
}

/// What [`add`] could not place: delivered IDs the run's truth does not hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotInTruth {
    pub count: usize,
    /// The first few, as written.
    pub first: Vec<String>,
}

/// Appends the consumer `name` that delivered `deliveries` to the loaded run,
/// as a poller with one request per distinct delivery time (see the module's
/// comment). A delivered ID the layout cannot read is an error; one the run
/// does not hold is counted in the result, not placed.
pub fn add(loaded: &mut Loaded, name: &str, deliveries: &[Delivery]) -> Result<NotInTruth, String> {
    let h = &mut loaded.history;
    if h.truth.is_none() {
        return Err(format!(
            "--delivered {name}: run {} has no truth to judge a delivered list against",
            loaded.run.id
        ));
    }
    if h.pollers.iter().any(|p| p.name == name) {
        return Err(format!(
            "--delivered {name}: run {} already has a poller called {name}",
            loaded.run.id
        ));
    }
    if h.pollers.len() >= crate::diff::MAX_POLLERS {
        return Err(format!(
            "--delivered {name}: analyze handles at most {} pollers",
            crate::diff::MAX_POLLERS
        ));
    }
    let index: HashMap<u128, u32> = h
        .statuses
        .iter()
        .enumerate()
        .map(|(i, s)| (s.key, i as u32))
        .collect();
    let mut placed: Vec<(i64, u32)> = Vec::with_capacity(deliveries.len());
    let mut missing = NotInTruth::default();
    for d in deliveries {
        let key = h
            .layout
            .parse(&d.id)
            .map_err(|e| format!("--delivered {name}: {e}"))?
            .0;
        match index.get(&key) {
            Some(&i) if h.truth_of(i as usize).is_some() => placed.push((d.delivered_at_ms, i)),
            _ => {
                missing.count += 1;
                if missing.first.len() < 5 {
                    missing.first.push(d.id.clone());
                }
            }
        }
    }
    // Stable: deliveries of one time keep the file's order.
    placed.sort_by_key(|&(at, _)| at);
    let poller = h.pollers.len();
    h.pollers.push(PollerSpec {
        name: name.to_string(),
        k_ms: None,
        keyset: false,
        forward: false,
    });
    loaded.pollers.push(rundb::PollerRow {
        id: -1 - poller as i64,
        name: name.to_string(),
        policy: DELIVERED_POLICY.into(),
        k_ms: None,
    });
    let mut highest: Option<u128> = None;
    let mut previous_at: Option<i64> = None;
    for (cycle, batch) in placed.chunk_by(|a, b| a.0 == b.0).enumerate() {
        let at = batch[0].0;
        let obs_start = h.observations.len() as u32;
        h.observations.extend(batch.iter().map(|&(_, i)| i));
        h.requests.push(Request {
            poller,
            cycle: cycle as i64,
            page: 0,
            sent_at_ms: previous_at.unwrap_or(at),
            received_at_ms: at,
            since_key: highest,
            since_time_ms: highest.map(|k| h.layout.ts_ms(Id(k))),
            before_key: None,
            failed: false,
            overflow: false,
            full: false,
            bytes: None,
            obs_start,
            obs_end: h.observations.len() as u32,
        });
        let top = batch.iter().map(|&(_, i)| h.statuses[i as usize].key).max();
        highest = highest.max(top);
        previous_at = Some(at);
    }
    // Not owed: what lies above the highest ID it delivered.
    let bit = 1u64 << poller;
    let above = |key: u128| highest.is_none_or(|top| key > top);
    if h.statuses.iter().any(|s| above(s.key)) {
        h.unserved.resize(h.statuses.len(), 0);
        for (i, s) in h.statuses.iter().enumerate() {
            if above(s.key) {
                h.unserved[i] |= bit;
            }
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivered_file_reads_iso_and_epoch_times_and_names_a_bad_line() {
        let text = "id,delivered_at\n10,2026-11-25T10:00:00.123Z\n\n11,1795600800124\n";
        let got = parse(text).unwrap();
        assert_eq!(
            got,
            vec![
                Delivery {
                    id: "10".into(),
                    delivered_at_ms: 1_795_600_800_123
                },
                Delivery {
                    id: "11".into(),
                    delivered_at_ms: 1_795_600_800_124
                },
            ]
        );
        let e = parse("10,1\n11\n").unwrap_err();
        assert!(e.starts_with("line 2: "), "{e}");
        let e = parse("10,1\n11,2\n12,yesterday\n").unwrap_err();
        assert!(e.starts_with("line 3: "), "{e}");
        // A time without its offset is ambiguous: refused.
        assert!(
            parse("10,2026-11-25T10:00:00\n")
                .unwrap_err()
                .starts_with("line 1: ")
        );
        assert!(parse_arg("relay").is_err());
        assert_eq!(
            parse_arg("relay=a.csv").unwrap(),
            ("relay".to_string(), "a.csv".into())
        );
    }
}
