//! The compiler: a policy file, read by serde as the raw schema of
//! [`crate::schema`] (with spans), to a [`PolicySet`]. Every error is
//! collected with its place in the file, so one run reports them all.
//!
//! This file reads the top level of the file and holds what all steps
//! share: errors, the variables the file names ([`Compiler::intern`]),
//! expressions. [`policy`] compiles one `[[policy]]` table step by step,
//! [`action`] its `then`/`otherwise` actions.

mod action;
mod policy;

use std::collections::HashMap;
use std::ops::Range;

use serde::Deserialize;
use toml::de::{DeString, DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

use super::{CompiledPolicy, PolicySet, Uses, Variable};
use crate::error::{Location, PolicyError, PolicyErrors, SourceMap};
use crate::expr::parser::{parse, Derived, Expr, VarRef};
use crate::expr::program::Program;
use crate::expr::{ExprError, VarKind};
use crate::schema::RawPolicy;
use crate::value::VarSlot;

/// Parses, validates and compiles a policy file (see [`PolicySet::parse`]).
pub(super) fn compile_file(source: &str, file_name: &str) -> Result<PolicySet, PolicyErrors> {
    let map = SourceMap::new(file_name, source);
    let (root, syntax) = DeTable::parse_recoverable(source);
    if !syntax.is_empty() {
        let errors = syntax
            .iter()
            .map(|e| map.error(e.span().map_or(0, |s| s.start), e.message().trim()))
            .collect();
        return Err(PolicyErrors::new(errors));
    }
    let mut c = Compiler::new(&map);
    let mut policies = Vec::new();
    let mut collectives = None;
    for (key, value) in root.get_ref().iter() {
        if key.get_ref().as_ref() == "collectives" {
            collectives = c.collectives(value, source);
        } else {
            c.top_level(key, value, source, &mut policies);
        }
    }
    c.unique_names(&policies);
    if !c.errors.is_empty() {
        return Err(PolicyErrors::new(c.errors));
    }
    Ok(PolicySet {
        file: file_name.to_string(),
        policies,
        variables: c.vars,
        collectives,
    })
}

/// Builds a [`PolicySet`], collecting errors.
pub(super) struct Compiler<'m, 's> {
    map: &'m SourceMap<'s>,
    errors: Vec<PolicyError>,
    vars: Vec<Variable>,
    index: HashMap<(VarKind, String), usize>,
}

/// How a policy uses a variable it names.
enum Use {
    /// In an expression, directly or through `delta`/`rate`/`changes`.
    Read(Option<Derived>),
    /// As the CVAR of a `set` action.
    Write,
}

impl<'m, 's> Compiler<'m, 's> {
    fn new(map: &'m SourceMap<'s>) -> Self {
        Compiler {
            map,
            errors: Vec::new(),
            vars: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// The `[collectives]` table (see [`crate::collectives`]).
    fn collectives(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        source: &str,
    ) -> Option<crate::collectives::CollectiveSpec> {
        let span = value.span();
        if !matches!(value.get_ref(), DeValue::Table(_)) {
            self.err(&span, "`collectives` must be a table: [collectives]");
            return None;
        }
        let raw = match crate::collectives::RawCollectives::deserialize(ValueDeserializer::from(
            value.clone(),
        )) {
            Ok(raw) => raw,
            Err(e) => {
                let at = e.span().unwrap_or(span);
                self.err(&at, serde_message(source, at.start, e.message()));
                return None;
            }
        };
        match crate::collectives::compile(raw, self.map) {
            Ok(spec) => Some(spec),
            Err(errors) => {
                for (at, message) in errors {
                    self.err(&at, format!("in [collectives]: {message}"));
                }
                None
            }
        }
    }

    /// One top-level entry of the file: only `policy`, an array of tables,
    /// each compiled into `policies` (when it has no errors).
    fn top_level(
        &mut self,
        key: &Spanned<DeString<'_>>,
        value: &Spanned<DeValue<'_>>,
        source: &str,
        policies: &mut Vec<CompiledPolicy>,
    ) {
        if key.get_ref().as_ref() != "policy" {
            self.err(
                &key.span(),
                format!(
                    "unknown top-level key `{}`; a policy file holds [[policy]] tables and one [collectives] table",
                    key.get_ref()
                ),
            );
            return;
        }
        let DeValue::Array(items) = value.get_ref() else {
            self.err(
                &key.span(),
                "`policy` must be an array of tables: write each policy as [[policy]], not [policy]",
            );
            return;
        };
        for item in items.iter() {
            let span = item.span();
            if !matches!(item.get_ref(), DeValue::Table(_)) {
                self.err(&span, "expected a policy table");
                continue;
            }
            match RawPolicy::deserialize(ValueDeserializer::from(item.clone())) {
                Ok(raw) => {
                    let index = policies.len();
                    if let Some(p) = self.policy(raw, span, index) {
                        policies.push(p);
                    }
                }
                Err(e) => {
                    let at = e.span().unwrap_or(span);
                    self.err(&at, serde_message(source, at.start, e.message()));
                }
            }
        }
    }

    /// Two policies may not have the same name.
    fn unique_names(&mut self, policies: &[CompiledPolicy]) {
        let mut seen: HashMap<&str, &Location> = HashMap::new();
        for p in policies {
            if let Some(first) = seen.insert(&p.name, &p.location) {
                self.errors.push(PolicyError {
                    location: p.location.clone(),
                    message: format!(
                        "two policies are named {:?} (the other one is at {first}); names must be unique, they identify policies in the logs",
                        p.name
                    ),
                    source_line: String::new(),
                });
            }
        }
    }

    fn err(&mut self, span: &Range<usize>, message: impl Into<String>) {
        self.errors.push(self.map.error_at(span, message));
    }

    /// Offset of an expression string's first character in the file, if
    /// the string is written without escapes (so offsets inside map 1:1).
    fn string_base(&self, span: &Range<usize>, text: &str) -> Option<usize> {
        let raw = self.map.text().get(span.clone())?;
        let quoted = |q: &str| {
            raw.len() == text.len() + 2 * q.len()
                && raw.starts_with(q)
                && raw.ends_with(q)
                && &raw[q.len()..raw.len() - q.len()] == text
        };
        if quoted("\"") || quoted("'") {
            Some(span.start + 1)
        } else if quoted("\"\"\"") || quoted("'''") {
            Some(span.start + 3)
        } else {
            None
        }
    }

    fn expr_err(&mut self, span: &Range<usize>, text: &str, e: &ExprError, context: &str) {
        let at = self
            .string_base(span, text)
            .map_or(span.start, |b| b + e.at);
        self.errors
            .push(self.map.error(at, format!("in {context}: {}", e.message)));
    }

    fn intern(&mut self, kind: VarKind, name: &str, at: usize, policy: usize, how: Use) -> VarSlot {
        let location = self.map.location(at);
        let i = *self
            .index
            .entry((kind, name.to_string()))
            .or_insert_with(|| {
                self.vars.push(Variable {
                    name: name.to_string(),
                    kind,
                    uses: Uses::default(),
                    first_use: location.clone(),
                    used_by: Vec::new(),
                });
                self.vars.len() - 1
            });
        let v = &mut self.vars[i];
        match how {
            Use::Write => v.uses.written = true,
            Use::Read(None) => v.uses.read = true,
            Use::Read(Some(Derived::Delta)) => v.uses.delta = true,
            Use::Read(Some(Derived::Rate)) => v.uses.rate = true,
            Use::Read(Some(Derived::Changes)) => v.uses.changes = true,
        }
        if !v.used_by.iter().any(|(p, _)| *p == policy) {
            v.used_by.push((policy, location));
        }
        VarSlot(i as u32)
    }

    /// Parses and compiles an expression string; `None` after reporting errors.
    fn expression(
        &mut self,
        text: &Spanned<String>,
        policy: usize,
        context: &str,
    ) -> Option<(Program, bool)> {
        let span = text.span();
        let src = text.get_ref();
        let expr = match parse(src) {
            Ok(e) => e,
            Err(e) => {
                self.expr_err(&span, src, &e, context);
                return None;
            }
        };
        Some(self.compile(&expr, src, &span, policy))
    }

    fn compile(
        &mut self,
        expr: &Expr,
        src: &str,
        span: &Range<usize>,
        policy: usize,
    ) -> (Program, bool) {
        let base = self.string_base(span, src);
        let mut reads = false;
        let program = Program::compile(expr, src, &mut |v: &VarRef, d| {
            reads = true;
            let at = base.map_or(span.start, |b| b + v.at);
            self.intern(v.kind, &v.name, at, policy, Use::Read(d))
        });
        (program, reads)
    }
}

/// Adds to a serde error the key it is about (found before `at` on its
/// line) and a hint for the usual mistakes.
fn serde_message(source: &str, at: usize, message: &str) -> String {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        // "unknown field `whne`, expected one of `name`, `ranks`, ..."
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let close = crate::catalogue::closest(field, known.iter().copied());
        if let Some(best) = close.first() {
            return format!("unknown field `{field}` (did you mean `{best}`?){expected}");
        }
        return message.to_string();
    }
    let before = source.get(..at).unwrap_or("");
    let line = before.rsplit('\n').next().unwrap_or("").trim_end();
    let Some(lhs) = line.strip_suffix('=') else {
        return message.to_string();
    };
    let key: String = lhs
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if key.is_empty() {
        return message.to_string();
    }
    let hint = match key.as_str() {
        "then" | "otherwise" if message.contains("expected a sequence") => {
            format!(" (`{key}` is an array of actions: write {key} = [ {{ ... }}, {{ ... }} ])")
        }
        "hysteresis" | "max_writes" | "index" => " (expected a whole number)".to_string(),
        "dry_run" => " (expected true or false)".to_string(),
        "every" | "cooldown" => " (expected a duration string such as \"1s\")".to_string(),
        _ => String::new(),
    };
    format!("in `{key}`: {message}{hint}")
}
