//! The MPICH collective selection table (MPICH 4.0, 4.1 and 5.0, read by
//! `src/mpi/coll/src/csel.c` from `MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE`
//! when `MPIR_CVAR_<COLL>_INTRA_ALGORITHM` is `auto`): nested JSON objects
//! whose keys are conditions (`collective=allreduce`, `comm_type=intra`,
//! `comm_size<=4`, `avg_msg_size<65536`, `total_msg_size<N`, `...=any`),
//! tried in file order among siblings, down to a leaf
//! `"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}`.
//!
//! The file replaces the library's whole table, and a collective without an
//! entry makes MPICH fail an assertion at its first call. So the table
//! written is the library's own default one, read from the MPICH library
//! itself (`maint/tuning/coll/mpir/generic.json`, compiled into libmpich as
//! a string), with the intra-communicator subtree of each collective the run
//! tuned replaced: per communicator size learned, one condition per size
//! bin with the algorithm kept; every other size and bin goes to the
//! library's default subtree. Every algorithm written is checked to be a
//! name the library's selection code knows, and tested in the table for
//! every condition MPICH's own choice checks before it runs that algorithm
//! ([`guarded_leaf`]).

use super::{segments, Choice, Family, Format, Learned};
use anyhow::{anyhow, bail, Context, Result};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use std::path::{Path, PathBuf};
use vocab::collective::Collective;

/// A selection tree: an object whose keys keep their order (MPICH tries
/// siblings in file order; `serde_json::Map` would sort them).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tree(pub Vec<(String, Tree)>);

impl Tree {
    /// The subtree under `key`.
    #[cfg(test)]
    pub fn get(&self, key: &str) -> Option<&Tree> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, t)| t)
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Tree> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, t)| t)
    }

    /// A leaf choosing `algorithm` (`MPIR_...`).
    fn leaf(algorithm: &str) -> Tree {
        Tree(vec![(format!("algorithm={algorithm}"), Tree::default())])
    }
}

