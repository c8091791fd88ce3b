//! The actions of a policy's `then` and `otherwise` lists: exactly one of
//! `set` (a CVAR and its value: a number, an array, a text or an
//! expression), `setenv` (pre-init only), `note` or `recommend`, each with
//! only the keys it takes.

use std::ops::Range;

use toml::Spanned;

use super::{Compiler, Use};
use crate::expr::parser::parse;
use crate::expr::VarKind;
use crate::policy::action::Action;
use crate::policy::{ActionKind, Phase, SetSource};
use crate::schema::RawAction;

impl Compiler<'_, '_> {
    /// The actions of list `list` (`then` or `otherwise`) of a policy in
    /// `phase`; those with errors are left out after reporting them.
    pub(super) fn actions(
        &mut self,
        raw: Option<&Spanned<Vec<Spanned<RawAction>>>>,
        phase: Phase,
        policy: usize,
        list: &str,
    ) -> Vec<Action> {
        let Some(raw) = raw else {
            return Vec::new();
        };
        raw.get_ref()
            .iter()
            .filter_map(|a| self.action(a, phase, policy, list))
            .collect()
    }

    /// One action; `None` after reporting its errors.
    fn action(
        &mut self,
        a: &Spanned<RawAction>,
        phase: Phase,
        policy: usize,
        list: &str,
    ) -> Option<Action> {
        let span = a.span();
        let r = a.get_ref();
        let location = self.map.location(span.start);
        self.one_kind(r, &span, list)?;
        let kind = if let Some(cvar) = &r.set {
            self.set_action(cvar, r, policy)?
        } else if let Some(name) = &r.setenv {
            self.setenv_action(name, r, phase)?
        } else {
            self.text_action(r)?
        };
        Some(Action {
            kind,
            location,
            last: Vec::new(),
        })
    }

