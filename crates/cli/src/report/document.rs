//! The report's sections, from the analysis of a run.

use super::analysis::{by_spread, spread, Analysis, Grouped};
use super::reading::{Problem, ProblemKind, Run};
use super::tables::{bytes, cut, num, one_line, seconds, sparkline, utc, Block, Document, Section};
use std::collections::BTreeMap;
use tuner_core::decide::format_ranks;
use tuner_core::sample::toolmetrics::bucket_floor;

/// Rows of the "top" tables.
const TOP: usize = 10;

/// Where a file is: (link from the Markdown file, path for the terminal).
pub type Link = (String, String);

/// Writes of one policy, CVAR and outcome.
struct WriteGroup {
    writes: u64,
    ranks: Vec<u32>,
    first: f64,
    last: f64,
    values: Vec<String>,
}

/// Files the report wrote, for its last section.
#[derive(Debug, Default)]
pub struct Outputs {
    /// Per plot: title, then (link from the Markdown file, path) of the
    /// PNG and of the SVG.
    pub plots: Vec<(String, Link, Link)>,
    /// CSV files.
    pub csv: Vec<String>,
    /// The Markdown file.
    pub markdown: Option<String>,
    /// Things about the outputs worth saying (no font, a plot that failed).
    pub notes: Vec<String>,
}

