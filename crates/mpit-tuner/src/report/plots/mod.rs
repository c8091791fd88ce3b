//! The plots: drawn once as SVG with plotters, then rasterised to PNG with
//! resvg, so both files show the same picture.
//!
//! - `over-time-<variable>`: a variable across ranks over time, one line
//!   per rank;
//! - `rank-histograms`: how the ranks spread over the range of the
//!   variables that differ most across ranks (summary.json's histograms);
//! - `message-sizes`: message-size distribution per MPI call family;
//! - `cvar-changes`: the CVAR writes of every rank over time, a marker per
//!   outcome;
//! - `collective-tuning`: per tuned (communicator, collective, size bin),
//!   the time per call of each candidate algorithm.
//!
//! Each chart has its file ([`over_time`], [`histograms`] for the rank
//! histograms and message sizes, [`cvar_changes`]); this one holds the
//! [`Painter`] (fonts, SVG to PNG) and what the charts share.
//!
//! PNG text needs a font: `MPIT_TUNER_FONT` (a .ttf/.otf file), else
//! DejaVu Sans, else any font under the system's font directories. With no
//! font at all the PNGs are drawn without text (the SVGs keep theirs) and
//! the report says so.

mod collectives;
mod cvar_changes;
mod histograms;
mod over_time;

pub use collectives::collective_tuning;
pub use cvar_changes::cvar_changes;
pub use histograms::{message_sizes, rank_histograms};
pub use over_time::over_time;

use super::tables::num;
use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use resvg::usvg::fontdb;
use resvg::{tiny_skia, usvg};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// An axis label for counts: whole numbers only.
fn whole(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        num(v.round())
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reading::Write;

    #[test]
    fn names_make_file_names() {
        assert_eq!(
            slug("pml_ob1_unexpected_msgq_length@world"),
            "pml_ob1_unexpected_msgq_length_world"
        );
        assert_eq!(slug("tool.allreduce.calls"), "tool.allreduce.calls");
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
            record: vocab::record::Write {
                t: 0.5,
                policy: "p".into(),
                phase: vocab::record::Phase::Periodic,
                attempt: vocab::record::CvarWrite::failed(
                    "C",
                    None,
                    vocab::record::Outcome::RefusedNow,
                    "not now".into(),
                ),
                source: "1".into(),
                dry_run: false,
            },
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
