//! The `--json` output: the same findings as the text report, for machines.
//!
//! The shape is an interface (documented in analysis/JSON.md); `schema` is
//! bumped on any incompatible change. Times are RFC 3339 with ms, UTC.

use crate::diff::{Analysis, PollerStats, Reference};
use crate::load::Loaded;
use serde::Serialize;
use since_id::time::rfc3339_ms;
use std::collections::BTreeMap;

/// The version of this JSON shape.
pub const JSON_SCHEMA: u32 = 1;

#[derive(Serialize)]
pub struct Output<'a> {
    pub schema: u32,
    pub run: Run,
    /// "truth", "union" (of the other pollers) or "none".
    pub reference: &'static str,
    pub pollers: Vec<PollerReport>,
    pub leaks: Leaks<'a>,
    pub other_misses: OtherMisses<'a>,
    /// The rows each poller lost to the retention job, one by one.
    pub expired: Vec<ExpiredReport<'a>>,
    pub future_ids: Vec<String>,
    pub truth: Option<Truth>,
    pub k_to_catch_all_ms: Option<i64>,
    pub required_k: Option<RequiredK>,
    /// With truth: the oracle's cost (`oracle.rs`).
    pub oracle: Option<Oracle>,
    /// A misskey-ftt run (or a recorded `serve --backend misskey-ftt`):
    /// what became of each note a poller lost (`ftt.rs`); `null` otherwise.
    pub ftt: Option<Ftt>,
    /// The machine's load while a real-time run ran (`runs.config`'s
    /// `machine_load`, [`crate::machine`]) with the reasons it is flagged;
    /// `null` for a virtual run.
    pub machine_load: Option<MachineLoadReport>,
    /// Plot files written (empty when plotting was skipped or failed).
    pub plots: Vec<String>,
    /// What a run judged streaming does not compute, since it needs the
    /// whole run (`analyze --in-memory` computes it); empty otherwise.
    pub not_computed: Vec<&'static str>,
}

impl Output<'_> {
    /// The same report listing at most `rows` leaks and `rows` other
    /// misses: what `--html` shows, without holding a million of them as
    /// JSON values.
    pub fn listing_at_most(mut self, rows: usize) -> Self {
        self.leaks.at_most = rows;
        self.other_misses.at_most = rows;
        self
    }
}

/// The figures a run judged streaming leaves out (`Output::not_computed`).
pub const NOT_STREAMED: [&str; 1] = ["oracle"];

/// The `machine_load` object: the run's recorded load and why it is
/// flagged (empty: it is not).
#[derive(Serialize)]
pub struct MachineLoadReport {
    #[serde(flatten)]
    pub load: crate::machine::MachineLoad,
    pub flags: Vec<String>,
}

/// The fates of the notes each poller lost, from [`crate::ftt::fates`].
#[derive(Serialize)]
pub struct Ftt {
    /// Every poller, in the pollers' order, those that lost nothing included.
    pub pollers: Vec<FttPoller>,
}

#[derive(Serialize)]
pub struct FttPoller {
    pub name: String,
    /// Lost notes per fate (`leak`, `trimmed`, `never-pushed`, `in-lists`,
    /// `gone`), every fate present.
    pub counts: BTreeMap<&'static str, usize>,
    /// Each lost note, in ID order.
    pub lost: Vec<FttLost>,
}

#[derive(Serialize)]
pub struct FttLost {
    pub id: String,
    pub fate: &'static str,
    /// The poller's first request that owed it (`diff::first_owing`): the
    /// one that should have returned it; null if none did.
    pub first_owed_by: Option<RequestRef>,
}

/// A request of the run, as a person finds it in run.db: its poller's
/// cycle and page, and when it was sent.
#[derive(Serialize)]
pub struct RequestRef {
    pub cycle: i64,
    pub page: i64,
    pub sent_at: String,
}

/// The `ftt` object: per poller, the counts of [`crate::ftt::counts`] and
/// each lost note with its fate.
pub fn ftt(loaded: &Loaded, lost: &[crate::ftt::Lost]) -> Ftt {
    let counts = crate::ftt::counts(lost);
    let pollers = loaded
        .pollers
        .iter()
        .enumerate()
        .map(|(i, p)| FttPoller {
            name: p.name.clone(),
            counts: crate::ftt::Fate::ALL
                .iter()
                .map(|f| {
                    let n = counts.get(&i).and_then(|c| c.get(f)).copied();
                    (f.as_str(), n.unwrap_or(0))
                })
                .collect(),
            lost: lost
                .iter()
                .filter(|l| l.poller == i)
                .map(|l| FttLost {
                    id: l.id.clone(),
                    fate: l.fate.as_str(),
                    first_owed_by: l.request.map(|ri| {
                        let r = &loaded.history.requests[ri as usize];
                        RequestRef {
                            cycle: r.cycle,
                            page: r.page,
                            sent_at: rfc3339_ms(r.sent_at_ms),
                        }
                    }),
                })
                .collect(),
        })
        .collect();
    Ftt { pollers }
}

