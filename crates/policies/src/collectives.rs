//! The `[collectives]` table of a policy file: what online collective
//! tuning tunes and how (docs/collective-tuning.md#what-to-tune; the keys:
//! docs/policies.md#collective-tuning-collectives). Checked here for
//! shape and ranges; the algorithm names are checked against the library
//! when the job starts (and by `mpit-tuner check --against-mpi`), because
//! they are the library's own.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use vocab::collective::{Collective, COLLECTIVES};

use crate::catalogue::{Diagnostic, Severity};
use crate::error::{Location, SourceMap};

/// The libraries a file can name algorithms for.
pub const LIBRARIES: [&str; 4] = ["mpich", "openmpi", "mvapich2", "intelmpi"];

/// The `[collectives]` table, compiled.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CollectiveSpec {
    /// `tune = true`: tune in mode `all` unless `mode` says otherwise;
    /// `tune = false`: no tuning, not even the default mode `safe`;
    /// `None` when the file does not say. `MPIT_TUNER_COLLECTIVES` wins.
    pub tune: Option<bool>,
    /// Which calls may switch (`mode = "safe"` or `"all"`): `None` when the
    /// file does not say (the environment's, else `all` with `tune = true`
    /// as before modes existed, else the default `safe`).
    pub mode: Option<vocab::record::CollectiveMode>,
    /// Calls per measurement window.
    pub window: Option<u32>,
    /// Windows per candidate at most: each runs one, and only those
    /// within `margin` of the fastest so far run more.
    pub windows: Option<u32>,
    /// Long calls get windows of about this long (from 2 to `window`
    /// calls); zero: always `window` calls.
    pub window_time: Option<std::time::Duration>,
    /// Short calls get windows of at least this long (from `window` to
    /// 4096 calls); zero: off.
    pub min_window_time: Option<std::time::Duration>,
    /// A communicator's first search measures nothing until every rank
    /// has run this long since tuning started; zero: off.
    pub settle: Option<std::time::Duration>,
    /// How much faster than the default a candidate must be to be kept
    /// (0.05: 5%), and how close to the fastest so far to run more than
    /// one window.
    pub margin: Option<f64>,
    /// A candidate this many times slower than the default after its first
    /// window is dropped.
    pub drop_factor: Option<f64>,
    /// What a search may cost beyond what it saved, as a share of the
    /// job's time in the collective (0.02: 2%; 0: off): past it, the next
    /// window waits, the search's current choice running.
    pub search_budget: Option<f64>,
    /// Calls after a decision before it is searched again (0: never).
    pub recheck: Option<u64>,
    /// Lower bounds of the message-size bins, in bytes, increasing.
    pub bins: Option<Vec<u64>>,
    /// Only communicators of at least this many ranks are tuned.
    pub min_comm_size: Option<u32>,
    /// Per library (`mpich`, `openmpi`, ...): the collectives to tune and
    /// the candidate algorithms of each, by the library's names. A library
    /// not listed: every collective, every algorithm.
    pub algorithms: BTreeMap<String, Vec<(Collective, Vec<String>)>>,
    /// Where each entry of `algorithms` is written in the file (same keys,
    /// same order), for the messages of [`CollectiveSpec::check`].
    pub places: BTreeMap<String, LibraryPlaces>,
}

/// Where a library's table of algorithms is written in the policy file.
#[derive(Debug, Clone, PartialEq)]
pub struct LibraryPlaces {
    /// The table's key (`mpich` in `[collectives.algorithms.mpich]`).
    pub table: Location,
    /// Per collective, in the order of the spec: its key and each name.
    pub collectives: Vec<(Location, Vec<Location>)>,
}

/// A collective's algorithm variable in an MPI library and the names of
/// its algorithms, in value order.
#[derive(Debug, Clone, PartialEq)]
pub struct Algorithms {
    /// The variable's name (`MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`).
    pub variable: String,
    /// The algorithms' names.
    pub names: Vec<String>,
}

