//! The plots, each written as PNG and SVG (same name, two extensions):
//!
//! - `run<N>-required-k`: the part-2 picture. Histogram of required_k over
//!   leaks of a compensated poller (red), leaks of naive only (orange) and
//!   late arrivals every poller caught (blue), stacked, with a
//!   vertical line at each compensated poller's k: leaks right of a poller's
//!   line are the ones that k is too small for.
//! - `run<N>-leaks`: leaks over the run: seconds since the run started (when
//!   the leak became visible) against id_skew_ms, one colour per set of
//!   pollers that caught it.
//! - `run<N>-lateness-cdf` (truth only): CDF of visibility lateness
//!   (visible_at - ID time) over every truth status, log x, with the pollers' k.
//! - `run<N>-price-of-safety` (>= 2 distinct compensated k): statuses missed
//!   and duplicates per new status against k (naive drawn at k = 0).
//!
//! plotters is built with `ab_glyph` instead of its default `ttf` feature
//! (font-kit, which needs fontconfig at build and run time), so it finds no
//! system font: Noto Sans, from the ttf-noto-sans crate, is registered as
//! "sans-serif" before anything is drawn (the workspace Cargo.toml; docs/layout.md,
//! the dependencies' paragraph).

use crate::diff::Analysis;
use crate::load::Loaded;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::cell::Cell;
use std::error::Error;
use std::path::Path;
use std::sync::Once;

type R = Result<(), Box<dyn Error>>;

pub(crate) const SIZE: (u32, u32) = (1200, 720);
pub(crate) const FONT: &str = "sans-serif";
pub(crate) const LEAK: RGBColor = RGBColor(214, 39, 40);
pub(crate) const LATE: RGBColor = RGBColor(31, 119, 180);
const NAIVE_ONLY: RGBColor = RGBColor(255, 160, 60);

/// The stacked categories of the required-k histogram, bottom to top.
const CATEGORIES: [(&str, RGBColor); 3] = [
    ("leaks of a compensated poller", LEAK),
    ("leaks of naive only", NAIVE_ONLY),
    ("late arrivals every poller caught", LATE),
];

/// Axis numbers without a useless ".0".
pub(crate) fn num(v: &f64) -> String {
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

pub(crate) fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Only fails on unreadable font bytes, which are compiled in.
        let _ = register_font(FONT, FontStyle::Normal, ttf_noto_sans::REGULAR);
    });
}

/// What the plots draw, extracted once from the analysis. Nothing in it
/// grows with the leaks (a run at 3,000/s has a million an hour): the
/// required-k histogram is counted in two passes over the findings, and
/// the leaks' points are read again as they are drawn
/// ([`PlotData::leak_points`]; from disk for a run judged streaming).
struct PlotData<'a> {
    run: i64,
    /// The required-k histogram of leaks and late arrivals.
    required_k: RequiredKBins,
    /// Compensated pollers: (name, k in s).
    ks: Vec<(String, f64)>,
    /// The leaks' frame: how many have a point, and their bounds.
    leaks: LeakFrame,
    /// The leaks' caught-by labels, sorted, each once.
    leak_labels: Vec<String>,
    /// Each caught-by mask's index in `leak_labels`.
    label_of: Vec<(u64, usize)>,
    /// Visibility lateness in ms over truth statuses, ascending, as (value,
    /// how many): a run at 3,000/s has twelve million statuses and a few
    /// thousand distinct values (`f32`: a plot needs no more).
    lateness: Option<Vec<(f32, u64)>>,
    /// (k in s, label, missed, duplicates per new) for naive and compensated pollers.
    price: Vec<(f64, String, Option<u64>, f64)>,
    loaded: &'a Loaded,
    analysis: &'a Analysis,
}

/// The required-k histogram: its range, how many values, and per bin the
/// count of each of [`CATEGORIES`].
struct RequiredKBins {
    lo: f64,
    hi: f64,
    n: usize,
    counts: Vec<[u32; 3]>,
}

/// Bars of the required-k histogram.
const BINS: usize = 40;

/// The leaks plot's points: how many, and their bounds (x: seconds since
/// the run started, y: id_skew_ms).
struct LeakFrame {
    n: usize,
    xmin: f64,
    xmax: f64,
    ymin: f64,
    ymax: f64,
}

