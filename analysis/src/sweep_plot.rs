//! The sweep's plots, PNG and SVG each:
//!
//! - `sweepN-frontier`: cost against misses, one point per poller: duplicates
//!   per new status (log x; naive's 0 drawn at 0.01) against leaks per seed
//!   (mean, with its 95 % interval as a bar), the oracle marked (no leaks, the
//!   floor of duplicates for pollers that detect at the first tick).
//! - `sweepN-lateness`: the survival function of visibility lateness
//!   (`P(visible_at - ID time > x)`) over every status of every seed, on
//!   log-log axes, where a heavy tail is a straight line and its end is
//!   visible; each poller's k (solid) and audit depth (dashed) marked. A CDF
//!   on linear axes would hide the tail, which is what decides leaks.

use crate::plot::{FONT, LATE, SIZE, both, caption_style, k_colour, num, register};
use crate::sweep::{PollerSummary, SeedResult};
use plotters::coord::Shift;
use plotters::prelude::*;
use since_id::policy::CursorPolicy;
use std::error::Error;
use std::path::Path;

type R = Result<(), Box<dyn Error>>;

struct SweepPlotData {
    sweep: i64,
    seeds: usize,
    points: Vec<PollerSummary>,
    oracle: Option<f64>,
    /// Sorted lateness (ms) of every status, all seeds.
    lateness: Vec<f64>,
    /// (poller index, poller, k ms, audit depth ms) from each policy spec.
    marks: Vec<(usize, String, f64, Option<f64>)>,
}

/// A poller's k and audit depth, from its name (its policy spec, perhaps with `#2`).
fn marks(name: &str) -> Option<(f64, Option<f64>)> {
    let spec: CursorPolicy = name.split('#').next()?.parse().ok()?;
    let state = since_id::strategy::PolicyState::new(spec);
    match spec {
        CursorPolicy::Naive => None,
        _ => Some((
            state.k_ms() as f64,
            state.audit().map(|(depth, _)| depth as f64),
        )),
    }
}

pub fn write_all(
    results: &[SeedResult],
    summary: &[PollerSummary],
    oracle: Option<f64>,
    dir: &Path,
    sweep: i64,
) -> Result<Vec<String>, Box<dyn Error>> {
    register();
    let mut lateness: Vec<f64> = results
        .iter()
        .flat_map(|r| r.lateness_ms.iter().map(|&l| l as f64))
        .collect();
    lateness.sort_by(f64::total_cmp);
    let d = SweepPlotData {
        sweep,
        seeds: results.len(),
        points: summary.to_vec(),
        oracle,
        lateness,
        marks: summary
            .iter()
            .enumerate()
            .filter_map(|(i, p)| marks(&p.name).map(|(k, depth)| (i, p.name.clone(), k, depth)))
            .collect(),
    };
    let mut files = both!(dir, format!("sweep{sweep}-frontier"), frontier, &d);
    if !d.lateness.is_empty() {
        files.extend(both!(dir, format!("sweep{sweep}-lateness"), survival, &d));
    }
    Ok(files)
}

const FLOOR_X: f64 = 0.01;

fn frontier<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, d: &SweepPlotData) -> R
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let xs = d
        .points
        .iter()
        .map(|p| p.duplicates_per_new)
        .chain(d.oracle);
    let xmax = xs.fold(1.0, f64::max) * 3.0;
    let ymax = d.points.iter().map(|p| p.leaks_ci95[1]).fold(1.0, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "Sweep {}: cost against leaks over {} seeds (mean and 95 % interval)",
                d.sweep, d.seeds
            ),
            caption_style(),
        )
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(70)
        .build_cartesian_2d((FLOOR_X * 0.5..xmax).log_scale(), -ymax * 0.04..ymax)?;
    chart
        .configure_mesh()
        .x_desc("duplicates per new status (log; 0 drawn at 0.01)")
        .y_desc("leaks per seed")
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 15))
        .x_label_formatter(&num)
        .y_label_formatter(&num)
        .draw()?;
    for (i, p) in d.points.iter().enumerate() {
        let c = k_colour(i);
        let x = p.duplicates_per_new.max(FLOOR_X);
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, p.leaks_ci95[0].max(0.0)), (x, p.leaks_ci95[1])],
            c.stroke_width(3),
        )))?;
        chart
            .draw_series(std::iter::once(Circle::new(
                (x, p.leaks_mean),
                7,
                c.filled(),
            )))?
            .label(format!(
                "{}: {}/{} seeds without leaks",
                p.name, p.seeds_without_leaks, p.seeds
            ))
            .legend(move |(x, y)| Circle::new((x + 7, y), 6, c.filled()));
        // Alternately above and below the point, so neighbours stay legible.
        let dy = if i % 2 == 0 { 0.03 } else { -0.02 };
        chart.draw_series(std::iter::once(Text::new(
            format!("  {}", p.name),
            (x, p.leaks_mean + ymax * dy),
            (FONT, 14).into_font(),
        )))?;
    }
    if let Some(o) = d.oracle {
        let x = o.max(FLOOR_X);
        chart
            .draw_series(std::iter::once(TriangleMarker::new(
                (x, 0.0),
                10,
                BLACK.filled(),
            )))?
            .label(format!(
                "oracle: {o:.3} duplicates per new status, no leaks"
            ))
            .legend(|(x, y)| TriangleMarker::new((x + 7, y), 7, BLACK.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn survival<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, d: &SweepPlotData) -> R
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let v = &d.lateness;
    let n = v.len() as f64;
    let xmax = v.last().copied().unwrap_or(1000.0).max(
        d.marks
            .iter()
            .flat_map(|m| [m.2, m.3.unwrap_or(0.0)])
            .fold(1000.0, f64::max),
    ) * 2.0;
    let ymin = (0.5 / n).min(1e-3);
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "Sweep {}: P(lateness > x) over {} statuses of {} seeds",
                d.sweep,
                v.len(),
                d.seeds
            ),
            caption_style(),
        )
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d((1f64..xmax).log_scale(), (ymin..1.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("x = visible_at - ID time (ms, log)")
        .y_desc("fraction of statuses later than x (log)")
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 15))
        .x_label_formatter(&num)
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .draw()?;
    // Survival at log-spaced x: at most ~400 points, every one the exact
    // fraction of the sample above x; the last point is the largest lateness.
    let mut pts = Vec::new();
    let mut x = 1.0;
    while x < xmax {
        let above = v.len() - v.partition_point(|&l| l <= x);
        if above == 0 {
            break;
        }
        pts.push((x, above as f64 / n));
        x *= 1.05;
    }
    chart
        .draw_series(LineSeries::new(pts, LATE.stroke_width(3)))?
        .label("P(lateness > x)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], LATE.stroke_width(3)));
    for (i, name, k, depth) in &d.marks {
        let c = k_colour(*i);
        let k = k.max(1.0);
        chart
            .draw_series(LineSeries::new(
                vec![(k, ymin), (k, 1.0)],
                c.stroke_width(2),
            ))?
            .label(format!("k of {name}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2)));
        if let Some(depth) = depth {
            // Dashed: short segments down the line.
            let mut y = 1.0f64;
            let mut segments = Vec::new();
            while y > ymin {
                segments.push(PathElement::new(
                    vec![(*depth, y), (*depth, y / 1.6)],
                    c.stroke_width(2),
                ));
                y /= 2.6;
            }
            chart
                .draw_series(segments)?
                .label(format!("audit depth of {name}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 5, y)], c.stroke_width(2))
                });
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