/// What an MPI library lets the tuner switch, as [`CollectiveSpec::check`]
/// sees it; the runtime implements it over the library's MPI_T variables.
pub trait AlgorithmLookup {
    /// The library, as policy files name it (one of [`LIBRARIES`]).
    fn library(&self) -> &str;
    /// The algorithm variable of `collective` in this library and its
    /// algorithms; `Err` says why it has none the tuner can use.
    fn algorithms(&self, collective: Collective) -> Result<Algorithms, String>;
    /// The algorithm names of `collective` known for another `library`
    /// without asking it (`None`: not known here).
    fn known(&self, library: &str, collective: Collective) -> Option<Vec<String>>;
}

impl CollectiveSpec {
    /// What this table asks of tuning: `Some(Some(mode))` on in that mode
    /// (its `mode`, or `all` for `tune = true` alone, as before modes
    /// existed), `Some(None)` off (`tune = false`), `None` nothing (the
    /// default applies).
    pub fn mode_asked(&self) -> Option<Option<vocab::record::CollectiveMode>> {
        match (self.tune, self.mode) {
            (Some(false), _) => Some(None),
            (_, Some(mode)) => Some(Some(mode)),
            (Some(true), None) => Some(Some(vocab::record::CollectiveMode::All)),
            (None, None) => None,
        }
    }

    /// What to tune for `library`: `None` for every collective and
    /// algorithm, else the listed collectives with their candidates.
    pub fn for_library(&self, library: &str) -> Option<&[(Collective, Vec<String>)]> {
        self.algorithms.get(library).map(Vec::as_slice)
    }

    /// Checks `algorithms` against an MPI library, sorted by position:
    /// - [`Severity::Missing`] for a collective of this library's table
    ///   that has no algorithm variable here (the runtime does not tune it);
    /// - [`Severity::Error`] for a name that is not one of the variable's
    ///   algorithms (with the closest names; the runtime drops it), and for
    ///   names in another library's table that are not that library's,
    ///   where its names are known without asking it (MPICH's);
    /// - [`Severity::Warning`] for another library's table that cannot be
    ///   checked here, and for a name of this library's table that is an
    ///   algorithm of another version of it only (a table shared by MPICH
    ///   4.0 and 5.0: the runtime leaves it out here).
    ///
    /// The diagnostics belong to no policy: [`Diagnostic::policy`] is
    /// `usize::MAX` and the name empty.
    pub fn check(&self, lookup: &dyn AlgorithmLookup) -> Vec<Diagnostic> {
        let here = lookup.library();
        let mut out = Vec::new();
        let mut diag = |severity, location: &Location, message: String| {
            out.push(Diagnostic {
                severity,
                location: location.clone(),
                policy: usize::MAX,
                policy_name: String::new(),
                slot: None,
                message: format!("in [collectives]: {message}"),
            });
        };
        for (library, list) in &self.algorithms {
            let Some(places) = self.places.get(library) else {
                continue;
            };
            let mut unchecked = 0;
            for ((collective, names), (at, names_at)) in list.iter().zip(&places.collectives) {
                let coll = collective.name();
                if library == here {
                    let algos = match lookup.algorithms(*collective) {
                        Ok(a) => a,
                        Err(why) => {
                            diag(
                                Severity::Missing,
                                at,
                                format!("`{coll}` has no algorithm variable the tuner can switch in this MPI library ({here}): {why}"),
                            );
                            continue;
                        }
                    };
                    let other_versions = lookup.known(here, *collective).unwrap_or_default();
                    for (name, name_at) in names.iter().zip(names_at) {
                        if algos.names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                            continue;
                        }
                        if other_versions.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                            // A table shared by several versions of this
                            // library: the runtime leaves it out here.
                            diag(
                                Severity::Warning,
                                name_at,
                                format!(
                                    "`{name}` is an algorithm of another {here} version, not of this one's {}: left out here; its algorithms are: {}",
                                    algos.variable,
                                    algos.names.join(", ")
                                ),
                            );
                            continue;
                        }
                        let elsewhere = LIBRARIES
                            .iter()
                            .filter(|l| **l != here)
                            .find(|l| {
                                lookup.known(l, *collective).is_some_and(|k| {
                                    k.iter().any(|n| n.eq_ignore_ascii_case(name))
                                })
                            })
                            .map(|l| format!(" (`{name}` is {l}'s name: {l}'s algorithms go under [collectives.algorithms.{l}])"))
                            .unwrap_or_default();
                        diag(
                            Severity::Error,
                            name_at,
                            format!(
                                "`{name}` is not an algorithm of {}{}{elsewhere}; its algorithms are: {}",
                                algos.variable,
                                hint(name, &algos.names.iter().map(String::as_str).collect::<Vec<_>>()),
                                algos.names.join(", ")
                            ),
                        );
                    }
                } else if let Some(known) = lookup.known(library, *collective) {
                    for (name, name_at) in names.iter().zip(names_at) {
                        if !known.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                            diag(
                                Severity::Error,
                                name_at,
                                format!(
                                    "`{name}` is not one of {library}'s algorithms for {coll}{}; they are: {}",
                                    hint(name, &known.iter().map(String::as_str).collect::<Vec<_>>()),
                                    known.join(", ")
                                ),
                            );
                        }
                    }
                } else {
                    unchecked += 1;
                }
            }
            if unchecked > 0 {
                diag(
                    Severity::Warning,
                    &places.table,
                    format!("the algorithm names for `{library}` are not checked: this MPI library is {here} (check this file with an mpit-tuner built against {library})"),
                );
            }
        }
        Diagnostic::sort(&mut out);
        out
    }
}