/// A leak's point: (s since `start_ms`, id_skew_ms, the pollers that caught it).
fn leak_point(start_ms: i64, i: &crate::diff::Finding) -> Option<(f64, f64, u64)> {
    let t = i.visible_ms?;
    let skew = i.id_skew_ms?;
    Some(((t - start_ms) as f64 / 1000.0, skew as f64, i.seen_by))
}

/// A finding's required_k in s and its category ([`CATEGORIES`]).
fn required_k_of(i: &crate::diff::Finding, compensated: u64) -> Option<(f64, usize)> {
    let cat = if i.leaked_by & compensated != 0 {
        0
    } else if i.leaked_by != 0 {
        1
    } else {
        2
    };
    i.required_k_ms.map(|k| (k as f64 / 1000.0, cat))
}

impl PlotData<'_> {
    /// The leaks' points, in the analysis's order, read again. A read
    /// error ends them and is kept in `failed`.
    fn leak_points<'b>(
        &'b self,
        failed: &'b Cell<Option<String>>,
    ) -> impl Iterator<Item = (f64, f64, u64)> + 'b {
        let start = self.loaded.run.started_at_ms;
        self.loaded
            .leaks(self.analysis)
            .map_while(move |l| match l {
                Ok(l) => Some(l),
                Err(e) => {
                    failed.set(Some(format!("cannot read the leaks back: {e}")));
                    None
                }
            })
            .filter_map(move |l| leak_point(start, &l.finding))
    }
}

fn extract<'a>(loaded: &'a Loaded, a: &'a Analysis) -> Result<PlotData<'a>, Box<dyn Error>> {
    let h = &loaded.history;
    let ks: Vec<(String, f64)> = loaded
        .pollers
        .iter()
        .filter_map(|p| p.k_ms.map(|k| (p.name.clone(), k as f64 / 1000.0)))
        .collect();
    let compensated: u64 = loaded
        .pollers
        .iter()
        .enumerate()
        .filter(|(_, p)| p.k_ms.is_some())
        .fold(0, |m, (i, _)| m | 1 << i);
    let kmax = ks.iter().map(|k| k.1).fold(0.0, f64::max);
    let start = loaded.run.started_at_ms;
    // Pass 1: the histogram's range, the leaks' frame, who caught them.
    let (mut lo, mut hi, mut n) = (0.0, kmax, 0usize);
    let mut leaks = LeakFrame {
        n: 0,
        xmin: 0.0,
        xmax: 1.0,
        ymin: 0.0,
        ymax: 1.0,
    };
    let mut masks = std::collections::BTreeSet::new();
    for f in loaded.findings(a) {
        let i = f?.finding;
        if let Some((v, _)) = required_k_of(&i, compensated) {
            (lo, hi, n) = (f64::min(lo, v), f64::max(hi, v), n + 1);
        }
        if let Some((t, skew, mask)) = (i.leaked_by != 0).then(|| leak_point(start, &i)).flatten() {
            leaks.n += 1;
            (leaks.xmin, leaks.xmax) = (f64::min(leaks.xmin, t), f64::max(leaks.xmax, t));
            (leaks.ymin, leaks.ymax) = (f64::min(leaks.ymin, skew), f64::max(leaks.ymax, skew));
            masks.insert(mask);
        }
    }
    let hi = hi.max(1.0) * 1.08;
    (leaks.xmax, leaks.ymax) = (leaks.xmax * 1.05, leaks.ymax * 1.35);
    // Pass 2: the histogram's counts.
    let width = (hi - lo) / BINS as f64;
    let mut counts = vec![[0u32; 3]; BINS];
    for f in loaded.findings(a) {
        if let Some((v, cat)) = required_k_of(&f?.finding, compensated) {
            let b = (((v - lo) / width) as usize).min(BINS - 1);
            counts[b][cat] += 1;
        }
    }
    let label = |mask: u64| {
        let names = crate::json::names(loaded, mask);
        if names.is_empty() {
            "caught by nobody".to_string()
        } else {
            format!("caught by {}", names.join(" + "))
        }
    };
    let mut labelled: Vec<(String, u64)> = masks.iter().map(|&m| (label(m), m)).collect();
    labelled.sort();
    let label_of = masks
        .iter()
        .map(|&m| (m, labelled.iter().position(|l| l.1 == m).unwrap_or(0)))
        .collect();
    let leak_labels = labelled.into_iter().map(|l| l.0).collect();
    // A run judged streaming keeps no truth but the statuses it names: it
    // counted each lateness as it read the truth.
    let lateness = match &loaded.totals {
        Some(t) => t
            .lateness
            .as_ref()
            .map(|counts| counts.iter().map(|&(l, n)| (l as f32, n)).collect()),
        None => h.truth.as_ref().map(|_| {
            let mut v: Vec<f32> = h.lateness_ms().map(|l| l as f32).collect();
            v.sort_by(f32::total_cmp);
            counted(v)
        }),
    };
    let has_ref = a.reference != crate::diff::Reference::None;
    let price = loaded
        .pollers
        .iter()
        .zip(&a.pollers)
        .map(|(p, s)| {
            (
                p.k_ms.unwrap_or(0) as f64 / 1000.0,
                p.name.clone(),
                has_ref.then(|| s.missed()),
                s.duplicates_per_new(),
            )
        })
        .collect();
    Ok(PlotData {
        run: loaded.run.id,
        required_k: RequiredKBins { lo, hi, n, counts },
        ks,
        leaks,
        leak_labels,
        label_of,
        lateness,
        price,
        loaded,
        analysis: a,
    })
}

