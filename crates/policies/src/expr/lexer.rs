//! Tokens of the expression language.

use super::ExprError;

/// How a variable reference was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VarKind {
    /// A bare name: a PVAR if the MPI library has a PVAR of that name,
    /// otherwise a CVAR. Bare names starting with `MPIR_CVAR_` are CVARs.
    Auto,
    /// `pvar:name`: a performance variable.
    Pvar,
    /// `cvar:name`: a control variable.
    Cvar,
    /// A name starting with `tool.`: a metric computed by the tuner itself.
    Tool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Num(f64),
    /// Identifier, keyword or variable name (may contain dots).
    Ident(String),
    /// `pvar:name` or `cvar:name`.
    Prefixed(VarKind, String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    EqEq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    AndAnd,
    OrOr,
    Bang,
    Eof,
}

impl Tok {
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Num(x) => format!("number {x}"),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Prefixed(VarKind::Pvar, s) => format!("`pvar:{s}`"),
            Tok::Prefixed(_, s) => format!("`cvar:{s}`"),
            Tok::Eof => "end of expression".to_string(),
            other => format!("`{}`", other.symbol()),
        }
    }

    fn symbol(&self) -> &'static str {
        match self {
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Comma => ",",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Bang => "!",
            _ => "?",
        }
    }
}

/// A token and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub at: usize,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Splits an expression into tokens; the last one is [`Tok::Eof`].
pub(crate) fn lex(src: &str) -> Result<Vec<Token>, ExprError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let at = i;
        let two = |x: u8| b.get(i + 1) == Some(&x);
        let (tok, len) = match c {
            b'(' => (Tok::LParen, 1),
            b')' => (Tok::RParen, 1),
            b'[' => (Tok::LBracket, 1),
            b']' => (Tok::RBracket, 1),
            b',' => (Tok::Comma, 1),
            b'+' => (Tok::Plus, 1),
            b'-' => (Tok::Minus, 1),
            b'*' => (Tok::Star, 1),
            b'/' => (Tok::Slash, 1),
            b'%' => (Tok::Percent, 1),
            b'=' if two(b'=') => (Tok::EqEq, 2),
            b'=' => {
                return Err(ExprError::new(
                    at,
                    "found `=`: write `==` to compare two values",
                ))
            }
            b'!' if two(b'=') => (Tok::Ne, 2),
            b'!' => (Tok::Bang, 1),
            b'<' if two(b'=') => (Tok::Le, 2),
            b'<' => (Tok::Lt, 1),
            b'>' if two(b'=') => (Tok::Ge, 2),
            b'>' => (Tok::Gt, 1),
            b'&' if two(b'&') => (Tok::AndAnd, 2),
            b'|' if two(b'|') => (Tok::OrOr, 2),
            b'&' | b'|' => {
                let op = if c == b'&' { "&&" } else { "||" };
                return Err(ExprError::new(
                    at,
                    format!("found `{}`: write `{op}` (or `and`/`or`)", c as char),
                ));
            }
            b'0'..=b'9' | b'.' => lex_number(src, i)?,
            c if is_ident_start(c) => lex_ident(src, i)?,
            b'"' | b'\'' => {
                return Err(ExprError::new(
                    at,
                    "text in quotes is not an expression; to write a text value to a string or enum CVAR use `text = \"...\"` instead of `value`",
                ))
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(ExprError::new(
                    at,
                    format!("unexpected character {ch:?}; expected a number, a variable name, a function call or an operator"),
                ));
            }
        };
        out.push(Token { tok, at });
        if out.len() > super::MAX_TOKENS {
            return Err(ExprError::new(
                at,
                format!(
                    "expression too long (more than {} tokens); split it into several policies",
                    super::MAX_TOKENS
                ),
            ));
        }
        i += len;
    }
    out.push(Token {
        tok: Tok::Eof,
        at: src.len(),
    });
    Ok(out)
}

