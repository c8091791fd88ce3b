//! Records of several ranks told together: identical ones grouped with
//! their ranks ([`group`]), warnings that differ only in the names they
//! quote merged ([`warnings`]), and each policy's totals over the ranks
//! ([`policy_totals`]).

use crate::report::reading::RankLog;
use std::collections::{BTreeMap, HashMap};

/// A group of identical records from several ranks.
#[derive(Debug, Clone)]
pub struct Grouped {
    /// What they say.
    pub key: Vec<String>,
    /// The ranks.
    pub ranks: Vec<u32>,
    /// How many records.
    pub count: u64,
    /// Earliest time.
    pub first_t: f64,
}

/// A policy's numbers over all ranks.
#[derive(Debug, Clone, Default)]
pub struct PolicyTotals {
    /// The policy.
    pub policy: String,
    /// Ranks that reported it.
    pub ranks: u32,
    /// Writes.
    pub writes: u64,
    /// Refused writes.
    pub refused: u64,
    /// Firings.
    pub firings: u64,
    /// Ranks on which it was disabled.
    pub disabled: u32,
}

/// Each policy's summary records added up over the ranks.
pub fn policy_totals(ranks: &[RankLog]) -> Vec<PolicyTotals> {
    let mut per: BTreeMap<&str, PolicyTotals> = BTreeMap::new();
    for r in ranks {
        // A rank logs a policy's totals at the end, and also at each
        // `mpit-tuner reload` that replaced it: the records add up, and
        // the rank counts once.
        let mut seen: BTreeMap<&str, bool> = BTreeMap::new();
        for p in &r.policies {
            let t = per
                .entry(p.policy.as_str())
                .or_insert_with(|| PolicyTotals {
                    policy: p.policy.clone(),
                    ..PolicyTotals::default()
                });
            let disabled = seen.entry(p.policy.as_str()).or_insert_with(|| {
                t.ranks += 1;
                false
            });
            t.writes += p.writes;
            t.refused += p.refused;
            t.firings += p.firings;
            if p.disabled.is_some() && !*disabled {
                *disabled = true;
                t.disabled += 1;
            }
        }
    }
    per.into_values().collect()
}

/// Groups records (key, rank, t, count) by key, in order of first time.
pub fn group(items: impl Iterator<Item = (Vec<String>, u32, f64, u64)>) -> Vec<Grouped> {
    let mut out: Vec<Grouped> = Vec::new();
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    for (key, rank, t, n) in items {
        let i = *index.entry(key.clone()).or_insert_with(|| {
            out.push(Grouped {
                key,
                ranks: Vec::new(),
                count: 0,
                first_t: t,
            });
            out.len() - 1
        });
        let g = &mut out[i];
        if g.ranks.last() != Some(&rank) {
            g.ranks.push(rank);
        }
        g.count += n;
        g.first_t = g.first_t.min(t);
    }
    for g in &mut out {
        g.ranks.sort_unstable();
        g.ranks.dedup();
    }
    out.sort_by(|a, b| a.first_t.total_cmp(&b.first_t).then(a.key.cmp(&b.key)));
    out
}

/// The warnings of every rank, those that differ only in the names they
/// quote told as one kind (key: [pattern, a few of the names]), most
/// frequent first.
pub fn warnings(ranks: &[RankLog]) -> Vec<Grouped> {
    let grouped = group(ranks.iter().flat_map(|r| {
        r.warnings.iter().map(move |(m, n)| {
            let (pattern, names) = warning_pattern(m);
            (vec![pattern, names.join(" ")], r.rank, 0.0, u64::from(*n))
        })
    }));
    let mut kinds: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in &grouped {
        let names = kinds.entry(g.key[0].clone()).or_default();
        for n in g.key[1].split(' ').filter(|n| !n.is_empty()) {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
    }
    let mut merged: Vec<Grouped> = Vec::new();
    for g in grouped {
        match merged.iter_mut().find(|m| m.key[0] == g.key[0]) {
            Some(m) => {
                m.count += g.count;
                m.ranks.extend(g.ranks);
                m.ranks.sort_unstable();
                m.ranks.dedup();
            }
            None => merged.push(g),
        }
    }
    for m in &mut merged {
        let names = &kinds[&m.key[0]];
        m.key[1] = match names.len() {
            0 | 1 => names.join(", "),
            n => format!(
                "{} distinct: {}{}",
                n,
                names.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                if n > 3 { ", ..." } else { "" }
            ),
        };
    }
    merged.sort_by(|x, y| y.count.cmp(&x.count).then(x.key.cmp(&y.key)));
    merged
}

/// A warning with the names it quotes (between backquotes) replaced by
/// `*`, and those names.
pub fn warning_pattern(message: &str) -> (String, Vec<String>) {
    let mut pattern = String::new();
    let mut names: Vec<String> = Vec::new();
    let mut parts = message.split('`');
    if let Some(first) = parts.next() {
        pattern.push_str(first);
    }
    let rest: Vec<&str> = parts.collect();
    for (i, part) in rest.iter().enumerate() {
        // Odd parts are quoted (when the quote is closed).
        if i % 2 == 0 && i + 1 < rest.len() {
            pattern.push_str("`*`");
            if !names.iter().any(|n| n == part) {
                names.push(part.to_string());
            }
        } else if i % 2 == 0 {
            pattern.push('`');
            pattern.push_str(part);
        } else {
            pattern.push_str(part);
        }
    }
    (pattern, names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vocab::record::PolicySummary;

    #[test]
    fn a_policy_logged_at_a_reload_and_at_the_end_counts_once_per_rank() {
        let summary = |policy: &str, writes: u64, firings: u64| PolicySummary {
            t: 1.0,
            policy: policy.into(),
            writes,
            refused: 0,
            firings,
            disabled: None,
        };
        let ranks: Vec<RankLog> = (0..2)
            .map(|rank| RankLog {
                rank,
                policies: vec![summary("a", 1, 5), summary("b", 0, 1), summary("a", 2, 3)],
                ..RankLog::default()
            })
            .collect();
        let totals = policy_totals(&ranks);
        assert_eq!(totals.len(), 2);
        assert_eq!(
            (totals[0].ranks, totals[0].writes, totals[0].firings),
            (2, 6, 16)
        );
        assert_eq!((totals[1].ranks, totals[1].firings), (2, 2));
    }

    #[test]
    fn warnings_differing_in_names_are_one_kind() {
        let (p, n) = warning_pattern("cannot sample `a` on world: failed for `a`");
        assert_eq!(p, "cannot sample `*` on world: failed for `*`");
        assert_eq!(n, vec!["a"]);
        assert_eq!(warning_pattern("plain").0, "plain");
        assert_eq!(warning_pattern("odd `quote").0, "odd `quote");
    }
}