/// Draws `f` into `<dir>/<stem>.png` and `.svg`; returns the two paths.
macro_rules! both {
    ($dir:expr, $stem:expr, $f:ident, $data:expr) => {{
        let png = $dir.join(format!("{}.png", $stem));
        let svg = $dir.join(format!("{}.svg", $stem));
        {
            let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
            $f(&root, $data)?;
            root.present()?;
        }
        {
            let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
            $f(&root, $data)?;
            root.present()?;
        }
        vec![png.display().to_string(), svg.display().to_string()]
    }};
}
pub(crate) use both;

/// Writes every plot that applies into `dir`. Returns the files written and
/// notes on the plots skipped.
pub fn write_all(
    loaded: &Loaded,
    a: &Analysis,
    dir: &Path,
) -> Result<(Vec<String>, Vec<String>), Box<dyn Error>> {
    register();
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create plot directory {}: {e}", dir.display()))?;
    let d = extract(loaded, a)?;
    let mut files = Vec::new();
    let mut notes = Vec::new();
    files.extend(both!(
        dir,
        format!("run{}-required-k", d.run),
        required_k,
        &d
    ));
    files.extend(both!(
        dir,
        format!("run{}-leaks", d.run),
        leaks_over_run,
        &d
    ));
    if d.lateness.as_ref().is_some_and(|l| !l.is_empty()) {
        files.extend(both!(
            dir,
            format!("run{}-lateness-cdf", d.run),
            lateness_cdf,
            &d
        ));
    } else {
        notes.push("lateness CDF skipped: the run has no truth (not a simulated target)".into());
    }
    let mut distinct: Vec<i64> = loaded.pollers.iter().filter_map(|p| p.k_ms).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() >= 2 && a.reference != crate::diff::Reference::None {
        files.extend(both!(
            dir,
            format!("run{}-price-of-safety", d.run),
            price,
            &d
        ));
    } else if distinct.len() >= 2 {
        // Asked for (several k) but not drawable; with fewer k nobody asked for it.
        notes.push(
            "price-of-safety plot skipped: it needs a reference (truth, or another poller to compare with)"
                .into(),
        );
    }
    Ok((files, notes))
}

pub(crate) fn caption_style() -> TextStyle<'static> {
    (FONT, 26).into_font().into()
}

pub(crate) fn k_colour(i: usize) -> RGBColor {
    const C: [RGBColor; 6] = [
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(23, 190, 207),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
    ];
    C[i % C.len()]
}

