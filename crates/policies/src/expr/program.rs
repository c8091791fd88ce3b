//! Compiled expressions: a flat list of operations in evaluation order, one
//! preallocated register per operation, evaluated without heap allocation
//! once the registers have grown to the sizes of the arrays they hold.

use super::parser::{BinOp, Builtin, Derived, Expr, Reduce, UnOp, VarRef};
use crate::value::{Env, Value, Values, VarSlot};

/// An error while evaluating an expression. Never a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// An element-wise operation on two arrays of different lengths.
    #[error(
        "arrays of different lengths ({left} and {right}) at column {column} of the expression"
    )]
    LengthMismatch {
        /// Length of the left operand.
        left: usize,
        /// Length of the right operand.
        right: usize,
        /// 1-based column of the operator in the expression.
        column: u32,
    },
    /// `x[i]` with `i` past the end of `x`.
    #[error("element index {index} is out of range for {len} value(s) at column {column} of the expression")]
    IndexOutOfRange {
        /// The index written in the expression.
        index: u32,
        /// Number of elements the value had.
        len: usize,
        /// 1-based column of the `[` in the expression.
        column: u32,
    },
    /// A `when` condition that evaluates to an array of more than one value.
    #[error("the condition is an array of {len} values; wrap it in any(...) or all(...)")]
    ArrayCondition {
        /// Length of the array.
        len: usize,
    },
    /// A computed CVAR value that is NaN or infinite.
    #[error("the value to write is not a finite number (NaN or infinity)")]
    NotFinite,
    /// A computed value for one element (`index = N`) that is an array.
    #[error(
        "the value for one element (`index`) is an array of {len} values, expected a single number"
    )]
    ArrayForElement {
        /// Length of the array.
        len: usize,
    },
}

/// Why a value is not available yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undef {
    /// The value source had no value for this slot.
    Missing(VarSlot),
    /// `delta`/`rate` before their second sample.
    Warmup,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Scalar,
    Array,
    Undef(Undef),
}

#[derive(Debug, Clone)]
struct Reg {
    shape: Shape,
    x: f64,
    buf: Vec<f64>,
}

/// An operand after length-1 arrays have been turned into scalars.
enum Operand<'a> {
    S(f64),
    A(&'a [f64]),
}

impl Reg {
    fn set_scalar(&mut self, x: f64) {
        self.shape = Shape::Scalar;
        self.x = x;
    }

    fn set_array(&mut self, it: impl Iterator<Item = f64>) {
        self.buf.clear();
        self.buf.extend(it);
        self.shape = Shape::Array;
    }

    fn set_value(&mut self, v: Value<'_>) {
        match v {
            Value::Scalar(x) => self.set_scalar(x),
            Value::Array(a) => {
                self.buf.clear();
                self.buf.extend_from_slice(a);
                self.shape = Shape::Array;
            }
        }
    }

    fn operand(&self) -> Result<Operand<'_>, Undef> {
        match self.shape {
            Shape::Undef(u) => Err(u),
            Shape::Scalar => Ok(Operand::S(self.x)),
            Shape::Array if self.buf.len() == 1 => Ok(Operand::S(self.buf[0])),
            Shape::Array => Ok(Operand::A(&self.buf)),
        }
    }

    fn slice(&self) -> &[f64] {
        match self.shape {
            Shape::Scalar => std::slice::from_ref(&self.x),
            _ => &self.buf,
        }
    }

    fn value(&self) -> Option<Value<'_>> {
        match self.shape {
            Shape::Scalar => Some(Value::Scalar(self.x)),
            Shape::Array => Some(Value::Array(&self.buf)),
            Shape::Undef(_) => None,
        }
    }
}

/// Previous sample of a variable, for `delta`, `rate` and `changes`.
#[derive(Debug, Clone, Default)]
struct History {
    have: bool,
    prev: Vec<f64>,
    time: f64,
    counts: Vec<f64>,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Num(f64),
    Builtin(Builtin),
    Var(VarSlot),
    Unary(UnOp, usize),
    Binary(BinOp, usize, usize, u32),
    Reduce(Reduce, usize),
    Derived(Derived, VarSlot, usize),
    Index(usize, u32, u32),
}

