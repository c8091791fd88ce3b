//! The hand-written trace format (see the module docs of [`super`]).

use super::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TraceLine {
    catalogue: Option<RawCatalogue>,
    t: Option<f64>,
    rank: Option<u32>,
    size: Option<u32>,
    #[serde(default)]
    pvars: BTreeMap<String, Json>,
    #[serde(default)]
    cvars: BTreeMap<String, Json>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCatalogue {
    #[serde(default)]
    cvars: BTreeMap<String, RawCvar>,
    #[serde(default)]
    pvars: BTreeMap<String, RawPvar>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCvar {
    scope: Option<String>,
    count: Option<usize>,
    #[serde(rename = "type")]
    ty: Option<String>,
    items: Option<RawItems>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawItems {
    Names(Vec<String>),
    Values(BTreeMap<String, i32>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPvar {
    class: Option<String>,
    count: Option<usize>,
}

pub(super) fn cvar_decl(raw: RawCvar) -> Result<CvarDecl, String> {
    let scope = match raw.scope.as_deref() {
        None => Scope::Local,
        Some(s) => Scope::parse(s).ok_or(format!(
            "unknown scope {s:?}; expected one of {}",
            names(Scope::ALL)
        ))?,
    };
    let enumeration = raw.items.map(|items| Enumeration {
        name: String::new(),
        items: match items {
            RawItems::Names(n) => n
                .into_iter()
                .enumerate()
                .map(|(i, name)| EnumItem {
                    value: i as i32,
                    name,
                })
                .collect(),
            RawItems::Values(m) => m
                .into_iter()
                .map(|(name, value)| EnumItem { value, name })
                .collect(),
        },
    });
    let datatype = match raw.ty.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("int" | "integer" | "enum") => Datatype::Int,
        Some("string" | "text" | "char") => Datatype::Char,
        Some("double" | "float") => Datatype::Double,
        Some("unsigned") => Datatype::Unsigned,
        Some("bool") => Datatype::CBool,
        Some(other) => Datatype::parse(other).ok_or(format!(
            "unknown type {other:?}; expected int, unsigned, double, string, enum or an MPI datatype name"
        ))?,
    };
    if raw.ty.as_deref() == Some("enum") && enumeration.is_none() {
        return Err("an enum CVAR needs `items`".into());
    }
    if enumeration.is_some() && datatype == Datatype::Char {
        return Err("a string CVAR can not have `items`".into());
    }
    Ok(CvarDecl {
        scope,
        count: raw.count.filter(|c| *c > 0),
        datatype,
        enumeration,
    })
}

pub(super) fn names<T: std::fmt::Display>(all: &[T]) -> String {
    all.iter()
        .map(|v| v.to_string().to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn declarations(raw: RawCatalogue) -> Result<Declarations, String> {
    let mut d = Declarations::default();
    for (name, c) in raw.cvars {
        let decl = cvar_decl(c).map_err(|m| format!("CVAR `{name}`: {m}"))?;
        d.cvars.insert(name, decl);
    }
    for (name, p) in raw.pvars {
        let class = match p.class.as_deref() {
            None => PvarClass::Generic,
            Some(c) => PvarClass::parse(c).ok_or(format!(
                "PVAR `{name}`: unknown class {c:?}; expected one of {}",
                names(PvarClass::ALL)
            ))?,
        };
        d.pvars.insert(
            name,
            PvarDecl {
                class,
                count: p.count.filter(|c| *c > 0),
            },
        );
    }
    Ok(d)
}

/// Parses a hand-written trace (format in the [module docs](crate::replay)): one
/// [`RankTrace`] per rank that has samples, in rank order.
pub fn parse_trace(text: &str, source: &str) -> Result<Vec<RankTrace>, ReplayError> {
    let (ranks, declared) = parse_trace_parts(text, source)?;
    if ranks.is_empty() && declared.is_empty() {
        return Err(ReplayError::Empty {
            source_name: source.into(),
            message: "no samples".into(),
        });
    }
    Ok(ranks)
}

pub(super) fn parse_trace_parts(
    text: &str,
    source: &str,
) -> Result<(Vec<RankTrace>, Declarations), ReplayError> {
    let mut declared = Declarations::default();
    let mut size: Option<u32> = None;
    let mut by_rank: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
    for (n, line) in lines(text) {
        let err = |m: String| format_error(source, n, m);
        let raw: TraceLine =
            serde_json::from_str(line).map_err(|e| err(format!("not a trace line: {e}")))?;
        if let Some(s) = raw.size {
            if s == 0 {
                return Err(err("`size` must be at least 1".into()));
            }
            size = Some(s);
        }
        if let Some(c) = raw.catalogue {
            if raw.t.is_some() || !raw.pvars.is_empty() || !raw.cvars.is_empty() {
                return Err(err(
                    "a catalogue line declares variables only; give samples on lines of their own"
                        .into(),
                ));
            }
            declared.fill_from(&declarations(c).map_err(err)?);
            continue;
        }
        let Some(t) = raw.t.filter(|t| t.is_finite() && *t >= 0.0) else {
            return Err(err(
                "a sample line needs a time `t` (seconds, at least 0); a catalogue line is {\"catalogue\": {...}}"
                    .into(),
            ));
        };
        let mut sample = Sample {
            t,
            ..Sample::default()
        };
        for (name, v) in raw.pvars {
            let value = json_value(&v).map_err(|m| err(format!("PVAR `{name}`: {m}")))?;
            if matches!(value, Value::Str(_)) {
                return Err(err(format!("PVAR `{name}`: expected numbers, not text")));
            }
            sample.pvars.push((name, value.to_f64s()));
        }
        for (name, v) in raw.cvars {
            let value = json_value(&v).map_err(|m| err(format!("CVAR `{name}`: {m}")))?;
            sample.cvars.push((name, value));
        }
        by_rank
            .entry(raw.rank.unwrap_or(0))
            .or_default()
            .push(sample);
    }
    let highest = by_rank.keys().next_back().copied().unwrap_or(0);
    let size = size.unwrap_or(highest + 1).max(highest + 1);
    let ranks = by_rank
        .into_iter()
        .map(|(rank, mut samples)| {
            samples.sort_by(|a, b| a.t.total_cmp(&b.t));
            RankTrace {
                source: source.to_string(),
                rank,
                size,
                library: None,
                samples,
                initial_cvars: BTreeMap::new(),
                declared: declared.clone(),
                end: None,
            }
        })
        .collect();
    Ok((ranks, declared))
}
