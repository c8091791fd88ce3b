//! The report as a document of sections (key/value lists, tables, bullet
//! lists, paragraphs, images) and its two renderings: plain text for the
//! terminal (long tables cut to a number of rows, with a line saying how
//! many more there are) and Markdown (everything).

use std::fmt::Write as _;

/// One piece of a section.
#[derive(Debug, Clone)]
pub enum Block {
    /// A paragraph.
    Text(String),
    /// `key: value` lines.
    Facts(Vec<(String, String)>),
    /// A table; `numeric[i]` right-aligns column i in the terminal.
    Table {
        /// Column titles.
        header: Vec<String>,
        /// Rows of cells.
        rows: Vec<Vec<String>>,
        /// Which columns hold numbers.
        numeric: Vec<bool>,
        /// Where to find the rows cut from the terminal.
        more: String,
    },
    /// A bullet list; each item may have indented detail lines.
    Bullets(Vec<(String, Vec<String>)>),
    /// An image (Markdown only; the terminal gets its path).
    Image {
        /// Alt text.
        title: String,
        /// Path as written in the Markdown.
        link: String,
        /// Path for the terminal.
        path: String,
        /// Another form of it (the SVG): (link, path).
        other: Option<(String, String)>,
    },
}

/// A titled section.
#[derive(Debug, Clone)]
pub struct Section {
    /// Its title.
    pub title: String,
    /// Its blocks.
    pub blocks: Vec<Block>,
}

impl Section {
    /// An empty section.
    pub fn new(title: impl Into<String>) -> Section {
        Section {
            title: title.into(),
            blocks: Vec::new(),
        }
    }

    /// Adds a paragraph.
    pub fn text(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Text(text.into()));
    }

    /// Adds a table.
    pub fn table(&mut self, header: &[&str], numeric: &[bool], rows: Vec<Vec<String>>, more: &str) {
        self.blocks.push(Block::Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows,
            numeric: numeric.to_vec(),
            more: more.to_string(),
        });
    }
}

/// The whole report.
#[derive(Debug, Clone)]
pub struct Document {
    /// Its title.
    pub title: String,
    /// Its sections.
    pub sections: Vec<Section>,
}

impl Document {
    /// Plain text; tables longer than `limit` rows (0: no limit) are cut.
    pub fn terminal(&self, limit: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title);
        let _ = writeln!(out, "{}", "=".repeat(self.title.chars().count()));
        for s in &self.sections {
            let _ = writeln!(out, "\n{}", s.title);
            let _ = writeln!(out, "{}", "-".repeat(s.title.chars().count()));
            for b in &s.blocks {
                terminal_block(&mut out, b, limit);
            }
        }
        out
    }

    /// Markdown, every row of every table.
    pub fn markdown(&self) -> String {
        let mut out = format!("# {}\n", md_escape(&self.title));
        for s in &self.sections {
            let _ = writeln!(out, "\n## {}\n", md_escape(&s.title));
            for b in &s.blocks {
                markdown_block(&mut out, b);
            }
        }
        out
    }
}

fn terminal_block(out: &mut String, b: &Block, limit: usize) {
    match b {
        Block::Text(t) => {
            let _ = writeln!(out, "{t}");
        }
        Block::Facts(items) => {
            let w = items
                .iter()
                .map(|(k, _)| k.chars().count())
                .max()
                .unwrap_or(0);
            for (k, v) in items {
                let _ = writeln!(out, "  {k:<w$}  {v}");
            }
        }
        Block::Table {
            header,
            rows,
            numeric,
            more,
        } => terminal_table(out, header, rows, numeric, more, limit),
        Block::Bullets(items) => {
            for (item, details) in items {
                let _ = writeln!(out, "  * {item}");
                for d in details {
                    let _ = writeln!(out, "      {d}");
                }
            }
        }
        Block::Image {
            title, path, other, ..
        } => {
            let _ = match other {
                Some((_, p)) => writeln!(
                    out,
                    "  {title}: {path}\n    {}{p}",
                    " ".repeat(title.chars().count())
                ),
                None => writeln!(out, "  {title}: {path}"),
            };
        }
    }
}

