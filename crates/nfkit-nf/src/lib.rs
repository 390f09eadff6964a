//! The NF catalogue: the C network functions of `nf/*.c`, compiled by clang
//! once per hook at build time and embedded, with the documentation each
//! source carries; and the search path for users' own NF objects.
//!
//! * [`hook`]: [`Hook`] (XDP, TC, socket filter, from nfkit-abi), one build
//!   per hook, and [`HookObject`]: its ELF section and program type.
//! * [`docblock`]: the `/** @nf ... */` documentation format and its parser.
//! * [`catalogue`](mod@catalogue): the embedded modules ([`catalogue()`], [`object`],
//!   [`find`], [`list`]) and the documentation types ([`NfDoc`]).
//! * [`search`]: [`SearchPath`] (`--nf-path`, `NFKIT_NF_PATH`): users'
//!   `<module>.<hook>.o` / `<module>.o` first, then the embedded catalogue.
//! * [`caller`]: a tiny entry program that runs one NF on a packet and
//!   reports its 64-bit result (tests in the VM and the kernel).
//! * [`error`]: the error type, [`NfError`].

#![forbid(unsafe_code)]

pub mod caller;
pub mod catalogue;
pub mod docblock;
pub mod error;
pub mod hook;
pub mod search;

pub use catalogue::{
    catalogue, classifiers, find, header, list, module, object, parse_name, ArgDoc, HookObj,
    ModuleObj, NfDoc, NfKind,
};
pub use error::NfError;
pub use hook::{Hook, HookObject};
pub use search::{Origin, Resolved, SearchPath, NF_PATH_ENV};
