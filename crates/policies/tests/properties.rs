//! Property tests: no input makes the loader, the expression parser, the
//! rank selector or the evaluator panic.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::Config;

use policies::{parse_duration, Decision, Env, PolicySet, Value, Values, VarSlot};

/// A TOML basic string holding `s`, escaped.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn policy_with_when(expr: &str) -> String {
    format!(
        "[[policy]]\nname = \"p\"\nwhen = {}\nthen = [ {{ set = \"MPIR_CVAR_A\", value = {} }} ]\notherwise = [ {{ note = \"n\" }} ]\n",
        quoted(expr),
        quoted(expr)
    )
}

/// Text built from the expression language's own pieces, so that many
/// samples get far into the parser.
fn expression_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("a"),
        Just("b"),
        Just("pvar:c"),
        Just("cvar:MPIR_CVAR_D"),
        Just("tool.e.f"),
        Just("1"),
        Just("0"),
        Just("2.5e3"),
        Just("64K"),
        Just("1M"),
        Just("250ms"),
        Just("2m"),
        Just("+"),
        Just("-"),
        Just("*"),
        Just("/"),
        Just("%"),
        Just("=="),
        Just("!="),
        Just("<"),
        Just("<="),
        Just(">"),
        Just(">="),
        Just("&&"),
        Just("||"),
        Just("!"),
        Just("and"),
        Just("or"),
        Just("not"),
        Just("("),
        Just(")"),
        Just(","),
        Just("["),
        Just("]"),
        Just("any("),
        Just("all("),
        Just("sum("),
        Just("min("),
        Just("max("),
        Just("len("),
        Just("abs("),
        Just("delta("),
        Just("rate("),
        Just("changes("),
        Just("count("),
        Just("rank"),
        Just("size"),
        Just("time"),
        Just(" "),
        Just("'x'"),
        Just("="),
        Just("&"),
        Just("é"),
        Just("."),
        Just(":"),
    ];
    prop::collection::vec(piece, 0..30).prop_map(|v| v.concat())
}

/// Well-formed expressions over three array/scalar variables.
fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("x".to_string()),
        Just("y".to_string()),
        Just("pvar:z".to_string()),
        Just("rank".to_string()),
        Just("size".to_string()),
        Just("time".to_string()),
        Just("delta(x)".to_string()),
        Just("rate(y)".to_string()),
        Just("changes(pvar:z)".to_string()),
        (-1000i32..1000).prop_map(|n| n.to_string()),
        Just("0".to_string()),
        Just("1e308".to_string()),
        Just("x[0]".to_string()),
        Just("y[3]".to_string()),
    ];
    leaf.prop_recursive(6, 64, 3, |inner| {
        let bin = prop_oneof![
            Just("+"),
            Just("-"),
            Just("*"),
            Just("/"),
            Just("%"),
            Just("=="),
            Just("!="),
            Just("<"),
            Just("<="),
            Just(">"),
            Just(">="),
            Just("&&"),
            Just("||"),
        ];
        let func = prop_oneof![
            Just("any"),
            Just("all"),
            Just("sum"),
            Just("mean"),
            Just("min"),
            Just("max"),
            Just("len"),
            Just("abs"),
            Just("count"),
            Just("floor"),
            Just("ceil"),
            Just("round"),
        ];
        prop_oneof![
            (inner.clone(), bin, inner.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (func, inner.clone()).prop_map(|(f, a)| format!("{f}({a})")),
            (
                prop_oneof![Just("min"), Just("max")],
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(f, a, b)| format!("{f}({a}, {b})")),
            inner.clone().prop_map(|a| format!("-{a}")),
            inner.clone().prop_map(|a| format!("!{a}")),
            inner.prop_map(|a| format!("({a})[1]")),
        ]
    })
}

/// Values for slots 0..4: missing, a scalar, or an array of 0-4 numbers
/// including NaN and infinities.
#[derive(Debug, Clone)]
struct Samples(Vec<Option<Result<f64, Vec<f64>>>>);

impl Values for Samples {
    fn get(&self, slot: VarSlot) -> Option<Value<'_>> {
        match self.0.get(slot.index())? {
            None => None,
            Some(Ok(x)) => Some(Value::Scalar(*x)),
            Some(Err(v)) => Some(Value::Array(v)),
        }
    }
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -100.0f64..100.0,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(0.0),
        1 => any::<f64>(),
    ]
}

fn samples() -> impl Strategy<Value = Samples> {
    let one = prop_oneof![
        1 => Just(None),
        2 => number().prop_map(|x| Some(Ok(x))),
        3 => prop::collection::vec(number(), 0..5).prop_map(|v| Some(Err(v))),
    ];
    prop::collection::vec(one, 5).prop_map(Samples)
}

