//! Semantic checks of a [`PolicySet`] against what an MPI library exports.

use crate::catalogue::{
    closest, suggestion, CvarInfo, CvarType, Diagnostic, Scope, Severity, VariableLookup,
};
use crate::error::Location;
use crate::expr::VarKind;
use crate::policy::{ActionKind, Phase, PolicySet, SetSource};
use crate::value::VarSlot;

impl PolicySet {
    /// Checks every variable and every write against `catalogue`.
    ///
    /// Reports, sorted by position:
    /// - [`Severity::Missing`] for each policy naming a variable the library
    ///   does not export (with the closest known names): the runtime disables
    ///   that policy and keeps the others;
    /// - [`Severity::Error`] for writes that can not work or are unsafe:
    ///   CONSTANT/READONLY CVARs, GROUP_EQ/ALL_EQ CVARs written by a periodic
    ///   or finalize policy, type mismatches, bad enum items, array lengths
    ///   and indices;
    /// - [`Severity::Warning`] for legal but dubious uses: a bare name that is
    ///   both a PVAR and a CVAR, ALL/GROUP CVARs written by a periodic policy,
    ///   GROUP_EQ/ALL_EQ CVARs written in pre-init/init by a policy that does
    ///   not select every rank or computes the value from per-rank variables.
    pub fn check(&self, catalogue: &dyn VariableLookup) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        // Every name, asked of the catalogue only when a name is missing.
        let names = std::cell::OnceCell::new();
        let near = |name: &str| {
            let names = names.get_or_init(|| catalogue.names());
            suggestion(&closest(name, names.iter().map(String::as_str)))
        };
        let diag = |out: &mut Vec<Diagnostic>,
                    severity,
                    policy: usize,
                    location: &Location,
                    slot,
                    message: String| {
            out.push(Diagnostic {
                severity,
                location: location.clone(),
                policy,
                policy_name: self.policies()[policy].name().to_string(),
                slot,
                message,
            });
        };

        for (i, var) in self.variables().iter().enumerate() {
            let slot = Some(VarSlot(i as u32));
            let name = var.name.as_str();
            let pvar = catalogue.pvar(name);
            let cvar = catalogue.cvar(name);
            let missing = match var.kind {
                VarKind::Tool => (!catalogue.has_tool_metric(name))
                    .then(|| format!("the tuner provides no tool metric `{name}`")),
                VarKind::Pvar if pvar.is_none() => Some(format!(
                    "the MPI library does not export a PVAR named `{name}`{}",
                    if cvar.is_some() {
                        format!(" (it has a CVAR of that name: write cvar:{name})")
                    } else {
                        near(name)
                    }
                )),
                VarKind::Cvar if cvar.is_none() => Some(format!(
                    "the MPI library does not export a CVAR named `{name}`{}",
                    if pvar.is_some() && !var.uses.written {
                        format!(" (it has a PVAR of that name: write pvar:{name})")
                    } else {
                        near(name)
                    }
                )),
                VarKind::Auto if pvar.is_none() && cvar.is_none() => Some(format!(
                    "the MPI library does not export a variable named `{name}`{}",
                    near(name)
                )),
                _ => None,
            };
            if let Some(message) = missing {
                for (policy, location) in &var.used_by {
                    diag(
                        &mut out,
                        Severity::Missing,
                        *policy,
                        location,
                        slot,
                        message.clone(),
                    );
                }
                continue;
            }
            if var.kind == VarKind::Auto && pvar.is_some() && cvar.is_some() {
                let (policy, location) = &var.used_by[0];
                diag(
                    &mut out,
                    Severity::Warning,
                    *policy,
                    location,
                    slot,
                    format!("`{name}` is both a PVAR and a CVAR; the PVAR is used (write pvar:{name} or cvar:{name} to say which)"),
                );
            }
            let read_cvar = match var.kind {
                VarKind::Cvar => true,
                VarKind::Auto => pvar.is_none(),
                _ => false,
            };
            let reads = var.uses.read || var.uses.delta || var.uses.rate || var.uses.changes;
            if read_cvar && reads && matches!(cvar.as_ref().map(|c| &c.ty), Some(CvarType::String))
            {
                let (policy, location) = &var.used_by[0];
                diag(
                    &mut out,
                    Severity::Error,
                    *policy,
                    location,
                    slot,
                    format!("CVAR `{name}` holds text and can not be used in an expression"),
                );
            }
        }