/// A CVAR value as the log has it (`[41]`, `"text"`), as text.
pub fn value_text(v: Option<&serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => "-".into(),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn ranks_text(ranks: &[u32]) -> String {
    let text = format_ranks(ranks);
    if text.len() > 40 {
        format!(
            "{} ranks in {}-{}",
            ranks.len(),
            ranks[0],
            ranks[ranks.len() - 1]
        )
    } else {
        text
    }
}

/// Builds the report.
pub fn build(run: &Run, a: &Analysis, out: &Outputs) -> Document {
    let mut sections = Vec::new();
    if !run.problems.is_empty() {
        sections.push(problems(&run.problems));
    }
    sections.push(facts(run, a));
    sections.push(top(a));
    sections.push(statistics(a));
    if !a.size_histograms.is_empty() {
        sections.push(sizes(a));
    }
    sections.push(classes(a));
    sections.push(changes(a));
    sections.push(policies(a));
    sections.push(recommendations(run, a));
    if !a.notes.is_empty() {
        sections.push(notes(a));
    }
    sections.push(warnings(a));
    sections.push(files(out));
    Document {
        title: format!("mpit-tuner report: {}", run.dir.display()),
        sections,
    }
}

fn problems(list: &[Problem]) -> Section {
    let mut s = Section::new("Problems with this run directory");
    let mut groups: BTreeMap<ProblemKind, Vec<&Problem>> = BTreeMap::new();
    for p in list {
        groups.entry(p.kind).or_default().push(p);
    }
    let mut items = Vec::new();
    for (kind, ps) in groups {
        let files: Vec<&str> = ps.iter().filter_map(|p| p.file.as_deref()).collect();
        let mut distinct = files.clone();
        distinct.dedup();
        if distinct.len() <= 6 {
            for p in ps {
                let item = match &p.file {
                    Some(f) => format!("{f}: {}", p.detail),
                    None => p.detail.clone(),
                };
                items.push((item, Vec::new()));
            }
        } else {
            let ranks: Vec<u32> = ps.iter().filter_map(|p| p.rank).collect();
            let mut ranks = ranks;
            ranks.dedup();
            let details = ps
                .iter()
                .take(3)
                .map(|p| format!("{}: {}", p.file.as_deref().unwrap_or(""), p.detail))
                .chain(std::iter::once(format!(
                    "... and {} more",
                    ps.len().saturating_sub(3)
                )))
                .collect();
            items.push((
                format!(
                    "{} {} (ranks {}): {}",
                    distinct.len(),
                    if kind == ProblemKind::Summary {
                        "problems"
                    } else {
                        "logs"
                    },
                    ranks_text(&ranks),
                    kind.headline()
                ),
                details,
            ));
        }
    }
    s.blocks.push(Block::Bullets(items));
    s.text("What follows is what the readable part of the run says.");
    s
}

fn facts(run: &Run, a: &Analysis) -> Section {
    let f = &a.facts;
    let mut s = Section::new("Run");
    let mut items = Vec::new();
    let lib = if f.library_version.is_empty() {
        f.library.clone()
    } else {
        f.library_version.clone()
    };
    items.push(("library".into(), lib));
    let logs = run.ranks.len();
    items.push((
        "ranks".into(),
        match f.size {
            Some(n) if n as usize == logs => format!("{n} ({logs} logs read)"),
            Some(n) => format!("{n} ({logs} of {n} logs read; {} rank files)", run.files),
            None => format!("unknown ({logs} logs read)"),
        },
    ));
    if !f.hosts.is_empty() {
        let shown: Vec<String> = f
            .hosts
            .iter()
            .take(4)
            .map(|(h, n)| format!("{h} ({n} rank{})", if *n == 1 { "" } else { "s" }))
            .collect();
        let more = if f.hosts.len() > 4 {
            format!(", and {} more", f.hosts.len() - 4)
        } else {
            String::new()
        };
        items.push((
            "hosts".into(),
            format!("{}: {}{more}", f.hosts.len(), shown.join(", ")),
        ));
    }
    if let Some(t) = f.start_unix {
        items.push(("started".into(), utc(t)));
    }
    if let Some(d) = f.duration {
        items.push(("duration".into(), seconds(d)));
    }
    let mut sampling = match f.interval {
        Some(i) => format!("every {}", seconds(i)),
        None => "interval unknown".into(),
    };
    if let Some(n) = f.samples_rank0 {
        sampling.push_str(&format!("; {n} samples on rank 0"));
    }
    if let Some((lo, hi)) = f.samples_range {
        if lo != hi || f.samples_rank0.is_none() {
            sampling.push_str(&format!(" ({lo} to {hi} per rank)"));
        }
    }
    items.push(("sampling".into(), sampling));
    if !f.config.is_empty() {
        items.push(("config".into(), f.config.join(", ")));
    }
    let mut mpit = Vec::new();
    if let Some(t) = &f.thread_level {
        mpit.push(format!("thread level {t}"));
    }
    if let Some((c, p, _)) = f.catalogue {
        mpit.push(format!("{c} CVARs, {p} PVARs"));
    }
    if let Some(n) = f.sampled {
        mpit.push(format!("{n} PVARs sampled, plus the tool's metrics"));
    }
    if f.new_pvars > 0 {
        mpit.push(format!("{} PVARs appeared during the run", f.new_pvars));
    }
    if !mpit.is_empty() {
        items.push(("MPI_T".into(), mpit.join("; ")));
    }
    if f.objects.0 > 0 {
        items.push((
            "objects".into(),
            format!(
                "{} communicators/windows tracked, {} freed (all ranks)",
                f.objects.0, f.objects.1
            ),
        ));
    }
    s.blocks.push(Block::Facts(items));
    s
}

fn top(a: &Analysis) -> Section {
    let mut s = Section::new("Top variables");
    let size = a.facts.size;
    let spread_rows: Vec<Vec<String>> = by_spread(&a.stats, size)
        .into_iter()
        .filter(|st| spread(st, size) > 0.01)
        .take(TOP)
        .map(|st| {
            vec![
                st.name.clone(),
                st.kind.clone(),
                format!(
                    "{}{}",
                    st.ranks,
                    size.map_or(String::new(), |n| format!("/{n}"))
                ),
                num(st.min),
                st.min_rank.to_string(),
                num(st.max),
                st.max_rank.to_string(),
                num(st.mean),
                format!("{:.0}%", spread(st, size) * 100.0),
            ]
        })
        .collect();
    s.text(
        "Largest spread across ranks ((max - min) / max; a rank without the variable counts as 0):",
    );
    if spread_rows.is_empty() {
        s.text("  none: every variable has the same value on every rank.");
    } else {
        s.table(
            &[
                "variable", "kind", "ranks", "min", "@rank", "max", "@rank", "mean", "spread",
            ],
            &[false, false, true, true, true, true, true, true, true],
            spread_rows,
            "",
        );
    }
    let active: Vec<Vec<String>> = a
        .activity
        .iter()
        .filter(|x| x.changed > 0.0)
        .take(TOP)
        .map(|x| {
            vec![
                x.key.clone(),
                x.class.clone(),
                x.ranks.to_string(),
                format!("{:.0}%", x.changed * 100.0),
                num(x.lo),
                num(x.hi),
            ]
        })
        .collect();
    s.text("Most change during the run (share of sampling intervals in which the value changed, mean over ranks; lowest and highest value on any rank):");
    if active.is_empty() {
        s.text("  none: no sampled variable changed between samples.");
    } else {
        s.table(
            &["variable", "class", "ranks", "changed", "lowest", "highest"],
            &[false, false, true, true, true, true],
            active,
            "",
        );
    }
    s
}

fn statistics(a: &Analysis) -> Section {
    let mut s = Section::new("Cross-rank statistics");
    if a.stats_recomputed {
        s.text("Recomputed from the last sample of each log (summary.json is missing or empty).");
    } else if a.stats.is_empty() {
        s.text("No statistics: summary.json has none and no log has samples.");
        return s;
    } else {
        s.text("From summary.json (computed at MPI_Finalize with reductions over all ranks).");
    }
    let size = a.facts.size;
    let mut order: Vec<&super::reading::Stat> = Vec::new();
    for st in by_spread(&a.stats, size) {
        order.push(st);
        let companion = format!("{}:max", st.name);
        if let Some(m) = a.stats.iter().find(|x| x.name == companion) {
            order.push(m);
        }
    }
    for st in &a.stats {
        if !order.iter().any(|o| std::ptr::eq(*o, st)) {
            order.push(st);
        }
    }
    let rows = order
        .iter()
        .map(|st| {
            vec![
                st.name.clone(),
                st.kind.clone(),
                st.ranks.to_string(),
                num(st.mean),
                num(st.min),
                st.min_rank.to_string(),
                num(st.max),
                st.max_rank.to_string(),
                num(st.stddev),
                sparkline(&st.histogram),
            ]
        })
        .collect();
    s.table(
        &[
            "variable",
            "kind",
            "ranks",
            "mean",
            "min",
            "@rank",
            "max",
            "@rank",
            "stddev",
            "ranks per bin",
        ],
        &[
            false, false, true, true, true, true, true, true, true, false,
        ],
        rows,
        "all in --markdown and summary.json",
    );
    s
}

/// `[8 B, 16 B)` for bucket 4; `0 B` for bucket 0.
pub fn bucket_label(b: usize) -> String {
    if b == 0 {
        "0 B".into()
    } else {
        format!(
            "[{}, {})",
            bytes(bucket_floor(b)),
            bytes(bucket_floor(b) * 2)
        )
    }
}

fn sizes(a: &Analysis) -> Section {
    let mut s = Section::new("Message sizes");
    s.text("Messages per MPI call family over all ranks, by size (power-of-two buckets):");
    let rows = a
        .size_histograms
        .iter()
        .map(|(family, h)| {
            let total: u64 = h.iter().sum();
            let parts: Vec<String> = h
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(b, n)| format!("{}: {n}", bucket_label(b)))
                .collect();
            vec![family.clone(), total.to_string(), parts.join("; ")]
        })
        .collect();
    s.table(
        &["family", "messages", "sizes"],
        &[false, true, false],
        rows,
        "",
    );
    s
}

