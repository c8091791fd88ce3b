//! The `hosts` key: which hosts (node names) a policy runs on.
//!
//! A list of patterns, each matched against the host name of the rank's
//! node, without regard to ASCII case (host names are case-insensitive), and
//! against its short form (up to the first dot), so `node01` matches
//! `node01.cluster.example`. `*` matches any run of characters, `?` one
//! character. A policy with `hosts` runs on the ranks that `ranks` selects
//! and whose node matches at least one pattern.

use std::fmt;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// A validated list of host patterns.
#[derive(Debug, Clone)]
pub struct HostSelector {
    patterns: Vec<String>,
    /// The same patterns, compiled (`*` and `?` only: validation leaves out
    /// every other glob metacharacter).
    set: GlobSet,
}

impl PartialEq for HostSelector {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for HostSelector {}

impl HostSelector {
    /// Validates `patterns`: non-empty, each non-empty and made of letters,
    /// digits, `-`, `_`, `.` and the wildcards `*` and `?`. Returns the
    /// index of the first bad pattern and why.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<HostSelector, (usize, String)> {
        if patterns.is_empty() {
            return Err((0, "`hosts` needs at least one host name or pattern".into()));
        }
        for (i, p) in patterns.iter().enumerate() {
            let p = p.as_ref();
            if p.is_empty() {
                return Err((i, "a host pattern must not be empty".into()));
            }
            if let Some(c) = p
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || "-_.*?".contains(*c)))
            {
                return Err((
                    i,
                    format!(
                        "`{c}` can not appear in a host pattern such as \"node01\" or \"gpu-*\" (letters, digits, `-`, `_`, `.`, wildcards `*` and `?`)"
                    ),
                ));
            }
        }
        let patterns: Vec<String> = patterns
            .iter()
            .map(|p| p.as_ref().to_ascii_lowercase())
            .collect();
        let mut set = GlobSetBuilder::new();
        for (i, p) in patterns.iter().enumerate() {
            let glob = GlobBuilder::new(p)
                .case_insensitive(true)
                .build()
                .map_err(|e| (i, format!("bad host pattern \"{p}\": {}", e.kind())))?;
            set.add(glob);
        }
        let set = set
            .build()
            .map_err(|e| (0, format!("bad host patterns: {}", e.kind())))?;
        Ok(HostSelector { patterns, set })
    }

    /// The patterns, in lower case.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// True if `host` (or its short form) matches one of the patterns.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let short = host.split('.').next().unwrap_or("");
        self.set.is_match(&host) || self.set.is_match(short)
    }
}

impl fmt::Display for HostSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.patterns.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(p: &[&str]) -> HostSelector {
        HostSelector::new(p).unwrap()
    }

    #[test]
    fn exact_short_and_case_insensitive() {
        let s = sel(&["node01"]);
        assert!(s.matches("node01"));
        assert!(s.matches("NODE01"));
        assert!(s.matches("node01.cluster.example"));
        assert!(!s.matches("node010"));
        assert!(!s.matches("xnode01"));
        assert!(!s.matches(""));
        let full = sel(&["node01.cluster.example"]);
        assert!(full.matches("node01.cluster.example"));
        assert!(!full.matches("node01"));
    }

    #[test]
    fn wildcards() {
        let s = sel(&["gpu-*", "node0?"]);
        assert!(s.matches("gpu-1"));
        assert!(s.matches("gpu-"));
        assert!(s.matches("gpu-17.site"));
        assert!(s.matches("node07"));
        assert!(!s.matches("node7"));
        assert!(!s.matches("node100"));
        assert!(sel(&["*"]).matches("anything.at.all"));
        assert!(sel(&["*a*b*"]).matches("xxaxxbxx"));
        assert!(!sel(&["*a*b*"]).matches("xxbxxaxx"));
        assert!(sel(&["n*1"]).matches("n111"));
        assert!(!sel(&["n*1"]).matches("n112"));
    }

    #[test]
    fn validation() {
        assert!(HostSelector::new::<&str>(&[]).is_err());
        assert_eq!(HostSelector::new(&["a", ""]).unwrap_err().0, 1);
        let (i, why) = HostSelector::new(&["ok", "node[01-04]"]).unwrap_err();
        assert_eq!(i, 1);
        assert!(why.contains("`[`"), "{why}");
        assert_eq!(sel(&["Node01", "gpu-*"]).to_string(), "node01,gpu-*");
    }
}
