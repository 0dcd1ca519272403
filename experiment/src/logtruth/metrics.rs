//! watch's live view: `/metrics` in Prometheus's text exposition format
//! 0.0.4 (`--metrics ADDR`), the slot guard's size (`--max-slot-lag SIZE`)
//! and the live line on stderr.
//!
//! Every [`REFRESH`] the watch's incremental checker (`analysis::settle`,
//! whose verdicts the end of the run gives) says its verdicts so far, and
//! the exposition is rendered once from that; a scrape only copies the last
//! rendering. The format: one `# HELP` and one `# TYPE`
//! line a metric, then its samples `name{label="value"} value`, label
//! values with `\`, `"` and newlines escaped, help text with `\` and
//! newlines, each line ended by `\n` (Prometheus docs, "Exposition
//! formats", text-based format; the names as "Metric and label naming"
//! asks: one prefix, base units, counters ending in `_total`).

pub use crate::logtruth::source::{SlotStatus, parse_size};
use analysis::consumers::Judged;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the verdicts are taken again (metrics and live line).
pub const REFRESH: Duration = Duration::from_secs(2);

/// How often the live line is printed when no verdict changed.
pub const LINE_EVERY: Duration = Duration::from_secs(10);

/// The Content-Type of the 0.0.4 text format (Prometheus docs,
/// "Exposition formats").
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric's type, as its `# TYPE` line names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// One metric: its name, help, type and samples (labels, value).
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

/// `text` with `\` and newlines escaped (a `# HELP` line).
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// `text` with `\`, `"` and newlines escaped (a label value).
fn escape_label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample's value: an integer as an integer, else Go's float syntax.
fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The exposition of `families`, each one uninterrupted group.
pub fn encode(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        out.push_str(&format!("# HELP {} {}\n", f.name, escape_help(f.help)));
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        out.push_str(&format!("# TYPE {} {kind}\n", f.name));
        for (labels, v) in &f.samples {
            out.push_str(f.name);
            if !labels.is_empty() {
                let inner: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                    .collect();
                out.push_str(&format!("{{{}}}", inner.join(",")));
            }
            out.push_str(&format!(" {}\n", value(*v)));
        }
    }
    out
}

/// The exposition of a judgement so far (and the slot's status, if any).
pub fn families(judged: &Judged, slot: Option<SlotStatus>) -> Vec<Family> {
    let per = |f: &dyn Fn(&analysis::consumers::Consumer) -> usize| {
        judged
            .consumers
            .iter()
            .map(|c| (vec![("consumer", c.name.clone())], f(c) as f64))
            .collect::<Vec<_>>()
    };
    let mut out = vec![
        Family {
            name: "snowleak_rows_committed_total",
            help: "Distinct keys of the watched table committed since watch started (the log).",
            kind: Kind::Counter,
            samples: vec![(Vec::new(), judged.committed as f64)],
        },
        Family {
            name: "snowleak_rows_delivered_total",
            help: "Distinct committed keys the consumer delivered.",
            kind: Kind::Counter,
            samples: per(&|c| c.delivered),
        },
        Family {
            name: "snowleak_rows_lost_total",
            help: "Committed rows the checker counts lost so far: below the highest key delivered, never delivered.",
            kind: Kind::Counter,
            samples: per(&|c| c.lost.len()),
        },
        Family {
            name: "snowleak_rows_duplicated_total",
            help: "Deliveries of a key already delivered.",
            kind: Kind::Counter,
            samples: per(&|c| c.duplicates.count),
        },
        Family {
            name: "snowleak_rows_out_of_order_total",
            help: "Deliveries of a key committed before one delivered earlier.",
            kind: Kind::Counter,
            samples: per(&|c| c.out_of_order.count),
        },
    ];
    if let Some(s) = slot {
        out.push(Family {
            name: "snowleak_slot_retained_bytes",
            help: "WAL the replication slot keeps: pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn).",
            kind: Kind::Gauge,
            samples: vec![(Vec::new(), s.retained as f64)],
        });
        out.push(Family {
            name: "snowleak_slot_read_position_bytes",
            help: "The slot's confirmed_flush_lsn as a number: up to where watch read the log and stored what it read.",
            kind: Kind::Gauge,
            samples: vec![(Vec::new(), s.position as f64)],
        });
    }
    out
}