fn lex_number(src: &str, start: usize) -> Result<(Tok, usize), ExprError> {
    let b = src.as_bytes();
    let mut i = start;
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    i = digits(i);
    if i == start {
        return Err(ExprError::new(
            start,
            "a number must start with a digit (write 0.5, not .5)",
        ));
    }
    if i < b.len() && b[i] == b'.' {
        let j = digits(i + 1);
        if j == i + 1 {
            return Err(ExprError::new(i, "expected digits after the decimal point"));
        }
        i = j;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let k = digits(j);
        if k > j {
            i = k;
        }
    }
    let number = &src[start..i];
    let mut value: f64 = number
        .parse()
        .map_err(|_| ExprError::new(start, format!("invalid number `{number}`")))?;
    let suffix_start = i;
    while i < b.len() && is_ident_char(b[i]) {
        i += 1;
    }
    let suffix = &src[suffix_start..i];
    let scale = match suffix {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        "m" => {
            return Err(ExprError::new(
                suffix_start,
                format!("suffix `m` is ambiguous: write {number}min for minutes or {number}M for {number} x 1024 x 1024"),
            ))
        }
        other => {
            return Err(ExprError::new(
                suffix_start,
                format!("unknown number suffix `{other}`; expected K, M, G (powers of 1024) or a time unit us, ms, s, min, h"),
            ))
        }
    };
    value *= scale;
    Ok((Tok::Num(value), i - start))
}

/// A name: letters, digits and underscores, with single dots between parts.
fn name_end(b: &[u8], start: usize) -> usize {
    let mut i = start;
    loop {
        while i < b.len() && is_ident_char(b[i]) {
            i += 1;
        }
        if i + 1 < b.len() && b[i] == b'.' && is_ident_char(b[i + 1]) {
            i += 1;
        } else {
            return i;
        }
    }
}

fn lex_ident(src: &str, start: usize) -> Result<(Tok, usize), ExprError> {
    let b = src.as_bytes();
    let end = name_end(b, start);
    let word = &src[start..end];
    if (word == "pvar" || word == "cvar") && b.get(end) == Some(&b':') {
        let name_start = end + 1;
        if name_start >= b.len() || !is_ident_start(b[name_start]) {
            return Err(ExprError::new(
                name_start,
                format!("expected a variable name after `{word}:`"),
            ));
        }
        let name_end = name_end(b, name_start);
        let kind = if word == "pvar" {
            VarKind::Pvar
        } else {
            VarKind::Cvar
        };
        return Ok((
            Tok::Prefixed(kind, src[name_start..name_end].to_string()),
            name_end - start,
        ));
    }
    Ok((Tok::Ident(word.to_string()), end - start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_and_suffixes() {
        assert_eq!(toks("64K"), vec![Tok::Num(65536.0), Tok::Eof]);
        assert_eq!(toks("1M"), vec![Tok::Num(1048576.0), Tok::Eof]);
        assert_eq!(toks("2G")[0], Tok::Num(2.0 * 1073741824.0));
        assert_eq!(toks("1.5e3")[0], Tok::Num(1500.0));
        assert_eq!(toks("250ms")[0], Tok::Num(0.25));
        assert_eq!(toks("2min")[0], Tok::Num(120.0));
        assert!(lex("2m").unwrap_err().message.contains("ambiguous"));
        assert!(lex("3q")
            .unwrap_err()
            .message
            .contains("unknown number suffix `q`"));
        assert!(lex("1.").is_err());
        assert!(lex(".5").is_err());
    }

    #[test]
    fn names_operators_prefixes() {
        assert_eq!(
            toks("tool.allreduce.bytes_p50 >= 2"),
            vec![
                Tok::Ident("tool.allreduce.bytes_p50".into()),
                Tok::Ge,
                Tok::Num(2.0),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("pvar:a!=cvar:B_2"),
            vec![
                Tok::Prefixed(VarKind::Pvar, "a".into()),
                Tok::Ne,
                Tok::Prefixed(VarKind::Cvar, "B_2".into()),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("a&&!b||c"),
            vec![
                Tok::Ident("a".into()),
                Tok::AndAnd,
                Tok::Bang,
                Tok::Ident("b".into()),
                Tok::OrOr,
                Tok::Ident("c".into()),
                Tok::Eof
            ]
        );
        assert!(lex("a = 1").unwrap_err().message.contains("=="));
        assert!(lex("a & b").unwrap_err().message.contains("&&"));
        assert!(lex("'auto'").unwrap_err().message.contains("text ="));
        assert_eq!(lex("a # b").unwrap_err().at, 2);
    }
}
