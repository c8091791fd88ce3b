//! `over-time-<variable>`: a variable across ranks over time, one line per
//! rank (a legend up to 12 ranks, a colour scale beyond).

use super::{e, rank_color, svg_of, Area, FONT, WIDE};
use crate::report::tables::{cut, num};
use anyhow::Result;
use plotters::coord::{cartesian::Cartesian2d, types::RangedCoordf64};
use plotters::prelude::*;

/// A chart with seconds on x and values on y.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A variable over time, one line per rank.
pub fn over_time(
    variable: &str,
    series: &[(u32, Vec<(f64, f64)>)],
    size: Option<u32>,
) -> Result<String> {
    let (t1, y0, y1) = extent(series);
    let pad = (y1 - y0) * 0.05;
    let n = series.len();
    let of = size.map_or(String::new(), |s| format!(" of {s}"));
    svg_of(WIDE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "{} across ranks over time ({n} rank{}{of})",
                    cut(variable, 60),
                    if n == 1 { "" } else { "s" }
                ),
                (FONT, 20),
            )
            .margin(12)
            .margin_right(28)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..t1 * 1.01, y0..y1 + pad)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("time since start (s)")
            .y_desc(cut(variable, 50))
            .y_label_formatter(&|v| num(*v))
            .label_style((FONT, 13))
            .light_line_style(BLACK.mix(0.04))
            .draw()
            .map_err(e)?;
        let legend = n <= 12;
        rank_lines(&mut chart, series, legend)?;
        if legend && n > 0 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .label_font((FONT, 13))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .draw()
                .map_err(e)?;
        } else if n > 12 {
            colour_scale(root, series)?;
        }
        Ok(())
    })
}

/// The end of the time axis and the range of the values (from 0 at most,
/// never empty).
fn extent(series: &[(u32, Vec<(f64, f64)>)]) -> (f64, f64, f64) {
    let (mut t1, mut y0, mut y1) = (0.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for (_, pts) in series {
        for &(t, y) in pts {
            if t.is_finite() && y.is_finite() {
                t1 = t1.max(t);
                y0 = y0.min(y);
                y1 = y1.max(y);
            }
        }
    }
    if !y0.is_finite() {
        (y0, y1) = (0.0, 1.0);
    }
    y0 = y0.min(0.0);
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let t1 = if t1 > 0.0 { t1 } else { 1.0 };
    (t1, y0, y1)
}

/// One line per rank, labelled for the legend when there is one.
fn rank_lines(
    chart: &mut Chart<'_, '_>,
    series: &[(u32, Vec<(f64, f64)>)],
    legend: bool,
) -> Result<()> {
    let n = series.len();
    for (i, (rank, pts)) in series.iter().enumerate() {
        let color = rank_color(i, n);
        let width = if n > 64 { 1 } else { 2 };
        let s = chart
            .draw_series(LineSeries::new(
                pts.iter()
                    .copied()
                    .filter(|(t, y)| t.is_finite() && y.is_finite()),
                color.stroke_width(width),
            ))
            .map_err(e)?;
        if legend {
            s.label(format!("rank {rank}")).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        }
    }
    Ok(())
}

/// Instead of a legend for many ranks: what the colours mean.
fn colour_scale(root: &Area<'_>, series: &[(u32, Vec<(f64, f64)>)]) -> Result<()> {
    root.draw(&Text::new(
        format!(
            "colour: rank 0 (blue) to rank {} (red)",
            series.last().map_or(0, |s| s.0)
        ),
        (100, 50),
        (FONT, 13).into_font(),
    ))
    .map_err(e)
}
