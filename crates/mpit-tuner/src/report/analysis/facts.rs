//! Facts about the run: library, ranks, hosts, times, sampling,
//! configuration, MPI_T, objects; from summary.json where it has them,
//! else from the logs' headers.

use crate::report::reading::{Header, Run};
use crate::report::tables::{one_line, seconds};
use std::collections::BTreeMap;

/// Facts about the run.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Library family (`mpich`, `openmpi`).
    pub library: String,
    /// The first line of `MPI_Get_library_version`, tidied.
    pub library_version: String,
    /// Job size.
    pub size: Option<u32>,
    /// Hosts and how many ranks each ran.
    pub hosts: Vec<(String, u32)>,
    /// Unix time of the earliest start.
    pub start_unix: Option<f64>,
    /// Seconds from start to the last sample.
    pub duration: Option<f64>,
    /// Sampling interval in seconds.
    pub interval: Option<f64>,
    /// Rank 0's samples.
    pub samples_rank0: Option<u64>,
    /// Fewest and most samples of a rank.
    pub samples_range: Option<(u64, u64)>,
    /// The configuration, as `key=value` items.
    pub config: Vec<String>,
    /// MPI_T thread level.
    pub thread_level: Option<String>,
    /// Catalogue counts: CVARs, PVARs, categories.
    pub catalogue: Option<(u64, u64, u64)>,
    /// PVARs the sampler read (rank 0 or the first log).
    pub sampled: Option<usize>,
    /// Communicators and windows created and freed, over all ranks.
    pub objects: (u64, u64),
    /// PVARs that appeared while the job ran (rank 0).
    pub new_pvars: u64,
}

/// The facts of a run.
pub fn facts(run: &Run) -> Facts {
    let summary = run.summary.as_ref();
    let headers: Vec<(u32, &Header)> = run
        .ranks
        .iter()
        .filter_map(|r| Some((r.rank, r.header.as_ref()?)))
        .collect();
    let first = headers.first().map(|(_, h)| *h);
    let library = summary
        .and_then(|s| s.library.clone())
        .or_else(|| first.map(|h| h.library.to_string()))
        .unwrap_or_else(|| "unknown".into());
    let library_version = summary
        .and_then(|s| s.library_version.clone())
        .or_else(|| first.map(|h| h.library_version.clone()))
        .map(|v| tidy_version(&v))
        .unwrap_or_default();
    let rank0 = run.ranks.iter().find(|r| r.rank == 0);
    let duration = summary.and_then(|s| s.duration_s).or_else(|| {
        run.ranks
            .iter()
            .map(|r| r.close.as_ref().map_or(r.last_t, |c| c.0))
            .reduce(f64::max)
    });
    let config = first.and_then(|h| serde_json::to_value(&h.config).ok());
    let interval = config
        .as_ref()
        .and_then(|c| c.get("interval"))
        .and_then(|v| v.as_f64());
    let catalogue = first.map(|h| {
        let c = &h.catalogue;
        (c.cvars as u64, c.pvars as u64, c.categories as u64)
    });
    let samples_range = run
        .ranks
        .iter()
        .map(|r| r.samples)
        .fold(None, |acc: Option<(u64, u64)>, s| {
            Some(acc.map_or((s, s), |(lo, hi)| (lo.min(s), hi.max(s))))
        });
    Facts {
        library,
        library_version,
        size: run.size,
        hosts: hosts(&headers),
        start_unix: headers.iter().map(|(_, h)| h.start_unix).reduce(f64::min),
        duration,
        interval,
        samples_rank0: summary
            .and_then(|s| s.samples_rank0)
            .or(rank0.map(|r| r.samples)),
        samples_range,
        config: config_items(config.as_ref()),
        thread_level: first.map(|h| h.mpi_t_thread_level.clone()),
        catalogue,
        sampled: rank0
            .and_then(|r| r.header.as_ref())
            .or(first)
            .map(|h| h.variables.len()),
        objects: run
            .ranks
            .iter()
            .fold((0, 0), |acc, r| (acc.0 + r.objects.0, acc.1 + r.objects.1)),
        new_pvars: rank0.map_or(0, |r| r.new_pvars),
    }
}

/// The hosts, by how many ranks each ran (most first), then name.
fn hosts(headers: &[(u32, &Header)]) -> Vec<(String, u32)> {
    let mut hosts: BTreeMap<String, u32> = BTreeMap::new();
    for (_, h) in headers {
        *hosts.entry(h.host.clone()).or_insert(0) += 1;
    }
    let mut hosts: Vec<(String, u32)> = hosts.into_iter().collect();
    hosts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    hosts
}

/// The configuration as `key=value` items, the interval left out (it is
/// told with the sampling).
fn config_items(config: Option<&serde_json::Value>) -> Vec<String> {
    config
        .and_then(|c| c.as_object())
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.as_str() != "interval")
                .map(|(k, v)| format!("{k}={}", config_value(k, v)))
                .collect()
        })
        .unwrap_or_default()
}

fn config_value(key: &str, v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null if key == "policy" => "default (embedded policies.toml)".into(),
        serde_json::Value::String(s) if key == "policy" && s == "none" => {
            "none (monitor only)".into()
        }
        serde_json::Value::Null => "none".into(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) if a.is_empty() && key == "pvars" => "all".into(),
        serde_json::Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(","),
        serde_json::Value::Number(n)
            if matches!(key, "flush" | "refresh" | "interval") && n.as_f64().is_some() =>
        {
            seconds(n.as_f64().unwrap_or(0.0))
        }
        other => other.to_string(),
    }
}

/// `MPICH Version: 4.0.2 (ch4:ucx)`, `Open MPI v4.1.4`: the first line, or
/// the first part of a one-line version.
pub fn tidy_version(v: &str) -> String {
    let mut lines = v.lines();
    let first = lines.next().unwrap_or_default();
    let first = first.split(", ").next().unwrap_or(first);
    let mut out = one_line(first).replace("MPICH Version:", "MPICH");
    if let Some(device) = v
        .lines()
        .find_map(|l| l.strip_prefix("MPICH Device:"))
        .map(str::trim)
    {
        out.push_str(&format!(" ({device})"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_tidied() {
        assert_eq!(
            tidy_version("MPICH Version:\t4.0.2\nMPICH Release date:\tx\nMPICH Device:\tch4:ucx\n"),
            "MPICH 4.0.2 (ch4:ucx)"
        );
        assert_eq!(
            tidy_version(
                "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4"
            ),
            "Open MPI v4.1.4"
        );
    }
}