/// Truth of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Truth {
    True,
    False,
    Undef(Undef),
}

/// A compiled expression with its registers and per-variable history.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    ops: Vec<Op>,
    regs: Vec<Reg>,
    history: Vec<History>,
    /// Audit labels: (text, op index) of each distinct variable read.
    inputs: Vec<(String, usize)>,
}

/// Truthiness: non-zero and not NaN.
pub(crate) fn truthy(x: f64) -> bool {
    x != 0.0 && !x.is_nan()
}

fn b2f(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

pub(crate) fn bin_fn(op: BinOp) -> fn(f64, f64) -> f64 {
    match op {
        BinOp::Add => |a, b| a + b,
        BinOp::Sub => |a, b| a - b,
        BinOp::Mul => |a, b| a * b,
        BinOp::Div => |a, b| a / b,
        BinOp::Rem => |a, b| a % b,
        BinOp::Eq => |a, b| b2f(a == b),
        BinOp::Ne => |a, b| b2f(a != b),
        BinOp::Lt => |a, b| b2f(a < b),
        BinOp::Le => |a, b| b2f(a <= b),
        BinOp::Gt => |a, b| b2f(a > b),
        BinOp::Ge => |a, b| b2f(a >= b),
        BinOp::And => |a, b| b2f(truthy(a) && truthy(b)),
        BinOp::Or => |a, b| b2f(truthy(a) || truthy(b)),
        BinOp::Min => f64::min,
        BinOp::Max => f64::max,
    }
}

pub(crate) fn un_fn(op: UnOp) -> fn(f64) -> f64 {
    match op {
        UnOp::Neg => |a| -a,
        UnOp::Not => |a| b2f(!truthy(a)),
        UnOp::Abs => f64::abs,
        UnOp::Floor => f64::floor,
        UnOp::Ceil => f64::ceil,
        UnOp::Round => f64::round,
    }
}

fn reduce(r: Reduce, xs: &[f64]) -> f64 {
    match r {
        Reduce::Any => b2f(xs.iter().any(|&x| truthy(x))),
        Reduce::All => b2f(xs.iter().all(|&x| truthy(x))),
        Reduce::Count => xs.iter().filter(|&&x| truthy(x)).count() as f64,
        Reduce::Sum => xs.iter().sum(),
        Reduce::Mean => xs.iter().sum::<f64>() / xs.len() as f64,
        Reduce::Min => xs.iter().copied().reduce(f64::min).unwrap_or(f64::NAN),
        Reduce::Max => xs.iter().copied().reduce(f64::max).unwrap_or(f64::NAN),
        Reduce::Len => xs.len() as f64,
    }
}

/// `false && undefined` is false and `true || undefined` is true; any other
/// operation on an undefined value is undefined.
fn kleene(op: BinOp, known: &Reg) -> Option<f64> {
    let Ok(Operand::S(x)) = known.operand() else {
        return None;
    };
    match op {
        BinOp::And if !truthy(x) => Some(0.0),
        BinOp::Or if truthy(x) => Some(1.0),
        _ => None,
    }
}

fn column(src: &str, at: usize) -> u32 {
    let at = at.min(src.len());
    let chars = src.char_indices().take_while(|(i, _)| *i < at).count();
    u32::try_from(chars + 1).unwrap_or(u32::MAX)
}

impl Program {
    /// Compiles `expr` (parsed from `src`); `resolve` assigns a slot to each
    /// variable reference.
    pub(crate) fn compile(
        expr: &Expr,
        src: &str,
        resolve: &mut dyn FnMut(&VarRef, Option<Derived>) -> VarSlot,
    ) -> Program {
        let mut p = Program {
            ops: Vec::new(),
            regs: Vec::new(),
            history: Vec::new(),
            inputs: Vec::new(),
        };
        p.lower(expr, src, resolve);
        p.regs = vec![
            Reg {
                shape: Shape::Scalar,
                x: 0.0,
                buf: Vec::new(),
            };
            p.ops.len()
        ];
        p
    }

    fn push(&mut self, op: Op) -> usize {
        self.ops.push(op);
        self.ops.len() - 1
    }

    fn input(&mut self, label: String, op: usize) {
        if !self.inputs.iter().any(|(l, _)| *l == label) {
            self.inputs.push((label, op));
        }
    }

    fn lower(
        &mut self,
        e: &Expr,
        src: &str,
        resolve: &mut dyn FnMut(&VarRef, Option<Derived>) -> VarSlot,
    ) -> usize {
        match e {
            Expr::Num(x) => self.push(Op::Num(*x)),
            Expr::Builtin(b) => self.push(Op::Builtin(*b)),
            Expr::Var(v) => {
                let slot = resolve(v, None);
                let i = self.push(Op::Var(slot));
                self.input(v.name.clone(), i);
                i
            }
            Expr::Derived(d, v) => {
                let slot = resolve(v, Some(*d));
                self.history.push(History::default());
                let i = self.push(Op::Derived(*d, slot, self.history.len() - 1));
                self.input(format!("{}({})", d.name(), v.name), i);
                i
            }
            Expr::Unary(op, a) => {
                let a = self.lower(a, src, resolve);
                self.push(Op::Unary(*op, a))
            }
            Expr::Reduce(r, a) => {
                let a = self.lower(a, src, resolve);
                self.push(Op::Reduce(*r, a))
            }
            Expr::Index(a, index, at) => {
                let a = self.lower(a, src, resolve);
                self.push(Op::Index(a, *index, column(src, *at)))
            }
            Expr::Binary(op, a, b, at) => {
                let a = self.lower(a, src, resolve);
                let b = self.lower(b, src, resolve);
                self.push(Op::Binary(*op, a, b, column(src, *at)))
            }
        }
    }

    /// Evaluates every operation once. Allocation-free once each register
    /// has held an array of its current length.
    pub(crate) fn run(&mut self, values: &dyn Values, env: &Env) -> Result<(), EvalError> {
        let time = env.elapsed.as_secs_f64();
        for i in 0..self.ops.len() {
            let (before, rest) = self.regs.split_at_mut(i);
            let out = &mut rest[0];
            match self.ops[i] {
                Op::Num(x) => out.set_scalar(x),
                Op::Builtin(Builtin::Rank) => out.set_scalar(f64::from(env.rank)),
                Op::Builtin(Builtin::Size) => out.set_scalar(f64::from(env.size)),
                Op::Builtin(Builtin::Time) => out.set_scalar(time),
                Op::Var(slot) => match values.get(slot) {
                    Some(v) => out.set_value(v),
                    None => out.shape = Shape::Undef(Undef::Missing(slot)),
                },
                Op::Unary(op, a) => {
                    let f = un_fn(op);
                    match before[a].operand() {
                        Err(u) => out.shape = Shape::Undef(u),
                        Ok(Operand::S(x)) => out.set_scalar(f(x)),
                        Ok(Operand::A(xs)) => out.set_array(xs.iter().map(|&x| f(x))),
                    }
                }
                Op::Reduce(r, a) => {
                    let a = &before[a];
                    match a.shape {
                        Shape::Undef(u) => out.shape = Shape::Undef(u),
                        _ => out.set_scalar(reduce(r, a.slice())),
                    }
                }
                Op::Index(a, index, column) => {
                    let a = &before[a];
                    match a.shape {
                        Shape::Undef(u) => out.shape = Shape::Undef(u),
                        _ => {
                            let xs = a.slice();
                            match xs.get(index as usize) {
                                Some(&x) => out.set_scalar(x),
                                None => {
                                    return Err(EvalError::IndexOutOfRange {
                                        index,
                                        len: xs.len(),
                                        column,
                                    })
                                }
                            }
                        }
                    }
                }
                Op::Binary(op, a, b, column) => {
                    let (a, b) = (&before[a], &before[b]);
                    let (x, y) = match (a.operand(), b.operand()) {
                        (Err(u), Err(_)) => {
                            out.shape = Shape::Undef(u);
                            continue;
                        }
                        (Err(u), Ok(_)) | (Ok(_), Err(u)) => {
                            let known = if matches!(a.shape, Shape::Undef(_)) {
                                b
                            } else {
                                a
                            };
                            match kleene(op, known) {
                                Some(v) => out.set_scalar(v),
                                None => out.shape = Shape::Undef(u),
                            }
                            continue;
                        }
                        (Ok(x), Ok(y)) => (x, y),
                    };
                    let f = bin_fn(op);
                    match (x, y) {
                        (Operand::S(x), Operand::S(y)) => out.set_scalar(f(x, y)),
                        (Operand::S(x), Operand::A(ys)) => {
                            out.set_array(ys.iter().map(|&y| f(x, y)));
                        }
                        (Operand::A(xs), Operand::S(y)) => {
                            out.set_array(xs.iter().map(|&x| f(x, y)));
                        }
                        (Operand::A(xs), Operand::A(ys)) => {
                            if xs.len() != ys.len() {
                                return Err(EvalError::LengthMismatch {
                                    left: xs.len(),
                                    right: ys.len(),
                                    column,
                                });
                            }
                            out.set_array(xs.iter().zip(ys).map(|(&x, &y)| f(x, y)));
                        }
                    }
                }
                Op::Derived(d, slot, h) => {
                    let Some(v) = values.get(slot) else {
                        out.shape = Shape::Undef(Undef::Missing(slot));
                        continue;
                    };
                    derive(d, v, time, &mut self.history[h], out);
                }
            }
        }
        Ok(())
    }

    fn root(&self) -> Option<&Reg> {
        self.regs.last()
    }

    /// The truth of the last evaluation. An array of one value counts as a
    /// scalar; NaN is false.
    pub(crate) fn truth(&self) -> Result<Truth, EvalError> {
        let Some(r) = self.root() else {
            return Ok(Truth::True);
        };
        match r.operand() {
            Err(u) => Ok(Truth::Undef(u)),
            Ok(Operand::S(x)) => Ok(if truthy(x) { Truth::True } else { Truth::False }),
            Ok(Operand::A(xs)) => Err(EvalError::ArrayCondition { len: xs.len() }),
        }
    }

    /// The value of the last evaluation, or why it is undefined.
    pub(crate) fn result(&self) -> Result<Value<'_>, Undef> {
        match self.root() {
            None => Ok(Value::Scalar(f64::NAN)),
            Some(r) => match r.shape {
                Shape::Undef(u) => Err(u),
                _ => Ok(r.value().unwrap_or(Value::Scalar(f64::NAN))),
            },
        }
    }

    /// Each distinct variable (or derived metric) the expression reads, with
    /// its value at the last evaluation (`None` if it had none).
    pub(crate) fn inputs(&self) -> impl Iterator<Item = (&str, Option<Value<'_>>)> + '_ {
        self.inputs
            .iter()
            .map(|(label, i)| (label.as_str(), self.regs.get(*i).and_then(Reg::value)))
    }
}

fn derive(d: Derived, v: Value<'_>, time: f64, h: &mut History, out: &mut Reg) {
    let cur = v.as_slice();
    let scalar = matches!(v, Value::Scalar(_));
    let fresh = !h.have || h.prev.len() != cur.len();
    if fresh {
        h.have = true;
        h.counts.clear();
        h.counts.resize(cur.len(), 0.0);
    }
    match d {
        Derived::Delta | Derived::Rate if fresh => out.shape = Shape::Undef(Undef::Warmup),
        Derived::Delta | Derived::Rate => {
            let dt = if d == Derived::Rate {
                time - h.time
            } else {
                1.0
            };
            if scalar {
                out.set_scalar((cur[0] - h.prev[0]) / dt);
            } else {
                out.set_array(cur.iter().zip(&h.prev).map(|(&c, &p)| (c - p) / dt));
            }
        }
        Derived::Changes => {
            if !fresh {
                for ((n, &c), &p) in h.counts.iter_mut().zip(cur).zip(&h.prev) {
                    if c.to_bits() != p.to_bits() {
                        *n += 1.0;
                    }
                }
            }
            if scalar {
                out.set_scalar(h.counts[0]);
            } else {
                out.set_array(h.counts.iter().copied());
            }
        }
    }
    h.prev.clear();
    h.prev.extend_from_slice(cur);
    h.time = time;
}

#[cfg(test)]
mod tests {
    use super::super::parser::parse;
    use super::*;
    use std::collections::HashMap;
    use std::time::Duration;

    /// Values by name; slots are assigned in order of first reference.
    #[derive(Default)]
    struct Vals {
        names: Vec<String>,
        vals: HashMap<String, Vec<f64>>,
        scalars: HashMap<String, f64>,
    }

    impl Values for Vals {
        fn get(&self, slot: VarSlot) -> Option<Value<'_>> {
            let name = self.names.get(slot.index())?;
            if let Some(x) = self.scalars.get(name) {
                return Some(Value::Scalar(*x));
            }
            self.vals.get(name).map(|v| Value::Array(v))
        }
    }

    fn compile(src: &str, vals: &mut Vals) -> Program {
        let e = parse(src).unwrap();
        Program::compile(&e, src, &mut |v, _| {
            let i = vals
                .names
                .iter()
                .position(|n| *n == v.name)
                .unwrap_or_else(|| {
                    vals.names.push(v.name.clone());
                    vals.names.len() - 1
                });
            VarSlot(i as u32)
        })
    }

    fn env(t: f64) -> Env {
        Env::new(3, 8, Duration::from_secs_f64(t))
    }

    fn eval(src: &str, vals: &mut Vals) -> Result<Vec<f64>, EvalError> {
        let mut p = compile(src, vals);
        p.run(vals, &env(0.0))?;
        Ok(p.result()
            .map(|v| v.as_slice().to_vec())
            .unwrap_or_default())
    }

    fn arrays(pairs: &[(&str, &[f64])]) -> Vals {
        let mut v = Vals::default();
        for (n, a) in pairs {
            v.vals.insert(n.to_string(), a.to_vec());
        }
        v
    }

    #[test]
    fn arithmetic_and_broadcast() {
        let mut v = arrays(&[
            ("a", &[64.0, 32.0, 32.0, 16.0]),
            ("b", &[60.0, 5.0, 2.0, 1.0]),
        ]);
        assert_eq!(eval("a - b", &mut v).unwrap(), vec![4.0, 27.0, 30.0, 15.0]);
        assert_eq!(
            eval("a - b > 10", &mut v).unwrap(),
            vec![0.0, 1.0, 1.0, 1.0]
        );
        assert_eq!(eval("any(a - b > 10)", &mut v).unwrap(), vec![1.0]);
        assert_eq!(eval("all(a - b > 10)", &mut v).unwrap(), vec![0.0]);
        assert_eq!(eval("count(a - b > 10)", &mut v).unwrap(), vec![3.0]);
        assert_eq!(eval("sum(b)", &mut v).unwrap(), vec![68.0]);
        assert_eq!(eval("mean(b)", &mut v).unwrap(), vec![17.0]);
        assert_eq!(
            eval("min(b) + max(b) + len(b)", &mut v).unwrap(),
            vec![65.0]
        );
        assert_eq!(
            eval("max(b, 4)", &mut v).unwrap(),
            vec![60.0, 5.0, 4.0, 4.0]
        );
        assert_eq!(eval("2 * b[0] + 1", &mut v).unwrap(), vec![121.0]);
        assert_eq!(
            eval("abs(b - 10)", &mut v).unwrap(),
            vec![50.0, 5.0, 8.0, 9.0]
        );
        assert_eq!(
            eval("round(b / 4)", &mut v).unwrap(),
            vec![15.0, 1.0, 1.0, 0.0]
        );
        assert_eq!(eval("rank * 10 + size", &mut v).unwrap(), vec![38.0]);
        assert_eq!(eval("7 % 4 + 64K / 1K", &mut v).unwrap(), vec![67.0]);
        assert_eq!(eval("!(1 < 2) || not 0", &mut v).unwrap(), vec![1.0]);
        assert_eq!(eval("1 and 0", &mut v).unwrap(), vec![0.0]);
    }

    #[test]
    fn errors_not_panics() {
        let mut v = arrays(&[("a", &[1.0, 2.0]), ("b", &[1.0, 2.0, 3.0]), ("one", &[5.0])]);
        assert_eq!(
            eval("a + b", &mut v),
            Err(EvalError::LengthMismatch {
                left: 2,
                right: 3,
                column: 3
            })
        );
        assert_eq!(
            eval("a[2]", &mut v),
            Err(EvalError::IndexOutOfRange {
                index: 2,
                len: 2,
                column: 2
            })
        );
        // a one-element array behaves like a scalar
        assert_eq!(eval("a + one", &mut v).unwrap(), vec![6.0, 7.0]);
        assert_eq!(eval("1 / 0", &mut v).unwrap(), vec![f64::INFINITY]);
        assert!(eval("0 / 0", &mut v).unwrap()[0].is_nan());
        assert!(eval("1 % 0", &mut v).unwrap()[0].is_nan());
    }

    #[test]
    fn nan_is_false_and_missing_is_undefined() {
        let mut v = Vals::default();
        let mut p = compile("0/0", &mut v);
        p.run(&v, &env(0.0)).unwrap();
        assert_eq!(p.truth(), Ok(Truth::False));
        let mut p = compile("0/0 > 1 || 0/0 <= 1", &mut v);
        p.run(&v, &env(0.0)).unwrap();
        assert_eq!(p.truth(), Ok(Truth::False));
        let mut p = compile("x > 1", &mut v);
        p.run(&v, &env(0.0)).unwrap();
        assert_eq!(p.truth(), Ok(Truth::Undef(Undef::Missing(VarSlot(0)))));
        // Kleene logic: a known operand can decide
        let mut p = compile("time > 60 && x > 1", &mut v);
        p.run(&v, &env(1.0)).unwrap();
        assert_eq!(p.truth(), Ok(Truth::False));
        let mut p = compile("x > 1 || time < 60", &mut v);
        p.run(&v, &env(1.0)).unwrap();
        assert_eq!(p.truth(), Ok(Truth::True));
        p.run(&v, &env(100.0)).unwrap();
        assert!(matches!(p.truth(), Ok(Truth::Undef(_))));
        let mut v = arrays(&[("a", &[1.0, 2.0])]);
        let mut p = compile("a > 1", &mut v);
        p.run(&v, &env(0.0)).unwrap();
        assert_eq!(p.truth(), Err(EvalError::ArrayCondition { len: 2 }));
    }

    #[test]
    fn delta_rate_changes() {
        let mut v = Vals::default();
        v.scalars.insert("c".into(), 10.0);
        v.vals.insert("w".into(), vec![1.0, 5.0]);
        let mut p = compile("delta(c) + rate(c) * 0", &mut v);
        p.run(&v, &env(0.0)).unwrap();
        assert_eq!(p.result(), Err(Undef::Warmup));
        v.scalars.insert("c".into(), 25.0);
        p.run(&v, &env(2.0)).unwrap();
        assert_eq!(p.result(), Ok(Value::Scalar(15.0)));
        let mut p = compile("rate(c)", &mut v);
        p.run(&v, &env(0.0)).unwrap();
        v.scalars.insert("c".into(), 35.0);
        p.run(&v, &env(2.0)).unwrap();
        assert_eq!(p.result(), Ok(Value::Scalar(5.0)));
        let labels: Vec<_> = p
            .inputs()
            .map(|(l, v)| (l.to_string(), v.map(|v| v.to_string())))
            .collect();
        assert_eq!(labels, vec![("rate(c)".to_string(), Some("5".to_string()))]);

        let mut p = compile("changes(w)", &mut v);
        p.run(&v, &env(0.0)).unwrap();
        assert_eq!(p.result(), Ok(Value::Array(&[0.0, 0.0])));
        v.vals.insert("w".into(), vec![1.0, 6.0]);
        p.run(&v, &env(1.0)).unwrap();
        v.vals.insert("w".into(), vec![1.0, 7.0]);
        p.run(&v, &env(2.0)).unwrap();
        assert_eq!(p.result(), Ok(Value::Array(&[0.0, 2.0])));
        // a length change restarts the history
        v.vals.insert("w".into(), vec![1.0, 7.0, 0.0]);
        p.run(&v, &env(3.0)).unwrap();
        assert_eq!(p.result(), Ok(Value::Array(&[0.0, 0.0, 0.0])));
    }
}
