//! The Open MPI `coll/tuned` dynamic rules file (Open MPI 4.1's format, as
//! `ompi/mca/coll/tuned/coll_tuned_dynamic_file.c` reads it): the number of
//! collectives; per collective its id (`COLLTYPE` in
//! `ompi/mca/coll/base/coll_base_functions.h`), the number of communicator
//! sizes; per size the size and the number of message sizes; per message
//! size a line `msg_size algorithm fanin/out segsize`. Numbers are read
//! with `%li`, so none is written with a leading 0 (octal); `#` starts a
//! comment to the end of the line.
//!
//! Open MPI picks the last communicator rule whose size is at most the
//! communicator's (the first rule when none is), then the last message
//! rule whose size is at most the call's; algorithm 0 means "no rule": the
//! library's fixed decision. So each size the run learned gets its rules,
//! and sizes around it get a rule with algorithm 0.

use super::{bin_text, segments, Family, Learned};
use std::fmt::Write as _;
use vocab::collective::Collective;

/// One message rule: bytes, algorithm value, what it is (a comment).
type MsgRule = (u64, i64, String);

/// Open MPI 4.1's `COLLTYPE` id of `c`.
pub fn collective_id(c: Collective) -> u32 {
    match c {
        Collective::Allgather => 0,
        Collective::Allreduce => 2,
        Collective::Alltoall => 3,
        Collective::Barrier => 6,
        Collective::Bcast => 7,
        Collective::Reduce => 11,
        Collective::ReduceScatterBlock => 13,
    }
}

/// The message size Open MPI's dynamic decision compares for a call whose
/// size the tuner measured as `bytes` on `comm_size` ranks
/// (`coll_tuned_decision_dynamic.c`: count times the datatype's size for
/// allreduce, bcast and reduce; times the communicator size for allgather,
/// alltoall and reduce_scatter_block; nothing for barrier).
pub fn message_size(c: Collective, bytes: u64, comm_size: i32) -> u64 {
    match c {
        Collective::Allgather | Collective::Alltoall | Collective::ReduceScatterBlock => {
            bytes.saturating_mul(u64::try_from(comm_size).unwrap_or(1))
        }
        Collective::Barrier => 0,
        Collective::Allreduce | Collective::Bcast | Collective::Reduce => bytes,
    }
}

