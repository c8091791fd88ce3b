//! Metadata vocabulary of MPI_T: scopes, PVAR classes, bindings, verbosity
//! levels and datatypes, decoded from the library's own constants.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! mpi_t_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A value this build's header does not define.
            Unknown,
        }

        impl $name {
            /// Every defined value, in the standard's order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The name the MPI standard gives this value (without prefix).
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                    $name::Unknown => "UNKNOWN",
                }
            }

            /// Parses the name (case-insensitive, with or without the
            /// `MPI_T_...` prefix).
            pub fn parse(text: &str) -> Option<Self> {
                let upper = text.to_ascii_uppercase();
                $name::ALL
                    .iter()
                    .copied()
                    .filter(|v| {
                        let name = v.as_str();
                        upper == name || upper.ends_with(&format!("_{name}"))
                    })
                    .max_by_key(|v| v.as_str().len())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

mpi_t_enum! {
    /// The scope of a control variable: who may change it, and whether all
    /// processes must agree on its value.
    Scope {
        /// Read-only, and never changes.
        Constant => "CONSTANT",
        /// Read-only, but may change.
        Readonly => "READONLY",
        /// Each process may set its own value.
        Local => "LOCAL",
        /// May be set by a group of processes that share a resource.
        Group => "GROUP",
        /// As `Group`, and the value must be equal in the group.
        GroupEq => "GROUP_EQ",
        /// May be set by every connected process.
        All => "ALL",
        /// As `All`, and the value must be equal everywhere.
        AllEq => "ALL_EQ",
    }
}

impl Scope {
    /// Whether MPI_T accepts writes at all for this scope.
    pub fn is_writable(self) -> bool {
        !matches!(self, Scope::Constant | Scope::Readonly | Scope::Unknown)
    }

    /// Whether the standard requires the same value on all processes (of
    /// the group): a rank must never change such a variable on its own.
    pub fn requires_equal_values(self) -> bool {
        matches!(self, Scope::GroupEq | Scope::AllEq)
    }
}

mpi_t_enum! {
    /// The class of a performance variable, which fixes how its values
    /// behave over time (thesis, chapter IV).
    PvarClass {
        /// A discrete state (an enum value).
        State => "STATE",
        /// Utilisation of a resource at this moment.
        Level => "LEVEL",
        /// Size of a resource at this moment.
        Size => "SIZE",
        /// Utilisation as a fraction between 0 and 1.
        Percentage => "PERCENTAGE",
        /// The highest value seen.
        Highwatermark => "HIGHWATERMARK",
        /// The lowest value seen.
        Lowwatermark => "LOWWATERMARK",
        /// A count of events; only grows.
        Counter => "COUNTER",
        /// A sum of values; only grows, may be a double.
        Aggregate => "AGGREGATE",
        /// A time; only grows.
        Timer => "TIMER",
        /// Anything else.
        Generic => "GENERIC",
    }
}

impl PvarClass {
    /// Counters, aggregates and timers accumulate: their useful derived
    /// values are deltas and rates.
    pub fn is_accumulating(self) -> bool {
        matches!(
            self,
            PvarClass::Counter | PvarClass::Aggregate | PvarClass::Timer
        )
    }

    /// High and low watermarks.
    pub fn is_watermark(self) -> bool {
        matches!(self, PvarClass::Highwatermark | PvarClass::Lowwatermark)
    }
}

mpi_t_enum! {
    /// The kind of MPI object a variable is bound to.
    Binding {
        /// Not bound: one value per process.
        NoObject => "NO_OBJECT",
        /// Bound to a communicator.
        Comm => "MPI_COMM",
        /// Bound to a datatype.
        Datatype => "MPI_DATATYPE",
        /// Bound to an error handler.
        Errhandler => "MPI_ERRHANDLER",
        /// Bound to a file.
        File => "MPI_FILE",
        /// Bound to a group.
        Group => "MPI_GROUP",
        /// Bound to a reduction operation.
        Op => "MPI_OP",
        /// Bound to a request.
        Request => "MPI_REQUEST",
        /// Bound to a window.
        Win => "MPI_WIN",
        /// Bound to a message.
        Message => "MPI_MESSAGE",
        /// Bound to an info object.
        Info => "MPI_INFO",
    }
}

impl Binding {
    /// A short name for tables: `-`, `comm`, `win`, ...
    pub fn short(self) -> &'static str {
        match self {
            Binding::NoObject => "-",
            Binding::Comm => "comm",
            Binding::Datatype => "datatype",
            Binding::Errhandler => "errhandler",
            Binding::File => "file",
            Binding::Group => "group",
            Binding::Op => "op",
            Binding::Request => "request",
            Binding::Win => "win",
            Binding::Message => "message",
            Binding::Info => "info",
            Binding::Unknown => "?",
        }
    }
}

