//! "Run": library, ranks, hosts, times, sampling, configuration, MPI_T,
//! objects.

use crate::report::analysis::{Analysis, Facts};
use crate::report::reading::Run;
use crate::report::tables::{seconds, utc, Block, Section};

/// The run facts section.
pub(super) fn facts(run: &Run, a: &Analysis) -> Section {
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
        items.push(("hosts".into(), hosts(&f.hosts)));
    }
    if let Some(t) = f.start_unix {
        items.push(("started".into(), utc(t)));
    }
    if let Some(d) = f.duration {
        items.push(("duration".into(), seconds(d)));
    }
    let sampling = sampling(f);
    items.push(("sampling".into(), sampling));
    if !f.config.is_empty() {
        items.push(("config".into(), f.config.join(", ")));
    }
    let mpit = mpit(f);
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

/// `N: host (n ranks), ...` for the first four hosts.
fn hosts(hosts: &[(String, u32)]) -> String {
    let shown: Vec<String> = hosts
        .iter()
        .take(4)
        .map(|(h, n)| format!("{h} ({n} rank{})", if *n == 1 { "" } else { "s" }))
        .collect();
    let more = if hosts.len() > 4 {
        format!(", and {} more", hosts.len() - 4)
    } else {
        String::new()
    };
    format!("{}: {}{more}", hosts.len(), shown.join(", "))
}

/// The interval and how many samples the ranks took.
fn sampling(f: &Facts) -> String {
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
    sampling
}

/// What MPI_T gave: thread level, catalogue, variables sampled and added.
fn mpit(f: &Facts) -> Vec<String> {
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
    mpit
}