        for (p, policy) in self.policies().iter().enumerate() {
            for action in policy.then.iter().chain(&policy.otherwise) {
                let ActionKind::Set {
                    cvar,
                    slot,
                    index,
                    value,
                    reads_vars,
                    ..
                } = &action.kind
                else {
                    continue;
                };
                let Some(info) = catalogue.cvar(cvar) else {
                    continue;
                };
                let loc = &action.location;
                let mut report = |severity, message: String| {
                    diag(&mut out, severity, p, loc, Some(*slot), message);
                };
                if let Some(m) = scope_problem(
                    cvar,
                    &info,
                    policy.phase(),
                    policy.ranks().is_all(),
                    *reads_vars,
                ) {
                    report(m.0, m.1);
                }
                for m in type_problems(cvar, &info, *index, value) {
                    report(m.0, m.1);
                }
            }
        }
        Diagnostic::sort(&mut out);
        out
    }
}

fn scope_problem(
    cvar: &str,
    info: &CvarInfo,
    phase: Phase,
    all_ranks: bool,
    computed: bool,
) -> Option<(Severity, String)> {
    let scope = info.scope;
    let once = matches!(phase, Phase::PreInit | Phase::Init);
    if !scope.is_writable() {
        return Some((
            Severity::Error,
            format!("`{cvar}` has scope {scope}: the MPI library does not allow writing it"),
        ));
    }
    if scope.requires_equal_values() {
        if !once {
            return Some((
                Severity::Error,
                format!(
                    "`{cvar}` has scope {scope} and can not be written by a \"{phase}\" policy: every rank must hold the same value and change it at the same moment, but a {phase} policy decides on each rank on its own, so ranks would switch at different moments and collective operations would run with mismatched settings, which can hang or corrupt data; write it in phase \"pre-init\" or \"init\", where every rank applies the same value at the same point"
                ),
            ));
        }
        if !all_ranks {
            return Some((
                Severity::Warning,
                format!(
                    "`{cvar}` has scope {scope}: the MPI library expects the same value on every rank, but this policy does not apply to every rank; make sure the library accepts different values here"
                ),
            ));
        }
        if computed {
            return Some((
                Severity::Warning,
                format!("`{cvar}` has scope {scope}: every rank must write the same value, but this value is computed from variables that may differ between ranks"),
            ));
        }
    } else if matches!(scope, Scope::All | Scope::Group) && !once {
        return Some((
            Severity::Warning,
            format!(
                "`{cvar}` has scope {scope}: a write on one rank changes it for other ranks too"
            ),
        ));
    }
    None
}

fn type_problems(
    cvar: &str,
    info: &CvarInfo,
    index: Option<u32>,
    value: &SetSource,
) -> Vec<(Severity, String)> {
    let mut out = Vec::new();
    match (&info.ty, value) {
        (CvarType::Int | CvarType::Double, SetSource::Text(_)) => out.push((
            Severity::Error,
            format!("`{cvar}` holds a number: write value = ... instead of text = ..."),
        )),
        (CvarType::String, SetSource::Number(_) | SetSource::Numbers(_) | SetSource::Expr(_)) => out.push((
            Severity::Error,
            format!("`{cvar}` holds text: write text = \"...\" instead of value = ..."),
        )),
        (CvarType::String, SetSource::Text(t)) if t.len() >= info.count && info.count > 0 => out.push((
            Severity::Error,
            format!("the text is {} bytes long but `{cvar}` holds at most {} (terminating NUL included)", t.len(), info.count),
        )),
        (CvarType::Enum(items), SetSource::Text(t)) if !items.iter().any(|i| i == t) => out.push((
            Severity::Error,
            format!(
                "`{cvar}` has no item {t:?}; its items are: {}{}",
                items.join(", "),
                suggestion(&closest(t, items.iter().map(String::as_str))).replace("; closest known names", "; closest")
            ),
        )),
        (CvarType::Int | CvarType::Enum(_), SetSource::Number(x)) if x.fract() != 0.0 => out.push((
            Severity::Warning,
            format!("`{cvar}` holds an integer; {x} will be rounded"),
        )),
        _ => {}
    }
    if info.ty != CvarType::String {
        if let Some(i) = index {
            if i as usize >= info.count {
                out.push((
                    Severity::Error,
                    format!("`index = {i}` is out of range: `{cvar}` has {} element(s), indices 0 to {}", info.count, info.count.saturating_sub(1)),
                ));
            }
        }
        if let SetSource::Numbers(v) = value {
            if v.len() != info.count {
                out.push((
                    Severity::Error,
                    format!(
                        "the array has {} values but `{cvar}` has {} element(s)",
                        v.len(),
                        info.count
                    ),
                ));
            }
        }
    }
    out
}