impl<'de> serde::Deserialize<'de> for Tree {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Tree, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Tree;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object (MPICH's selection tree has only objects)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Tree>()? {
                    out.push((k, v));
                }
                Ok(Tree(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl serde::Serialize for Tree {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// MPICH's selection-code name of algorithm `name` (a value name of
/// `MPIR_CVAR_<COLL>_INTRA_ALGORITHM`) of `c`: `MPIR_Allreduce_intra_smp`,
/// `MPIR_Bcast_allcomm_nb`.
pub fn algorithm_name(c: Collective, name: &str) -> String {
    let coll = c.name();
    let cap = format!("{}{}", coll[..1].to_ascii_uppercase(), &coll[1..]);
    if name == "nb" {
        format!("MPIR_{cap}_allcomm_nb")
    } else {
        format!("MPIR_{cap}_intra_{name}")
    }
}

/// The size condition of a bin ending before `hi` bytes (as the tuner
/// measures the call) on `size` ranks: `avg_msg_size` (count times datatype
/// size) where MPICH defines it, `total_msg_size` (times the communicator
/// size) for allgather and reduce_scatter_block; `None` for barrier.
fn size_key(c: Collective, hi: Option<u64>, size: i32) -> Option<String> {
    let total = |b: u64| b.saturating_mul(u64::try_from(size).unwrap_or(1));
    match (c, hi) {
        (Collective::Barrier, _) => None,
        (Collective::Allgather | Collective::ReduceScatterBlock, Some(hi)) => {
            Some(format!("total_msg_size<{}", total(hi)))
        }
        (Collective::Allgather | Collective::ReduceScatterBlock, None) => {
            Some("total_msg_size=any".into())
        }
        (_, Some(hi)) => Some(format!("avg_msg_size<{hi}")),
        (_, None) => Some("avg_msg_size=any".into()),
    }
}

/// A condition MPICH's CVAR path checks before it runs an algorithm (the
/// `restrictions` of `src/mpi/coll/coll_algorithms.txt`, 4.0.2, 4.1 and
/// 5.0.0),
/// falling back to its own choice when it fails. The selection table's path
/// checks nothing: a leaf runs whatever the call, so the table written must
/// test each condition itself, as the library's own `generic.json` does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Restriction {
    /// `parent-comm`: a communicator with a node hierarchy
    /// (`comm_hierarchy=parent`).
    ParentComm,
    /// `commutative`: a commutative operation (`is_commutative=yes`).
    Commutative,
    /// `builtin-op`: a predefined operation (`is_op_built_in=yes`).
    BuiltinOp,
    /// `size-ge-pof2`: at least as many elements as the largest power of two
    /// not above the communicator's size (`count<pow2` fails).
    CountGePof2,
    /// `power-of-two`: a communicator whose size is a power of two; the
    /// size is known where the rule is written.
    PowerOfTwo,
    /// `inplace`: `MPI_IN_PLACE` as the send buffer.
    InPlace,
    /// `noinplace`: a send buffer other than `MPI_IN_PLACE`.
    NotInPlace,
}

/// The restrictions of MPICH 4.0-5.0's algorithm `name` (a value name of
/// `MPIR_CVAR_<COLL>_INTRA_ALGORITHM`) of `c`, in the order the table tests
/// them. The names 5.0 added are not 4.0's, and the names both have carry
/// the same restrictions in both.
fn restrictions(c: Collective, name: &str) -> &'static [Restriction] {
    use Collective as C;
    use Restriction::*;
    match (c, name) {
        (C::Allreduce | C::Reduce, "smp") => &[ParentComm, Commutative],
        (C::Allreduce, "recursive_multiplying" | "ring" | "k_reduce_scatter_allgather") => {
            &[Commutative]
        }
        (C::Bcast | C::Barrier, "smp") => &[ParentComm],
        (C::Allreduce, "reduce_scatter_allgather") | (C::Reduce, "reduce_scatter_gather") => {
            &[BuiltinOp, CountGePof2]
        }
        (C::Allgather, "recursive_doubling") | (C::ReduceScatterBlock, "noncommutative") => {
            &[PowerOfTwo]
        }
        (C::ReduceScatterBlock, "pairwise" | "recursive_halving") => &[Commutative],
        (C::Alltoall, "brucks" | "pairwise" | "scattered") => &[NotInPlace],
        (C::Alltoall, "pairwise_sendrecv_replace") => &[InPlace],
        _ => &[],
    }
}

/// The parameters MPICH's algorithm `name` of `c` takes (the `extra_params`
/// of `coll_algorithms.txt`, 4.1 and 5.0), if any. Through the algorithm
/// variable they come from variables of their own (`..._KVAL`, ...); in the
/// selection table they are the leaf's own keys (`"k=2": {}`), and a leaf
/// without them leaves them unset (`src/mpi/coll/src/csel_container.c`
/// reads only the keys present). The value the tuned run used is not in its
/// logs, so such an algorithm is not written.
fn parameters(c: Collective, name: &str) -> Option<&'static str> {
    use Collective as C;
    match (c, name) {
        (C::Barrier, "k_dissemination") | (C::Allgather | C::Alltoall, "k_brucks") => Some("k"),
        (C::Allreduce, "recursive_multiplying") => Some("k"),
        (C::Barrier | C::Allreduce, "recexch") | (C::Allreduce, "k_reduce_scatter_allgather") => {
            Some("k, single_phase_recv")
        }
        (C::Allgather, "recexch_doubling" | "recexch_halving") => Some("k, single_phase_recv"),
        (C::Bcast, "tree") => Some("tree_type, k, is_non_blocking"),
        (C::Bcast, "pipelined_tree") => {
            Some("tree_type, k, is_non_blocking, chunk_size, recv_pre_posted")
        }
        (C::Allreduce, "tree") => Some("tree_type, k, chunk_size, buffer_per_child"),
        (C::Allreduce, "ccl") => Some("ccl"),
        _ => None,
    }
}

/// The rule for algorithm `name` of `c` on communicators of `size` ranks:
/// its leaf where MPICH's CVAR path would run it, the library's `default`
/// subtree wherever that path would fall back ([`restrictions`]). Unguarded,
/// the table ran `MPIR_Allreduce_intra_smp` on the node roots' communicator
/// ch4's compositions make, with wrong sums (2 and 4 emulated nodes x 1
/// rank, MPICH 4.0.2), and `MPIR_Allreduce_intra_reduce_scatter_allgather`
/// with a user-defined operation, which stops the job on an assertion.
fn guarded_leaf(c: Collective, name: &str, size: i32, default: &Tree) -> Tree {
    let either = |test: &str, pass: Tree, fail: &str| {
        Tree(vec![
            (test.to_string(), pass),
            (fail.to_string(), default.clone()),
        ])
    };
    let mut rule = Tree::leaf(&algorithm_name(c, name));
    for r in restrictions(c, name).iter().rev() {
        rule = match r {
            Restriction::ParentComm => either("comm_hierarchy=parent", rule, "comm_hierarchy=any"),
            Restriction::Commutative => either("is_commutative=yes", rule, "is_commutative=no"),
            Restriction::BuiltinOp => either("is_op_built_in=yes", rule, "is_op_built_in=no"),
            Restriction::InPlace => either("is_sendbuf_inplace=yes", rule, "is_sendbuf_inplace=no"),
            Restriction::NotInPlace => {
                either("is_sendbuf_inplace=no", rule, "is_sendbuf_inplace=yes")
            }
            // Fails: the default; else (`count=any`) the rule.
            Restriction::CountGePof2 => Tree(vec![
                ("count<pow2".to_string(), default.clone()),
                ("count=any".to_string(), rule),
            ]),
            Restriction::PowerOfTwo if size > 0 && size & (size - 1) == 0 => rule,
            Restriction::PowerOfTwo => default.clone(),
        };
    }
    rule
}

/// The intra-communicator subtree for one communicator size: per bin the
/// algorithm kept, or the library's `default` subtree, also where the
/// algorithm kept takes parameters ([`parameters`]; a line in `notes` says
/// so).
fn by_size(
    c: Collective,
    size: i32,
    choices: &[Choice],
    default: &Tree,
    notes: &mut Vec<String>,
) -> Tree {
    let mut pick = |choice: Option<&Choice>| match choice {
        Some(ch) if !ch.default => match parameters(c, &ch.algorithm) {
            Some(params) => {
                notes.push(format!(
                    "{} `{}` on {size} ranks ({}): not written, the library's own choice is kept there: \
                     in the selection table MPICH takes this algorithm's parameters ({params}) from the \
                     table itself, and the values the run used are not in its logs; the pre-init \
                     policy sets it through its algorithm variable, whose parameters MPICH reads from \
                     their own variables",
                    c.name(),
                    ch.algorithm,
                    tuner_core::collectives::bin_text(ch.lo, ch.hi),
                ));
                default.clone()
            }
            None => guarded_leaf(c, &ch.algorithm, size, default),
        },
        _ => default.clone(),
    };
    let segs = segments(choices);
    if c == Collective::Barrier {
        return pick(segs.first().and_then(|s| s.2));
    }
    Tree(
        segs.into_iter()
            .map(|(_, hi, choice)| {
                (
                    size_key(c, hi, size).expect("sizes for all but barrier"),
                    pick(choice),
                )
            })
            .collect(),
    )
}

/// `table` (the library's default) with the choices of `learned` in place,
/// and a note per choice left out ([`by_size`]). Errors name the
/// collective the table lacks.
pub fn apply(table: &Tree, learned: &Learned) -> Result<(Tree, Vec<String>), String> {
    let mut out = table.clone();
    let mut notes = Vec::new();
    for c in vocab::collective::COLLECTIVES {
        let sizes = learned.tuned(c);
        if sizes.is_empty() {
            continue;
        }
        let key = format!("collective={}", c.name());
        let intra = out
            .get_mut(&key)
            .and_then(|t| t.get_mut("comm_type=intra"))
            .ok_or_else(|| {
                format!(
                    "the MPICH library's default table has no `{key}` / `comm_type=intra` entry"
                )
            })?;
        let default = intra.clone();
        let mut new = Vec::new();
        for (size, list) in sizes {
            new.push((format!("comm_size<{size}"), default.clone()));
            new.push((
                format!("comm_size<={size}"),
                by_size(c, size, list, &default, &mut notes),
            ));
        }
        new.push(("comm_size=any".into(), default));
        *intra = Tree(new);
    }
    Ok((out, notes))
}

/// The leaves `algorithm=...` of `tree`.
fn algorithms(tree: &Tree, out: &mut Vec<String>) {
    for (k, v) in &tree.0 {
        if let Some(a) = k.strip_prefix("algorithm=") {
            if !out.iter().any(|x| x == a) {
                out.push(a.to_string());
            }
        }
        algorithms(v, out);
    }
}

/// The MPICH selection JSON for `learned`, with the default table of the
/// MPICH library at `lib` (or found), or why there is none.
pub fn selection(learned: &Learned, lib: Option<&Path>) -> Result<String> {
    if learned.family != Family::Mpich {
        bail!(
            "{} was made with {}: its algorithms are {}, which have no defined \
             equivalent among MPICH's; nothing to export as an MPICH selection table",
            learned.source,
            learned.version,
            learned.family.algorithms_text()
        );
    }
    let parsed = mpit::quirks::LibraryVersion::parse(&learned.version);
    let version = parsed.version;
    if let Some(v) = version {
        // The series whose algorithm names the tuner knows.
        if tuner_core::collectives::mpich_algorithms(parsed, Collective::Allreduce).is_none() {
            bail!(
                "{} was made with MPICH {v}: the selection JSON is written for MPICH 4.0, 4.1 and 5.0 only \
                 (other series name and arrange their algorithms differently, and the table written \
                 is checked against what those three hold); use the pre-init policy, or \
                 `mpit-tuner tune`'s settings",
                learned.source
            );
        }
    }
    // --mpich-lib, else the library the run loaded (its header's
    // `library_file`) when this machine has it, else the one ldconfig knows.
    let run_file = learned.library_file.as_deref().filter(|p| p.is_file());
    let lib = match lib.or(run_file) {
        Some(p) => p.to_path_buf(),
        None => find_libmpich().ok_or_else(|| {
            anyhow!("cannot find the MPICH library (libmpich.so.12) to read its default selection table from: name it with --mpich-lib")
        })?,
    };
    let lib = through_linker_script(&lib)?;
    let bytes = std::fs::read(&lib).with_context(|| format!("cannot read {}", lib.display()))?;
    let table = default_table(&bytes).ok_or_else(|| {
        anyhow!(
            "{} holds no MPICH collective selection table (MPICH 4.0, 4.1 and 5.0's libmpich has one): is it an MPICH library?",
            lib.display()
        )
    })?;
    let table: Tree = serde_json::from_str(&table).with_context(|| {
        format!(
            "the selection table in {} is not the JSON expected",
            lib.display()
        )
    })?;
    if let Some(v) = version {
        // As MPICH prints it: "4.1" for the first release of a series.
        let text = match v {
            mpit::quirks::Version(major, minor, 0) => format!("{major}.{minor}"),
            v => v.to_string(),
        };
        if !contains(&bytes, text.as_bytes()) {
            if !holds_series(&bytes, v.0, v.1) {
                bail!(
                    "the run was made with MPICH {text}, and {} is not an MPICH {}.{} library: its table \
                     would replace the run's library's whole table with another series' algorithms; \
                     name the library the run used with --mpich-lib{}",
                    lib.display(),
                    v.0,
                    v.1,
                    match &learned.library_file {
                        Some(f) if run_file.is_none() => {
                            format!(" (the run loaded {}, which is not on this machine)", f.display())
                        }
                        _ => String::new(),
                    }
                );
            }
            eprintln!(
                "mpit-tuner: export: warning: the run was made with MPICH {text}, and {} does not look like MPICH {text}: the table written keeps that library's defaults",
                lib.display()
            );
        }
    }
    let (tree, notes) = apply(&table, learned).map_err(anyhow::Error::msg)?;
    for note in notes {
        eprintln!(
            "mpit-tuner: export: {}: {note}",
            Format::MpichJson.file_name()
        );
    }
    let mut names = Vec::new();
    algorithms(&tree, &mut names);
    for name in names {
        if !contains(&bytes, format!("algorithm={name}\0").as_bytes()) {
            bail!(
                "{} does not know the algorithm {name} (its selection code has no `algorithm={name}`): not written",
                lib.display()
            );
        }
    }
    let mut text = serde_json::to_string_pretty(&tree).context("writing the JSON")?;
    text.push('\n');
    Ok(text)
}

/// The library a GNU ld script names, when `path` is one (MPICH 5's
/// `lib/libmpi.so` is the text `INPUT(libmpi.so.12)`), else `path`: the
/// first file of its `INPUT(...)` or `GROUP(...)`, next to the script when
/// the name has no directory.
fn through_linker_script(path: &Path) -> Result<PathBuf> {
    let head = {
        use std::io::Read;
        let mut head = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(4096).read_to_end(&mut head))
            .with_context(|| format!("cannot read {}", path.display()))?;
        head
    };
    if head.starts_with(b"\x7fELF") || head.len() >= 4096 || head.contains(&0) {
        return Ok(path.to_path_buf());
    }
    let text = String::from_utf8_lossy(&head);
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ','))
        .filter(|w| !w.is_empty())
        .collect();
    let named = words
        .iter()
        .position(|w| matches!(*w, "INPUT" | "GROUP"))
        .and_then(|i| words[i + 1..].iter().find(|w| **w != "AS_NEEDED"));
    let Some(name) = named else {
        return Ok(path.to_path_buf());
    };
    let named = Path::new(name);
    let lib = if named.is_absolute() {
        named.to_path_buf()
    } else {
        path.parent().unwrap_or(Path::new(".")).join(named)
    };
    if !lib.is_file() {
        bail!(
            "{} is a linker script naming {}, which is not a file: name the library itself with --mpich-lib",
            path.display(),
            lib.display()
        );
    }
    Ok(lib)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// Whether a library image holds a version string of MPICH's `major.minor`
