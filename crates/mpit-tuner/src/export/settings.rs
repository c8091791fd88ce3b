//! The pre-init settings: one policy of phase `pre-init` whose `setenv`
//! actions set each tuned collective's algorithm before the library reads
//! it (the form of the eager-threshold policies, see docs/init-settings.md),
//! with the same settings as plain environment variables in its comments,
//! for runs without the tool.
//!
//! One variable holds one algorithm for every message size and
//! communicator: where the run kept different algorithms for different
//! sizes, the one with the largest saving per call is set and the file
//! says what it leaves out, pointing to the rules and JSON exports, which
//! hold every size.

use super::{bin_text, Choice, Family, Learned};
use std::fmt::Write as _;
use vocab::collective::Collective;

/// The environment variable that chooses `c`'s algorithm, and the value
/// for `choice`; `None` where the library has no such variable or the
/// value is not known (MVAPICH2: a number, from the run or from the names
/// the tuner knows).
fn setting(family: Family, c: Collective, choice: &Choice) -> Option<(String, String)> {
    match family {
        Family::Mpich => Some((
            format!(
                "MPIR_CVAR_{}_INTRA_ALGORITHM",
                c.name().to_ascii_uppercase()
            ),
            choice.algorithm.clone(),
        )),
        Family::OpenMpi => Some((
            format!("OMPI_MCA_coll_tuned_{}_algorithm", c.name()),
            choice
                .value
                .map_or_else(|| choice.algorithm.clone(), |v| v.to_string()),
        )),
        Family::Mvapich2 => {
            let value = choice.value.or_else(|| {
                tuner_core::collectives::mvapich2_algorithms(c)
                    .iter()
                    .position(|n| *n == choice.algorithm)
                    .map(|v| v as i64)
            })?;
            Some((
                tuner_core::collectives::mvapich2_cvar(c)?,
                value.to_string(),
            ))
        }
    }
}

