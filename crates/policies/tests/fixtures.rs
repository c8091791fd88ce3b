//! Policy files under tests/fixtures: the good ones load, the broken ones
//! fail with exactly the messages in their `.expected` files.
//!
//! Run with `POLICIES_BLESS=1` to rewrite the `.expected` files after a
//! deliberate change of messages (then review the diff).

use std::fs;
use std::path::{Path, PathBuf};

use policies::{PolicySet, VarKind};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn load(name: &str) -> PolicySet {
    let path = fixtures().join(name);
    let text = fs::read_to_string(&path).unwrap();
    PolicySet::parse(&text, name).unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn good_fixtures_load() {
    let set = load("thesis_vbuf.toml");
    assert_eq!(set.policies().len(), 1);
    let set = load("all_features.toml");
    let names: Vec<_> = set.policies().iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "eager-per-rank",
            "smp-collectives",
            "vbuf-watch",
            "sharp-advice",
            "affinity-env"
        ]
    );
}

#[test]
fn variables_of_all_features() {
    let set = load("all_features.toml");
    let vars: Vec<String> = set
        .variables()
        .iter()
        .map(|v| {
            let mut uses = Vec::new();
            for (flag, name) in [
                (v.uses.read, "read"),
                (v.uses.written, "written"),
                (v.uses.delta, "delta"),
                (v.uses.rate, "rate"),
                (v.uses.changes, "changes"),
            ] {
                if flag {
                    uses.push(name);
                }
            }
            format!(
                "{:?} {} [{}] {}",
                v.kind,
                v.name,
                uses.join(","),
                v.first_use
            )
        })
        .collect();
    assert_eq!(
        vars,
        [
            "Cvar MPIR_CVAR_IBA_EAGER_THRESHOLD [written] all_features.toml:8:20",
            "Cvar MPIR_CVAR_ENABLE_SMP_COLLECTIVES [written] all_features.toml:15:20",
            "Auto mv2_vbuf_allocated [rate] all_features.toml:23:20",
            "Cvar MPIR_CVAR_VBUF_POOL_REDUCED_VALUE [written] all_features.toml:24:25",
            "Auto mv2_vbuf_max_use_array [read] all_features.toml:24:85",
            "Tool tool.allreduce.bytes_p50 [read] all_features.toml:37:10",
            "Pvar mv2_vbuf_max_use [changes] all_features.toml:37:52",
            "Cvar MPIR_CVAR_ENABLE_SHARP [read] all_features.toml:37:83",
            "Cvar MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM [written] all_features.toml:39:20",
        ]
    );
    let watch = &set.policies()[2];
    let slot_names: Vec<_> = watch
        .slots()
        .iter()
        .map(|s| set.variable(*s).unwrap().name.as_str())
        .collect();
    assert_eq!(
        slot_names,
        [
            "mv2_vbuf_allocated",
            "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE",
            "mv2_vbuf_max_use_array"
        ]
    );
    assert_eq!(set.variables()[5].kind, VarKind::Tool);
}

#[test]
fn broken_fixtures_report_expected_messages() {
    let dir = fixtures().join("broken");
    let bless = std::env::var_os("POLICIES_BLESS").is_some();
    let mut paths: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 7, "fixtures missing: {paths:?}");
    let mut failures = Vec::new();
    for path in paths {
        let name = format!("broken/{}", path.file_name().unwrap().to_string_lossy());
        let text = fs::read_to_string(&path).unwrap();
        let got = match PolicySet::parse(&text, &name) {
            Ok(_) => "(loaded without error)\n".to_string(),
            Err(e) => format!("{e}\n"),
        };
        let expected_path = path.with_extension("expected");
        if bless {
            fs::write(&expected_path, &got).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if got != expected {
            failures.push(format!("--- {name}\nexpected:\n{expected}got:\n{got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The TOML examples of the README and of the user manual's policy page
/// (docs/policies.md) stay valid.
#[test]
fn readme_examples_parse() {
    examples_parse(include_str!("../README.md"), "README.md");
    examples_parse(
        include_str!("../../../docs/policies.md"),
        "docs/policies.md",
    );
}

/// Every ```toml block of `text` (at least two) loads.
fn examples_parse(text: &str, file_name: &str) {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```toml\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").unwrap();
        blocks.push(&body[..end]);
        rest = &body[end + 3..];
    }
    assert!(
        blocks.len() >= 2,
        "{file_name}: {} TOML blocks",
        blocks.len()
    );
    for block in blocks {
        let whole = ["[[policy]]", "[collectives]"];
        let doc = if whole.iter().any(|w| block.trim_start().starts_with(w)) {
            block.to_string()
        } else {
            // Fragments (actions) go into a pre-init policy, where every action is legal.
            format!("[[policy]]\nname = \"readme\"\nphase = \"pre-init\"\n{block}")
        };
        if let Err(e) = PolicySet::parse(&doc, file_name) {
            panic!("{file_name} example does not load:\n{doc}\n{e:#}");
        }
    }
}
