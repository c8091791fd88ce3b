//! `PolicySet::check` against catalogues: the real MVAPICH2 2.3.7 variable
//! list (tests/fixtures/mvapich2-2.3.7-variables.txt) and hand-made ones.

use policies::{
    CvarInfo, CvarType, MemoryCatalogue, Phase, PolicySet, PvarClass, PvarInfo, Scope, Severity,
    VariableLookup,
};

/// The variables MVAPICH2 2.3.7 exports, from its recorded listing.
fn mvapich2() -> MemoryCatalogue {
    let text = include_str!("fixtures/mvapich2-2.3.7-variables.txt");
    let mut cat = MemoryCatalogue::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["CVAR", name, scope, ..] => {
                let scope = match *scope {
                    "all_eq" => Scope::AllEq,
                    "local" => Scope::Local,
                    other => panic!("scope {other}"),
                };
                cat.add_cvar(
                    name,
                    CvarInfo {
                        scope,
                        count: 1,
                        ty: CvarType::Int,
                    },
                );
            }
            ["PVAR", name, class, ..] => {
                let class = match *class {
                    "COUNTER" => PvarClass::Counter,
                    "LEVEL" => PvarClass::Level,
                    "TIMER" => PvarClass::Timer,
                    other => panic!("class {other}"),
                };
                cat.add_pvar(name, PvarInfo { class, count: 1 });
            }
            _ => {}
        }
    }
    cat
}

/// MVAPICH2 with the research VBUF variables of the thesis.
fn mvapich2_research() -> MemoryCatalogue {
    let mut cat = mvapich2();
    let pool = PvarInfo {
        class: PvarClass::Level,
        count: 4,
    };
    cat.add_pvar("mv2_vbuf_allocated_array", pool)
        .add_pvar("mv2_vbuf_max_use_array", pool)
        .add_cvar(
            "MPIR_CVAR_VBUF_POOL_CONTROL",
            CvarInfo {
                scope: Scope::Local,
                count: 1,
                ty: CvarType::Int,
            },
        )
        .add_cvar(
            "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE",
            CvarInfo {
                scope: Scope::Local,
                count: 4,
                ty: CvarType::Int,
            },
        );
    cat
}

fn check(src: &str, cat: &dyn VariableLookup) -> Vec<String> {
    let set = PolicySet::parse(src, "p.toml").unwrap_or_else(|e| panic!("{e:#}"));
    set.check(cat).iter().map(ToString::to_string).collect()
}

const THESIS: &str = include_str!("fixtures/thesis_vbuf.toml");

#[test]
fn mvapich2_catalogue_is_read() {
    let cat = mvapich2();
    assert_eq!(
        cat.cvar("MPIR_CVAR_IBA_EAGER_THRESHOLD").map(|c| c.scope),
        Some(Scope::AllEq)
    );
    assert!(cat.pvar("mv2_vbuf_allocated").is_some());
    assert!(cat.names().len() > 1000);
}

#[test]
fn thesis_policy_on_released_mvapich2_names_the_missing_variables() {
    let d = check(THESIS, &mvapich2());
    assert_eq!(
        d,
        [
            "p.toml:6:14: missing: policy \"free-unused-vbufs\": the MPI library does not export a variable named `mv2_vbuf_allocated_array`; closest known names: mv2_vbuf_allocated",
            "p.toml:6:41: missing: policy \"free-unused-vbufs\": the MPI library does not export a variable named `mv2_vbuf_max_use_array`",
            "p.toml:7:20: missing: policy \"free-unused-vbufs\": the MPI library does not export a CVAR named `MPIR_CVAR_VBUF_POOL_CONTROL`",
            "p.toml:8:20: missing: policy \"free-unused-vbufs\": the MPI library does not export a CVAR named `MPIR_CVAR_VBUF_POOL_REDUCED_VALUE`",
        ]
    );
}

