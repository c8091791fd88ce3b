//! Recursive-descent parser from tokens to [`Expr`].

use super::lexer::{lex, Tok, Token, VarKind};
use super::ExprError;

/// Deepest nesting of parentheses and unary operators accepted.
const MAX_DEPTH: u32 = 48;

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    /// two-argument `min(a, b)`, element-wise
    Min,
    /// two-argument `max(a, b)`, element-wise
    Max,
}

/// Unary operators and element-wise one-argument functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Not,
    Abs,
    Floor,
    Ceil,
    Round,
}

/// One-argument functions that reduce an array to a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reduce {
    Any,
    All,
    Count,
    Sum,
    Mean,
    Min,
    Max,
    Len,
}

/// Functions over the history of one variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Derived {
    Delta,
    Rate,
    Changes,
}

impl Derived {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Derived::Delta => "delta",
            Derived::Rate => "rate",
            Derived::Changes => "changes",
        }
    }
}

/// Built-in values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Rank,
    Size,
    Time,
}

/// A variable reference: how it was written, its name, where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VarRef {
    pub kind: VarKind,
    pub name: String,
    pub at: usize,
}

/// Expression tree. `at` is the byte offset of the node's operator or start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Num(f64),
    Builtin(Builtin),
    Var(VarRef),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>, usize),
    Reduce(Reduce, Box<Expr>),
    Derived(Derived, VarRef),
    Index(Box<Expr>, u32, usize),
}

impl Expr {
    /// Calls `f` on every variable reference, in source order.
    pub(crate) fn visit_vars(&self, f: &mut dyn FnMut(&VarRef, Option<Derived>)) {
        match self {
            Expr::Num(_) | Expr::Builtin(_) => {}
            Expr::Var(v) => f(v, None),
            Expr::Derived(d, v) => f(v, Some(*d)),
            Expr::Unary(_, a) | Expr::Reduce(_, a) | Expr::Index(a, _, _) => a.visit_vars(f),
            Expr::Binary(_, a, b, _) => {
                a.visit_vars(f);
                b.visit_vars(f);
            }
        }
    }
}

const FUNCTIONS: &str =
    "any, all, count, sum, mean, min, max, len, abs, floor, ceil, round, delta, rate, changes";

