//! `cvar-changes`: the CVAR writes of every rank over time, a row per rank,
//! a marker per outcome, the value written next to each when there are few.
//! Writes a user asked for (`mpit-tuner set`) that the library took have a
//! marker of their own, apart from the policies' writes.

use super::{e, svg_of, FONT, WIDE};
use crate::report::document::cvar_value_text;
use crate::report::reading::Write;
use crate::report::tables::cut;
use anyhow::Result;
use plotters::coord::{cartesian::Cartesian2d, types::RangedCoordf64};
use plotters::prelude::*;
use vocab::record::{Outcome, Phase};

/// A chart with seconds on x and ranks on y.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The groups of outcomes, in the order of the legend, with their labels.
const OUTCOMES: [(&str, &str); 6] = [
    ("user", "set by a user (mpit-tuner set)"),
    ("written", "written"),
    (
        "written_differs",
        "written, reads back different (or not at all)",
    ),
    ("refused", "refused"),
    ("dry_run", "dry run"),
    ("invalid", "invalid or missing"),
];

/// The group of [`OUTCOMES`] a write is drawn as.
fn outcome_group(w: &Write) -> &'static str {
    let o = w.record.attempt.outcome;
    if w.record.phase == Phase::Steering
        && matches!(
            o,
            Outcome::Written | Outcome::WrittenDiffers | Outcome::WrittenUnverified
        )
    {
        return "user";
    }
    match o {
        Outcome::Written => "written",
        Outcome::WrittenDiffers | Outcome::WrittenUnverified => "written_differs",
        Outcome::Refused | Outcome::RefusedNow => "refused",
        Outcome::DryRun => "dry_run",
        Outcome::Invalid | Outcome::Missing => "invalid",
    }
}

/// Every CVAR write over time, a row per rank, a marker per outcome.
pub fn cvar_changes(writes: &[Write], size: Option<u32>, duration: Option<f64>) -> Result<String> {
    let top_rank = writes
        .iter()
        .map(|w| w.rank)
        .max()
        .unwrap_or(0)
        .max(size.unwrap_or(1).saturating_sub(1));
    let t1 = writes
        .iter()
        .map(|w| w.record.t)
        .fold(duration.unwrap_or(0.0), f64::max)
        .max(0.001);
    let caption = caption(writes);
    let label_values = writes.len() <= 60;
    // Markers shrink as ranks crowd the rows.
    let r: i32 = match top_rank {
        0..=31 => 6,
        32..=127 => 4,
        _ => 2,
    };
    svg_of(WIDE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(caption, (FONT, 20))
            .margin(12)
            .margin_right(28)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..t1 * 1.05, -0.6f64..f64::from(top_rank) + 0.6)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("time since start (s)")
            .y_desc("rank")
            .y_labels((top_rank as usize + 1).min(16))
            .y_label_formatter(&|v| {
                if (v - v.round()).abs() < 1e-6 && *v >= 0.0 {
                    format!("{}", v.round() as i64)
                } else {
                    String::new()
                }
            })
            .label_style((FONT, 13))
            .light_line_style(BLACK.mix(0.04))
            .draw()
            .map_err(e)?;
        for (group, label) in OUTCOMES {
            let pts: Vec<(f64, f64)> = writes
                .iter()
                .filter(|w| outcome_group(w) == group)
                .map(|w| (w.record.t, f64::from(w.rank)))
                .collect();
            if !pts.is_empty() {
                markers(&mut chart, group, label, &pts, r, t1)?;
            }
        }
        if label_values {
            values(&mut chart, writes)?;
        }
        if !writes.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .label_font((FONT, 13))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .draw()
                .map_err(e)?;
        }
        Ok(())
    })
}

/// The title: how many writes of which CVARs.
fn caption(writes: &[Write]) -> String {
    let cvars: std::collections::BTreeSet<&str> = writes
        .iter()
        .map(|w| w.record.attempt.cvar.as_str())
        .collect();
    if writes.is_empty() {
        "CVAR changes: none in this run".to_string()
    } else {
        format!(
            "CVAR changes over time: {} write{} of {}",
            writes.len(),
            if writes.len() == 1 { "" } else { "s" },
            cut(&cvars.iter().copied().collect::<Vec<_>>().join(", "), 60)
        )
    }
}

/// The markers of one group of outcomes at `pts` (t, rank), size `r`, with
/// their legend entry.
fn markers(
    chart: &mut Chart<'_, '_>,
    group: &str,
    label: &str,
    pts: &[(f64, f64)],
    r: i32,
    t1: f64,
) -> Result<()> {
    match group {
        "user" => {
            let c = RGBColor(20, 90, 200);
            chart
                .draw_series(pts.iter().map(move |&(t, y)| {
                    Rectangle::new(
                        [(t - t1 * 0.005, y - 0.2), (t + t1 * 0.005, y + 0.2)],
                        c.stroke_width(3),
                    )
                }))
                .map_err(e)?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x + 3, y - 5), (x + 13, y + 5)], c.stroke_width(3))
                });
        }
        "written" => {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, r, GREEN.filled())))
                .map_err(e)?
                .label(label)
                .legend(|(x, y)| Circle::new((x + 8, y), 5, GREEN.filled()));
        }
        "written_differs" => {
            let c = RGBColor(230, 140, 0);
            chart
                .draw_series(
                    pts.iter()
                        .map(move |&p| TriangleMarker::new(p, r + 1, c.filled())),
                )
                .map_err(e)?
                .label(label)
                .legend(move |(x, y)| TriangleMarker::new((x + 8, y), 6, c.filled()));
        }
        "refused" => {
            chart
                .draw_series(pts.iter().map(|&p| Cross::new(p, r, RED.stroke_width(3))))
                .map_err(e)?
                .label(label)
                .legend(|(x, y)| Cross::new((x + 8, y), 5, RED.stroke_width(3)));
        }
        "dry_run" => {
            chart
                .draw_series(
                    pts.iter()
                        .map(|&p| Circle::new(p, r, BLACK.mix(0.6).stroke_width(2))),
                )
                .map_err(e)?
                .label(label)
                .legend(|(x, y)| Circle::new((x + 8, y), 5, BLACK.mix(0.6).stroke_width(2)));
        }
        _ => {
            let c = RGBColor(130, 60, 170);
            chart
                .draw_series(pts.iter().map(move |&(t, r)| {
                    Rectangle::new([(t, r - 0.12), (t + t1 * 0.006, r + 0.12)], c.filled())
                }))
                .map_err(e)?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x + 3, y - 5), (x + 13, y + 5)], c.filled())
                });
        }
    }
    Ok(())
}

/// The value each write set (read back, else requested), above its marker.
fn values(chart: &mut Chart<'_, '_>, writes: &[Write]) -> Result<()> {
    for w in writes {
        let a = &w.record.attempt;
        let value = cvar_value_text(a.readback.as_ref().or(a.requested.as_ref()));
        chart
            .draw_series(std::iter::once(Text::new(
                value,
                (w.record.t, f64::from(w.rank) + 0.18),
                (FONT, 11).into_font(),
            )))
            .map_err(e)?;
    }
    Ok(())
}