/// The `run` object: the `runs` row ([`rundb::RunRow`]) as JSON.md documents
/// it, with its times in RFC 3339 and without `page_limit`, `config` and
/// `version`. Written field by field, so that the row type is declared once.
pub struct Run(pub rundb::RunRow);

impl Serialize for Run {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let r = &self.0;
        let mut o = s.serialize_struct("Run", 11)?;
        o.serialize_field("id", &r.id)?;
        o.serialize_field("target", &r.target)?;
        o.serialize_field("profile", &r.profile)?;
        o.serialize_field("seed", &r.seed)?;
        o.serialize_field("clock", &r.clock)?;
        o.serialize_field("layout", &r.layout)?;
        o.serialize_field("interval_ms", &r.interval_ms)?;
        o.serialize_field("complete", &r.complete)?;
        o.serialize_field("end_reason", &r.end_reason)?;
        o.serialize_field("started_at", &rfc3339_ms(r.started_at_ms))?;
        o.serialize_field("ended_at", &r.ended_at_ms.map(rfc3339_ms))?;
        o.end()
    }
}

#[derive(Serialize)]
pub struct PollerReport {
    pub name: String,
    /// The client this poller is one timeline of (`experiment serve
    /// --record`: `CLIENT home`, `CLIENT tag:snowleak` are of `CLIENT`);
    /// `null` for the harness's own pollers.
    pub client: Option<String>,
    pub policy: String,
    pub k_ms: Option<i64>,
    pub requests: u64,
    pub errors: u64,
    pub seen: u64,
    pub duplicates: u64,
    pub duplicates_per_new: f64,
    pub duplicate_bytes_estimate: Option<u64>,
    pub back_pages: u64,
    pub late_arrivals: u64,
    pub missed: Option<u64>,
    /// `leaks` to `before_baseline`, each under its name in [`PollerStats`].
    #[serde(flatten)]
    pub lost: Lost,
    pub verdict: &'static str,
    pub verdict_reason: String,
    /// Duplicates over the oracle's; `None` without truth or oracle duplicates.
    pub oracle_ratio: Option<f64>,
    /// With truth: visible -> first returned, over statuses visible after its first request.
    pub detection_delay_ms: Option<Delay>,
}

/// What a poller lost or was not owed, as [`PollerStats`] counts it: the
/// leaks, the misses by cause, and the statuses gone before it could see
/// them, expired (not in `missed`), or below its baseline page.
pub struct Lost(pub PollerStats);

impl Serialize for Lost {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let s = &self.0;
        let fields = [
            ("leaks", s.leaks),
            ("misses_error", s.misses_error),
            ("misses_overflow", s.misses_overflow),
            ("misses_unexplained", s.misses_unexplained),
            ("misses_future_id", s.misses_future_id),
            ("gone_before_seen", s.gone_before_seen),
            ("expired", s.expired),
            ("before_baseline", s.before_baseline),
        ];
        let mut o = serializer.serialize_struct("Lost", fields.len())?;
        for (name, value) in fields {
            o.serialize_field(name, &value)?;
        }
        o.end()
    }
}

#[derive(Serialize)]
pub struct Oracle {
    pub ticks: u64,
    pub new: u64,
    pub duplicates: u64,
    pub duplicates_per_new: f64,
}

#[derive(Serialize)]
pub struct Delay {
    pub basis: usize,
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
}

#[derive(Serialize)]
pub struct LeakReport {
    pub id: String,
    pub id_time: String,
    pub first_seen: Option<String>,
    pub seen_by: Vec<String>,
    pub missed_by: Vec<String>,
    pub id_skew_ms: Option<i64>,
    pub required_k_ms: Option<i64>,
}

/// The leaks, each written as the JSON is serialized (a run can have a
/// million: as strings all at once they cost about 300 bytes each). Those
/// of a run judged streaming are read back from disk ([`Loaded::leaks`]).
pub struct Leaks<'a> {
    loaded: &'a Loaded,
    analysis: &'a Analysis,
    /// Write only the first ones (`--html` lists at most a thousand).
    at_most: usize,
}