/// Parses an expression.
pub(crate) fn parse(src: &str) -> Result<Expr, ExprError> {
    let tokens = lex(src)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let e = p.or()?;
    let t = p.peek();
    if t.tok != Tok::Eof {
        let hint = match t.tok {
            Tok::RParen => "unbalanced `)`",
            Tok::Ident(_) | Tok::Num(_) | Tok::Prefixed(..) | Tok::LParen => {
                "expected an operator between two operands"
            }
            _ => "expected an operator",
        };
        return Err(ExprError::new(
            t.at,
            format!("{hint}, found {}", t.tok.describe()),
        ));
    }
    Ok(e)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: u32,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(&self.peek().tok, Tok::Ident(s) if s == w)
    }

    fn enter(&mut self, at: usize) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ExprError::new(
                at,
                format!("expression nested too deeply (more than {MAX_DEPTH} levels)"),
            ));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.and()?;
        while self.peek().tok == Tok::OrOr || self.is_word("or") {
            let at = self.bump().at;
            let rhs = self.and()?;
            lhs = Expr::Binary(BinOp::Or, Box::new(lhs), Box::new(rhs), at);
        }
        Ok(lhs)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.cmp()?;
        while self.peek().tok == Tok::AndAnd || self.is_word("and") {
            let at = self.bump().at;
            let rhs = self.cmp()?;
            lhs = Expr::Binary(BinOp::And, Box::new(lhs), Box::new(rhs), at);
        }
        Ok(lhs)
    }

    fn cmp_op(&self) -> Option<BinOp> {
        Some(match self.peek().tok {
            Tok::EqEq => BinOp::Eq,
            Tok::Ne => BinOp::Ne,
            Tok::Lt => BinOp::Lt,
            Tok::Le => BinOp::Le,
            Tok::Gt => BinOp::Gt,
            Tok::Ge => BinOp::Ge,
            _ => return None,
        })
    }

    fn cmp(&mut self) -> Result<Expr, ExprError> {
        let lhs = self.add()?;
        let Some(op) = self.cmp_op() else {
            return Ok(lhs);
        };
        let at = self.bump().at;
        let rhs = self.add()?;
        if self.cmp_op().is_some() {
            return Err(ExprError::new(
                self.peek().at,
                "comparisons can not be chained: write `a < b && b < c`",
            ));
        }
        Ok(Expr::Binary(op, Box::new(lhs), Box::new(rhs), at))
    }

    fn add(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.mul()?;
        loop {
            let op = match self.peek().tok {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                _ => return Ok(lhs),
            };
            let at = self.bump().at;
            let rhs = self.mul()?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs), at);
        }
    }

    fn mul(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek().tok {
                Tok::Star => BinOp::Mul,
                Tok::Slash => BinOp::Div,
                Tok::Percent => BinOp::Rem,
                _ => return Ok(lhs),
            };
            let at = self.bump().at;
            let rhs = self.unary()?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs), at);
        }
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        let op = if self.peek().tok == Tok::Minus {
            UnOp::Neg
        } else if self.peek().tok == Tok::Bang || self.is_word("not") {
            UnOp::Not
        } else {
            return self.postfix();
        };
        let at = self.bump().at;
        self.enter(at)?;
        let arg = self.unary()?;
        self.depth -= 1;
        Ok(match (op, arg) {
            (UnOp::Neg, Expr::Num(x)) => Expr::Num(-x),
            (op, arg) => Expr::Unary(op, Box::new(arg)),
        })
    }

    fn postfix(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.primary()?;
        while self.peek().tok == Tok::LBracket {
            let at = self.bump().at;
            let t = self.bump();
            let index = match t.tok {
                Tok::Num(x) if x >= 0.0 && x.fract() == 0.0 && x <= f64::from(u32::MAX) => x as u32,
                other => {
                    return Err(ExprError::new(
                        t.at,
                        format!(
                            "expected an element index (a whole number such as 0), found {}",
                            other.describe()
                        ),
                    ))
                }
            };
            self.expect(Tok::RBracket, "`]` after the element index")?;
            e = Expr::Index(Box::new(e), index, at);
        }
        Ok(e)
    }

    fn expect(&mut self, tok: Tok, what: &str) -> Result<(), ExprError> {
        let t = self.bump();
        if t.tok == tok {
            Ok(())
        } else {
            Err(ExprError::new(
                t.at,
                format!("expected {what}, found {}", t.tok.describe()),
            ))
        }
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        let t = self.bump();
        match t.tok {
            Tok::Num(x) => Ok(Expr::Num(x)),
            Tok::LParen => {
                self.enter(t.at)?;
                let e = self.or()?;
                self.depth -= 1;
                self.expect(Tok::RParen, "`)`")?;
                Ok(e)
            }
            Tok::Prefixed(kind, name) => Ok(Expr::Var(VarRef {
                kind,
                name,
                at: t.at,
            })),
            Tok::Ident(word) => {
                if self.peek().tok == Tok::LParen {
                    return self.call(&word, t.at);
                }
                Ok(match word.as_str() {
                    "true" => Expr::Num(1.0),
                    "false" => Expr::Num(0.0),
                    "rank" => Expr::Builtin(Builtin::Rank),
                    "size" => Expr::Builtin(Builtin::Size),
                    "time" => Expr::Builtin(Builtin::Time),
                    "and" | "or" | "not" => {
                        return Err(ExprError::new(
                            t.at,
                            format!("expected an operand, found keyword `{word}`"),
                        ))
                    }
                    _ => Expr::Var(var_ref(word, t.at)),
                })
            }
            other => Err(ExprError::new(
                t.at,
                format!(
                    "expected an operand (a number, a variable or a function call), found {}",
                    other.describe()
                ),
            )),
        }
    }

    fn call(&mut self, name: &str, at: usize) -> Result<Expr, ExprError> {
        let paren = self.bump().at;
        self.enter(paren)?;
        let mut args = Vec::new();
        let mut arg_starts = Vec::new();
        if self.peek().tok != Tok::RParen {
            loop {
                arg_starts.push(self.peek().at);
                args.push(self.or()?);
                if self.peek().tok == Tok::Comma {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        self.expect(Tok::RParen, "`,` or `)` in the argument list")?;
        self.depth -= 1;
        let arity = |n: usize| -> Result<(), ExprError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(ExprError::new(
                    at,
                    format!(
                        "{name}() takes {n} argument{}, found {}",
                        if n == 1 { "" } else { "s" },
                        args.len()
                    ),
                ))
            }
        };
        let reduce = |r| -> Result<Expr, ExprError> {
            arity(1)?;
            Ok(Expr::Reduce(r, Box::new(args[0].clone())))
        };
        let unary = |u| -> Result<Expr, ExprError> {
            arity(1)?;
            Ok(Expr::Unary(u, Box::new(args[0].clone())))
        };
        match name {
            "any" => reduce(Reduce::Any),
            "all" => reduce(Reduce::All),
            "count" => reduce(Reduce::Count),
            "sum" => reduce(Reduce::Sum),
            "mean" => reduce(Reduce::Mean),
            "len" => reduce(Reduce::Len),
            "abs" => unary(UnOp::Abs),
            "floor" => unary(UnOp::Floor),
            "ceil" => unary(UnOp::Ceil),
            "round" => unary(UnOp::Round),
            "min" | "max" => match args.len() {
                1 => reduce(if name == "min" { Reduce::Min } else { Reduce::Max }),
                2 => {
                    let op = if name == "min" { BinOp::Min } else { BinOp::Max };
                    let mut it = args.into_iter();
                    let (a, b) = (it.next(), it.next());
                    match (a, b) {
                        (Some(a), Some(b)) => Ok(Expr::Binary(op, Box::new(a), Box::new(b), at)),
                        _ => Err(ExprError::new(at, format!("{name}() takes 1 or 2 arguments"))),
                    }
                }
                n => Err(ExprError::new(
                    at,
                    format!("{name}() takes 1 argument (reduce an array) or 2 (element-wise), found {n}"),
                )),
            },
            "delta" | "rate" | "changes" => {
                arity(1)?;
                let d = match name {
                    "delta" => Derived::Delta,
                    "rate" => Derived::Rate,
                    _ => Derived::Changes,
                };
                match &args[0] {
                    Expr::Var(v) => Ok(Expr::Derived(d, v.clone())),
                    _ => Err(ExprError::new(
                        arg_starts[0],
                        format!("{name}() takes a variable name, such as {name}(mv2_vbuf_allocated), not an expression"),
                    )),
                }
            }
            _ => Err(ExprError::new(
                at,
                format!("unknown function `{name}`; expected one of {FUNCTIONS}"),
            )),
        }
    }
}