/// The live view's state: the last rendering served, when it was made,
/// and the verdicts the live line last showed.
pub struct Live {
    pub body: Arc<Mutex<String>>,
    refreshed: Option<Instant>,
    printed: Option<Instant>,
    verdicts: Vec<String>,
}

impl Default for Live {
    fn default() -> Live {
        Live {
            body: Arc::new(Mutex::new(String::new())),
            refreshed: None,
            printed: None,
            verdicts: Vec::new(),
        }
    }
}

impl Live {
    /// Takes the verdicts so far (`judge`) again if [`REFRESH`] has
    /// passed: renders the exposition and prints the live line when a
    /// verdict changed or [`LINE_EVERY`] has passed.
    pub fn tick(&mut self, judge: impl FnOnce() -> Judged, slot: Option<SlotStatus>) {
        if self.refreshed.is_some_and(|at| at.elapsed() < REFRESH) {
            return;
        }
        self.refreshed = Some(Instant::now());
        let judged = judge();
        *self.body.lock().unwrap() = encode(&families(&judged, slot));
        let verdicts: Vec<String> = judged
            .consumers
            .iter()
            .map(|c| c.verdict.as_str().to_string())
            .collect();
        let due = self.printed.is_none_or(|at| at.elapsed() >= LINE_EVERY);
        if due || verdicts != self.verdicts {
            self.printed = Some(Instant::now());
            self.verdicts = verdicts;
            for line in live_lines(&judged) {
                eprintln!("{line}");
            }
        }
    }
}

/// The live line: one a consumer.
pub fn live_lines(judged: &Judged) -> Vec<String> {
    judged
        .consumers
        .iter()
        .map(|c| {
            format!(
                "watch: {}: {} of {} committed rows delivered, {} lost so far, {} so far",
                c.name,
                c.delivered,
                judged.committed,
                c.lost.len(),
                c.verdict.as_str()
            )
        })
        .collect()
}

/// Binds `addr` and serves `GET /metrics` from `body` on the runtime.
pub fn serve(
    runtime: &tokio::runtime::Runtime,
    addr: &str,
    body: Arc<Mutex<String>>,
) -> Result<(), String> {
    let parsed: std::net::SocketAddr = addr.parse().map_err(|_| {
        format!("bad --metrics '{addr}': an address and port such as 127.0.0.1:9464")
    })?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(parsed))
        .map_err(|e| format!("--metrics {addr}: cannot listen: {e}"))?;
    let router = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let text = body.lock().unwrap().clone();
            async move { ([(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], text) }
        }),
    );
    runtime.spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_help_type_and_samples_one_group_a_metric() {
        let text = encode(&[
            Family {
                name: "x_total",
                help: "a\\b\nc",
                kind: Kind::Counter,
                samples: vec![
                    (vec![("consumer", "naive".into())], 1.0),
                    (vec![("consumer", "q\"u\\o\nte".into())], 0.0),
                ],
            },
            Family {
                name: "y_bytes",
                help: "y",
                kind: Kind::Gauge,
                samples: vec![(Vec::new(), 123456789.0), (vec![("a", "1".into())], 0.5)],
            },
        ]);
        assert_eq!(
            text,
            "# HELP x_total a\\\\b\\nc\n\
             # TYPE x_total counter\n\
             x_total{consumer=\"naive\"} 1\n\
             x_total{consumer=\"q\\\"u\\\\o\\nte\"} 0\n\
             # HELP y_bytes y\n\
             # TYPE y_bytes gauge\n\
             y_bytes 123456789\n\
             y_bytes{a=\"1\"} 0.5\n"
        );
    }

    #[test]
    fn values_in_go_syntax() {
        assert_eq!(value(f64::NAN), "NaN");
        assert_eq!(value(f64::INFINITY), "+Inf");
        assert_eq!(value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(value(3.0), "3");
        assert_eq!(value(1e20), "100000000000000000000");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("500"), Ok(500));
        assert_eq!(parse_size("8 KiB"), Ok(8192));
        for bad in ["", "0", "1GB", "x", "-1", "1.5GiB", "99999999999TiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
