//! Steering requests: what `mpit-tuner set`, `pause`, `resume` and
//! `reload` ask the ranks of a running job, defined here and nowhere else.
//!
//! A request is one JSON object in a file of the run directory's
//! [`CONTROL_DIR`], named after its id (`<id>.json`). The command writes it
//! under a temporary name starting with `.` and renames it, so a helper
//! thread never sees half a request. Every rank's helper thread lists the
//! directory on its tick, handles each request once and answers with a
//! `control` record in its own log ([`crate::record::SteeringAnswer`]).
//!
//! ```
//! use vocab::steering::{Action, Request};
//! let r = Request::parse(br#"{"id":"a1","kind":"set","cvar":"X","value":"4","ranks":"0-1"}"#)
//!     .unwrap();
//! assert_eq!(r.action, Action::Set { cvar: "X".into(), value: "4".into() });
//! assert_eq!(r.describe(), "set X=4 on ranks 0-1");
//! ```

use crate::record::SteeringKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The directory of the run directory that holds the requests.
pub const CONTROL_DIR: &str = "control";

/// The largest request file a rank reads (a policy file fits many times).
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// One steering request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Request {
    /// Unique within the run directory; also the file name (`<id>.json`).
    /// Letters, digits, `-`, `_` and `.` (not first).
    pub id: String,
    /// What to do.
    #[serde(flatten)]
    pub action: Action,
    /// Which ranks: a list of ranks and ranges (`0-7,12`) or a predicate
    /// over `rank` and `size` (`rank % 2 == 0`), as in policies; all when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<String>,
    /// Which hosts: names or patterns with `*` and `?`, as in policies;
    /// all when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// What a request asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Write a CVAR: a number, numbers separated by commas (one per
    /// element), an enumeration item or a string, as the variable's type
    /// takes it.
    Set {
        /// The CVAR.
        cvar: String,
        /// The value as the user wrote it.
        value: String,
    },
    /// Stop evaluating one policy, or all of them.
    Pause {
        /// The policy; all when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<String>,
    },
    /// Evaluate a paused policy again, or all of them.
    Resume {
        /// The policy; all when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<String>,
    },
    /// Replace the running policies by a policy file, once it compiled and
    /// checked on the rank; a bad file changes nothing.
    Reload {
        /// The file's name, for messages (`file:line:column`).
        file: String,
        /// Its contents.
        source: String,
    },
}

impl Action {
    /// The request's `kind`, as its answer records it.
    pub fn kind(&self) -> SteeringKind {
        match self {
            Action::Set { .. } => SteeringKind::Set,
            Action::Pause { .. } => SteeringKind::Pause,
            Action::Resume { .. } => SteeringKind::Resume,
            Action::Reload { .. } => SteeringKind::Reload,
        }
    }
}

/// Why bytes are not a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a steering request: {0}")]
pub struct BadRequest(pub String);

impl Request {
    /// Parses a request file's bytes (JSON, a valid id).
    pub fn parse(bytes: &[u8]) -> Result<Request, BadRequest> {
        let request: Request =
            serde_json::from_slice(bytes).map_err(|e| BadRequest(e.to_string()))?;
        if !valid_id(&request.id) {
            return Err(BadRequest(format!(
                "the id {:?} is not letters, digits, `-`, `_` and `.`",
                request.id
            )));
        }
        Ok(request)
    }

    /// The file name of the request in [`CONTROL_DIR`].
    pub fn file_name(&self) -> String {
        format!("{}.json", self.id)
    }

    /// One line for people: `set X=4 on ranks 0-1`, `reload p.toml`.
    pub fn describe(&self) -> String {
        let mut text = match &self.action {
            Action::Set { cvar, value } => format!("set {cvar}={value}"),
            Action::Pause { policy: Some(p) } => format!("pause {p}"),
            Action::Pause { policy: None } => "pause all policies".into(),
            Action::Resume { policy: Some(p) } => format!("resume {p}"),
            Action::Resume { policy: None } => "resume all policies".into(),
            Action::Reload { file, .. } => format!("reload {file}"),
        };
        if let Some(r) = &self.ranks {
            text.push_str(&format!(" on ranks {r}"));
        }
        if !self.hosts.is_empty() {
            text.push_str(&format!(" on hosts {}", self.hosts.join(",")));
        }
        text
    }
}

/// Whether `id` can name a request (and its file).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// The id of a request file's name (`a1.json` -> `a1`); `None` for
/// temporary files (`.`-prefixed) and other names.
pub fn id_of_file_name(name: &str) -> Option<&str> {
    name.strip_suffix(".json").filter(|id| valid_id(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_names() {
        let r = Request {
            id: "20260101-1-2".into(),
            action: Action::Reload {
                file: "p.toml".into(),
                source: "[[policy]]\n".into(),
            },
            ranks: None,
            hosts: vec!["node*".into()],
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""kind":"reload""#), "{text}");
        assert_eq!(Request::parse(text.as_bytes()).unwrap(), r);
        assert_eq!(r.file_name(), "20260101-1-2.json");
        assert_eq!(id_of_file_name("20260101-1-2.json"), Some("20260101-1-2"));
        assert_eq!(id_of_file_name(".tmp-x.json"), None);
        assert_eq!(id_of_file_name("x.toml"), None);
        assert_eq!(r.describe(), "reload p.toml on hosts node*");
    }

    /// The kind an answer records is the `kind` the request was sent with.
    #[test]
    fn answers_name_the_kind_of_the_request() {
        for action in [
            Action::Set {
                cvar: "X".into(),
                value: "1".into(),
            },
            Action::Pause { policy: None },
            Action::Resume {
                policy: Some("p".into()),
            },
            Action::Reload {
                file: "f".into(),
                source: String::new(),
            },
        ] {
            let text = serde_json::to_string(&action).unwrap();
            let kind = action.kind();
            assert!(text.contains(&format!(r#""kind":"{kind}""#)), "{text}");
        }
    }

    #[test]
    fn bad_requests_say_why() {
        for bad in [
            &b"{"[..],
            br#"{"id":"a","kind":"set","cvar":"X"}"#,
            br#"{"id":"a","kind":"explode"}"#,
            br#"{"id":"../x","kind":"pause"}"#,
        ] {
            let e = Request::parse(bad).unwrap_err();
            assert!(e.to_string().starts_with("not a steering request"), "{e}");
        }
        assert_eq!(
            Request::parse(br#"{"id":"a","kind":"pause"}"#)
                .unwrap()
                .action,
            Action::Pause { policy: None }
        );
    }
}
