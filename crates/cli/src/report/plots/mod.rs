//! The plots: drawn once as SVG with plotters, then rasterised to PNG with
//! resvg, so both files show the same picture.
//!
//! - `over-time-<variable>`: a variable across ranks over time, one line
//!   per rank;
//! - `rank-histograms`: how the ranks spread over the range of the
//!   variables that differ most across ranks (summary.json's histograms);
//! - `message-sizes`: message-size distribution per MPI call family;
//! - `cvar-changes`: the CVAR writes of every rank over time, a marker per
//!   outcome.
//!
//! PNG text needs a font: `MPIT_TUNER_FONT` (a .ttf/.otf file), else
//! DejaVu Sans, else any font under the system's font directories. With no
//! font at all the PNGs are drawn without text (the SVGs keep theirs) and
//! the report says so.

use super::analysis::by_spread;
use super::reading::{Stat, Write};
use super::tables::{bytes, cut, num};
use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use resvg::usvg::fontdb;
use resvg::{tiny_skia, usvg};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tuner_core::toolmetrics::bucket_floor;

const FONT: &str = "sans-serif";
const WIDE: (u32, u32) = (1000, 560);

/// One plot written as SVG and PNG.
#[derive(Debug, Clone)]
pub struct Plot {
    /// What it shows.
    pub title: String,
    /// The SVG file.
    pub svg: PathBuf,
    /// The PNG file.
    pub png: PathBuf,
}

/// Writes SVG and PNG files, with the fonts found once.
pub struct Painter {
    fonts: Arc<fontdb::Database>,
    /// Why PNG text is missing, if it is.
    pub font_note: Option<String>,
}

impl Painter {
    /// Finds a font for the PNGs.
    pub fn new() -> Painter {
        let mut db = fontdb::Database::new();
        let mut tried = Vec::new();
        if let Some(path) = std::env::var_os("MPIT_TUNER_FONT") {
            let _ = db.load_font_file(&path);
            tried.push(PathBuf::from(path));
        }
        let dejavu = Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf");
        if db.is_empty() && dejavu.exists() {
            let _ = db.load_font_file(dejavu);
        }
        if db.is_empty() {
            db.load_system_fonts();
        }
        if db.is_empty() {
            db.load_fonts_dir("/usr/share/fonts");
        }
        let family = db
            .faces()
            .find(|f| f.families.iter().any(|(n, _)| n == "DejaVu Sans"))
            .or_else(|| db.faces().next())
            .and_then(|f| f.families.first().map(|(n, _)| n.clone()));
        let font_note = match &family {
            Some(f) => {
                db.set_sans_serif_family(f.clone());
                db.set_serif_family(f.clone());
                db.set_monospace_family(f.clone());
                None
            }
            None => Some(
                "no font found (install fonts-dejavu-core, or set MPIT_TUNER_FONT to a .ttf file): \
                 the PNGs have no text; the SVGs do"
                    .to_string(),
            ),
        };
        Painter {
            fonts: Arc::new(db),
            font_note,
        }
    }

    /// Writes `svg` as `dir/stem.svg` and its rendering as `dir/stem.png`.
    pub fn save(&self, dir: &Path, stem: &str, title: &str, svg: &str) -> Result<Plot> {
        let svg_path = dir.join(format!("{stem}.svg"));
        let png_path = dir.join(format!("{stem}.png"));
        std::fs::write(&svg_path, svg)
            .with_context(|| format!("cannot write {}", svg_path.display()))?;
        let png = self.rasterise(svg)?;
        std::fs::write(&png_path, png)
            .with_context(|| format!("cannot write {}", png_path.display()))?;
        Ok(Plot {
            title: title.to_string(),
            svg: svg_path,
            png: png_path,
        })
    }

    /// Renders an SVG to PNG bytes on a white background.
    pub fn rasterise(&self, svg: &str) -> Result<Vec<u8>> {
        let options = usvg::Options {
            fontdb: self.fonts.clone(),
            ..usvg::Options::default()
        };
        let tree = usvg::Tree::from_str(svg, &options).context("parsing the SVG")?;
        let size = tree.size().to_int_size();
        let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
            .ok_or_else(|| anyhow!("empty image"))?;
        pixmap.fill(tiny_skia::Color::WHITE);
        resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
        pixmap.encode_png().context("encoding the PNG")
    }
}