impl Serialize for Leaks<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let loaded = self.loaded;
        let mut seq = serializer.serialize_seq(None)?;
        for leak in loaded.leaks(self.analysis).take(self.at_most) {
            let leak =
                leak.map_err(|e| S::Error::custom(format!("cannot read the leaks back: {e}")))?;
            let i = &leak.finding;
            seq.serialize_element(&LeakReport {
                id: leak.id.into_owned(),
                id_time: rfc3339_ms(leak.id_time_ms),
                first_seen: i.first_seen_ms.map(rfc3339_ms),
                seen_by: names(loaded, i.seen_by),
                missed_by: names(loaded, i.leaked_by),
                id_skew_ms: i.id_skew_ms,
                required_k_ms: i.required_k_ms,
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
pub struct OtherMissReport<'a> {
    pub id: std::borrow::Cow<'a, str>,
    pub poller: &'a str,
    pub cause: &'static str,
}

/// The misses that are not leaks, written one at a time as the JSON is
/// serialized: a run with heavy overflow has millions of them, and building
/// them all as strings first cost more memory than the whole history.
/// Those of a run judged streaming are read back from disk
/// ([`Loaded::other_misses`]).
pub struct OtherMisses<'a> {
    loaded: &'a Loaded,
    analysis: &'a Analysis,
    /// As [`Leaks::at_most`].
    at_most: usize,
}

impl Serialize for OtherMisses<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = serializer.serialize_seq(None)?;
        for m in self.loaded.other_misses(self.analysis).take(self.at_most) {
            let m = m.map_err(|e| S::Error::custom(format!("cannot read the misses back: {e}")))?;
            seq.serialize_element(&OtherMissReport {
                id: m.id,
                poller: &self.loaded.pollers[m.poller as usize].name,
                cause: m.cause.as_str(),
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
pub struct ExpiredReport<'a> {
    pub id: std::borrow::Cow<'a, str>,
    pub poller: &'a str,
}

#[derive(Serialize)]
pub struct Truth {
    pub statuses: usize,
    pub missed: BTreeMap<String, u64>,
}

#[derive(Serialize)]
pub struct RequiredK {
    pub basis: usize,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
}

/// Names of the pollers whose bit is set in `mask`.
pub fn names(loaded: &Loaded, mask: u64) -> Vec<String> {
    loaded
        .pollers
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, p)| p.name.clone())
        .collect()
}

/// `ftt`: the lost notes' fates ([`crate::ftt::fates`]) when the run has
/// an FTT truth.
pub fn build<'a>(
    loaded: &'a Loaded,
    a: &'a Analysis,
    plots: &[String],
    ftt: Option<&[crate::ftt::Lost]>,
) -> Output<'a> {
    let run = &loaded.run;
    let h = &loaded.history;
    let has_ref = a.reference != Reference::None;
    let costs = crate::oracle::costs_of(loaded, a);
    let pollers = loaded
        .pollers
        .iter()
        .zip(&a.pollers)
        .zip(&a.verdicts)
        .zip(&a.verdict_reasons)
        .enumerate()
        .map(|(i, (((p, s), v), why))| PollerReport {
            name: p.name.clone(),
            client: loaded.client_of(i).map(str::to_string),
            policy: p.policy.clone(),
            k_ms: p.k_ms,
            requests: s.requests,
            errors: s.errors,
            seen: s.seen,
            duplicates: s.duplicates,
            duplicates_per_new: (s.duplicates_per_new() * 1000.0).round() / 1000.0,
            duplicate_bytes_estimate: s.duplicate_bytes.map(|b| b.round() as u64),
            back_pages: s.back_pages,
            late_arrivals: s.late_arrivals,
            missed: has_ref.then(|| s.missed()),
            lost: Lost(s.clone()),
            verdict: v.as_str(),
            verdict_reason: why.clone(),
            oracle_ratio: costs.ratios[i].map(|r| (r * 1000.0).round() / 1000.0),
            detection_delay_ms: costs.delays[i].map(|d| Delay {
                basis: d.basis,
                p50: d.p50,
                p99: d.p99,
                max: d.max,
            }),
        })
        .collect();
    let leaks = Leaks {
        loaded,
        analysis: a,
        at_most: usize::MAX,
    };
    let other_misses = OtherMisses {
        loaded,
        analysis: a,
        at_most: usize::MAX,
    };
    let future_ids = a
        .future_ids
        .iter()
        .map(|&s| loaded.status_id(s).into_owned())
        .collect();
    let truth = h.truth.as_ref().map(|t| Truth {
        statuses: match &loaded.totals {
            Some(totals) => totals.truth_rows as usize,
            None => t.iter().filter(|v| v.is_some()).count(),
        },
        missed: loaded
            .pollers
            .iter()
            .zip(&a.pollers)
            .map(|(p, s)| (p.name.clone(), s.missed()))
            .collect(),
    });
    Output {
        schema: JSON_SCHEMA,
        run: Run(run.clone()),
        reference: match a.reference {
            Reference::Truth => "truth",
            Reference::Union => "union",
            Reference::None => "none",
        },
        pollers,
        leaks,
        other_misses,
        expired: a
            .expired
            .iter()
            .map(|e| ExpiredReport {
                id: loaded.status_id(e.status),
                poller: &loaded.pollers[e.poller as usize].name,
            })
            .collect(),
        future_ids,
        truth,
        k_to_catch_all_ms: a.k_to_catch_all_ms,
        required_k: a.required_k.map(|d| RequiredK {
            basis: d.basis,
            p50: d.p50,
            p90: d.p90,
            p99: d.p99,
            max: d.max,
        }),
        oracle: costs.oracle.map(|o| Oracle {
            ticks: o.ticks,
            new: o.new,
            duplicates: o.duplicates,
            duplicates_per_new: (o.duplicates_per_new() * 1000.0).round() / 1000.0,
        }),
        ftt: ftt.map(|lost| self::ftt(loaded, lost)),
        machine_load: loaded.machine_load().map(|load| MachineLoadReport {
            flags: load.flags(),
            load,
        }),
        plots: plots.to_vec(),
        not_computed: if loaded.totals.is_some() {
            NOT_STREAMED.to_vec()
        } else {
            Vec::new()
        },
    }
}