    /// An action has exactly one of `set`, `setenv`, `note`, `recommend`.
    fn one_kind(&mut self, r: &RawAction, span: &Range<usize>, list: &str) -> Option<()> {
        let keys: Vec<&str> = [
            ("set", r.set.is_some()),
            ("setenv", r.setenv.is_some()),
            ("note", r.note.is_some()),
            ("recommend", r.recommend.is_some()),
        ]
        .iter()
        .filter(|(_, present)| *present)
        .map(|(k, _)| *k)
        .collect();
        if keys.len() != 1 {
            let found = if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(" and ")
            };
            self.err(
                span,
                format!("an action in `{list}` must have exactly one of `set`, `setenv`, `note`, `recommend`; found {found}"),
            );
            return None;
        }
        Some(())
    }

    /// Reports `key` (at `present`, if given) as not allowed in a `what`
    /// action.
    fn forbid(&mut self, key: &str, present: Option<Range<usize>>, what: &str) {
        if let Some(s) = present {
            self.err(&s, format!("`{key}` is not allowed in a `{what}` action"));
        }
    }

    /// `setenv` with its `value`: pre-init only, a valid name, a value the
    /// library's grammar accepts.
    fn setenv_action(
        &mut self,
        name: &Spanned<String>,
        r: &RawAction,
        phase: Phase,
    ) -> Option<ActionKind> {
        if phase != Phase::PreInit {
            self.err(
                &name.span(),
                format!(
                    "`setenv` is only allowed in phase \"pre-init\" (this policy is \"{phase}\"): the MPI library reads its environment during MPI_Init, so a variable set later can not take effect"
                ),
            );
            return None;
        }
        self.forbid("text", r.text.as_ref().map(Spanned::span), "setenv");
        self.forbid("index", r.index.as_ref().map(Spanned::span), "setenv");
        let value = match r.value.as_ref().map(|v| (v.span(), v.get_ref())) {
            Some((_, toml::Value::String(s))) => s.clone(),
            Some((_, toml::Value::Integer(n))) => n.to_string(),
            Some((_, toml::Value::Float(x))) => x.to_string(),
            Some((s, _)) => {
                self.err(&s, "the value of an environment variable must be a string");
                return None;
            }
            None => {
                self.err(
                    &name.span(),
                    "`setenv` needs a `value`, e.g. { setenv = \"MV2_USE_SHARP\", value = \"1\" }",
                );
                return None;
            }
        };
        if name.get_ref().is_empty() || name.get_ref().contains(['=', '\0']) {
            self.err(
                &name.span(),
                "an environment variable name must be non-empty and contain no `=`",
            );
            return None;
        }
        // Checked against the library's grammar here, so that `check`
        // and the runtime refuse it alike, before any library sees it.
        if let Err(why) = crate::envvalues::check(name.get_ref(), &value) {
            let span = r.value.as_ref().map_or_else(|| name.span(), Spanned::span);
            self.err(&span, why.to_string());
            return None;
        }
        Some(ActionKind::SetEnv {
            name: name.get_ref().clone(),
            value,
        })
    }

    /// `note` or `recommend`: a text, no other key.
    fn text_action(&mut self, r: &RawAction) -> Option<ActionKind> {
        let (key, text) = match (&r.note, &r.recommend) {
            (Some(n), _) => ("note", n),
            (_, Some(n)) => ("recommend", n),
            _ => return None,
        };
        self.forbid("value", r.value.as_ref().map(Spanned::span), key);
        self.forbid("text", r.text.as_ref().map(Spanned::span), key);
        self.forbid("index", r.index.as_ref().map(Spanned::span), key);
        if key == "note" {
            Some(ActionKind::Note(text.get_ref().clone()))
        } else {
            Some(ActionKind::Recommend(text.get_ref().clone()))
        }
    }

    /// `set` with its `value` or `text`, and `index`.
    fn set_action(
        &mut self,
        cvar: &Spanned<String>,
        r: &RawAction,
        policy: usize,
    ) -> Option<ActionKind> {
        let name = cvar.get_ref();
        let valid_name = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !valid_name {
            self.err(
                &cvar.span(),
                format!("`set` expects a CVAR name (letters, digits, underscores), found {name:?}"),
            );
            return None;
        }
        let index = match &r.index {
            None => None,
            Some(i) => match u32::try_from(*i.get_ref()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.err(&i.span(), "`index` must be a whole number of at least 0");
                    return None;
                }
            },
        };
        let at = self
            .string_base(&cvar.span(), name)
            .unwrap_or(cvar.span().start);
        let slot = self.intern(VarKind::Cvar, name, at, policy, Use::Write);
        let (value, source, reads_vars) = self.set_value(cvar, r, index.is_some(), policy)?;
        if let SetSource::Number(x) = value {
            if !x.is_finite() {
                self.err(&cvar.span(), "the value must be a finite number");
                return None;
            }
        }
        Some(ActionKind::Set {
            cvar: name.clone(),
            slot,
            index,
            value,
            source,
            reads_vars,
        })
    }

    /// The value of a `set`: `value` or `text`, one of them.
    fn set_value(
        &mut self,
        cvar: &Spanned<String>,
        r: &RawAction,
        indexed: bool,
        policy: usize,
    ) -> Option<(SetSource, String, bool)> {
        let name = cvar.get_ref();
        match (&r.value, &r.text) {
            (Some(_), Some(t)) => {
                self.err(&t.span(), "give either `value` (a number, array or expression) or `text` (a string), not both");
                None
            }
            (None, None) => {
                self.err(
                    &cvar.span(),
                    format!("`set = {name:?}` needs a `value` (a number, an array of numbers or an expression) or a `text`"),
                );
                None
            }
            (None, Some(t)) => Some((
                SetSource::Text(t.get_ref().clone()),
                t.get_ref().clone(),
                false,
            )),
            (Some(v), None) => self.number_or_expression(name, v, indexed, policy),
        }
    }

    /// A `value`: a number, a boolean, an array of numbers, or an
    /// expression string; with the text it is logged as, and whether it
    /// reads variables.
    fn number_or_expression(
        &mut self,
        name: &str,
        v: &Spanned<toml::Value>,
        indexed: bool,
        policy: usize,
    ) -> Option<(SetSource, String, bool)> {
        let span = v.span();
        match v.get_ref() {
            toml::Value::Integer(n) => Some((SetSource::Number(*n as f64), n.to_string(), false)),
            toml::Value::Float(x) => Some((SetSource::Number(*x), x.to_string(), false)),
            toml::Value::Boolean(b) => Some((
                SetSource::Number(f64::from(u8::from(*b))),
                b.to_string(),
                false,
            )),
            toml::Value::Array(items) => self.numbers(items, &span, indexed),
            toml::Value::String(s) => self.value_expression(name, s, &span, policy),
            _ => {
                self.err(&span, "`value` must be a number, a boolean, an array of numbers or an expression string");
                None
            }
        }
    }

    /// An array `value`: non-empty, finite numbers, not with `index`.
    fn numbers(
        &mut self,
        items: &[toml::Value],
        span: &Range<usize>,
        indexed: bool,
    ) -> Option<(SetSource, String, bool)> {
        if indexed {
            self.err(
                span,
                "with `index`, `value` must be a single number, not an array",
            );
            return None;
        }
        let nums: Option<Vec<f64>> = items
            .iter()
            .map(|x| match x {
                toml::Value::Integer(n) => Some(*n as f64),
                toml::Value::Float(f) if f.is_finite() => Some(*f),
                _ => None,
            })
            .collect();
        match nums.filter(|n| !n.is_empty()) {
            Some(n) => {
                let src = format!("{:?}", n);
                Some((SetSource::Numbers(n), src, false))
            }
            None => {
                self.err(
                    span,
                    "an array `value` must be a non-empty list of finite numbers",
                );
                None
            }
        }
    }

    /// An expression `value` of CVAR `name`, compiled.
    fn value_expression(
        &mut self,
        name: &str,
        s: &str,
        span: &Range<usize>,
        policy: usize,
    ) -> Option<(SetSource, String, bool)> {
        let context = format!("the value of {name}");
        let (program, reads) = match parse(s) {
            Ok(e) => self.compile(&e, s, span, policy),
            Err(e) => {
                let mut e = e;
                if !e.message.contains("text =") {
                    e.message.push_str(" (a `value` string is an expression; for a text value write `text = \"...\"`)");
                }
                self.expr_err(span, s, &e, &context);
                return None;
            }
        };
        Some((SetSource::Expr(program), s.to_string(), reads))
    }
}