fn classes(a: &Analysis) -> Section {
    let mut s = Section::new("Classes of ranks");
    if a.classes.is_empty() {
        s.text("No classes: no rank recorded MPI calls.");
        return s;
    }
    if a.classes_recomputed {
        s.text("Recomputed from the logs' tool metrics (summary.json is missing or has none).");
    }
    s.text(if a.classes.len() == 1 {
        "Every rank behaved alike (same calls and bytes per MPI call family):".to_string()
    } else {
        format!(
            "{} classes: ranks in a class made the same calls with the same bytes per MPI call family.",
            a.classes.len()
        )
    });
    let rows = a
        .classes
        .iter()
        .map(|c| vec![c.ranks.clone(), c.count.to_string(), c.signature.clone()])
        .collect();
    s.table(
        &["ranks", "count", "behaviour"],
        &[false, true, false],
        rows,
        "",
    );
    s
}

fn changes(a: &Analysis) -> Section {
    let mut s = Section::new("CVAR changes");
    if a.writes.is_empty() && a.setenvs.is_empty() {
        s.text("No CVAR was written and no environment variable set by a policy.");
        return s;
    }
    if !a.writes.is_empty() {
        let ranks: std::collections::BTreeSet<u32> = a.writes.iter().map(|w| w.rank).collect();
        let refused = a
            .writes
            .iter()
            .filter(|w| {
                w.outcome.starts_with("refused") || w.outcome == "invalid" || w.outcome == "missing"
            })
            .count();
        s.text(format!(
            "{} write{} on {} rank{} ({refused} refused or invalid). By policy and CVAR:",
            a.writes.len(),
            if a.writes.len() == 1 { "" } else { "s" },
            ranks.len(),
            if ranks.len() == 1 { "" } else { "s" }
        ));
        // (policy, cvar, outcome) -> writes, ranks, first, last, values.
        let mut groups: BTreeMap<(String, String, String), WriteGroup> = BTreeMap::new();
        for w in &a.writes {
            let g = groups
                .entry((w.policy.clone(), w.cvar.clone(), w.outcome.clone()))
                .or_insert(WriteGroup {
                    writes: 0,
                    ranks: Vec::new(),
                    first: f64::INFINITY,
                    last: 0.0,
                    values: Vec::new(),
                });
            g.writes += 1;
            g.ranks.push(w.rank);
            g.first = g.first.min(w.t);
            g.last = g.last.max(w.t);
            let v = value_text(w.readback.as_ref().or(w.requested.as_ref()));
            if !g.values.contains(&v) {
                g.values.push(v);
            }
        }
        let rows = groups
            .into_iter()
            .map(|((policy, cvar, outcome), mut g)| {
                g.ranks.sort_unstable();
                g.ranks.dedup();
                let shown: Vec<String> = g.values.iter().take(6).cloned().collect();
                let more = if g.values.len() > 6 {
                    format!(" (+{} more)", g.values.len() - 6)
                } else {
                    String::new()
                };
                vec![
                    policy,
                    cvar,
                    outcome,
                    g.writes.to_string(),
                    ranks_text(&g.ranks),
                    format!("{:.3}-{:.3}", g.first, g.last),
                    format!("{}{more}", shown.join(" ")),
                ]
            })
            .collect();
        s.table(
            &[
                "policy", "cvar", "outcome", "writes", "ranks", "t (s)", "values",
            ],
            &[false, false, false, true, false, false, false],
            rows,
            "",
        );
        s.text(
            "Every write, in time order (old -> read back; the requested value when it differs):",
        );
        let rows = a
            .writes
            .iter()
            .map(|w| {
                let old = value_text(w.old.as_ref());
                let back = value_text(w.readback.as_ref());
                let req = value_text(w.requested.as_ref());
                let mut change = format!("{old} -> {back}");
                if req != back && req != "-" {
                    change.push_str(&format!(" (asked {req})"));
                }
                let cvar = match w.index {
                    Some(i) => format!("{}[{i}]", w.cvar),
                    None => w.cvar.clone(),
                };
                let mut outcome = w.outcome.clone();
                if w.dry_run && outcome != "dry_run" {
                    outcome.push_str(" (dry run)");
                }
                vec![
                    format!("{:.3}", w.t),
                    w.rank.to_string(),
                    w.policy.clone(),
                    w.phase.clone(),
                    cvar,
                    change,
                    outcome,
                    w.error.as_deref().map(one_line).unwrap_or_default(),
                ]
            })
            .collect();
        s.table(
            &[
                "t (s)", "rank", "policy", "phase", "cvar", "change", "outcome", "error",
            ],
            &[true, true, false, false, false, false, false, false],
            rows,
            "all in --markdown and --csv writes.csv",
        );
    }
    if !a.setenvs.is_empty() {
        s.text("Environment variables set by policies:");
        let rows = a
            .setenvs
            .iter()
            .map(|e| {
                vec![
                    format!("{:.3}", e.t),
                    e.rank.to_string(),
                    e.policy.clone(),
                    format!("{}={}", e.name, e.value),
                    if e.dry_run {
                        "dry run".into()
                    } else {
                        String::new()
                    },
                    e.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        s.table(
            &["t (s)", "rank", "policy", "setting", "", "error"],
            &[true, true, false, false, false, false],
            rows,
            "all in --markdown",
        );
    }
    s
}

fn policies(a: &Analysis) -> Section {
    let mut s = Section::new("Policies");
    if a.policies.is_empty() && a.disabled.is_empty() && a.disabled_messages.is_empty() {
        s.text("No policy reported (monitor-only run, or the logs end before finalize).");
        return s;
    }
    if !a.policies.is_empty() {
        let rows = a
            .policies
            .iter()
            .map(|p| {
                vec![
                    p.policy.clone(),
                    p.ranks.to_string(),
                    p.firings.to_string(),
                    p.writes.to_string(),
                    p.refused.to_string(),
                    p.disabled.to_string(),
                ]
            })
            .collect();
        s.text("Totals over the ranks (from each log's policy summary at finalize):");
        s.table(
            &[
                "policy",
                "ranks",
                "firings",
                "writes",
                "refused",
                "disabled on",
            ],
            &[false, true, true, true, true, true],
            rows,
            "",
        );
    }
    let mut items: Vec<(String, Vec<String>)> = a
        .disabled_messages
        .iter()
        .map(|m| (m.clone(), Vec::new()))
        .collect();
    if items.is_empty() {
        items = a
            .disabled
            .iter()
            .map(|g| {
                (
                    format!(
                        "policy {} disabled on ranks {}: {}",
                        g.key[0],
                        ranks_text(&g.ranks),
                        g.key[1]
                    ),
                    Vec::new(),
                )
            })
            .collect();
    }
    if items.is_empty() {
        s.text("No policy was disabled.");
    } else {
        s.text(format!("Disabled policies ({}):", items.len()));
        s.blocks.push(Block::Bullets(items));
    }
    s
}

fn recommendations(run: &Run, a: &Analysis) -> Section {
    let mut s = Section::new("Recommendations");
    if a.advice_recomputed {
        s.text("summary.json is missing: these come from the tuner's end-of-run rules applied to the statistics recomputed from the logs (the eager limit taken as the library's default).");
    }
    let mut items: Vec<(String, Vec<String>)> = a
        .advice
        .iter()
        .map(|r| {
            (
                format!("[{}] {}", r.id, r.advice),
                vec![
                    format!("evidence: {}", r.evidence),
                    format!("set: {}", r.setting),
                ],
            )
        })
        .collect();
    for g in &a.policy_advice {
        items.push((
            format!("policy {}: {}", g.key[0], g.key[1]),
            vec![format!(
                "on ranks {} (first at t = {:.3} s)",
                ranks_text(&g.ranks),
                g.first_t
            )],
        ));
    }
    if items.is_empty() {
        s.text(if run.summary.is_some() || a.advice_recomputed {
            "None: nothing in this run calls for a change."
        } else {
            "None available."
        });
    } else {
        s.blocks.push(Block::Bullets(items));
    }
    s
}

fn grouped_rows(groups: &[Grouped]) -> Vec<Vec<String>> {
    groups
        .iter()
        .map(|g| {
            vec![
                g.key[0].clone(),
                one_line(&g.key[1]),
                ranks_text(&g.ranks),
                g.count.to_string(),
                format!("{:.3}", g.first_t),
            ]
        })
        .collect()
}

fn notes(a: &Analysis) -> Section {
    let mut s = Section::new("Notes from policies");
    s.table(
        &["policy", "note", "ranks", "times", "first t (s)"],
        &[false, false, false, true, true],
        grouped_rows(&a.notes),
        "all in --markdown",
    );
    s
}

fn warnings(a: &Analysis) -> Section {
    let mut s = Section::new("Warnings");
    if a.warning_total == 0 {
        s.text("No warnings in the logs.");
        return s;
    }
    s.text(format!(
        "{} warning{} in the logs ({} kinds), most frequent first:",
        a.warning_total,
        if a.warning_total == 1 { "" } else { "s" },
        a.warnings.len()
    ));
    let rows = a
        .warnings
        .iter()
        .map(|g| {
            vec![
                g.count.to_string(),
                g.ranks.len().to_string(),
                cut(&one_line(&g.key[0]), 120),
                cut(&g.key[1], 100),
            ]
        })
        .collect();
    s.table(
        &["count", "ranks", "message (`*`: a name)", "names"],
        &[true, true, false, false],
        rows,
        "all in --markdown",
    );
    s
}

fn files(out: &Outputs) -> Section {
    let mut s = Section::new("Plots and files");
    for n in &out.notes {
        s.text(format!("Note: {n}"));
    }
    for (title, (link, path), svg) in &out.plots {
        s.blocks.push(Block::Image {
            title: title.clone(),
            link: link.clone(),
            path: path.clone(),
            other: Some(svg.clone()),
        });
    }
    if out.plots.is_empty() {
        s.text("No plots were drawn.");
    }
    for c in &out.csv {
        s.text(format!("CSV: {c}"));
    }
    if let Some(m) = &out.markdown {
        s.text(format!("Markdown: {m}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_buckets_as_text() {
        assert_eq!(value_text(Some(&serde_json::json!([41]))), "41");
        assert_eq!(value_text(Some(&serde_json::json!([1, 2]))), "1,2");
        assert_eq!(value_text(Some(&serde_json::json!("auto"))), "auto");
        assert_eq!(value_text(None), "-");
        assert_eq!(bucket_label(4), "[8 B, 16 B)");
        assert_eq!(bucket_label(17), "[64 KiB, 128 KiB)");
        assert_eq!(bucket_label(0), "0 B");
    }
}
