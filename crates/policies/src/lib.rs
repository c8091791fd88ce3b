//! Declarative tuning policies for mpit-tuner: load, check and evaluate them.
//!
//! This crate has one job: turn a TOML policy file into compiled policies
//! that decide, on every tick of the tuner's helper thread, which control
//! variables (CVARs) to write. It knows nothing about MPI: it builds and is
//! tested without an MPI library. The runtime (`tuner-core`) supplies
//! variable values and metadata through two small traits and performs the
//! writes. In the flow
//!
//! ```text
//! MPI_T -> sampler -> policies -> actuator -> log
//! ```
//!
//! this crate is the `policies` step: samples in, decisions out.
//!
//! Main types:
//! - [`PolicySet`]: a parsed, validated file (two stages: raw serde structs,
//!   then compiled policies). [`PolicySet::parse`] reports every error as
//!   `file:line:col: error: ...`; [`PolicySet::variables`] lists every
//!   variable the file names, each with a [`VarSlot`];
//!   [`PolicySet::check`] validates them against a [`VariableLookup`] of
//!   what the MPI library exports (unknown names, read-only CVARs, the
//!   ALL_EQ/GROUP_EQ scope rule, types).
//! - [`CompiledPolicy`]: one policy with its state (hysteresis, cooldown,
//!   writes done). [`CompiledPolicy::evaluate`] reads values through
//!   [`Values`] and returns a [`Decision`] without allocating;
//!   [`CompiledPolicy::actions`] then gives the writes to perform.
//!
//! The policy language (file format and expressions) is documented in the
//! user manual, `docs/policies.md#language-reference`.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use policies::{ActionView, Branch, Decision, Env, PolicySet, SetValue, Value, Values, VarSlot};
//!
//! let set = PolicySet::parse(r#"
//! [[policy]]
//! name  = "free-unused-vbufs"
//! every = "1s"
//! when  = "any(mv2_vbuf_allocated_array - mv2_vbuf_max_use_array > 10)"
//! then  = [ { set = "MPIR_CVAR_VBUF_POOL_CONTROL", value = 1 },
//!           { set = "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE", value = "mv2_vbuf_max_use_array" } ]
//! otherwise = [ { set = "MPIR_CVAR_VBUF_POOL_CONTROL", value = 0 } ]
//! "#, "policies.toml").unwrap();
//!
//! // The runtime serves the latest samples by slot.
//! struct Samples { allocated: VarSlot, max_use: VarSlot }
//! impl Values for Samples {
//!     fn get(&self, slot: VarSlot) -> Option<Value<'_>> {
//!         if slot == self.allocated { Some(Value::Array(&[64.0, 32.0, 32.0, 16.0])) }
//!         else if slot == self.max_use { Some(Value::Array(&[60.0, 5.0, 2.0, 1.0])) }
//!         else { None }
//!     }
//! }
//! let samples = Samples {
//!     allocated: set.slot_of("mv2_vbuf_allocated_array").unwrap(),
//!     max_use: set.slot_of("mv2_vbuf_max_use_array").unwrap(),
//! };
//!
//! let mut policy = set.policies()[0].clone();
//! let decision = policy.evaluate(&samples, &Env::new(0, 4, Duration::from_secs(1)));
//! assert_eq!(decision, Decision::Fired { branch: Branch::Then, write: true });
//! let writes: Vec<_> = policy.actions(Branch::Then).collect();
//! assert!(matches!(writes[1], ActionView::Set { value: SetValue::Numbers(&[60.0, 5.0, 2.0, 1.0]), .. }));
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod catalogue;
mod check;
mod collectives;
mod duration;
pub mod envvalues;
mod error;
mod expr;
mod hosts;
mod policy;
mod ranks;
mod schema;
mod value;

pub use catalogue::{
    CvarInfo, CvarType, Diagnostic, MemoryCatalogue, PvarClass, PvarInfo, Scope, Severity,
    VariableLookup,
};
pub use collectives::{AlgorithmLookup, Algorithms, CollectiveSpec, LibraryPlaces, LIBRARIES};
pub use duration::{parse_duration, DurationError};
pub use error::{Location, PolicyError, PolicyErrors};
pub use expr::program::EvalError;
pub use expr::VarKind;
pub use hosts::HostSelector;
pub use policy::{
    ActionView, Branch, CompiledPolicy, Decision, Phase, PolicySet, PolicyState, SetValue, Skip,
    Uses, Variable, DEFAULT_EVERY, MIN_EVERY,
};
pub use ranks::RankSelector;
pub use value::{Env, NoValues, Value, Values, VarSlot};