fn required_k<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, d: &PlotData) -> R
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let RequiredKBins {
        lo,
        hi,
        n,
        ref counts,
    } = d.required_k;
    let (bins, width) = (BINS, (hi - lo) / BINS as f64);
    // Headroom above the bars for the legend and the k labels.
    let ymax = counts
        .iter()
        .map(|c| c.iter().sum::<u32>())
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.6;
    let title = if n == 0 {
        format!("Run {}: required k (no leaks or late arrivals)", d.run)
    } else {
        format!("Run {}: required k of {} leaks and late arrivals", d.run, n)
    };
    let mut chart = ChartBuilder::on(root)
        .caption(title, caption_style())
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(70)
        .build_cartesian_2d(lo..hi, 0.0..ymax)?;
    chart
        .configure_mesh()
        .x_desc("required k (s): the smallest k whose compensated since_id catches the item")
        .y_desc("statuses")
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 15))
        .x_label_formatter(&num)
        .y_label_formatter(&num)
        .draw()?;
    for (cat, (label, colour)) in CATEGORIES.iter().enumerate() {
        let colour = *colour;
        chart
            .draw_series((0..bins).filter(|&b| counts[b][cat] > 0).map(|b| {
                let below: u32 = counts[b][..cat].iter().sum();
                let x0 = lo + b as f64 * width;
                Rectangle::new(
                    [
                        (x0, below as f64),
                        (x0 + width * 0.92, (below + counts[b][cat]) as f64),
                    ],
                    colour.filled(),
                )
            }))?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled()));
    }
    for (i, (name, k)) in d.ks.iter().enumerate() {
        let c = k_colour(i);
        chart
            .draw_series(LineSeries::new(
                vec![(*k, 0.0), (*k, ymax)],
                c.stroke_width(3),
            ))?
            .label(format!("k of {name}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(3)));
        chart.draw_series(std::iter::once(Text::new(
            format!(" k = {}", fmt_s(*k)),
            (*k, ymax * (0.62 - 0.05 * i as f64)),
            (FONT, 16).into_font().color(&c),
        )))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn fmt_s(s: f64) -> String {
    if s >= 1.0 || s == 0.0 {
        format!("{s}s")
    } else {
        format!("{}ms", (s * 1000.0).round())
    }
}

fn leaks_over_run<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, d: &PlotData) -> R
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let LeakFrame {
        n,
        xmin,
        xmax,
        ymin,
        ymax,
    } = d.leaks;
    // Smaller marks when there are thousands, so that the density still shows.
    let radius = if n > 1000 { 3 } else { 5 };
    let title = if n == 0 {
        format!("Run {}: leaks over the run (none)", d.run)
    } else {
        format!("Run {}: {} leaks over the run", d.run, n)
    };
    let mut chart = ChartBuilder::on(root)
        .caption(title, caption_style())
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(xmin..xmax, ymin..ymax)?;
    chart
        .configure_mesh()
        .x_desc("time since the run started (s), when the leaked status became visible")
        .y_desc("id_skew (ms) below the cursor")
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 15))
        .x_label_formatter(&num)
        .y_label_formatter(&num)
        .draw()?;
    let labels = &d.leak_labels;
    let failed = Cell::new(None);
    let label_of = |mask: u64| d.label_of.iter().find(|l| l.0 == mask).map(|l| l.1);
    for (i, label) in labels.iter().enumerate() {
        let c = if label.ends_with("nobody") {
            LEAK
        } else {
            k_colour(i)
        };
        let mut marked = MarkedCells::new(radius as u32);
        let coord = chart.as_coord_spec().clone();
        chart
            .draw_series(
                d.leak_points(&failed)
                    .filter(|l| label_of(l.2) == Some(i))
                    .filter(|l| marked.first(coord.translate(&(l.0, l.1))))
                    .map(|l| Circle::new((l.0, l.1), radius, c.mix(0.8).filled())),
            )?
            .label(label.to_string())
            .legend(move |(x, y)| Circle::new((x + 7, y), 5, c.filled()));
        if let Some(e) = failed.take() {
            return Err(e.into());
        }
    }
    if !labels.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.95))
            .border_style(BLACK)
            .draw()?;
    }
    Ok(())
}

