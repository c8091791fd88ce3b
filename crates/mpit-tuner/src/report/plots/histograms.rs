//! `rank-histograms` (how the ranks spread over the range of the variables
//! that differ most across ranks) and `message-sizes` (message-size
//! distribution per MPI call family).

use super::{e, svg_of, whole, FONT};
use crate::report::analysis::by_spread;
use crate::report::reading::Stat;
use crate::report::tables::{bytes, cut, num};
use anyhow::Result;
use plotters::prelude::*;
use tuner_core::sample::toolmetrics::bucket_floor;

/// Cross-rank histograms of the variables that differ most across ranks.
pub fn rank_histograms(stats: &[Stat], size: Option<u32>) -> Result<String> {
    let chosen: Vec<&Stat> = by_spread(stats, size)
        .into_iter()
        .filter(|s| !s.histogram.is_empty() && s.max > s.min)
        .take(6)
        .collect();
    svg_of((1000, 640), |root| {
        let title = "How the ranks spread: ranks per bin between the smallest and largest value";
        let body = root.titled(title, (FONT, 20)).map_err(e)?;
        if chosen.is_empty() {
            body.draw(&Text::new(
                if stats.is_empty() {
                    "no cross-rank statistics in this run"
                } else {
                    "every variable has the same value on all ranks that have it"
                },
                (300, 250),
                (FONT, 18).into_font(),
            ))
            .map_err(e)?;
            return Ok(());
        }
        let cols = if chosen.len() > 2 { 3 } else { chosen.len() };
        let rows = chosen.len().div_ceil(cols);
        let panels = body.split_evenly((rows, cols));
        for (panel, s) in panels.iter().zip(&chosen) {
            let bins = s.histogram.len() as f64;
            let (lo, hi) = if s.max > s.min {
                (s.min, s.max)
            } else {
                (s.min - 0.5, s.min + 0.5)
            };
            let top = f64::from(s.histogram.iter().copied().max().unwrap_or(1).max(1));
            let of = size.map_or(String::new(), |n| format!("/{n}"));
            let mut chart = ChartBuilder::on(panel)
                .caption(
                    format!("{} ({}{of} ranks)", cut(&s.name, 32), s.ranks),
                    (FONT, 13),
                )
                .margin(8)
                .margin_right(24)
                .x_label_area_size(30)
                .y_label_area_size(36)
                .build_cartesian_2d(lo..hi, 0f64..top * 1.15)
                .map_err(e)?;
            chart
                .configure_mesh()
                .x_labels(4)
                .y_labels(4)
                .x_label_formatter(&|v| num(*v))
                .y_label_formatter(&whole)
                .y_desc("ranks")
                .label_style((FONT, 11))
                .light_line_style(BLACK.mix(0.04))
                .draw()
                .map_err(e)?;
            let w = (hi - lo) / bins;
            chart
                .draw_series(s.histogram.iter().enumerate().map(|(b, &c)| {
                    let x0 = lo + w * b as f64;
                    Rectangle::new(
                        [(x0 + w * 0.05, 0.0), (x0 + w * 0.95, f64::from(c))],
                        BLUE.mix(0.7).filled(),
                    )
                }))
                .map_err(e)?;
        }
        Ok(())
    })
}

/// The boundary label of a size bucket edge: bucket `b` starts here.
fn edge_label(b: i32) -> String {
    if b <= 0 {
        "0".into()
    } else {
        bytes(bucket_floor(b as usize))
    }
}

/// Message-size distribution per call family.
pub fn message_sizes(hists: &std::collections::BTreeMap<String, Vec<u64>>) -> Result<String> {
    let families: Vec<(&String, &Vec<u64>)> = hists
        .iter()
        .filter(|(_, h)| h.iter().any(|&n| n > 0))
        .collect();
    let cols = families.len().clamp(1, 3);
    let rows = families.len().div_ceil(cols).max(1);
    svg_of((1000, (260 * rows as u32 + 40).max(320)), |root| {
        let body = root
            .titled(
                "Message sizes per MPI call family (all ranks; bars are power-of-two buckets)",
                (FONT, 20),
            )
            .map_err(e)?;
        if families.is_empty() {
            body.draw(&Text::new(
                "no message sizes recorded in this run",
                (300, 120),
                (FONT, 18).into_font(),
            ))
            .map_err(e)?;
            return Ok(());
        }
        let panels = body.split_evenly((rows, cols));
        for (panel, (family, h)) in panels.iter().zip(&families) {
            let first = h.iter().position(|&n| n > 0).unwrap_or(0) as i32;
            let last = h.iter().rposition(|&n| n > 0).unwrap_or(0) as i32;
            // At least four buckets wide, so that one bar is not a slab.
            let lo = (first - 1).max(0);
            let hi = (last + 2).max(lo + 4);
            let total: u64 = h.iter().sum();
            let top = h.iter().copied().max().unwrap_or(1).max(1) as f64;
            let mut chart = ChartBuilder::on(panel)
                .caption(format!("{family}: {total} messages"), (FONT, 15))
                .margin(8)
                .margin_right(24)
                .x_label_area_size(30)
                .y_label_area_size(50)
                .build_cartesian_2d(lo..hi, 0f64..top * 1.15)
                .map_err(e)?;
            chart
                .configure_mesh()
                .x_labels((hi - lo + 1) as usize)
                .y_labels(4)
                .x_label_formatter(&|b| edge_label(*b))
                .y_label_formatter(&whole)
                .label_style((FONT, 11))
                .light_line_style(BLACK.mix(0.04))
                .disable_x_mesh()
                .draw()
                .map_err(e)?;
            chart
                .draw_series((lo..hi).filter_map(|b| {
                    let n = *h.get(b as usize)?;
                    (n > 0).then(|| {
                        Rectangle::new([(b, 0.0), (b + 1, n as f64)], GREEN.mix(0.6).filled())
                    })
                }))
                .map_err(e)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_edges_are_labelled() {
        assert_eq!(edge_label(4), "8 B");
        assert_eq!(edge_label(17), "64 KiB");
    }
}
