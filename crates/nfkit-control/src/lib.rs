//! nfkit's one orchestration path. The CLI, the benches and the tests
//! call it; none of them strings the steps together on its own.
//!
//! * [`runner`]: a compiled script run in the userspace VM, packet by
//!   packet, as `nfkit run` does (control-plane writes, pinned clock,
//!   per-chain counters, maps).
//! * [`deploy`]: compile → slot planning → (dynamic) compile → deploy on
//!   a kernel hook, with the script's own attach point and warnings for
//!   targets that cannot work; [`deploy_object`](mod@deploy_object): one
//!   program of a plain eBPF object through the same deployer.
//! * [`maps`]: typed map keys and values (docs/abi.md 9) and one
//!   `MapAccess` trait for kernel and VM maps.
//! * [`status`](mod@status): what is deployed, with per-chain counters;
//!   undeploy.
//! * [`error`](mod@error): [`ControlError`].
#![forbid(unsafe_code)]

pub mod deploy;
pub mod deploy_object;
pub mod error;
pub mod maps;
pub mod runner;
pub mod status;

pub use deploy::{deploy_script, DeploySpec, Deployed, Mode};
pub use deploy_object::{deploy_object, ObjectSpec};
pub use error::ControlError;