/// The table as serde reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCollectives {
    tune: Option<Spanned<bool>>,
    mode: Option<Spanned<String>>,
    window: Option<Spanned<i64>>,
    windows: Option<Spanned<i64>>,
    window_time: Option<Spanned<String>>,
    min_window_time: Option<Spanned<String>>,
    settle: Option<Spanned<String>>,
    margin: Option<Spanned<f64>>,
    drop_factor: Option<Spanned<f64>>,
    search_budget: Option<Spanned<f64>>,
    /// Replaced by `search_budget`: named in an error.
    point_budget: Option<Spanned<f64>>,
    recheck: Option<Spanned<i64>>,
    bins: Option<Spanned<Vec<Spanned<i64>>>>,
    min_comm_size: Option<Spanned<i64>>,
    algorithms: Option<Spanned<BTreeMap<Spanned<String>, Spanned<RawLibrary>>>>,
}

type RawLibrary = BTreeMap<Spanned<String>, Spanned<Vec<Spanned<String>>>>;

/// Compiles the table; errors are (place in the file, message).
pub(crate) fn compile(
    raw: RawCollectives,
    map: &SourceMap<'_>,
) -> Result<CollectiveSpec, Vec<(Range<usize>, String)>> {
    let mut errors = Vec::new();
    let mut spec = CollectiveSpec {
        tune: raw.tune.map(Spanned::into_inner),
        ..CollectiveSpec::default()
    };
    if let Some(m) = raw.mode {
        match vocab::record::CollectiveMode::parse(m.get_ref()) {
            Some(mode) => spec.mode = Some(mode),
            None => errors.push((
                m.span(),
                format!(
                    "`mode` is \"safe\" (only calls whose result cannot depend on the algorithm) \
                     or \"all\" (floating-point reductions too) (got {:?})",
                    m.get_ref()
                ),
            )),
        }
    }
    let mut count = |v: Option<Spanned<i64>>, what: &str, min: i64| -> Option<u64> {
        let v = v?;
        let n = *v.get_ref();
        if n < min {
            errors.push((
                v.span(),
                format!("`{what}` must be at least {min} (got {n})"),
            ));
            return None;
        }
        Some(n as u64)
    };
    spec.window = count(raw.window, "window", 1).map(|n| n.min(u64::from(u32::MAX)) as u32);
    spec.windows = count(raw.windows, "windows", 1).map(|n| n.min(u64::from(u32::MAX)) as u32);
    spec.recheck = count(raw.recheck, "recheck", 0);
    spec.min_comm_size =
        count(raw.min_comm_size, "min_comm_size", 1).map(|n| n.min(u64::from(u32::MAX)) as u32);
    let mut duration = |v: Option<Spanned<String>>, what: &str, example: &str| {
        let v = v?;
        crate::parse_duration(v.get_ref())
            .map_err(|e| {
                errors.push((
                    v.span(),
                    format!("`{what}` is a duration such as \"{example}\" or \"0\" (off): {e}"),
                ))
            })
            .ok()
    };
    spec.window_time = duration(raw.window_time, "window_time", "25ms");
    spec.min_window_time = duration(raw.min_window_time, "min_window_time", "200us");
    spec.settle = duration(raw.settle, "settle", "20ms");
    let mut fraction = |v: Option<Spanned<f64>>, what: &str| {
        let v = v?;
        let x = *v.get_ref();
        if (0.0..1.0).contains(&x) {
            Some(x)
        } else {
            errors.push((
                v.span(),
                format!("`{what}` is a fraction from 0 up to 1, such as 0.05 for 5% (got {x})"),
            ));
            None
        }
    };
    spec.margin = fraction(raw.margin, "margin");
    spec.search_budget = fraction(raw.search_budget, "search_budget");
    if let Some(old) = raw.point_budget {
        errors.push((
            old.span(),
            "`point_budget` is replaced by `search_budget`: what a search may cost, its agreed \
             points and its slower candidates' calls together, beyond what it saved, as a share of \
             the job's time in the collective (default 0.02)"
                .to_string(),
        ));
    }
    if let Some(d) = raw.drop_factor {
        let x = *d.get_ref();
        if x > 1.0 && x.is_finite() {
            spec.drop_factor = Some(x);
        } else {
            errors.push((
                d.span(),
                format!("`drop_factor` must be above 1, such as 3 (got {x})"),
            ));
        }
    }
    if let Some(bins) = raw.bins {
        let mut out: Vec<u64> = Vec::new();
        for b in bins.get_ref() {
            let n = *b.get_ref();
            match u64::try_from(n) {
                Ok(n) if out.last().is_none_or(|&last| n > last) => out.push(n),
                Ok(_) => {
                    errors.push((b.span(), "`bins` must be increasing byte sizes".to_string()))
                }
                Err(_) => errors.push((
                    b.span(),
                    format!("a bin bound is a size in bytes (got {n})"),
                )),
            }
        }
        spec.bins = Some(out);
    }
    if let Some(libraries) = raw.algorithms {
        for (library, table) in libraries.into_inner() {
            let name = library.get_ref().as_str();
            if !LIBRARIES.contains(&name) {
                errors.push((
                    library.span(),
                    format!(
                        "unknown library `{name}`{}; algorithms are named per library: {}",
                        hint(name, &LIBRARIES),
                        LIBRARIES.join(", ")
                    ),
                ));
                continue;
            }
            let mut list = Vec::new();
            let mut places = LibraryPlaces {
                table: map.location(library.span().start),
                collectives: Vec::new(),
            };
            for (coll, names) in table.into_inner() {
                let Some(c) = Collective::parse(coll.get_ref()) else {
                    let all: Vec<&str> = COLLECTIVES.iter().map(|c| c.name()).collect();
                    errors.push((
                        coll.span(),
                        format!(
                            "`{}` is not a collective the tuner can switch{} ({})",
                            coll.get_ref(),
                            hint(coll.get_ref(), &all),
                            all.join(", ")
                        ),
                    ));
                    continue;
                };
                let mut algos: Vec<String> = Vec::new();
                let mut at = Vec::new();
                for n in names.get_ref() {
                    let a = n.get_ref().trim();
                    if a.is_empty() {
                        errors.push((n.span(), "an empty algorithm name".to_string()));
                    } else if algos.iter().any(|x| x == a) {
                        errors.push((n.span(), format!("`{a}` is listed twice")));
                    } else {
                        algos.push(a.to_string());
                        at.push(map.location(n.span().start));
                    }
                }
                list.push((c, algos));
                places
                    .collectives
                    .push((map.location(coll.span().start), at));
            }
            spec.algorithms.insert(name.to_string(), list);
            spec.places.insert(name.to_string(), places);
        }
    }
    if errors.is_empty() {
        Ok(spec)
    } else {
        Err(errors)
    }
}

