//! `summary.json` (rank 0 writes it at `MPI_Finalize`), read leniently:
//! whatever is recognisable is kept, and what is wrong with the file becomes
//! a [`Problem`].

use super::problem::{Problem, ProblemKind};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::Path;
use tuner_core::run::log::FORMAT_VERSION;

/// `summary.json`, read leniently.
#[derive(Debug, Clone, Default)]
pub struct SummaryDoc {
    /// Job size.
    pub size: Option<u32>,
    /// Library family.
    pub library: Option<String>,
    /// `MPI_Get_library_version`.
    pub library_version: Option<String>,
    /// Samples taken by rank 0.
    pub samples_rank0: Option<u64>,
    /// Duration in seconds.
    pub duration_s: Option<f64>,
    /// Cross-rank statistics.
    pub variables: Vec<Stat>,
    /// Classes of ranks.
    pub classes: Vec<Class>,
    /// Message-size histograms per family.
    pub size_histograms: BTreeMap<String, Vec<u64>>,
    /// End-of-run recommendations.
    pub recommendations: Vec<Advice>,
    /// Messages: (kind, text).
    pub messages: Vec<(String, String)>,
}

/// Cross-rank statistics of one quantity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stat {
    /// `name`, `name@world` or `name:max`.
    pub name: String,
    /// `total`, `final`, `mean`, `max`.
    pub kind: String,
    /// Ranks that had it.
    pub ranks: u32,
    /// Smallest per-rank value.
    pub min: f64,
    /// Its rank.
    pub min_rank: i64,
    /// Largest per-rank value.
    pub max: f64,
    /// Its rank.
    pub max_rank: i64,
    /// Mean over ranks.
    pub mean: f64,
    /// Standard deviation over ranks.
    pub stddev: f64,
    /// Ranks per bin, 8 bins from min to max.
    pub histogram: Vec<u32>,
}

/// A class of ranks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Class {
    /// How many ranks.
    pub count: u32,
    /// The members, compactly.
    pub ranks: String,
    /// What they do.
    pub signature: String,
}

/// A recommendation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Advice {
    /// Stable identifier.
    pub id: String,
    /// What to do.
    pub advice: String,
    /// Why.
    pub evidence: String,
    /// What to set.
    pub setting: String,
}

/// Reads summary.json leniently; records what is wrong with it.
pub fn read_summary(dir: &Path, problems: &mut Vec<Problem>) -> Option<SummaryDoc> {
    let doc = load(&dir.join("summary.json"), &mut |detail| {
        problems.push(Problem {
            kind: ProblemKind::Summary,
            rank: None,
            file: Some("summary.json".into()),
            detail,
        })
    })?;
    Some(SummaryDoc {
        size: doc["size"].as_u64().map(|n| n as u32),
        library: doc["library"].as_str().map(str::to_string),
        library_version: doc["library_version"].as_str().map(str::to_string),
        samples_rank0: doc["samples_rank0"].as_u64(),
        duration_s: doc["duration_s"].as_f64(),
        variables: variables(&doc),
        classes: classes(&doc),
        size_histograms: size_histograms(&doc),
        recommendations: recommendations(&doc),
        messages: messages(&doc),
    })
}

/// The file as a JSON object, or `None` after telling `problem` why not; a
/// newer format is told and read.
fn load(path: &Path, problem: &mut dyn FnMut(String)) -> Option<Json> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            problem(
                "missing (rank 0 did not get through MPI_Finalize?): cross-rank statistics, \
                 classes and recommendations below are recomputed from the logs"
                    .into(),
            );
            return None;
        }
        Err(e) => {
            problem(format!(
                "cannot be read ({e}): statistics recomputed from the logs"
            ));
            return None;
        }
    };
    let doc: Json = match serde_json::from_slice(&bytes) {
        Ok(d) => d,
        Err(e) => {
            problem(format!(
                "is not valid JSON ({e}): statistics recomputed from the logs"
            ));
            return None;
        }
    };
    if !doc.is_object() {
        problem("is not a JSON object: statistics recomputed from the logs".into());
        return None;
    }
    let version = doc["version"].as_u64();
    if let Some(v) = version.filter(|&v| v > u64::from(FORMAT_VERSION)) {
        problem(format!(
            "format version {v}, newer than this mpit-tuner's ({FORMAT_VERSION}); read what is recognisable"
        ));
    }
    Some(doc)
}

/// A string field, empty when absent.
fn s(v: &Json) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// A number field, NaN when absent.
fn f(v: &Json) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// `variables`: the cross-rank statistics.
fn variables(doc: &Json) -> Vec<Stat> {
    doc["variables"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|v| v["name"].is_string())
                .map(|v| Stat {
                    name: s(&v["name"]),
                    kind: s(&v["kind"]),
                    ranks: v["ranks"].as_u64().unwrap_or(0) as u32,
                    min: f(&v["min"]),
                    min_rank: v["min_rank"].as_i64().unwrap_or(-1),
                    max: f(&v["max"]),
                    max_rank: v["max_rank"].as_i64().unwrap_or(-1),
                    mean: f(&v["mean"]),
                    stddev: f(&v["stddev"]),
                    histogram: v["histogram"]
                        .as_array()
                        .map(|h| h.iter().map(|c| c.as_u64().unwrap_or(0) as u32).collect())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `classes`: the classes of ranks.
fn classes(doc: &Json) -> Vec<Class> {
    doc["classes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| Class {
                    count: c["count"].as_u64().unwrap_or(0) as u32,
                    ranks: s(&c["ranks"]),
                    signature: s(&c["signature"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `size_histograms`: message sizes per MPI call family.
fn size_histograms(doc: &Json) -> BTreeMap<String, Vec<u64>> {
    doc["size_histograms"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    Some((
                        k.clone(),
                        v.as_array()?
                            .iter()
                            .map(|c| c.as_u64().unwrap_or(0))
                            .collect(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `recommendations`: the end-of-run advice.
fn recommendations(doc: &Json) -> Vec<Advice> {
    doc["recommendations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| Advice {
                    id: s(&r["id"]),
                    advice: s(&r["advice"]),
                    evidence: s(&r["evidence"]),
                    setting: s(&r["setting"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `messages`: (kind, text).
fn messages(doc: &Json) -> Vec<(String, String)> {
    doc["messages"]
        .as_array()
        .map(|a| a.iter().map(|m| (s(&m["kind"]), s(&m["text"]))).collect())
        .unwrap_or_default()
}