/// The rules file, or why there is none for this run.
pub fn rules(learned: &Learned) -> Result<String, String> {
    if learned.family != Family::OpenMpi {
        return Err(format!(
            "{} was made with {}: its algorithms are {}, which \
             have no defined equivalent among Open MPI's coll/tuned algorithms; nothing to export as \
             Open MPI rules (tune the application on Open MPI to get them)",
            learned.source,
            learned.version,
            learned.family.algorithms_text()
        ));
    }
    let mut body = String::new();
    let mut count = 0;
    for c in vocab::collective::COLLECTIVES {
        let sizes = learned.tuned(c);
        if sizes.is_empty() {
            // Nothing but the default learned: Open MPI keeps its own choice.
            continue;
        }
        count += 1;
        // Communicator rules: 1 (default below the first size learned),
        // each size learned, and size + 1 (default above it) unless the
        // next size learned follows at once.
        let mut rules: Vec<(i32, Vec<MsgRule>)> = Vec::new();
        if sizes[0].0 > 1 {
            rules.push((1, vec![(0, 0, "library default".into())]));
        }
        for (i, (size, list)) in sizes.iter().enumerate() {
            let mut msgs = Vec::new();
            for (lo, hi, choice) in segments(list) {
                let ms = message_size(c, lo, *size);
                let (alg, what) = match choice {
                    Some(ch) if !ch.default => {
                        let value = ch.value.ok_or_else(|| {
                            format!(
                                "{}: the {} decision for {} ranks, {}, has no value of coll_tuned_{}_algorithm",
                                learned.source,
                                c.name(),
                                size,
                                bin_text(lo, hi),
                                c.name()
                            )
                        })?;
                        (value, format!("{} {}", ch.algorithm, bin_text(lo, hi)))
                    }
                    _ => (0, format!("library default {}", bin_text(lo, hi))),
                };
                // Barrier has one message size; bins of one algorithm merge.
                match msgs.last_mut() {
                    Some((m, a, _)) if *m == ms || *a == alg => {
                        if *m == ms {
                            *a = alg;
                        }
                    }
                    _ => msgs.push((ms, alg, what)),
                }
            }
            rules.push((*size, msgs));
            if sizes.get(i + 1).is_none_or(|(next, _)| *next != size + 1) {
                rules.push((size + 1, vec![(0, 0, "library default".into())]));
            }
        }
        let _ = writeln!(
            body,
            "{:<12} # {} (COLLTYPE {})",
            collective_id(c),
            c.name(),
            collective_id(c)
        );
        let _ = writeln!(body, "{:<12} # communicator sizes", rules.len());
        for (size, msgs) in rules {
            let _ = writeln!(body, "{size:<12} # communicator size");
            let _ = writeln!(body, "{:<12} # message sizes", msgs.len());
            for (ms, alg, what) in msgs {
                let _ = writeln!(body, "{:<24} # {what}", format!("{ms} {alg} 0 0"));
            }
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Open MPI coll/tuned dynamic rules: what online collective tuning kept in\n\
         # {} ({}), written by mpit-tuner export.\n\
         #\n\
         # Use:  OMPI_MCA_coll_tuned_use_dynamic_rules=1\n\
         #       OMPI_MCA_coll_tuned_dynamic_rules_filename=/path/to/this/file\n\
         #\n\
         # Per collective: its id, the number of communicator sizes; per size the size\n\
         # and the number of message sizes, then `bytes algorithm fanin/out segsize`.\n\
         # Open MPI uses the last rule at or below the communicator's size and the\n\
         # call's bytes (count x datatype size, x communicator size for allgather,\n\
         # alltoall and reduce_scatter_block). Algorithm 0 is the library's own choice;\n\
         # fan-in/out and segment size 0 leave the algorithm's parameters to Open MPI.",
        learned.source, learned.version
    );
    for note in &learned.notes {
        let _ = writeln!(out, "# note: {note}");
    }
    let _ = writeln!(out, "{count:<12} # collectives");
    out.push_str(&body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decision, learned};
    use super::*;

    /// The numbers of a rules file, as `%li` reads them past `#` comments.
    fn numbers(text: &str) -> Vec<i64> {
        text.lines()
            .map(|l| l.split('#').next().unwrap())
            .flat_map(|l| l.split_whitespace().map(|n| n.parse::<i64>().unwrap()))
            .collect()
    }

    #[test]
    fn rules_per_size_with_defaults_around() {
        let records = [
            decision("c0.0", 3, "allgather", (0, Some(256)), "two_proc", 6, 50.0),
            decision("c0.0", 3, "allgather", (256, None), "ring", 4, 50.0),
            decision("c0.0", 4, "barrier", (0, None), "ignore", 0, 100.0),
            decision("c0.0", 4, "bcast", (0, None), "chain", 2, 10.0),
        ];
        let text = rules(&learned(Family::OpenMpi, &records)).unwrap();
        assert_eq!(
            numbers(&text),
            vec![
                2, // collectives, in the order of COLLECTIVES
                7, 3, // bcast (the barrier kept the default: not written)
                1, 1, 0, 0, 0, 0, 4, 1, 0, 2, 0, 0, 5, 1, 0, 0, 0, 0, //
                0, 3, // allgather, 3 communicator sizes
                1, 1, 0, 0, 0, 0, // below 3: default
                3, 2, 0, 6, 0, 0, 768, 4, 0, 0, // 256 B per block x 3 ranks
                4, 1, 0, 0, 0, 0, // above 3: default
            ],
            "{text}"
        );
        // No number is written with a leading 0 (read as octal).
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            for n in line.split('#').next().unwrap().split_whitespace() {
                assert!(n == "0" || !n.starts_with('0'), "{line}");
            }
        }
    }

    #[test]
    fn an_mpich_run_has_no_open_mpi_rules() {
        let records = [decision(
            "c0.0",
            2,
            "allreduce",
            (0, None),
            "recursive_doubling",
            3,
            5.0,
        )];
        let err = rules(&learned(Family::Mpich, &records)).unwrap_err();
        assert!(
            err.contains("no defined equivalent among Open MPI"),
            "{err}"
        );
    }
}