/// examples/policies/mvapich2-eager.toml against the variables of a real
/// MVAPICH2 2.3.7 (none is installed here to run it): every name exists,
/// the ALL_EQ eager threshold is written on every rank before MPI_Init, and
/// the shared-memory eager size goes through the environment, in a policy
/// of its own (it runs before MPI_T is initialised).
#[test]
fn mvapich2_eager_example_is_clean_on_mvapich2() {
    let src = include_str!("../../../examples/policies/mvapich2-eager.toml");
    assert_eq!(check(src, &mvapich2()), Vec::<String>::new());
    let set = PolicySet::parse(src, "mvapich2-eager.toml").unwrap();
    let p = set.policies();
    let names: Vec<_> = p.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        ["iba-eager-64k", "smp-eager-64k", "iba-eager-readback"]
    );
    assert_eq!(p[0].phase(), Phase::PreInit);
    assert!(!p[0].sets_environment() && (0..4).all(|r| p[0].applies_to(r, 4)));
    assert_eq!(p[1].phase(), Phase::PreInit);
    assert!(p[1].sets_environment() && p[1].slots().is_empty());
    assert_eq!(p[2].phase(), Phase::Init);
}

#[test]
fn thesis_policy_on_research_mvapich2_is_clean() {
    assert_eq!(check(THESIS, &mvapich2_research()), Vec::<String>::new());
}

#[test]
fn missing_diagnostics_carry_policy_and_slot() {
    let src = r#"
[[policy]]
name = "ok"
when = "mv2_vbuf_allocated > 1"
then = [ { note = "x" } ]

[[policy]]
name = "typo"
when = "mv2_vbuf_alocated > 1 && mv2_vbuf_allocated > 2"
then = [ { note = "x" } ]
"#;
    let set = PolicySet::parse(src, "p.toml").unwrap();
    let d = set.check(&mvapich2());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Missing);
    assert_eq!(d[0].policy, 1);
    assert_eq!(d[0].policy_name, "typo");
    assert_eq!(
        set.variable(d[0].slot.unwrap()).unwrap().name,
        "mv2_vbuf_alocated"
    );
    assert!(
        d[0].message
            .ends_with("closest known names: mv2_vbuf_allocated, mv2_ud_vbuf_allocated"),
        "{}",
        d[0].message
    );
}

#[test]
fn all_eq_cvar_in_a_periodic_policy_is_rejected_with_the_reason() {
    let src = r#"
[[policy]]
name = "switch-allreduce"
when = "unexpected_recvq_length > 100"
then = [ { set = "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM", value = 2 } ]
"#;
    let d = check(src, &mvapich2());
    assert_eq!(
        d,
        ["p.toml:5:10: error: policy \"switch-allreduce\": `MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM` has scope ALL_EQ and can not be written by a \"periodic\" policy: every rank must hold the same value and change it at the same moment, but a periodic policy decides on each rank on its own, so ranks would switch at different moments and collective operations would run with mismatched settings, which can hang or corrupt data; write it in phase \"pre-init\" or \"init\", where every rank applies the same value at the same point"]
    );
    let finalize = src.replace(
        "name = \"switch-allreduce\"",
        "name = \"switch-allreduce\"\nphase = \"finalize\"",
    );
    assert!(
        check(&finalize, &mvapich2())[0].contains("can not be written by a \"finalize\" policy")
    );
    // The same write at init, on every rank, is fine.
    let init = r#"
[[policy]]
name = "allreduce-at-init"
phase = "init"
then = [ { set = "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM", value = 2 } ]
"#;
    assert_eq!(check(init, &mvapich2()), Vec::<String>::new());
}

#[test]
fn all_eq_cvar_before_init_on_some_ranks_is_a_warning() {
    let src = r#"
[[policy]]
name = "eager"
phase = "pre-init"
ranks = "0-1"
then = [ { set = "MPIR_CVAR_IBA_EAGER_THRESHOLD", value = "64K" } ]

[[policy]]
name = "eager-computed"
phase = "init"
then = [ { set = "MPIR_CVAR_IBA_EAGER_THRESHOLD", value = "mv2_vbuf_allocated * 2" } ]
"#;
    let set = PolicySet::parse(src, "p.toml").unwrap();
    let d = set.check(&mvapich2());
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(d.iter().all(|d| d.severity == Severity::Warning));
    assert!(d[0].message.contains("does not apply to every rank"));
    assert!(d[1].message.contains("computed from variables"));
}