mpi_t_enum! {
    /// Who a variable is meant for, and how much detail it is.
    Verbosity {
        /// End users, basic.
        UserBasic => "USER_BASIC",
        /// End users, detailed.
        UserDetail => "USER_DETAIL",
        /// End users, everything.
        UserAll => "USER_ALL",
        /// Performance tuners, basic.
        TunerBasic => "TUNER_BASIC",
        /// Performance tuners, detailed.
        TunerDetail => "TUNER_DETAIL",
        /// Performance tuners, everything.
        TunerAll => "TUNER_ALL",
        /// MPI developers, basic.
        MpidevBasic => "MPIDEV_BASIC",
        /// MPI developers, detailed.
        MpidevDetail => "MPIDEV_DETAIL",
        /// MPI developers, everything.
        MpidevAll => "MPIDEV_ALL",
    }
}

impl Verbosity {
    /// 1 (user basic) to 9 (MPI developer, all), as `mpivars` counts.
    pub fn level(self) -> u8 {
        Verbosity::ALL
            .iter()
            .position(|v| *v == self)
            .map_or(10, |i| i as u8 + 1)
    }
}

mpi_t_enum! {
    /// The C datatype MPI_T reports a variable's values in.
    Datatype {
        /// `MPI_INT`
        Int => "INT",
        /// `MPI_UNSIGNED`
        Unsigned => "UNSIGNED",
        /// `MPI_UNSIGNED_LONG`
        UnsignedLong => "UNSIGNED_LONG",
        /// `MPI_UNSIGNED_LONG_LONG`
        UnsignedLongLong => "UNSIGNED_LONG_LONG",
        /// `MPI_COUNT`
        Count => "COUNT",
        /// `MPI_DOUBLE`
        Double => "DOUBLE",
        /// `MPI_CHAR` (a string)
        Char => "CHAR",
        /// `MPI_LONG`
        Long => "LONG",
        /// `MPI_LONG_LONG`
        LongLong => "LONG_LONG",
        /// `MPI_C_BOOL` (Open MPI's switches: 0 or 1, one byte)
        CBool => "C_BOOL",
    }
}

/// Bytes of an `MPI_Count`: 64 bits in MPICH's, Open MPI's and the MPI-5
/// standard ABI. This crate has no MPI header; the MPI layer checks this
/// against the header of its build at compile time.
pub const COUNT_BYTES: usize = 8;

impl Datatype {
    /// Bytes one element takes in a read or write buffer.
    pub fn size(self) -> usize {
        match self {
            Datatype::Int | Datatype::Unsigned => 4,
            Datatype::UnsignedLong | Datatype::Long => std::mem::size_of::<std::ffi::c_long>(),
            Datatype::UnsignedLongLong | Datatype::LongLong => 8,
            Datatype::Count => COUNT_BYTES,
            Datatype::Double => 8,
            Datatype::Char | Datatype::CBool => 1,
            Datatype::Unknown => 8,
        }
    }

    /// Whether the values are integers (every type but `DOUBLE`, `CHAR`
    /// and unknown ones).
    pub fn is_integer(self) -> bool {
        !matches!(self, Datatype::Double | Datatype::Char | Datatype::Unknown)
    }

    /// A short lower-case name for tables (`int`, `u64`, `double`, `string`).
    pub fn short(self) -> &'static str {
        match self {
            Datatype::Int => "int",
            Datatype::Unsigned => "unsigned",
            Datatype::UnsignedLong => "ulong",
            Datatype::UnsignedLongLong => "ull",
            Datatype::Count => "count",
            Datatype::Double => "double",
            Datatype::Char => "string",
            Datatype::Long => "long",
            Datatype::LongLong => "longlong",
            Datatype::CBool => "bool",
            Datatype::Unknown => "?",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_and_without_prefix() {
        assert_eq!(Scope::parse("MPI_T_SCOPE_ALL_EQ"), Some(Scope::AllEq));
        assert_eq!(Scope::parse("local"), Some(Scope::Local));
        assert_eq!(
            PvarClass::parse("MPI_T_PVAR_CLASS_HIGHWATERMARK"),
            Some(PvarClass::Highwatermark)
        );
        assert_eq!(
            Verbosity::parse("TUNER_DETAIL"),
            Some(Verbosity::TunerDetail)
        );
        assert_eq!(Binding::parse("MPI_T_BIND_MPI_COMM"), Some(Binding::Comm));
        assert_eq!(Scope::parse("nonsense"), None);
        assert_eq!(Datatype::parse("MPI_LONG_LONG"), Some(Datatype::LongLong));
        assert_eq!(
            Datatype::parse("MPI_UNSIGNED_LONG"),
            Some(Datatype::UnsignedLong)
        );
    }

    #[test]
    fn scope_rules() {
        assert!(!Scope::Readonly.is_writable());
        assert!(Scope::Local.is_writable());
        assert!(Scope::AllEq.requires_equal_values());
        assert!(!Scope::All.requires_equal_values());
        assert_eq!(Verbosity::UserBasic.level(), 1);
        assert_eq!(Verbosity::MpidevAll.level(), 9);
    }
}
