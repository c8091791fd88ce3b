//! The expression language: lexer, parser and compiled, allocation-free evaluator.

pub(crate) mod lexer;
pub(crate) mod parser;
pub(crate) mod program;

pub use lexer::VarKind;

/// Most tokens accepted in one expression (keeps trees shallow enough for
/// recursion everywhere else).
pub(crate) const MAX_TOKENS: usize = 512;

/// A syntax error inside one expression; `at` is a byte offset into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExprError {
    pub at: usize,
    pub message: String,
}

impl ExprError {
    pub(crate) fn new(at: usize, message: impl Into<String>) -> ExprError {
        ExprError {
            at,
            message: message.into(),
        }
    }
}