/// The policy file.
pub fn policy(learned: &Learned) -> String {
    let mut settings: Vec<(String, String, String)> = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    for c in vocab::collective::COLLECTIVES {
        let all: Vec<(i32, &Choice)> = learned
            .choices
            .iter()
            .filter(|((coll, _), _)| *coll == c)
            .flat_map(|((_, size), list)| list.iter().map(move |ch| (*size, ch)))
            .collect();
        let saving = |ch: &Choice| {
            let s = ch.default_us - ch.time_us;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        };
        let Some(&(size, best)) = all
            .iter()
            .filter(|(_, ch)| !ch.default)
            .max_by(|a, b| saving(a.1).total_cmp(&saving(b.1)))
        else {
            continue;
        };
        let Some((name, value)) = setting(learned.family, c, best) else {
            left_out.push(format!(
                "{}: the run kept {}, whose setting this library's variable cannot say",
                c.name(),
                best.algorithm
            ));
            continue;
        };
        let why = format!(
            "{}: {} kept on {} ranks for {} ({:.1} us per call, default {:.1} us)",
            c.name(),
            best.algorithm,
            size,
            bin_text(best.lo, best.hi),
            best.time_us,
            best.default_us
        );
        for (s, ch) in &all {
            if ch.algorithm != best.algorithm {
                left_out.push(format!(
                    "{}: {} ranks, {}: the run kept {}, this file sets {} for every size",
                    c.name(),
                    s,
                    bin_text(ch.lo, ch.hi),
                    ch.algorithm,
                    best.algorithm
                ));
            }
        }
        settings.push((name, value, why));
    }
    if learned.family == Family::OpenMpi && !settings.is_empty() {
        settings.insert(
            0,
            (
                "OMPI_MCA_coll_tuned_use_dynamic_rules".into(),
                "1".into(),
                "Open MPI honours coll_tuned_<coll>_algorithm only with dynamic rules on".into(),
            ),
        );
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Collective algorithms learned by online tuning in\n\
         # {} ({}),\n\
         # written by mpit-tuner export as settings read before MPI_Init.\n\
         #\n\
         # With the tool:  mpit-tuner run --policy THIS_FILE -- mpiexec ...\n\
         # Without it, set the same variables in the environment of every rank:",
        learned.source, learned.version
    );
    for (name, value, _) in &settings {
        let _ = writeln!(out, "#   {name}={value}");
    }
    if learned.family == Family::Mvapich2 {
        let _ = writeln!(
            out,
            "#\n\
             # One setting holds one algorithm for every message size and every\n\
             # communicator; MVAPICH2 has no per-size format among these exports."
        );
    } else {
        let _ = writeln!(
            out,
            "#\n\
             # One setting holds one algorithm for every message size and every\n\
             # communicator. Per size, the run learned more than that: use\n\
             # `mpit-tuner export --format openmpi-rules` (Open MPI) or\n\
             # `--format mpich-json` (MPICH), which keep every size and communicator\n\
             # size and leave the rest to the library."
        );
    }
    if !left_out.is_empty() {
        let _ = writeln!(out, "#\n# What this file cannot say:");
        for l in &left_out {
            let _ = writeln!(out, "#   {l}");
        }
    }
    for note in &learned.notes {
        let _ = writeln!(out, "# note: {note}");
    }
    if settings.is_empty() {
        let _ = writeln!(
            out,
            "#\n# The run kept the library's default everywhere: nothing to set.\n\
             # (A policy file needs a policy: this one only notes it.)\n\n\
             [[policy]]\n\
             name  = \"collectives-from-run\"\n\
             phase = \"init\"\n\
             then  = [ {{ note = \"the tuned run kept every collective's default algorithm\" }} ]"
        );
        return out;
    }
    let _ = writeln!(
        out,
        "\n[[policy]]\nname  = \"collectives-from-run\"\nphase = \"pre-init\"\nthen  = ["
    );
    for (name, value, why) in &settings {
        let _ = writeln!(out, "  # {why}");
        let _ = writeln!(out, "  {{ setenv = \"{name}\", value = \"{value}\" }},");
    }
    out.push_str("]\n");
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decision, learned};
    use super::*;

    #[test]
    fn one_setting_per_collective_and_what_it_leaves_out() {
        let records = [
            decision(
                "c0.0",
                4,
                "allreduce",
                (0, Some(256)),
                "recursive_doubling",
                3,
                90.0,
            ),
            decision(
                "c0.0",
                4,
                "allreduce",
                (1 << 20, None),
                "reduce_scatter_allgather",
                4,
                20.0,
            ),
            decision("c0.0", 4, "bcast", (0, None), "auto", 0, 100.0),
        ];
        let text = policy(&learned(Family::Mpich, &records));
        assert!(
            text.contains("#   MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=reduce_scatter_allgather\n"),
            "{text}"
        );
        assert!(text.contains(
            "{ setenv = \"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM\", value = \"reduce_scatter_allgather\" }"
        ));
        assert!(text.contains("allreduce: 4 ranks, [0 B, 256 B): the run kept recursive_doubling, this file sets reduce_scatter_allgather for every size"), "{text}");
        assert!(!text.contains("BCAST"), "{text}");
        let file = policies::PolicySet::parse(&text, "export.toml");
        assert!(file.is_ok(), "{text}\n{file:?}");
    }

    /// MVAPICH2: its variable, set to the number of the algorithm (from
    /// the run, else from the names the tuner knows); its default (-1) is
    /// never set.
    #[test]
    fn mvapich2_settings_are_numbers_of_its_variable() {
        let records = [
            decision(
                "c0.0",
                4,
                "allreduce",
                (0, Some(256)),
                "reduce_scatter_allgather_allreduce",
                1,
                50.0,
            ),
            decision("c0.0", 4, "bcast", (0, None), "default", -1, 100.0),
        ];
        let l = learned(Family::Mvapich2, &records);
        assert!(l.choices[&(Collective::Bcast, 4)][0].default);
        let text = policy(&l);
        assert!(
            text.contains("#   MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM=1\n"),
            "{text}"
        );
        assert!(text
            .contains("{ setenv = \"MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM\", value = \"1\" }"));
        assert!(!text.contains("BCAST"), "{text}");
        assert!(!text.contains("mpich-json"), "{text}");
        let file = policies::PolicySet::parse(&text, "export.toml");
        assert!(file.is_ok(), "{text}\n{file:?}");

        // Without the value in the record: the table's.
        let mut ch = l.choices[&(Collective::Allreduce, 4)][0].clone();
        ch.value = None;
        let names = tuner_core::collectives::mvapich2_algorithms(Collective::Allreduce);
        let at = names.iter().position(|n| *n == ch.algorithm).unwrap();
        assert_eq!(
            setting(Family::Mvapich2, Collective::Allreduce, &ch),
            Some((
                "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM".to_string(),
                at.to_string()
            ))
        );
        ch.algorithm = "no_such_algorithm".into();
        assert_eq!(setting(Family::Mvapich2, Collective::Allreduce, &ch), None);
    }

    #[test]
    fn open_mpi_settings_turn_dynamic_rules_on() {
        let records = [decision(
            "c0.0",
            3,
            "allgather",
            (0, None),
            "two_proc",
            6,
            50.0,
        )];
        let text = policy(&learned(Family::OpenMpi, &records));
        assert!(text.contains("#   OMPI_MCA_coll_tuned_use_dynamic_rules=1\n#   OMPI_MCA_coll_tuned_allgather_algorithm=6\n"), "{text}");
    }
}