fn typed_catalogue() -> MemoryCatalogue {
    let mut cat = MemoryCatalogue::default();
    let cvar = |scope, count, ty| CvarInfo { scope, count, ty };
    cat.add_cvar("MPIR_CVAR_CONST", cvar(Scope::Constant, 1, CvarType::Int))
        .add_cvar("MPIR_CVAR_RO", cvar(Scope::Readonly, 1, CvarType::Int))
        .add_cvar("MPIR_CVAR_ALL", cvar(Scope::All, 1, CvarType::Int))
        .add_cvar("MPIR_CVAR_NUM", cvar(Scope::Local, 4, CvarType::Double))
        .add_cvar("MPIR_CVAR_STR", cvar(Scope::Local, 8, CvarType::String))
        .add_cvar(
            "MPIR_CVAR_ALGO",
            cvar(
                Scope::Local,
                1,
                CvarType::Enum(vec!["auto".into(), "ring".into(), "rabenseifner".into()]),
            ),
        )
        .add_cvar("both", cvar(Scope::Local, 1, CvarType::Int))
        .add_pvar(
            "both",
            PvarInfo {
                class: PvarClass::Level,
                count: 1,
            },
        )
        .add_pvar(
            "level",
            PvarInfo {
                class: PvarClass::Level,
                count: 1,
            },
        )
        .set_tool_metrics(&["tool.allreduce.bytes_p50"]);
    cat
}

#[test]
fn scopes_and_types() {
    let src = r#"
[[policy]]
name = "t"
when = "both > 0 && pvar:MPIR_CVAR_ALL > 0 && tool.allreduce.bytes_p99 > 1"
then = [ { set = "MPIR_CVAR_CONST", value = 1 },
         { set = "MPIR_CVAR_RO", value = 1 },
         { set = "MPIR_CVAR_ALL", value = 1.5 },
         { set = "MPIR_CVAR_NUM", value = [1, 2, 3] },
         { set = "MPIR_CVAR_NUM", index = 4, value = 1 },
         { set = "MPIR_CVAR_NUM", text = "1" },
         { set = "MPIR_CVAR_STR", value = 3 },
         { set = "MPIR_CVAR_STR", text = "much too long" },
         { set = "MPIR_CVAR_ALGO", text = "rign" },
         { set = "MPIR_CVAR_ALGO", text = "ring" } ]
"#;
    let d = check(src, &typed_catalogue());
    let expected = [
        "p.toml:4:9: warning: policy \"t\": `both` is both a PVAR and a CVAR; the PVAR is used (write pvar:both or cvar:both to say which)",
        "p.toml:4:21: missing: policy \"t\": the MPI library does not export a PVAR named `MPIR_CVAR_ALL` (it has a CVAR of that name: write cvar:MPIR_CVAR_ALL)",
        "p.toml:4:47: missing: policy \"t\": the tuner provides no tool metric `tool.allreduce.bytes_p99`",
        "p.toml:5:10: error: policy \"t\": `MPIR_CVAR_CONST` has scope CONSTANT: the MPI library does not allow writing it",
        "p.toml:6:10: error: policy \"t\": `MPIR_CVAR_RO` has scope READONLY: the MPI library does not allow writing it",
        "p.toml:7:10: warning: policy \"t\": `MPIR_CVAR_ALL` has scope ALL: a write on one rank changes it for other ranks too",
        "p.toml:7:10: warning: policy \"t\": `MPIR_CVAR_ALL` holds an integer; 1.5 will be rounded",
        "p.toml:8:10: error: policy \"t\": the array has 3 values but `MPIR_CVAR_NUM` has 4 element(s)",
        "p.toml:9:10: error: policy \"t\": `index = 4` is out of range: `MPIR_CVAR_NUM` has 4 element(s), indices 0 to 3",
        "p.toml:10:10: error: policy \"t\": `MPIR_CVAR_NUM` holds a number: write value = ... instead of text = ...",
        "p.toml:11:10: error: policy \"t\": `MPIR_CVAR_STR` holds text: write text = \"...\" instead of value = ...",
        "p.toml:12:10: error: policy \"t\": the text is 13 bytes long but `MPIR_CVAR_STR` holds at most 8 (terminating NUL included)",
        "p.toml:13:10: error: policy \"t\": `MPIR_CVAR_ALGO` has no item \"rign\"; its items are: auto, ring, rabenseifner; closest: ring",
    ];
    assert_eq!(d, expected);
}

#[test]
fn string_cvar_in_an_expression_is_an_error() {
    let src = r#"
[[policy]]
name = "s"
when = "cvar:MPIR_CVAR_STR > 0"
then = [ { note = "x" } ]
"#;
    let d = check(src, &typed_catalogue());
    assert_eq!(
        d,
        ["p.toml:4:9: error: policy \"s\": CVAR `MPIR_CVAR_STR` holds text and can not be used in an expression"]
    );
}