fn var_ref(name: String, at: usize) -> VarRef {
    let kind = if name.starts_with("tool.") {
        VarKind::Tool
    } else if name.starts_with("MPIR_CVAR_") {
        VarKind::Cvar
    } else {
        VarKind::Auto
    };
    VarRef { kind, name, at }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Expr {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    fn err(s: &str) -> ExprError {
        parse(s).expect_err(s)
    }

    #[test]
    fn precedence() {
        let e = p("1 + 2 * 3 > 4 && !b || c");
        let Expr::Binary(BinOp::Or, lhs, _, _) = e else {
            panic!("or at top")
        };
        let Expr::Binary(BinOp::And, cmp, not, _) = *lhs else {
            panic!("and")
        };
        assert!(matches!(*not, Expr::Unary(UnOp::Not, _)));
        let Expr::Binary(BinOp::Gt, sum, _, _) = *cmp else {
            panic!("gt")
        };
        let Expr::Binary(BinOp::Add, _, prod, _) = *sum else {
            panic!("add")
        };
        assert!(matches!(*prod, Expr::Binary(BinOp::Mul, _, _, _)));
    }

    #[test]
    fn words_and_kinds() {
        assert!(matches!(p("a and b"), Expr::Binary(BinOp::And, ..)));
        let Expr::Binary(BinOp::Or, not, _, _) = p("not a or b") else {
            panic!("or")
        };
        assert!(matches!(*not, Expr::Unary(UnOp::Not, _)));
        assert_eq!(p("-3"), Expr::Num(-3.0));
        assert_eq!(p("true"), Expr::Num(1.0));
        let kinds = |s: &str| {
            let mut k = Vec::new();
            p(s).visit_vars(&mut |v, d| k.push((v.kind, v.name.clone(), d)));
            k
        };
        assert_eq!(
            kinds("x + tool.m + MPIR_CVAR_X + pvar:y + cvar:z + rate(w)"),
            vec![
                (VarKind::Auto, "x".into(), None),
                (VarKind::Tool, "tool.m".into(), None),
                (VarKind::Cvar, "MPIR_CVAR_X".into(), None),
                (VarKind::Pvar, "y".into(), None),
                (VarKind::Cvar, "z".into(), None),
                (VarKind::Auto, "w".into(), Some(Derived::Rate)),
            ]
        );
    }

    #[test]
    fn functions() {
        assert!(matches!(p("min(a)"), Expr::Reduce(Reduce::Min, _)));
        assert!(matches!(p("max(a, 3)"), Expr::Binary(BinOp::Max, _, _, _)));
        assert!(matches!(p("a[3]"), Expr::Index(_, 3, _)));
        assert!(matches!(
            p("delta(pvar:a)"),
            Expr::Derived(Derived::Delta, _)
        ));
        assert_eq!(err("any()").message, "any() takes 1 argument, found 0");
        assert_eq!(err("max(1,2,3)").at, 0);
        assert!(err("foo(1)").message.starts_with("unknown function `foo`"));
        assert!(err("delta(a + b)")
            .message
            .contains("takes a variable name"));
        assert_eq!(err("delta(a + b)").at, 6);
    }

    #[test]
    fn error_positions() {
        assert_eq!(err("a >").at, 3);
        assert!(err("a >").message.contains("end of expression"));
        assert_eq!(err("(a + b").at, 6);
        assert_eq!(err("a b").at, 2);
        assert!(err("a b").message.contains("operator between"));
        assert!(err("a < b < c").message.contains("chained"));
        assert!(err("a)").message.contains("unbalanced"));
        assert!(err("a[x]").message.contains("element index"));
        assert!(err("and").message.contains("keyword"));
        assert!(err("").message.contains("end of expression"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let s = "(".repeat(100) + "1" + &")".repeat(100);
        assert!(err(&s).message.contains("nested too deeply"));
        let s = "any(".repeat(100) + "1" + &")".repeat(100);
        assert!(err(&s).message.contains("nested too deeply"));
        let s = "-".repeat(10_000) + "1";
        assert!(err(&s).message.contains("expression too long"));
        let s = "1".to_string() + &"+1".repeat(10_000);
        assert!(err(&s).message.contains("expression too long"));
        let s = "!".repeat(100) + "1";
        assert!(err(&s).message.contains("nested too deeply"));
    }
}