/// A table in the terminal: columns aligned (numbers to the right), cut to
/// `limit` rows (0: no limit) with a line saying how many more there are
/// and where (`more`).
fn terminal_table(
    out: &mut String,
    header: &[String],
    rows: &[Vec<String>],
    numeric: &[bool],
    more: &str,
    limit: usize,
) {
    let shown = if limit == 0 {
        rows.len()
    } else {
        rows.len().min(limit)
    };
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows[..shown] {
        for (i, c) in r.iter().enumerate().take(n) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut l = String::from("  ");
        for (i, c) in cells.iter().enumerate().take(n) {
            let pad = widths[i].saturating_sub(c.chars().count());
            let right = numeric.get(i).copied().unwrap_or(false);
            if right {
                l.push_str(&" ".repeat(pad));
                l.push_str(c);
            } else {
                l.push_str(c);
                if i + 1 < n {
                    l.push_str(&" ".repeat(pad));
                }
            }
            if i + 1 < n {
                l.push_str("  ");
            }
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(header));
    for r in &rows[..shown] {
        let _ = writeln!(out, "{}", line(r));
    }
    if shown < rows.len() {
        let _ = writeln!(
            out,
            "  ... {} more {}{}",
            rows.len() - shown,
            if rows.len() - shown == 1 {
                "row"
            } else {
                "rows"
            },
            if more.is_empty() {
                String::new()
            } else {
                format!(" ({more})")
            }
        );
    }
}

fn markdown_block(out: &mut String, b: &Block) {
    match b {
        Block::Text(t) => {
            let _ = writeln!(out, "{}\n", md_escape(t));
        }
        Block::Facts(items) => {
            for (k, v) in items {
                let _ = writeln!(out, "- **{}**: {}", md_escape(k), md_escape(v));
            }
            out.push('\n');
        }
        Block::Table {
            header,
            rows,
            numeric,
            ..
        } => {
            let cell = |c: &str| md_escape(c).replace('|', "\\|");
            let _ = writeln!(
                out,
                "| {} |",
                header
                    .iter()
                    .map(|h| cell(h))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            let _ = writeln!(
                out,
                "|{}|",
                (0..header.len())
                    .map(|i| if numeric.get(i).copied().unwrap_or(false) {
                        "---:"
                    } else {
                        "---"
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            );
            for r in rows {
                let _ = writeln!(
                    out,
                    "| {} |",
                    r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
                );
            }
            out.push('\n');
        }
        Block::Bullets(items) => {
            for (item, details) in items {
                let _ = writeln!(out, "- {}", md_escape(item));
                for d in details {
                    let _ = writeln!(out, "  - {}", md_escape(d));
                }
            }
            out.push('\n');
        }
        Block::Image {
            title, link, other, ..
        } => {
            let _ = writeln!(
                out,
                "![{}]({})\n",
                md_escape(title),
                link.replace(' ', "%20")
            );
            if let Some((l, _)) = other {
                let _ = writeln!(out, "([SVG]({}))\n", l.replace(' ', "%20"));
            }
        }
    }
}

/// Escapes the characters Markdown would take for formatting.
fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '_' | '`' | '<' | '>' | '[' | ']' | '#') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A number for a table: integers whole, others with a few significant
/// digits.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "-".into()
        } else {
            v.to_string()
        };
    }
    let a = v.abs();
    if v == v.trunc() && a < 1e15 {
        format!("{v:.0}")
    } else if a >= 1000.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        format!("{v:.2e}")
    }
}

/// A duration: `20 ms`, `1.7 s`, `2 min 5 s`.
pub fn seconds(s: f64) -> String {
    if !s.is_finite() {
        "?".into()
    } else if s < 1.0 {
        format!("{} ms", num((s * 1000.0 * 1000.0).round() / 1000.0))
    } else if s < 120.0 {
        format!("{s:.2} s")
    } else {
        format!("{} min {:.0} s", (s / 60.0).floor(), s % 60.0)
    }
}

/// A byte count with binary units: `64 KiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024 && v % 1024 == 0 && u + 1 < UNITS.len() {
        v /= 1024;
        u += 1;
    }
    format!("{v} {}", UNITS[u])
}

/// A histogram as a bar of block characters (`·` for an empty bin).
pub fn sparkline(bins: &[u32]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = bins.iter().copied().max().unwrap_or(0);
    bins.iter()
        .map(|&c| {
            if c == 0 || max == 0 {
                '·'
            } else {
                BARS[((c as usize * 8).div_ceil(max as usize)).clamp(1, 8) - 1]
            }
        })
        .collect()
}

/// Runs of whitespace as one space.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to `max` characters with an ellipsis.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(unix: f64) -> String {
    let secs = unix.max(0.0) as i64;
    match jiff::Timestamp::from_second(secs) {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
        Err(_) => format!("{unix} s after 1970-01-01 00:00:00 UTC"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(num(200.0), "200");
        assert_eq!(num(3.764705882), "3.765");
        assert_eq!(num(0.000365), "3.65e-4");
        assert_eq!(num(0.0456), "0.0456");
        assert_eq!(num(49153.25), "49153.2");
        assert_eq!(num(f64::NAN), "-");
        assert_eq!(bytes(65536), "64 KiB");
        assert_eq!(bytes(1000), "1000 B");
        assert_eq!(seconds(0.02), "20 ms");
        assert_eq!(seconds(1.668), "1.67 s");
    }

    #[test]
    fn sparklines_and_dates() {
        assert_eq!(sparkline(&[3, 0, 0, 0, 0, 0, 0, 1]), "█······▃");
        assert_eq!(utc(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn tables_are_cut_in_the_terminal_only() {
        let mut s = Section::new("T");
        let rows = (0..5)
            .map(|i| vec![format!("v{i}"), i.to_string()])
            .collect();
        s.table(&["name", "n"], &[false, true], rows, "see --markdown");
        let doc = Document {
            title: "R".into(),
            sections: vec![s],
        };
        let t = doc.terminal(2);
        assert!(t.contains("  v1    1\n"), "{t}");
        assert!(!t.contains("v2"));
        assert!(t.contains("... 3 more rows (see --markdown)"));
        let md = doc.markdown();
        assert!(md.contains("| v4 | 4 |"));
        assert!(md.contains("|---|---:|"));
    }
}
