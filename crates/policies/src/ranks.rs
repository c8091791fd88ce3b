//! Rank selectors: `all`, lists and ranges (`"0-3,8"`), predicates (`"rank % 2 == 0"`).

use std::fmt;
use std::ops::RangeInclusive;

use crate::expr::parser::{parse, Builtin, Expr};
use crate::expr::program::{bin_fn, truthy, un_fn};
use crate::expr::ExprError;

/// Which ranks a policy applies to.
#[derive(Debug, Clone, PartialEq)]
pub struct RankSelector {
    text: String,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    All,
    List(Vec<RangeInclusive<u32>>),
    Predicate(Expr),
}

impl Default for RankSelector {
    fn default() -> Self {
        RankSelector::all()
    }
}

impl RankSelector {
    /// Every rank.
    pub fn all() -> RankSelector {
        RankSelector {
            text: "all".to_string(),
            kind: Kind::All,
        }
    }

    /// The given ranks.
    pub fn list(ranks: &[u32]) -> RankSelector {
        RankSelector {
            text: ranks
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            kind: Kind::List(ranks.iter().map(|&r| r..=r).collect()),
        }
    }

    /// Parses `"all"`, a list of ranks and ranges (`"0-3, 8"`), or a
    /// predicate over `rank` and `size` (`"rank % 2 == 0"`, `"rank < size/2"`).
    ///
    /// On error returns the byte offset in `text` and a message.
    pub(crate) fn parse(text: &str) -> Result<RankSelector, ExprError> {
        let t = text.trim();
        let kind = if t == "all" || t == "*" {
            Kind::All
        } else if t.starts_with(|c: char| c.is_ascii_digit())
            && (t.contains(',')
                || t.chars()
                    .all(|c| c.is_ascii_digit() || c == '-' || c.is_ascii_whitespace()))
        {
            Kind::List(parse_list(text)?)
        } else {
            let e = parse(text)?;
            check_predicate(&e)?;
            Kind::Predicate(e)
        };
        Ok(RankSelector {
            text: t.to_string(),
            kind,
        })
    }

    /// Parses a selector as a policy's `ranks` takes it (for selectors
    /// outside a policy file, such as `mpit-tuner set --ranks`); the error
    /// names the column.
    pub fn from_text(text: &str) -> Result<RankSelector, String> {
        RankSelector::parse(text).map_err(|e| format!("column {}: {}", e.at + 1, e.message))
    }

    /// True if a process of rank `rank` in a job of `size` ranks is selected.
    ///
    /// A predicate that evaluates to NaN selects nothing.
    pub fn applies_to(&self, rank: u32, size: u32) -> bool {
        match &self.kind {
            Kind::All => true,
            Kind::List(ranges) => ranges.iter().any(|r| r.contains(&rank)),
            Kind::Predicate(e) => truthy(eval(e, f64::from(rank), f64::from(size))),
        }
    }

    /// True if the selector is `all` (and so selects every rank of any job).
    pub fn is_all(&self) -> bool {
        matches!(self.kind, Kind::All)
    }
}

impl fmt::Display for RankSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn parse_list(text: &str) -> Result<Vec<RangeInclusive<u32>>, ExprError> {
    let mut out = Vec::new();
    let mut offset = 0;
    for part in text.split(',') {
        let at = offset + (part.len() - part.trim_start().len());
        offset += part.len() + 1;
        let p = part.trim();
        let bad = || {
            ExprError::new(
                at,
                format!("expected a rank (such as 3) or a range (such as 0-3), found {p:?}"),
            )
        };
        let num = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
        let range = match p.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(ExprError::new(
                        at,
                        format!("range {p:?} is empty: write the lower rank first"),
                    ));
                }
                a..=b
            }
            None => {
                let r = num(p)?;
                r..=r
            }
        };
        out.push(range);
    }
    Ok(out)
}

fn check_predicate(e: &Expr) -> Result<(), ExprError> {
    let mut var = None;
    e.visit_vars(&mut |v, _| {
        var.get_or_insert((v.at, v.name.clone()));
    });
    if let Some((at, name)) = var {
        return Err(ExprError::new(
            at,
            format!("a rank predicate may only use `rank`, `size`, numbers and operators, found variable `{name}`"),
        ));
    }
    if uses_time_or_reduce(e) {
        return Err(ExprError::new(
            0,
            "a rank predicate may only use `rank`, `size`, numbers, operators and abs/floor/ceil/round/min/max of two values",
        ));
    }
    Ok(())
}

fn uses_time_or_reduce(e: &Expr) -> bool {
    match e {
        Expr::Builtin(Builtin::Time) | Expr::Reduce(..) | Expr::Index(..) => true,
        Expr::Num(_) | Expr::Builtin(_) | Expr::Var(_) | Expr::Derived(..) => false,
        Expr::Unary(_, a) => uses_time_or_reduce(a),
        Expr::Binary(_, a, b, _) => uses_time_or_reduce(a) || uses_time_or_reduce(b),
    }
}

/// Scalar evaluation of a checked predicate (depth bounded by the parser).
fn eval(e: &Expr, rank: f64, size: f64) -> f64 {
    match e {
        Expr::Num(x) => *x,
        Expr::Builtin(Builtin::Rank) => rank,
        Expr::Builtin(Builtin::Size) => size,
        Expr::Unary(op, a) => un_fn(*op)(eval(a, rank, size)),
        Expr::Binary(op, a, b, _) => bin_fn(*op)(eval(a, rank, size), eval(b, rank, size)),
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(s: &str) -> RankSelector {
        RankSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    fn selected(s: &str, size: u32) -> Vec<u32> {
        let r = sel(s);
        (0..size).filter(|&i| r.applies_to(i, size)).collect()
    }

    #[test]
    fn lists_ranges_predicates() {
        assert_eq!(selected("all", 3), vec![0, 1, 2]);
        assert_eq!(selected("0-3,8", 10), vec![0, 1, 2, 3, 8]);
        assert_eq!(selected(" 5 , 1 - 2 ", 10), vec![1, 2, 5]);
        assert_eq!(selected("rank % 2 == 0", 6), vec![0, 2, 4]);
        assert_eq!(selected("rank < size/2", 6), vec![0, 1, 2]);
        assert_eq!(selected("rank == size - 1 or rank == 0", 4), vec![0, 3]);
        assert_eq!(selected("rank % 0 == 0", 4), Vec::<u32>::new());
        assert!(RankSelector::list(&[1, 2]).applies_to(2, 3));
        assert_eq!(sel("0-3,8").to_string(), "0-3,8");
    }

    #[test]
    fn errors() {
        let e = RankSelector::parse("0-3,x").unwrap_err();
        assert_eq!(e.at, 4);
        assert!(e.message.contains("expected a rank"), "{e:?}");
        let e = RankSelector::parse("rank == x").unwrap_err();
        assert!(e.message.contains("variable `x`"), "{e:?}");
        let e = RankSelector::parse("0-3,,4").unwrap_err();
        assert_eq!(e.at, 4);
        let e = RankSelector::parse("4-1").unwrap_err();
        assert!(e.message.contains("empty"));
        assert!(RankSelector::parse("time > 3").is_err());
        assert!(RankSelector::parse("rank == mv2_x").is_err());
        assert!(RankSelector::parse("99999999999").is_err());
    }
}