fn hint(name: &str, known: &[&str]) -> String {
    crate::catalogue::closest(name, known.iter().copied())
        .first()
        .map(|b| format!(" (did you mean `{b}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PolicySet;

    #[test]
    fn a_full_table_compiles() {
        let set = PolicySet::parse(
            r#"
[collectives]
tune = true
mode = "safe"
window = 4
windows = 3
window_time = "20ms"
min_window_time = "1ms"
settle = "0"
margin = 0.1
drop_factor = 5.0
search_budget = 0.02
recheck = 10000
bins = [64, 65536]
min_comm_size = 4

[collectives.algorithms.mpich]
allreduce = ["recursive_doubling", "reduce_scatter_allgather"]
bcast = ["binomial"]

[collectives.algorithms.openmpi]
allreduce = ["ring"]
"#,
            "t.toml",
        )
        .unwrap();
        let spec = set.collectives().unwrap();
        assert_eq!(spec.tune, Some(true));
        assert_eq!(spec.mode, Some(vocab::record::CollectiveMode::Safe));
        assert_eq!((spec.window, spec.windows), (Some(4), Some(3)));
        assert_eq!(spec.window_time, Some(std::time::Duration::from_millis(20)));
        assert_eq!(
            spec.min_window_time,
            Some(std::time::Duration::from_millis(1))
        );
        assert_eq!(spec.settle, Some(std::time::Duration::ZERO));
        assert_eq!((spec.margin, spec.drop_factor), (Some(0.1), Some(5.0)));
        assert_eq!(spec.search_budget, Some(0.02));
        assert_eq!(spec.recheck, Some(10000));
        assert_eq!(spec.bins, Some(vec![64, 65536]));
        assert_eq!(spec.min_comm_size, Some(4));
        let mpich = spec.for_library("mpich").unwrap();
        assert_eq!(
            mpich[0],
            (
                Collective::Allreduce,
                vec![
                    "recursive_doubling".into(),
                    "reduce_scatter_allgather".into()
                ]
            )
        );
        assert_eq!(mpich[1], (Collective::Bcast, vec!["binomial".into()]));
        assert!(spec.for_library("mvapich2").is_none());
        assert!(set.policies().is_empty());
    }

    /// A library whose only algorithm variable is allreduce's. (MPICH 4.0
    /// and Open MPI 4.1 have one for every collective the tuner switches,
    /// so the CLI's tests against them cannot show this case.)
    struct OnlyAllreduce;

    impl AlgorithmLookup for OnlyAllreduce {
        fn library(&self) -> &str {
            "mpich"
        }
        fn algorithms(&self, c: Collective) -> Result<Algorithms, String> {
            match c {
                Collective::Allreduce => Ok(Algorithms {
                    variable: "A".into(),
                    names: vec!["auto".into(), "ring".into()],
                }),
                _ => Err(format!("this MPI library has no {}", c.name())),
            }
        }
        fn known(&self, _: &str, _: Collective) -> Option<Vec<String>> {
            None
        }
    }

    /// This version's allreduce names, and one more (`tree`) known for
    /// another version of the same library.
    struct OlderVersion;

    impl AlgorithmLookup for OlderVersion {
        fn library(&self) -> &str {
            "mpich"
        }
        fn algorithms(&self, _: Collective) -> Result<Algorithms, String> {
            Ok(Algorithms {
                variable: "A".into(),
                names: vec!["auto".into(), "ring".into()],
            })
        }
        fn known(&self, library: &str, _: Collective) -> Option<Vec<String>> {
            (library == "mpich").then(|| vec!["auto".into(), "ring".into(), "tree".into()])
        }
    }

    #[test]
    fn a_name_of_another_version_is_a_warning() {
        let set = PolicySet::parse(
            "[collectives]\n[collectives.algorithms.mpich]\nallreduce = [\"ring\", \"tree\", \"tre\"]\n",
            "m.toml",
        )
        .unwrap();
        let d = set.collectives().unwrap().check(&OlderVersion);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(
            d[0].to_string(),
            "m.toml:3:22: warning: in [collectives]: `tree` is an algorithm of another mpich \
             version, not of this one's A: left out here; its algorithms are: auto, ring"
        );
        assert_eq!(d[1].severity, Severity::Error);
        assert!(
            d[1].message.contains("`tre` is not an algorithm of A"),
            "{d:?}"
        );
    }

    #[test]
    fn a_collective_without_a_variable_is_missing() {
        let set = PolicySet::parse(
            "[collectives]\n[collectives.algorithms.mpich]\nallreduce = [\"ring\"]\nbarrier = [\"x\"]\n",
            "m.toml",
        )
        .unwrap();
        let d = set.collectives().unwrap().check(&OnlyAllreduce);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].severity, Severity::Missing);
        assert_eq!(
            d[0].to_string(),
            "m.toml:4:1: missing: in [collectives]: `barrier` has no algorithm variable the tuner \
             can switch in this MPI library (mpich): this MPI library has no barrier"
        );
    }

    #[test]
    fn the_replaced_point_budget_is_named() {
        let err = PolicySet::parse("[collectives]\npoint_budget = 0.25\n", "old.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("old.toml:2:16: error: in [collectives]: `point_budget` is replaced by `search_budget`"),
            "{err}"
        );
    }

    #[test]
    fn mistakes_are_named_with_their_place() {
        let err = PolicySet::parse(
            r#"[collectives]
window = 0
margin = 5
bins = [100, 10]

[collectives.algorithms.mpch]
allreduce = ["x"]

[collectives.algorithms.mpich]
allreduse = ["x"]
bcast = ["a", "a"]
"#,
            "bad.toml",
        )
        .unwrap_err()
        .to_string();
        for expected in [
            "bad.toml:2:10: error: in [collectives]: `window` must be at least 1 (got 0)",
            "bad.toml:3:10: error: in [collectives]: `margin` is a fraction from 0 up to 1",
            "bad.toml:4:14: error: in [collectives]: `bins` must be increasing byte sizes",
            "bad.toml:6:25: error: in [collectives]: unknown library `mpch` (did you mean `mpich`?)",
            "bad.toml:10:1: error: in [collectives]: `allreduse` is not a collective the tuner can switch (did you mean `allreduce`?)",
            "bad.toml:11:15: error: in [collectives]: `a` is listed twice",
        ] {
            assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
        }
        let err = PolicySet::parse("[collectives]\nsearch_budget = -0.5\n", "b.toml")
            .unwrap_err()
            .to_string();
        let expected = "b.toml:2:17: error: in [collectives]: `search_budget` is a fraction from 0 up to 1, such as 0.05 for 5% (got -0.5)";
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
        for (source, file, expected) in [
            (
                "[collectives]\nmode = \"fast\"\n",
                "mode.toml",
                "mode.toml:2:8: error: in [collectives]: `mode` is \"safe\"",
            ),
            (
                "[collectives]\nwindow_time = \"soon\"\n",
                "w.toml",
                "w.toml:2:15: error: in [collectives]: `window_time` is a duration",
            ),
            (
                "[collectives]\nmin_window_time = \"200\"\n",
                "m.toml",
                "m.toml:2:19: error: in [collectives]: `min_window_time` is a duration such as \"200us\"",
            ),
            (
                "[collectives]\ntune = true\nwindw = 3\n",
                "u.toml",
                "unknown field `windw` (did you mean `window`?)",
            ),
        ] {
            let err = PolicySet::parse(source, file).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