/// A file-name-safe form of a variable name.
pub fn slug(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn svg_of(size: (u32, u32), draw: impl FnOnce(&Area<'_>) -> Result<()>) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        draw(&root)?;
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(out)
}

fn rank_color(i: usize, n: usize) -> RGBColor {
    if n <= 12 {
        let c = Palette99::pick(i).to_rgba();
        RGBColor(c.0, c.1, c.2)
    } else {
        // Blue (rank 0) to red (the last rank).
        let f = i as f64 / (n - 1).max(1) as f64;
        let hsl = HSLColor(0.66 * (1.0 - f), 0.75, 0.45);
        let (r, g, b) = hsl.rgb();
        RGBColor(r, g, b)
    }
}

fn e(err: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("{err}")
}

/// A variable over time, one line per rank.
pub fn over_time(
    variable: &str,
    series: &[(u32, Vec<(f64, f64)>)],
    size: Option<u32>,
) -> Result<String> {
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
    let pad = (y1 - y0) * 0.05;
    let t1 = if t1 > 0.0 { t1 } else { 1.0 };
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
            root.draw(&Text::new(
                format!(
                    "colour: rank 0 (blue) to rank {} (red)",
                    series.last().map_or(0, |s| s.0)
                ),
                (100, 50),
                (FONT, 13).into_font(),
            ))
            .map_err(e)?;
        }
        Ok(())
    })
}

/// An axis label for counts: whole numbers only.
fn whole(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        num(v.round())
    } else {
        String::new()
    }
}

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

const OUTCOMES: [(&str, &str); 5] = [
    ("written", "written"),
    (
        "written_differs",
        "written, reads back different (or not at all)",
    ),
    ("refused", "refused"),
    ("dry_run", "dry run"),
    ("invalid", "invalid or missing"),
];

fn outcome_group(o: &str) -> &'static str {
    match o {
        "written" => "written",
        "written_differs" | "written_unverified" => "written_differs",
        "refused" | "refused_now" => "refused",
        "dry_run" => "dry_run",
        _ => "invalid",
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
        .map(|w| w.t)
        .fold(duration.unwrap_or(0.0), f64::max)
        .max(0.001);
    let cvars: std::collections::BTreeSet<&str> = writes.iter().map(|w| w.cvar.as_str()).collect();
    let caption = if writes.is_empty() {
        "CVAR changes: none in this run".to_string()
    } else {
        format!(
            "CVAR changes over time: {} write{} of {}",
            writes.len(),
            if writes.len() == 1 { "" } else { "s" },
            cut(&cvars.iter().copied().collect::<Vec<_>>().join(", "), 60)
        )
    };
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
                .filter(|w| outcome_group(&w.outcome) == group)
                .map(|w| (w.t, f64::from(w.rank)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            match group {
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
                        .legend(|(x, y)| {
                            Circle::new((x + 8, y), 5, BLACK.mix(0.6).stroke_width(2))
                        });
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
        }
        if label_values {
            for w in writes {
                let value =
                    super::document::value_text(w.readback.as_ref().or(w.requested.as_ref()));
                chart
                    .draw_series(std::iter::once(Text::new(
                        value,
                        (w.t, f64::from(w.rank) + 0.18),
                        (FONT, 11).into_font(),
                    )))
                    .map_err(e)?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_make_file_names() {
        assert_eq!(
            slug("pml_ob1_unexpected_msgq_length@world"),
            "pml_ob1_unexpected_msgq_length_world"
        );
        assert_eq!(slug("tool.allreduce.calls"), "tool.allreduce.calls");
        assert_eq!(edge_label(4), "8 B");
        assert_eq!(edge_label(17), "64 KiB");
    }

    #[test]
    fn charts_render_to_svg_and_png() {
        let series = vec![
            (0, vec![(0.0, 0.0), (1.0, 5.0)]),
            (1, vec![(0.0, 1.0), (1.0, 2.0)]),
        ];
        let svg = over_time("x", &series, Some(2)).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("<polyline"));
        let png = Painter::new().rasterise(&svg).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let w = Write {
            rank: 1,
            t: 0.5,
            cvar: "C".into(),
            outcome: "refused_now".into(),
            ..Write::default()
        };
        let svg = cvar_changes(&[w], Some(2), Some(1.0)).unwrap();
        assert!(svg.contains("refused"));
        assert!(cvar_changes(&[], Some(2), None)
            .unwrap()
            .contains("none in this run"));
        let mut h = std::collections::BTreeMap::new();
        h.insert("send".to_string(), {
            let mut v = vec![0u64; 32];
            v[17] = 200;
            v
        });
        assert!(message_sizes(&h).unwrap().contains("send: 200 messages"));
    }
}
