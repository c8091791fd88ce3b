//! The actions of a policy's branches: what the compiler keeps
//! ([`Action`]), and what the runtime is given to perform
//! ([`ActionView`]), with values computed by the last evaluation.

use super::Skip;
use crate::error::Location;
use crate::expr::program::{EvalError, Program, Undef};
use crate::value::{Env, Value, Values, VarSlot};

/// The value of a `set` action.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SetValue<'a> {
    /// One number (written to the element `index`, or to every element).
    Number(f64),
    /// One number per element.
    Numbers(&'a [f64]),
    /// A text (string CVAR) or the name of an enum item (enum CVAR).
    Text(&'a str),
}

/// An action to perform, with its value computed by the last evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ActionView<'a> {
    /// Write a control variable.
    Set {
        /// CVAR name.
        cvar: &'a str,
        /// Its slot.
        slot: VarSlot,
        /// Element to write, if only one.
        index: Option<u32>,
        /// Value to write. For a computed value: as of the last evaluation.
        value: SetValue<'a>,
        /// The value as written in the file (for logs).
        source: &'a str,
    },
    /// Set an environment variable (phase pre-init only).
    SetEnv {
        /// Variable name.
        name: &'a str,
        /// Its value.
        value: &'a str,
    },
    /// Write a note into the log.
    Note(&'a str),
    /// Write a recommendation into the log (and the end-of-run report).
    Recommend(&'a str),
}

#[derive(Debug, Clone)]
pub(crate) enum SetSource {
    Number(f64),
    Numbers(Vec<f64>),
    Text(String),
    Expr(Program),
}

#[derive(Debug, Clone)]
pub(crate) enum ActionKind {
    Set {
        cvar: String,
        slot: VarSlot,
        index: Option<u32>,
        value: SetSource,
        source: String,
        /// Variables the value expression reads.
        reads_vars: bool,
    },
    SetEnv {
        name: String,
        value: String,
    },
    Note(String),
    Recommend(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Action {
    pub kind: ActionKind,
    pub location: Location,
    /// Values at the last firing of this action's branch (computed values only).
    pub(super) last: Vec<f64>,
}

impl Action {
    pub(super) fn writes(&self) -> bool {
        matches!(
            self.kind,
            ActionKind::Set { .. } | ActionKind::SetEnv { .. }
        )
    }

    pub(super) fn view(&self) -> ActionView<'_> {
        match &self.kind {
            ActionKind::Set {
                cvar,
                slot,
                index,
                value,
                source,
                ..
            } => ActionView::Set {
                cvar,
                slot: *slot,
                index: *index,
                value: match value {
                    SetSource::Number(x) => SetValue::Number(*x),
                    SetSource::Numbers(v) => SetValue::Numbers(v),
                    SetSource::Text(t) => SetValue::Text(t),
                    SetSource::Expr(p) => match p.result() {
                        Ok(Value::Scalar(x)) => SetValue::Number(x),
                        Ok(Value::Array(a)) if a.len() == 1 => SetValue::Number(a[0]),
                        Ok(Value::Array(a)) => SetValue::Numbers(a),
                        Err(_) => SetValue::Number(f64::NAN),
                    },
                },
                source,
            },
            ActionKind::SetEnv { name, value } => ActionView::SetEnv { name, value },
            ActionKind::Note(t) => ActionView::Note(t),
            ActionKind::Recommend(t) => ActionView::Recommend(t),
        }
    }

    /// Computes an expression value; `Ok(changed)` compares with the last firing.
    pub(super) fn compute(&mut self, values: &dyn Values, env: &Env) -> Result<bool, Skip> {
        let ActionKind::Set {
            value: SetSource::Expr(p),
            index,
            ..
        } = &mut self.kind
        else {
            return Ok(false);
        };
        p.run(values, env).map_err(Skip::Error)?;
        let v = p.result().map_err(|u| match u {
            Undef::Missing(s) => Skip::Missing(s),
            Undef::Warmup => Skip::Warmup,
        })?;
        let xs = v.as_slice();
        if index.is_some() && xs.len() != 1 {
            return Err(Skip::Error(EvalError::ArrayForElement { len: xs.len() }));
        }
        if xs.iter().any(|x| !x.is_finite()) {
            return Err(Skip::Error(EvalError::NotFinite));
        }
        Ok(xs != self.last.as_slice())
    }

    pub(super) fn remember(&mut self) {
        if let ActionKind::Set {
            value: SetSource::Expr(p),
            ..
        } = &self.kind
        {
            self.last.clear();
            if let Ok(v) = p.result() {
                self.last.extend_from_slice(v.as_slice());
            }
        }
    }
}