/// series as MPICH stores its own (`MPICH_VERSION`, a string of its own:
/// `\05.0.2\0`, `\04.1\0`, `\04.1a1\0`): the series, then nothing or a
/// short tail of a release (`.2`, `a1`, `rc3`).
fn holds_series(bytes: &[u8], major: u32, minor: u32) -> bool {
    let start = format!("\0{major}.{minor}");
    memchr::memmem::find_iter(bytes, start.as_bytes()).any(|i| {
        let rest = &bytes[i + start.len()..];
        let tail = &rest[..memchr::memchr(0, rest).unwrap_or(rest.len())];
        tail.is_empty()
            || (tail.len() <= 6
                && matches!(tail[0], b'.' | b'a' | b'b' | b'r')
                && tail[1..].first().is_some_and(u8::is_ascii_alphanumeric)
                && tail.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'.'))
    })
}

/// The MPIR-level default table in a libmpich image: the NUL-terminated
/// string starting `{"collective=` whose algorithms are `MPIR_` ones (the
/// library also holds its device's tables, whose names start `MPIDI_`).
pub fn default_table(bytes: &[u8]) -> Option<String> {
    let start = b"{\"collective=";
    let mut at = 0;
    while let Some(i) = memchr::memmem::find(&bytes[at..], start).map(|i| i + at) {
        let end = memchr::memchr(0, &bytes[i..]).map_or(bytes.len(), |e| i + e);
        let text = &bytes[i..end];
        if contains(text, b"\"algorithm=MPIR_") && !contains(text, b"MPIDI_") {
            return String::from_utf8(text.to_vec()).ok();
        }
        at = end;
    }
    None
}

