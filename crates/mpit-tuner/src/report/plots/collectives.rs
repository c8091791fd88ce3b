//! `collective-tuning`: per tuned (communicator, collective, size bin), the
//! agreed time per call of each candidate algorithm its search measured,
//! the default and the kept one marked.

use super::{e, svg_of, FONT};
use crate::report::tables::{bytes, cut, num};
use anyhow::Result;
use plotters::prelude::*;
use vocab::summary::CollectiveOutcome;

/// Panels at most (the outcomes with the largest gain first).
const PANELS: usize = 9;

/// The chart of `outcomes` (those with measured candidates).
pub fn collective_tuning(outcomes: &[CollectiveOutcome]) -> Result<String> {
    let mut shown: Vec<&CollectiveOutcome> = outcomes
        .iter()
        .filter(|o| o.candidates.iter().any(|c| c.time_us.is_some()))
        .collect();
    shown.sort_by(|a, b| {
        b.gain
            .unwrap_or(0.0)
            .total_cmp(&a.gain.unwrap_or(0.0))
            .then_with(|| (&a.comm, &a.collective, a.bin).cmp(&(&b.comm, &b.collective, b.bin)))
    });
    shown.truncate(PANELS);
    let cols = shown.len().clamp(1, 3);
    let rows = shown.len().div_ceil(cols).max(1);
    svg_of((1000, (300 * rows as u32 + 40).max(340)), |root| {
        let body = root
            .titled(
                "Collective tuning: time per call of each candidate (us; default grey, kept green, dropped red)",
                (FONT, 18),
            )
            .map_err(e)?;
        if shown.is_empty() {
            body.draw(&Text::new(
                "no candidate was measured in this run",
                (300, 120),
                (FONT, 18).into_font(),
            ))
            .map_err(e)?;
            return Ok(());
        }
        let panels = body.split_evenly((rows, cols));
        for (panel, o) in panels.iter().zip(&shown) {
            let n = o.candidates.len();
            let top = o
                .candidates
                .iter()
                .filter_map(|c| c.time_us)
                .fold(0.0f64, f64::max)
                .max(1e-3);
            let size = |b: u64| if b == 0 { "0".to_string() } else { bytes(b) };
            let bin = o.bin.map_or(String::new(), |(lo, hi)| match hi {
                Some(hi) => format!(" {}-{}", size(lo), size(hi)),
                None => format!(" {}-", size(lo)),
            });
            let caption = format!(
                "{} {}{bin} ({}{})",
                o.collective,
                o.comm,
                o.comm_size.map_or(String::new(), |s| format!("{s} ranks")),
                o.gain.map_or(String::new(), |g| format!(", gain {g:.2}x"))
            );
            // A user's pin overrides what the search kept.
            let caption = match &o.pinned {
                Some(p) => format!("{caption}, pinned {p}"),
                None => caption,
            };
            let mut chart = ChartBuilder::on(panel)
                .caption(cut(&caption, 48), (FONT, 13))
                .margin(8)
                .margin_right(20)
                .x_label_area_size(60)
                .y_label_area_size(50)
                .build_cartesian_2d((0..n as i32).into_segmented(), 0f64..top * 1.15)
                .map_err(e)?;
            let names: Vec<String> = o.candidates.iter().map(|c| cut(&c.algorithm, 11)).collect();
            chart
                .configure_mesh()
                .x_labels(n)
                .y_labels(4)
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                        names.get(*i as usize).cloned().unwrap_or_default()
                    }
                    SegmentValue::Last => String::new(),
                })
                .y_label_formatter(&|v| num(*v))
                .y_desc("us per call")
                .label_style((FONT, 10))
                .light_line_style(BLACK.mix(0.04))
                .disable_x_mesh()
                .draw()
                .map_err(e)?;
            chart
                .draw_series(o.candidates.iter().enumerate().filter_map(|(i, c)| {
                    let t = c.time_us?;
                    let color = if c.dropped {
                        RED.mix(0.6)
                    } else if o.chosen.as_deref() == Some(c.algorithm.as_str()) {
                        GREEN.mix(0.7)
                    } else if o.default.as_deref() == Some(c.algorithm.as_str()) {
                        BLACK.mix(0.35)
                    } else {
                        BLUE.mix(0.6)
                    };
                    let i = i as i32;
                    let mut bar = Rectangle::new(
                        [
                            (SegmentValue::Exact(i), 0.0),
                            (SegmentValue::Exact(i + 1), t),
                        ],
                        color.filled(),
                    );
                    bar.set_margin(0, 0, 4, 4);
                    Some(bar)
                }))
                .map_err(e)?;
        }
        Ok(())
    })
}
