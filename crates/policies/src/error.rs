//! Load-time errors with `file:line:column` locations.

use std::fmt;
use std::ops::Range;

/// A position in a policy file: file name, 1-based line and 1-based column.
///
/// Columns count characters (Unicode scalar values), not bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The file name given to [`PolicySet::parse`](crate::PolicySet::parse).
    pub file: String,
    /// Line number, starting at 1.
    pub line: u32,
    /// Column number, starting at 1.
    pub column: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One error found while loading a policy file.
///
/// Displays as `file:line:col: error: message`. The alternate form (`{:#}`)
/// adds the offending source line and a caret under the column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// Where the error is.
    pub location: Location,
    /// What is wrong and what was expected.
    pub message: String,
    /// The source line the error points into (without its line break).
    pub source_line: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: error: {}", self.location, self.message)?;
        if f.alternate() && !self.source_line.is_empty() {
            let pad: String = self
                .source_line
                .chars()
                .take(self.location.column.saturating_sub(1) as usize)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            write!(f, "\n  | {}\n  | {}^", self.source_line, pad)?;
        }
        Ok(())
    }
}

impl std::error::Error for PolicyError {}

/// Every error found in a policy file, in source order.
///
/// Never empty. Displays one error per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyErrors {
    errors: Vec<PolicyError>,
}

impl PolicyErrors {
    pub(crate) fn new(mut errors: Vec<PolicyError>) -> PolicyErrors {
        debug_assert!(!errors.is_empty());
        errors.sort_by_key(|e| (e.location.line, e.location.column));
        errors.dedup();
        PolicyErrors { errors }
    }

    /// The errors, sorted by position.
    pub fn errors(&self) -> &[PolicyError] {
        &self.errors
    }

    /// Number of errors (at least one).
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// Always false: a `PolicyErrors` holds at least one error.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}

impl fmt::Display for PolicyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if f.alternate() {
                write!(f, "{e:#}")?;
            } else {
                write!(f, "{e}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for PolicyErrors {}

impl IntoIterator for PolicyErrors {
    type Item = PolicyError;
    type IntoIter = std::vec::IntoIter<PolicyError>;
    fn into_iter(self) -> Self::IntoIter {
        self.errors.into_iter()
    }
}

/// Maps byte offsets of a source text to lines and columns.
#[derive(Debug, Clone)]
pub(crate) struct SourceMap<'s> {
    file: &'s str,
    text: &'s str,
    line_starts: Vec<usize>,
}

impl<'s> SourceMap<'s> {
    pub(crate) fn new(file: &'s str, text: &'s str) -> SourceMap<'s> {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceMap {
            file,
            text,
            line_starts,
        }
    }

    pub(crate) fn text(&self) -> &'s str {
        self.text
    }

    /// Location of a byte offset (clamped to the text, moved back to a char boundary).
    pub(crate) fn location(&self, offset: usize) -> Location {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let column = self.text[start..offset].chars().count() + 1;
        Location {
            file: self.file.to_string(),
            line: u32::try_from(line + 1).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }

    fn line_text(&self, line: u32) -> String {
        let i = (line as usize).saturating_sub(1);
        let Some(&start) = self.line_starts.get(i) else {
            return String::new();
        };
        let end = self
            .line_starts
            .get(i + 1)
            .map_or(self.text.len(), |&e| e - 1);
        self.text[start..end.max(start)]
            .trim_end_matches('\r')
            .to_string()
    }

    pub(crate) fn error(&self, offset: usize, message: impl Into<String>) -> PolicyError {
        let location = self.location(offset);
        PolicyError {
            source_line: self.line_text(location.line),
            location,
            message: message.into(),
        }
    }

    pub(crate) fn error_at(&self, span: &Range<usize>, message: impl Into<String>) -> PolicyError {
        self.error(span.start, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_one_based_and_count_chars() {
        let map = SourceMap::new("f.toml", "ab\néé x\n");
        assert_eq!(map.location(0).to_string(), "f.toml:1:1");
        assert_eq!(map.location(3).to_string(), "f.toml:2:1");
        // 'x' is after two 2-byte chars and a space
        assert_eq!(map.location(8).to_string(), "f.toml:2:4");
        // inside a multi-byte char: moved back to its start
        assert_eq!(map.location(4).to_string(), "f.toml:2:1");
        assert_eq!(map.location(999).line, 3);
    }

    #[test]
    fn alternate_display_shows_caret() {
        let map = SourceMap::new("f.toml", "when = \"x >\"\n");
        let e = map.error(10, "expected an operand");
        assert_eq!(e.to_string(), "f.toml:1:11: error: expected an operand");
        assert_eq!(
            format!("{e:#}"),
            "f.toml:1:11: error: expected an operand\n  | when = \"x >\"\n  |           ^"
        );
    }
}
