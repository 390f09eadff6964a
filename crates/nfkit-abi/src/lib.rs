//! The binary contract of nfkit (docs/abi.md), the Rust twin of
//! `nf/include/nfkit/abi.h`. No dependencies: every other crate builds on
//! it, and a test checks it against the BTF of the built NF catalogue.
//!
//! * [`verdict`]: results (values, verdicts, faults) and action names.
//! * [`stats`]: `nfkit_stats` indices and the names of its columns.
//! * [`hook`]: [`Hook`] (what a program is built for), [`AttachPoint`]
//!   (where it is attached), hook return codes and what they do with the
//!   packet.
//! * [`layout`]: [`PktInfo`], [`NfConfig`], [`NfFrame`] and the classifier
//!   entries, with `to_bytes`/`from_bytes` and their field tables.
//! * [`maps`]: the fixed map names, their sizes, and the slot ranges and
//!   banks of `nfkit_progs`.
//! * [`helpers`]: the kernel helper ids nfkit's own code calls.
#![forbid(unsafe_code)]

pub mod helpers;
pub mod hook;
pub mod layout;
pub mod maps;
pub mod stats;
pub mod verdict;

pub use hook::{AttachPoint, Fate, Hook, UnknownAttachPoint, UnknownHook};
pub use layout::{ClsEntry, ClsIp4Key, ClsIp6Key, Field, NfConfig, NfFrame, PktInfo};
pub use verdict::{Action, NfResult};
