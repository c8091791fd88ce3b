//! Deciding: the policy engine runs this rank's compiled policies against a
//! backend and the actuator carries out their CVAR writes.
//!
//! - [`Engine`] (`engine.rs`): phases, cooldowns, decisions, one record each;
//! - [`MpiBackend`] and [`EnvBackend`] (`backends.rs`): values and writes in
//!   a running job, environment variables before `MPI_Init`;
//! - [`PolicyHooks`] (`hooks.rs`): the engine as the runtime's hooks, with
//!   the cross-rank agreement of the policies' init stage;
//! - [`actuator`]: one CVAR write, checked (scope, type, range) and read back.

pub mod actuator;
mod backends;
mod engine;
mod hooks;

pub use backends::{set_environment, EnvBackend, MpiBackend, SetenvError};
pub use engine::{
    convert_class, convert_scope, env, format_ranks, load, refused, Backend, CatalogueView, Engine,
    LoadError, DEFAULT_POLICIES, RUNTIME_PHASES,
};
pub(crate) use engine::{cvar_info, WriteCounts};
pub use hooks::PolicyHooks;
/// The length of the policies' part of the start agreement.
pub(crate) use hooks::AGREEMENT_LEN as POLICY_AGREEMENT_LEN;
