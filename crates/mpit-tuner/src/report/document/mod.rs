//! The report's sections, from the analysis of a run.
//!
//! Each section has its function, in the order of the report: [`problems`]
//! (what is wrong with the run directory), [`changed`] (what the tool
//! changed: collectives switched, CVARs written), [`facts`] (the run),
//! [`variables`] (the variables worth a look, cross-rank statistics),
//! [`traffic`] (message sizes, classes of ranks), [`hosts`] (a run on
//! several nodes, by node), [`changes`] (CVAR writes
//! and environment settings), [`policies`] (policies and recommendations),
//! [`messages`] (notes of policies, warnings), and the files the report
//! wrote (here). [`super::tables`] renders the [`Document`].

mod changed;
mod changes;
mod collectives;

pub(crate) use collectives::outcomes as collective_outcomes;
mod facts;
mod hosts;
mod messages;
mod policies;
mod problems;
mod traffic;
mod variables;

use super::analysis::Analysis;
use super::reading::Run;
use super::tables::{Block, Document, Section};
use tuner_core::decide::format_ranks;

/// Where a file is: (link from the Markdown file, path for the terminal).
pub type Link = (String, String);

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

/// Builds the report.
pub fn build(run: &Run, a: &Analysis, out: &Outputs) -> Document {
    let mut sections = Vec::new();
    if !run.problems.is_empty() {
        sections.push(problems::problems(&run.problems));
    }
    sections.push(changed::changed(run, a));
    sections.push(facts::facts(run, a));
    sections.push(variables::top(a));
    sections.push(variables::statistics(a));
    if !a.size_histograms.is_empty() {
        sections.push(traffic::sizes(a));
    }
    sections.push(traffic::classes(a));
    if a.hosts.rows.len() > 1 {
        sections.push(hosts::hosts(a));
    }
    sections.push(changes::changes(a));
    sections.push(policies::policies(a));
    sections.push(policies::recommendations(run, a));
    if let Some(c) = collectives::collectives(run) {
        sections.push(c);
    }
    if !a.notes.is_empty() {
        sections.push(messages::notes(a));
    }
    sections.push(messages::warnings(a));
    sections.push(files(out));
    Document {
        title: format!("mpit-tuner report: {}", run.dir.display()),
        sections,
    }
}

/// The last section: the plots and other files the report wrote.
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

/// A CVAR value as the log has it (`[41]`, `"text"`), as text.
/// A CVAR value of a record as [`value_text`] shows it.
pub fn cvar_value_text(v: Option<&vocab::Value>) -> String {
    value_text(v.and_then(|v| serde_json::to_value(v).ok()).as_ref())
}

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

/// Ranks, compactly; a range and a count when that is long.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_text() {
        assert_eq!(value_text(Some(&serde_json::json!([41]))), "41");
        assert_eq!(value_text(Some(&serde_json::json!([1, 2]))), "1,2");
        assert_eq!(value_text(Some(&serde_json::json!("auto"))), "auto");
        assert_eq!(value_text(None), "-");
    }
}
