//! The error type of the safe layer.

use std::fmt;

/// Which MPI_T (or MPI) routine failed, the code it returned with its name
/// from the header, and the variable involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiError {
    /// The routine, e.g. `"MPI_T_cvar_write"`.
    pub call: &'static str,
    /// The return code.
    pub code: i32,
    /// The code's name from the header of the build (`"MPI_T_ERR_CVAR_SET_NOT_NOW"`),
    /// or `"unknown error <code>"`.
    pub name: String,
    /// The variable the call was about, when there was one.
    pub variable: Option<String>,
}

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed with {}", self.call, self.name)?;
        if let Some(var) = &self.variable {
            write!(f, " for `{var}`")?;
        }
        Ok(())
    }
}

/// Everything that can go wrong in the safe MPI_T layer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The process has no MPI library loaded, or it lacks MPI_T.
    #[error("no MPI library with MPI_T is loaded in this process")]
    NoMpi,
    /// The MPI library lacks a routine this operation needs.
    #[error("the MPI library does not provide {0}")]
    MissingFunction(&'static str),
    /// An MPI_T routine returned an error code.
    #[error("{0}")]
    Mpi(MpiError),
    /// The MPI library refused a CVAR write now but may accept it at another
    /// time (`MPI_T_ERR_CVAR_SET_NOT_NOW`).
    #[error("`{variable}` cannot be set now (MPI_T_ERR_CVAR_SET_NOT_NOW from {call})")]
    SetNotNow {
        /// The routine that answered.
        call: &'static str,
        /// The control variable.
        variable: String,
    },
    /// The MPI library will never accept a write to this CVAR
    /// (`MPI_T_ERR_CVAR_SET_NEVER`).
    #[error("`{variable}` can never be set (MPI_T_ERR_CVAR_SET_NEVER from {call})")]
    SetNever {
        /// The routine that answered.
        call: &'static str,
        /// The control variable.
        variable: String,
    },
    /// The CVAR's scope forbids writes (CONSTANT or READONLY); checked before
    /// any call is made.
    #[error("`{variable}` has scope {scope} and cannot be written")]
    NotWritable {
        /// The control variable.
        variable: String,
        /// Its scope, as MPI_T names it.
        scope: String,
    },
    /// No variable of that name (and class) exists in this MPI library.
    #[error("this MPI library exports no {kind} named `{name}`")]
    NotFound {
        /// "CVAR", "PVAR" or "category".
        kind: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A value of the wrong type or size was given for a variable.
    #[error("`{variable}`: {message}")]
    BadValue {
        /// The variable.
        variable: String,
        /// What was wrong.
        message: String,
    },
    /// The tool will not touch this variable now, because the MPI library
    /// would crash (see `quirks`).
    #[error("`{variable}`: {message}")]
    Unavailable {
        /// The variable.
        variable: String,
        /// Why.
        message: String,
    },
    /// A datatype the tool could not take apart (nested too deep).
    #[error("{0}")]
    Datatype(String),
    /// The variable is bound to an MPI object and needs one, or is not bound
    /// and was given one.
    #[error("`{variable}`: {message}")]
    Binding {
        /// The variable.
        variable: String,
        /// What was wrong.
        message: String,
    },
}

impl Error {
    /// The name of the variable the error is about, if any.
    pub fn variable(&self) -> Option<&str> {
        match self {
            Error::Mpi(e) => e.variable.as_deref(),
            Error::SetNotNow { variable, .. }
            | Error::SetNever { variable, .. }
            | Error::NotWritable { variable, .. }
            | Error::BadValue { variable, .. }
            | Error::Unavailable { variable, .. }
            | Error::Binding { variable, .. } => Some(variable),
            Error::NotFound { name, .. } => Some(name),
            Error::NoMpi | Error::MissingFunction(_) | Error::Datatype(_) => None,
        }
    }

    /// The MPI_T error name (`"MPI_T_ERR_INVALID_INDEX"`) when an MPI routine
    /// reported the error.
    pub fn mpi_error_name(&self) -> Option<&str> {
        match self {
            Error::Mpi(e) => Some(&e.name),
            Error::SetNotNow { .. } => Some("MPI_T_ERR_CVAR_SET_NOT_NOW"),
            Error::SetNever { .. } => Some("MPI_T_ERR_CVAR_SET_NEVER"),
            _ => None,
        }
    }

    /// Attaches a variable name to an error that has none yet.
    pub fn about(mut self, variable: &str) -> Self {
        match &mut self {
            Error::Mpi(e) if e.variable.is_none() => e.variable = Some(variable.to_string()),
            Error::SetNotNow { variable: v, .. } | Error::SetNever { variable: v, .. }
                if v.is_empty() =>
            {
                *v = variable.to_string()
            }
            _ => {}
        }
        self
    }
}

/// The result type of the safe layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;