/// The cells of a plot's grid, `cell` pixels square, that a series has
/// marked. A mark is drawn once per cell: a second one there would cover
/// the first (marks are wider than a cell), and a run at 3,000/s has a
/// million leaks an hour, which as one SVG element each made 90.8 MB
/// (docs/benchmarks.md). The title still counts every leak. Memory: one
/// bit per cell of the image, whatever the number of leaks.
struct MarkedCells {
    cell: u32,
    columns: usize,
    bits: Vec<u64>,
}

impl MarkedCells {
    fn new(cell: u32) -> MarkedCells {
        let cell = cell.max(1);
        let columns = SIZE.0.div_ceil(cell) as usize;
        let rows = SIZE.1.div_ceil(cell) as usize;
        MarkedCells {
            cell,
            columns,
            bits: vec![0; (columns * rows).div_ceil(64)],
        }
    }

    /// Whether `at` (pixels) is the first mark of its cell; marks it.
    /// A point outside the image is always drawn (the backend clips it).
    fn first(&mut self, at: (i32, i32)) -> bool {
        let (Ok(x), Ok(y)) = (u32::try_from(at.0), u32::try_from(at.1)) else {
            return true;
        };
        if x >= SIZE.0 || y >= SIZE.1 {
            return true;
        }
        let i = (y / self.cell) as usize * self.columns + (x / self.cell) as usize;
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        let first = self.bits[word] & bit == 0;
        self.bits[word] |= bit;
        first
    }
}

