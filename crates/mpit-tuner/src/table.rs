//! Plain-text tables: left-aligned columns separated by two spaces, the last
//! column cut to the terminal's width when there is one.

use std::io::{self, IsTerminal, Write};

/// A table of text cells under a header row.
#[derive(Debug)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Per column, the widest a cell may be before it is cut (`None`: no
    /// limit).
    caps: Vec<Option<usize>>,
}

const GAP: &str = "  ";

impl Table {
    /// A table with these column titles.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        let caps = vec![None; header.len()];
        Table {
            header,
            rows: Vec::new(),
            caps,
        }
    }

    /// Limits column `column` (not the last) to `width` characters.
    pub fn cap(&mut self, column: usize, width: usize) {
        self.caps[column] = Some(width);
    }

    /// Adds a row (as many cells as columns).
    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.header.len());
        self.rows.push(row);
    }

    /// Writes the header and the rows, cells cut to their column's cap.
    /// With `width`, the last column is cut to what is left of it; without
    /// it, the last column is written whole.
    pub fn write(&self, out: &mut impl Write, width: Option<usize>) -> io::Result<()> {
        let n = self.header.len();
        let cell = |row: &[String], i: usize| -> String {
            match self.caps[i] {
                Some(cap) => cut(&row[i], cap),
                None => row[i].clone(),
            }
        };
        let mut widths = vec![0; n];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, w) in widths.iter_mut().enumerate().take(n - 1) {
                *w = (*w).max(cell(row, i).chars().count());
            }
        }
        let used: usize = widths[..n - 1].iter().map(|w| w + GAP.len()).sum();
        // The last column gets what the terminal has left, but never less
        // than a readable minimum (the line then wraps).
        let last = width.map(|w| w.saturating_sub(used).max(24));
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, w) in widths.iter().enumerate().take(n - 1) {
                let text = cell(row, i);
                line.push_str(&text);
                line.push_str(&" ".repeat(w - text.chars().count()));
                line.push_str(GAP);
            }
            match last {
                Some(last) => line.push_str(&cut(&row[n - 1], last)),
                None => line.push_str(&row[n - 1]),
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// `text` cut to `max` characters, the last one an ellipsis when cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Collapses runs of whitespace (descriptions contain newlines and tabs)
/// into single spaces.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The width of the terminal standard output writes to, or `None` when it
/// is not a terminal (then nothing is cut). `COLUMNS` overrides the size
/// the terminal reports.
///
/// Call it before `MPI_Init`. Open MPI's launcher gives each rank a
/// pseudo-terminal whatever its own output is (a file, a pipe), so a rank
/// it launched cannot know, and nothing is cut there.
pub fn terminal_width() -> Option<usize> {
    let open_mpi_rank = ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if open_mpi_rank || !io::stdout().is_terminal() {
        return None;
    }
    if let Some(cols) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|&c| c > 0)
    {
        return Some(cols);
    }
    let width = terminal_size::terminal_size_of(io::stdout()).map(|(w, _)| usize::from(w.0));
    Some(width.filter(|&w| w > 0).unwrap_or(80))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(table: &Table, width: Option<usize>) -> String {
        let mut out = Vec::new();
        table.write(&mut out, width).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn sample() -> Table {
        let mut t = Table::new(["NAME", "TYPE", "DESCRIPTION"]);
        t.push(vec!["a_long_name".into(), "int".into(), "x".repeat(100)]);
        t.push(vec!["b".into(), "double".into(), "short".into()]);
        t
    }

    #[test]
    fn columns_align_and_whole_cells_without_width() {
        let text = render(&sample(), None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "NAME         TYPE    DESCRIPTION");
        assert_eq!(
            lines[1],
            format!("a_long_name  int     {}", "x".repeat(100))
        );
        assert_eq!(lines[2], "b            double  short");
    }

    #[test]
    fn last_column_is_cut_to_the_terminal() {
        let text = render(&sample(), Some(60));
        for line in text.lines() {
            assert!(line.chars().count() <= 60, "{line}");
        }
        assert!(text.lines().nth(1).unwrap().ends_with('…'));
        assert!(text.lines().nth(2).unwrap().ends_with("short"));
    }

    #[test]
    fn capped_columns_are_cut() {
        let mut t = Table::new(["VALUE", "D"]);
        t.push(vec!["y".repeat(50), "d".into()]);
        t.cap(0, 10);
        for width in [None, Some(200)] {
            let text = render(&t, width);
            assert_eq!(text.lines().nth(1), Some("yyyyyyyyy…  d"));
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
        assert_eq!(one_line(" a\n\tb  c "), "a b c");
    }
}