/// TOML-shaped documents: policy-like lines, some of them wrong.
fn toml_document() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("name"),
        Just("ranks"),
        Just("phase"),
        Just("every"),
        Just("when"),
        Just("then"),
        Just("otherwise"),
        Just("cooldown"),
        Just("hysteresis"),
        Just("max_writes"),
        Just("dry_run"),
        Just("whne"),
        Just("policy"),
    ];
    let scalar = prop_oneof![
        "[a-z0-9 %<>=+*/\\-.,:()]{0,16}".prop_map(|s| quoted(&s)),
        expression_soup().prop_map(|s| quoted(&s)),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        Just("\"pre-init\"".to_string()),
        Just("\"1s\"".to_string()),
        Just("\"0-3,8\"".to_string()),
        Just("[0, 1, \"2-3\"]".to_string()),
        Just("1.5".to_string()),
        Just("nan".to_string()),
    ];
    let action = prop_oneof![
        (expression_soup(), scalar.clone())
            .prop_map(|(c, v)| format!("{{ set = {}, value = {v} }}", quoted(&c))),
        scalar
            .clone()
            .prop_map(|v| format!("{{ set = \"MPIR_CVAR_A\", value = {v}, index = 2 }}")),
        scalar
            .clone()
            .prop_map(|v| format!("{{ setenv = \"E\", value = {v} }}")),
        scalar.clone().prop_map(|v| format!("{{ note = {v} }}")),
        scalar
            .clone()
            .prop_map(|v| format!("{{ recommend = {v}, text = {v} }}")),
        Just("{ set = \"MPIR_CVAR_A\", text = \"auto\" }".to_string()),
        Just("{ }".to_string()),
        Just("{ set = \"A\", note = \"b\" }".to_string()),
    ];
    let line = prop_oneof![
        3 => Just("[[policy]]".to_string()),
        1 => Just("[policy]".to_string()),
        8 => (key.clone(), scalar).prop_map(|(k, v)| format!("{k} = {v}")),
        4 => (prop_oneof![Just("then"), Just("otherwise")], prop::collection::vec(action, 0..4))
            .prop_map(|(k, a)| format!("{k} = [ {} ]", a.join(", "))),
        1 => "[\\PC]{0,20}",
    ];
    prop::collection::vec(line, 0..16).prop_map(|l| l.join("\n"))
}

fn at(rank: u32, size: u32, ms: u64) -> Env {
    Env::new(rank, size, Duration::from_millis(ms))
}

proptest! {
    #![proptest_config(Config { cases: 512, ..Config::default() })]

    #[test]
    fn parse_never_panics_on_arbitrary_text(text in "\\PC*") {
        let _ = PolicySet::parse(&text, "arbitrary.toml");
    }

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = PolicySet::parse(&text, "bytes.toml");
    }

    #[test]
    fn parse_never_panics_on_toml_shaped_documents(doc in toml_document()) {
        match PolicySet::parse(&doc, "doc.toml") {
            Ok(set) => {
                for p in set.policies() {
                    let _ = p.applies_to(3, 8);
                }
            }
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                for e in errors.errors() {
                    prop_assert!(e.location.line >= 1 && e.location.column >= 1);
                    prop_assert!(e.to_string().starts_with("doc.toml:"));
                    let _ = format!("{e:#}");
                }
            }
        }
    }

    #[test]
    fn expression_parser_never_panics(expr in expression_soup()) {
        let _ = PolicySet::parse(&policy_with_when(&expr), "soup.toml");
    }

    #[test]
    fn expression_parser_never_panics_on_any_text(expr in "\\PC{0,60}") {
        let _ = PolicySet::parse(&policy_with_when(&expr), "any.toml");
    }

    #[test]
    fn rank_selectors_never_panic(sel in "[0-9a-z ,%<>=+*/\\-()!&|]{0,24}", rank in 0u32..70000, size in 0u32..70000) {
        let doc = format!("[[policy]]\nname = \"r\"\nranks = {}\nthen = [ {{ note = \"n\" }} ]\n", quoted(&sel));
        if let Ok(set) = PolicySet::parse(&doc, "ranks.toml") {
            let _ = set.policies()[0].applies_to(rank, size);
        }
    }

    #[test]
    fn durations_never_panic(text in "\\PC{0,12}") {
        let _ = parse_duration(&text);
    }

    #[test]
    fn evaluation_never_panics(
        expr in expression(),
        ticks in prop::collection::vec((samples(), 0u64..5000), 1..6),
        rank in 0u32..64,
        size in 0u32..64,
    ) {
        let doc = policy_with_when(&expr);
        let set = PolicySet::parse(&doc, "gen.toml");
        prop_assert!(set.is_ok(), "generated expression rejected: {expr}: {}", set.unwrap_err());
        let set = set.unwrap();
        let mut p = set.policies()[0].clone();
        let mut t = 0;
        for (values, dt) in &ticks {
            t += dt;
            let d = p.evaluate(values, &at(rank, size, t));
            if let Decision::Fired { branch, .. } = d {
                for a in p.actions(branch) {
                    let _ = format!("{a:?}");
                }
            }
            let _ = p.condition_value().map(|v| v.to_string());
            let _ = p.condition_inputs().count();
        }
    }
}
