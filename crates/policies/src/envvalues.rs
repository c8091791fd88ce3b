//! The grammars of the environment settings MPI libraries read at
//! `MPI_Init`, so that a `setenv` value the library would reject (and abort
//! `MPI_Init` over: UCX does, for `UCX_RNDV_THRESH = "lots"`) is refused
//! when the policy file is loaded, with the reason, and never reaches the
//! library.
//!
//! Known settings are checked against their library's grammar: UCX memory
//! units, Open MPI integer and boolean MCA values, MVAPICH2 sizes and
//! switches. Any other variable only has to be non-blank and on one line.

/// Why a value cannot be given to an environment variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvValueError {
    /// A blank value.
    #[error("refusing to set {0} to an empty value: MPI libraries abort MPI_Init on some empty settings")]
    Empty(String),
    /// A value with a line break or a NUL.
    #[error("the value of {0} must be on one line")]
    MultiLine(String),
    /// A value the library's grammar for this variable rejects.
    #[error("{value:?} is not a valid value of {name}: expected {expected}")]
    Invalid {
        /// The variable.
        name: String,
        /// The value refused.
        value: String,
        /// What the grammar accepts.
        expected: &'static str,
    },
}

/// Why `value` is not a valid value of the environment variable `name`.
pub fn check(name: &str, value: &str) -> Result<(), EnvValueError> {
    if value.trim().is_empty() {
        return Err(EnvValueError::Empty(name.into()));
    }
    if value.contains(['\n', '\r', '\0']) {
        return Err(EnvValueError::MultiLine(name.into()));
    }
    let Some(grammar) = grammar_of(name) else {
        return Ok(());
    };
    if grammar.accepts(value.trim()) {
        Ok(())
    } else {
        Err(EnvValueError::Invalid {
            name: name.into(),
            value: value.into(),
            expected: grammar.expected(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grammar {
    /// UCX memory units: `<number>[b|kb|mb|gb]`, `inf` or `auto`.
    UcxSize,
    /// UCX transport list: `[^]name[,name...]`.
    UcxList,
    /// Open MPI MCA integer: digits with an optional k/m/g suffix.
    OmpiInt,
    /// Open MPI MCA boolean.
    OmpiBool,
    /// MVAPICH2 size: digits with an optional K/M/G suffix.
    Mv2Size,
    /// MVAPICH2 switch: 0 or 1.
    Mv2Switch,
}

impl Grammar {
    fn expected(self) -> &'static str {
        match self {
            Grammar::UcxSize => {
                "UCX memory units: <number>[b|kb|mb|gb], \"inf\" or \"auto\" (e.g. 65536, 64kb)"
            }
            Grammar::UcxList => {
                "a comma-separated list of UCX names, optionally starting with ^ (e.g. sm,self or ^ib)"
            }
            Grammar::OmpiInt => {
                "an Open MPI integer: digits with an optional k, m or g suffix (e.g. 65536, 64k)"
            }
            Grammar::OmpiBool => {
                "an Open MPI boolean: 1, 0, true, false, yes, no, enabled or disabled"
            }
            Grammar::Mv2Size => "an MVAPICH2 size: digits with an optional K, M or G suffix (e.g. 16384, 16K)",
            Grammar::Mv2Switch => "0 or 1",
        }
    }

    fn accepts(self, v: &str) -> bool {
        let lower = v.to_ascii_lowercase();
        match self {
            Grammar::UcxSize => {
                lower == "inf"
                    || lower == "auto"
                    || number_with_suffix(&lower, &["", "b", "k", "kb", "m", "mb", "g", "gb"])
            }
            Grammar::UcxList => {
                let list = lower.strip_prefix('^').unwrap_or(&lower);
                !list.is_empty()
                    && list.split(',').all(|t| {
                        !t.is_empty()
                            && t.chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    })
            }
            Grammar::OmpiInt => {
                let digits = lower.strip_prefix('-').unwrap_or(&lower);
                number_with_suffix(digits, &["", "k", "m", "g"])
            }
            Grammar::OmpiBool => matches!(
                lower.as_str(),
                "1" | "0" | "true" | "false" | "yes" | "no" | "enabled" | "disabled" | "t" | "f"
            ),
            Grammar::Mv2Size => number_with_suffix(&lower, &["", "k", "m", "g"]),
            Grammar::Mv2Switch => matches!(v, "0" | "1"),
        }
    }
}

/// Digits (at least one) followed by one of `suffixes` (lower case).
fn number_with_suffix(v: &str, suffixes: &[&str]) -> bool {
    let end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    end > 0 && v[..end].parse::<u64>().is_ok() && suffixes.contains(&&v[end..])
}

/// The grammar of a variable this module knows, by name.
fn grammar_of(name: &str) -> Option<Grammar> {
    const UCX_SIZES: &[&str] = &[
        "UCX_RNDV_THRESH",
        "UCX_RNDV_SEND_NBR_THRESH",
        "UCX_ZCOPY_THRESH",
        "UCX_BCOPY_THRESH",
        "UCX_SEG_SIZE",
        "UCX_MAX_SHORT",
        "UCX_MAX_BCOPY",
        "UCX_RC_MAX_GET_ZCOPY",
    ];
    const UCX_LISTS: &[&str] = &["UCX_TLS", "UCX_NET_DEVICES", "UCX_SOCKADDR_TLS_PRIORITY"];
    const MV2_SIZES: &[&str] = &[
        "MV2_SMP_EAGERSIZE",
        "MV2_IBA_EAGER_THRESHOLD",
        "MV2_VBUF_TOTAL_SIZE",
        "MV2_SMP_QUEUE_LENGTH",
        "MV2_SMPI_LENGTH_QUEUE",
        "MV2_SMP_SEND_BUF_SIZE",
        "MV2_RDMA_FAST_PATH_BUF_SIZE",
        "MV2_VBUF_POOL_SIZE",
        "MV2_VBUF_SECONDARY_POOL_SIZE",
    ];
    if UCX_SIZES.contains(&name) || name.ends_with("_RNDV_THRESH") && name.starts_with("UCX_") {
        return Some(Grammar::UcxSize);
    }
    if UCX_LISTS.contains(&name) {
        return Some(Grammar::UcxList);
    }
    if MV2_SIZES.contains(&name) {
        return Some(Grammar::Mv2Size);
    }
    if name.starts_with("MV2_USE_") || name.starts_with("MV2_ENABLE_") {
        return Some(Grammar::Mv2Switch);
    }
    if let Some(param) = name.strip_prefix("OMPI_MCA_") {
        const INT_SUFFIXES: &[&str] = &[
            "_eager_limit",
            "_max_send_size",
            "_rndv_eager_limit",
            "_free_list_num",
            "_free_list_max",
            "_free_list_inc",
            "_priority",
            "_segsize",
            "_fifo_size",
            "_max_inline_data",
        ];
        const BOOL_SUFFIXES: &[&str] = &["_use_dynamic_rules", "_warn_component_unused"];
        if INT_SUFFIXES.iter().any(|s| param.ends_with(s)) {
            return Some(Grammar::OmpiInt);
        }
        if BOOL_SUFFIXES.iter().any(|s| param.ends_with(s)) {
            return Some(Grammar::OmpiBool);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn ucx_sizes() {
        for ok in ["65536", "64kb", "64K", "1mb", "inf", "auto", "AUTO", "8b"] {
            check("UCX_RNDV_THRESH", ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["lots", "64 kb", "-1", "1.5mb", "kb", "64kib"] {
            let e = check("UCX_RNDV_THRESH", bad).unwrap_err().to_string();
            assert!(e.contains("UCX memory units"), "{bad}: {e}");
        }
        assert!(check("UCX_TLS", "sm,self").is_ok());
        assert!(check("UCX_TLS", "^ib").is_ok());
        assert!(check("UCX_TLS", "sm,,self").is_err());
    }

    #[test]
    fn open_mpi_values() {
        assert!(check("OMPI_MCA_btl_vader_eager_limit", "65536").is_ok());
        assert!(check("OMPI_MCA_btl_vader_eager_limit", "64k").is_ok());
        let e = check("OMPI_MCA_btl_vader_eager_limit", "big")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Open MPI integer"), "{e}");
        assert!(check("OMPI_MCA_coll_tuned_use_dynamic_rules", "true").is_ok());
        assert!(check("OMPI_MCA_coll_tuned_use_dynamic_rules", "maybe").is_err());
        // Unknown parameters: only non-blank.
        assert!(check("OMPI_MCA_pml", "ob1").is_ok());
    }

    #[test]
    fn mvapich2_values() {
        assert!(check("MV2_SMP_EAGERSIZE", "16K").is_ok());
        assert!(check("MV2_SMP_EAGERSIZE", "16KB").is_err());
        assert!(check("MV2_ENABLE_SHARP", "1").is_ok());
        assert!(check("MV2_USE_SHARP", "yes").is_err());
    }

    #[test]
    fn blank_and_multi_line_values() {
        assert!(check("ANYTHING", " ")
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert!(check("ANYTHING", "a\nb").is_err());
        assert!(check("ANYTHING", "whatever").is_ok());
    }
}