fn lateness_cdf<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, d: &PlotData) -> R
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let v = d.lateness.as_deref().unwrap_or(&[]);
    let total: u64 = v.iter().map(|&(_, c)| c).sum();
    // Log x: lateness of 0 ms (or less: a clock quirk) is drawn at 1 ms.
    let xmax = v
        .last()
        .map_or(10.0, |&(x, _)| f64::from(x))
        .max(d.ks.iter().map(|k| k.1 * 1000.0).fold(10.0, f64::max))
        * 1.5;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "Run {}: visibility lateness of {} statuses (truth)",
                d.run, total
            ),
            caption_style(),
        )
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(70)
        .build_cartesian_2d((1f64..xmax).log_scale(), 0f64..1.0)?;
    chart
        .configure_mesh()
        .x_desc("visible_at - ID time (ms, log scale; 0 or less drawn at 1 ms)")
        .y_desc("fraction of statuses")
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 15))
        .x_label_formatter(&num)
        .y_label_formatter(&num)
        .draw()?;
    let mut pts = cdf_points(v, total);
    pts.dedup();
    chart
        .draw_series(LineSeries::new(pts, LATE.stroke_width(3)))?
        .label("CDF of visibility lateness")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], LATE.stroke_width(3)));
    for (i, (name, k)) in d.ks.iter().enumerate() {
        let c = k_colour(i);
        let kms = (k * 1000.0).max(1.0);
        chart
            .draw_series(LineSeries::new(
                vec![(kms, 0.0), (kms, 1.0)],
                c.stroke_width(2),
            ))?
            .label(format!("k of {name}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Sorted values as (value, how many), ascending.
fn counted(sorted: Vec<f32>) -> Vec<(f32, u64)> {
    let mut counts: Vec<(f32, u64)> = Vec::new();
    for x in sorted {
        match counts.last_mut() {
            Some((last, n)) if *last == x => *n += 1,
            _ => counts.push((x, 1)),
        }
    }
    counts
}

/// The CDF's points of `counts` (ascending values, how many each, `total`
/// in all): at most ~2000, the CDF's shape needs no more. Rank `i` of the
/// sorted values is drawn when it is a multiple of the step or the last.
fn cdf_points(counts: &[(f32, u64)], total: u64) -> Vec<(f64, f64)> {
    let step = (total / 2000).max(1);
    let n = total.max(1) as f64;
    let mut pts = Vec::new();
    let mut rank = 0u64;
    for &(x, c) in counts {
        let x = f64::from(x).max(1.0);
        let mut i = rank.div_ceil(step) * step;
        while i < rank + c {
            pts.push((x, (i + 1) as f64 / n));
            i += step;
        }
        rank += c;
        if rank == total && !(total - 1).is_multiple_of(step) {
            pts.push((x, total as f64 / n));
        }
    }
    pts
}

fn price<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, d: &PlotData) -> R
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (title_area, body) = root.split_vertically(50);
    title_area.titled(
        &format!("Run {}: the price of safety (naive drawn at k = 0)", d.run),
        caption_style(),
    )?;
    let panels = body.split_evenly((1, 2));
    let mut pts: Vec<&(f64, String, Option<u64>, f64)> = d.price.iter().collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max) * 1.4;
    type Panel<'a> = (&'a str, Vec<(f64, f64)>, RGBColor);
    let series: [Panel; 2] = [
        (
            "statuses missed",
            pts.iter()
                .filter_map(|p| p.2.map(|m| (p.0, m as f64)))
                .collect(),
            LEAK,
        ),
        (
            "duplicates per new status",
            pts.iter().map(|p| (p.0, p.3)).collect(),
            LATE,
        ),
    ];
    for (panel, (ylabel, values, colour)) in panels.iter().zip(series) {
        let ymax = values.iter().map(|v| v.1).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .margin(20)
            .x_label_area_size(55)
            .y_label_area_size(70)
            .build_cartesian_2d(-xmax * 0.03..xmax, 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("k (s)")
            .y_desc(ylabel)
            .axis_desc_style((FONT, 18))
            .label_style((FONT, 15))
            .x_label_formatter(&num)
            .y_label_formatter(&num)
            .draw()?;
        chart
            .draw_series(LineSeries::new(values.clone(), colour.stroke_width(2)))?
            .label(ylabel)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], colour.stroke_width(2))
            });
        chart.draw_series(
            values
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 5, colour.filled())),
        )?;
        chart.draw_series(
            pts.iter()
                .zip(&values)
                // Just above the point, so that a label at 0 clears the axis.
                .map(|(p, &(x, y))| {
                    Text::new(
                        format!(" {}", p.1),
                        (x, y + ymax * 0.045),
                        (FONT, 14).into_font(),
                    )
                }),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{MarkedCells, SIZE, cdf_points, counted};

    /// A mark is drawn once per cell and per series, wherever the cell is;
    /// a point off the image is left to the backend to clip.
    #[test]
    fn a_cell_is_marked_once() {
        let mut cells = MarkedCells::new(3);
        assert!(cells.first((10, 10)));
        assert!(!cells.first((10, 10)));
        assert!(!cells.first((11, 9)), "same 3-px cell (9..12, 9..12)");
        assert!(cells.first((12, 10)), "the next cell");
        let last = (SIZE.0 as i32 - 1, SIZE.1 as i32 - 1);
        assert!(cells.first(last));
        assert!(!cells.first(last));
        for off in [(-1, 5), (5, -1), (SIZE.0 as i32, 5), (5, SIZE.1 as i32)] {
            assert!(cells.first(off) && cells.first(off), "{off:?}");
        }
        let mut all = MarkedCells::new(1);
        let drawn = (0..SIZE.0 as i32)
            .flat_map(|x| (0..SIZE.1 as i32).map(move |y| (x, y)))
            .chain([(0, 0), (7, 7)])
            .filter(|&p| all.first(p))
            .count();
        assert_eq!(drawn, (SIZE.0 * SIZE.1) as usize, "every pixel once");
    }

    /// The points from counts are those of the sorted values themselves:
    /// rank `i` when a multiple of the step, and the last.
    #[test]
    fn cdf_points_from_counts_are_the_sorted_values_points() {
        for total in [1u64, 7, 1999, 2000, 4001, 12_345] {
            let values: Vec<f32> = (0..total).map(|i| ((i * i) % 97 / 3) as f32).collect();
            let mut sorted = values.clone();
            sorted.sort_by(f32::total_cmp);
            let step = (sorted.len() / 2000).max(1);
            let expected: Vec<(f64, f64)> = sorted
                .iter()
                .enumerate()
                .filter(|(i, _)| i % step == 0 || i + 1 == sorted.len())
                .map(|(i, &x)| (f64::from(x).max(1.0), (i + 1) as f64 / total as f64))
                .collect();
            assert_eq!(
                cdf_points(&counted(sorted), total),
                expected,
                "{total} values"
            );
        }
    }
}
