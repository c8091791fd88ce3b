//! Stage one: the raw shape of a policy file, as serde reads it (with spans).
//! [`crate::policy`] validates and compiles it.

use serde::Deserialize;
use toml::Spanned;

/// One `[[policy]]` table, unvalidated.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicy {
    pub name: Option<Spanned<String>>,
    pub ranks: Option<Spanned<toml::Value>>,
    pub hosts: Option<Spanned<toml::Value>>,
    pub phase: Option<Spanned<String>>,
    pub every: Option<Spanned<String>>,
    pub when: Option<Spanned<String>>,
    pub then: Option<Spanned<Vec<Spanned<RawAction>>>>,
    pub otherwise: Option<Spanned<Vec<Spanned<RawAction>>>>,
    pub cooldown: Option<Spanned<String>>,
    pub hysteresis: Option<Spanned<i64>>,
    pub max_writes: Option<Spanned<i64>>,
    pub dry_run: Option<Spanned<bool>>,
}

/// One action of `then`/`otherwise`, unvalidated.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAction {
    pub set: Option<Spanned<String>>,
    pub setenv: Option<Spanned<String>>,
    pub note: Option<Spanned<String>>,
    pub recommend: Option<Spanned<String>>,
    pub value: Option<Spanned<toml::Value>>,
    pub text: Option<Spanned<String>>,
    pub index: Option<Spanned<i64>>,
}