/// libmpich.so.12 as `ldconfig -p` lists it, else in the usual directories.
fn find_libmpich() -> Option<PathBuf> {
    if let Ok(out) = std::process::Command::new("ldconfig").arg("-p").output() {
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines() {
            if line.trim_start().starts_with("libmpich.so.12 ") {
                if let Some(path) = line.split("=>").nth(1) {
                    let p = PathBuf::from(path.trim());
                    if p.is_file() {
                        return Some(p);
                    }
                }
            }
        }
    }
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ]
    .iter()
    .map(|d| Path::new(d).join("libmpich.so.12"))
    .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decision, learned};
    use super::*;

    /// A default table in MPICH's shape (two collectives, an intra and an
    /// inter subtree each).
    const TABLE: &str = r#"{"collective=allreduce":{"comm_type=intra":{"avg_msg_size<=8":{"algorithm=MPIR_Allreduce_intra_recursive_doubling":{}},"avg_msg_size=any":{"algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather":{}}},"comm_type=inter":{"algorithm=MPIR_Allreduce_inter_reduce_exchange_bcast":{}}},"collective=allgather":{"comm_type=intra":{"algorithm=MPIR_Allgather_intra_ring":{}}},"collective=barrier":{"comm_type=intra":{"algorithm=MPIR_Barrier_intra_dissemination":{}}}}"#;

    #[test]
    fn order_is_kept_through_parse_and_write() {
        let t: Tree = serde_json::from_str(TABLE).unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), TABLE);
        assert!(serde_json::from_str::<Tree>(r#"{"a": 1}"#).is_err());
    }

    #[test]
    fn tuned_sizes_get_their_bins_and_the_rest_keeps_the_default() {
        let records = [
            decision("c0.0", 4, "allreduce", (0, Some(256)), "auto", 0, 100.0),
            decision("c0.0", 4, "allreduce", (256, Some(4096)), "nb", 1, 50.0),
            decision(
                "c0.0",
                4,
                "allreduce",
                (1 << 20, None),
                "recursive_doubling",
                3,
                50.0,
            ),
            decision("c0.0", 2, "allreduce", (0, None), "smp", 2, 50.0),
            decision("c0.0", 4, "allgather", (0, Some(256)), "brucks", 1, 50.0),
            decision("c0.0", 4, "barrier", (0, Some(256)), "smp", 2, 50.0),
        ];
        let table: Tree = serde_json::from_str(TABLE).unwrap();
        let (out, notes) = apply(&table, &learned(Family::Mpich, &records)).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let default = table
            .get("collective=allreduce")
            .unwrap()
            .get("comm_type=intra")
            .unwrap();
        let intra = out
            .get("collective=allreduce")
            .unwrap()
            .get("comm_type=intra")
            .unwrap();
        let keys: Vec<&str> = intra.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "comm_size<2",
                "comm_size<=2",
                "comm_size<4",
                "comm_size<=4",
                "comm_size=any"
            ]
        );
        assert_eq!(intra.get("comm_size<2"), Some(default));
        assert_eq!(intra.get("comm_size<4"), Some(default));
        // smp for a reduction: with a node hierarchy and a commutative
        // operation only, the library's default elsewhere.
        let smp = intra
            .get("comm_size<=2")
            .unwrap()
            .get("avg_msg_size=any")
            .unwrap();
        let keys: Vec<&str> = smp.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["comm_hierarchy=parent", "comm_hierarchy=any"]);
        assert_eq!(smp.get("comm_hierarchy=any"), Some(default));
        let parent = smp.get("comm_hierarchy=parent").unwrap();
        assert_eq!(
            parent.get("is_commutative=yes"),
            Some(&Tree::leaf("MPIR_Allreduce_intra_smp"))
        );
        assert_eq!(parent.get("is_commutative=no"), Some(default));
        assert_eq!(intra.get("comm_size=any"), Some(default));
        let bins = intra.get("comm_size<=4").unwrap();
        let keys: Vec<&str> = bins.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "avg_msg_size<256",
                "avg_msg_size<4096",
                "avg_msg_size<1048576",
                "avg_msg_size=any"
            ]
        );
        assert_eq!(bins.get("avg_msg_size<256"), Some(default));
        assert_eq!(
            bins.get("avg_msg_size<4096"),
            Some(&Tree::leaf("MPIR_Allreduce_allcomm_nb"))
        );
        assert_eq!(bins.get("avg_msg_size<1048576"), Some(default));
        assert_eq!(
            bins.get("avg_msg_size=any"),
            Some(&Tree::leaf("MPIR_Allreduce_intra_recursive_doubling"))
        );
        // The inter subtree is untouched.
        assert_eq!(
            out.get("collective=allreduce")
                .unwrap()
                .get("comm_type=inter"),
            table
                .get("collective=allreduce")
                .unwrap()
                .get("comm_type=inter")
        );
        // Allgather: total sizes (per block x 4 ranks); barrier: no size.
        let ag = out
            .get("collective=allgather")
            .unwrap()
            .get("comm_type=intra")
            .unwrap();
        let ag4 = ag.get("comm_size<=4").unwrap();
        assert_eq!(ag4.0[0].0, "total_msg_size<1024");
        assert_eq!(ag4.0[0].1, Tree::leaf("MPIR_Allgather_intra_brucks"));
        let b = out
            .get("collective=barrier")
            .unwrap()
            .get("comm_type=intra")
            .unwrap();
        // smp: only where the communicator has a node hierarchy, else the
        // library's default.
        let b4 = b.get("comm_size<=4").unwrap();
        assert_eq!(
            b4.get("comm_hierarchy=parent"),
            Some(&Tree::leaf("MPIR_Barrier_intra_smp"))
        );
        assert_eq!(
            b4.get("comm_hierarchy=any"),
            table
                .get("collective=barrier")
                .unwrap()
                .get("comm_type=intra")
        );
    }

    /// Every restriction MPICH's CVAR path checks is tested in the table,
    /// with the library's default where it fails, as its own
    /// `generic.json` does; a power-of-two restriction is settled by the
    /// communicator's size.
    #[test]
    fn restricted_algorithms_are_guarded_as_mpich_guards_them() {
        let d = Tree::leaf("default");
        let leaf = |c, n| Tree::leaf(&algorithm_name(c, n));
        let two = |k1: &str, t1: Tree, k2: &str, t2: Tree| {
            Tree(vec![(k1.to_string(), t1), (k2.to_string(), t2)])
        };
        let c = Collective::Allreduce;
        assert_eq!(
            guarded_leaf(c, "reduce_scatter_allgather", 3, &d),
            two(
                "is_op_built_in=yes",
                two(
                    "count<pow2",
                    d.clone(),
                    "count=any",
                    leaf(c, "reduce_scatter_allgather")
                ),
                "is_op_built_in=no",
                d.clone()
            )
        );
        assert_eq!(
            guarded_leaf(c, "smp", 4, &d),
            two(
                "comm_hierarchy=parent",
                two(
                    "is_commutative=yes",
                    leaf(c, "smp"),
                    "is_commutative=no",
                    d.clone()
                ),
                "comm_hierarchy=any",
                d.clone()
            )
        );
        assert_eq!(
            guarded_leaf(c, "recursive_doubling", 3, &d),
            leaf(c, "recursive_doubling")
        );
        assert_eq!(
            guarded_leaf(c, "nb", 3, &d),
            Tree::leaf("MPIR_Allreduce_allcomm_nb")
        );
        let c = Collective::Allgather;
        assert_eq!(
            guarded_leaf(c, "recursive_doubling", 4, &d),
            leaf(c, "recursive_doubling")
        );
        assert_eq!(guarded_leaf(c, "recursive_doubling", 6, &d), d);
        let c = Collective::Alltoall;
        for name in ["brucks", "pairwise", "scattered"] {
            assert_eq!(
                guarded_leaf(c, name, 3, &d),
                two(
                    "is_sendbuf_inplace=no",
                    leaf(c, name),
                    "is_sendbuf_inplace=yes",
                    d.clone()
                )
            );
        }
        assert_eq!(
            guarded_leaf(c, "pairwise_sendrecv_replace", 3, &d),
            two(
                "is_sendbuf_inplace=yes",
                leaf(c, "pairwise_sendrecv_replace"),
                "is_sendbuf_inplace=no",
                d.clone()
            )
        );
        let c = Collective::ReduceScatterBlock;
        assert_eq!(
            guarded_leaf(c, "pairwise", 3, &d),
            two(
                "is_commutative=yes",
                leaf(c, "pairwise"),
                "is_commutative=no",
                d.clone()
            )
        );
        assert_eq!(guarded_leaf(c, "noncommutative", 3, &d), d);
        assert_eq!(
            guarded_leaf(c, "noncommutative", 2, &d),
            leaf(c, "noncommutative")
        );
        let c = Collective::Reduce;
        assert_eq!(
            guarded_leaf(c, "reduce_scatter_gather", 8, &d).get("is_op_built_in=no"),
            Some(&d)
        );
        assert_eq!(
            guarded_leaf(Collective::Bcast, "smp", 4, &d),
            two(
                "comm_hierarchy=parent",
                leaf(Collective::Bcast, "smp"),
                "comm_hierarchy=any",
                d.clone()
            )
        );
    }

    /// MPICH 5.0's algorithms that take parameters are not written (the
    /// library's choice stays there, with a note naming them); the ones
    /// that need a commutative operation are guarded like 4.0's.
    #[test]
    fn mpich5_algorithms_with_parameters_are_left_out_and_the_rest_guarded() {
        let records = [
            decision(
                "c0.0",
                4,
                "allreduce",
                (0, Some(256)),
                "recursive_multiplying",
                4,
                50.0,
            ),
            decision("c0.0", 4, "allreduce", (256, Some(4096)), "ring", 8, 50.0),
            decision("c0.0", 4, "allgather", (0, None), "k_brucks", 2, 50.0),
        ];
        let table: Tree = serde_json::from_str(TABLE).unwrap();
        let (out, notes) = apply(&table, &learned(Family::Mpich, &records)).unwrap();
        let default = |c: &str| {
            table
                .get(c)
                .unwrap()
                .get("comm_type=intra")
                .unwrap()
                .clone()
        };
        let sized = |c: &str| {
            out.get(c)
                .unwrap()
                .get("comm_type=intra")
                .unwrap()
                .get("comm_size<=4")
                .unwrap()
                .clone()
        };
        let allreduce = sized("collective=allreduce");
        assert_eq!(
            allreduce.get("avg_msg_size<256"),
            Some(&default("collective=allreduce"))
        );
        let ring = allreduce.get("avg_msg_size<4096").unwrap();
        assert_eq!(
            ring.get("is_commutative=yes"),
            Some(&Tree::leaf("MPIR_Allreduce_intra_ring"))
        );
        assert_eq!(
            ring.get("is_commutative=no"),
            Some(&default("collective=allreduce"))
        );
        assert_eq!(
            sized("collective=allgather").get("total_msg_size=any"),
            Some(&default("collective=allgather"))
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("allreduce `recursive_multiplying` on 4 ranks ([0 B, 256 B))")
                && notes[0].contains("parameters (k)"),
            "{notes:?}"
        );
        assert!(
            notes[1].starts_with("allgather `k_brucks` on 4 ranks (>= 0 B)"),
            "{notes:?}"
        );
        let mut names = Vec::new();
        algorithms(&out, &mut names);
        assert!(
            !names
                .iter()
                .any(|n| n.contains("multiplying") || n.contains("k_brucks")),
            "{names:?}"
        );
    }

    #[test]
    fn a_linker_script_is_followed_to_its_library() {
        let dir = std::env::temp_dir().join(format!("mpit-export-ld-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libmpi.so.12");
        std::fs::write(&lib, b"\x7fELF...").unwrap();
        let script = dir.join("libmpi.so");
        std::fs::write(&script, "INPUT(libmpi.so.12)\n").unwrap();
        assert_eq!(through_linker_script(&script).unwrap(), lib);
        assert_eq!(through_linker_script(&lib).unwrap(), lib);
        let absolute = dir.join("libabs.so");
        std::fs::write(
            &absolute,
            format!("/* GNU ld script */\nGROUP ( {} )\n", lib.display()),
        )
        .unwrap();
        assert_eq!(through_linker_script(&absolute).unwrap(), lib);
        let dangling = dir.join("libgone.so");
        std::fs::write(&dangling, "INPUT(libgone.so.1)\n").unwrap();
        let err = through_linker_script(&dangling).unwrap_err().to_string();
        assert!(
            err.contains("linker script naming") && err.contains("libgone.so.1"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_library_series_is_read_from_its_version_string() {
        let image = b"junk\0MPICH Version:\t%s\n\x005.0.2\0MPI 4.1\0".to_vec();
        assert!(holds_series(&image, 5, 0));
        assert!(!holds_series(&image, 4, 1), "within another string");
        assert!(!holds_series(&image, 4, 0));
        assert!(holds_series(b"x\x004.1\0", 4, 1));
        assert!(holds_series(b"x\x004.1a1\0", 4, 1));
        assert!(holds_series(b"x\x004.1rc3\0", 4, 1));
        assert!(!holds_series(b"x\x004.10\0", 4, 1));
        assert!(!holds_series(b"x\x005.0.2 build\0", 5, 0));
        assert!(!holds_series(b"5.0.2\0", 5, 0), "no string starts there");
    }

    #[test]
    fn a_collective_missing_from_the_table_is_an_error() {
        let records = [decision("c0.0", 2, "bcast", (0, None), "binomial", 1, 5.0)];
        let table: Tree = serde_json::from_str(TABLE).unwrap();
        let err = apply(&table, &learned(Family::Mpich, &records)).unwrap_err();
        assert!(err.contains("collective=bcast"), "{err}");
    }

    #[test]
    fn the_table_is_found_among_the_library_strings() {
        let mut image =
            b"\x7fELF junk\0{\"collective=bcast\":{\"algorithm=MPIDI_x\":{}}}\0".to_vec();
        image.extend_from_slice(TABLE.as_bytes());
        image.extend_from_slice(b"\0more");
        assert_eq!(default_table(&image).as_deref(), Some(TABLE));
        assert_eq!(default_table(b"nothing here"), None);
    }
}
