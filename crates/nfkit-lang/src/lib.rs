//! The chain language: Python-syntax chain scripts, checked and compiled
//! straight to eBPF (docs/language.md).
//!
//! * [`diag`]: diagnostics with file:line:col, the line, a caret and help.
//! * [`types`]: the value types and their wrapping rules.
//! * [`ir`]: the typed IR.
//! * [`check`]: parsing (rustpython-parser), name resolution, type checking.
//! * [`eval`]: the reference arithmetic (constant folding, tests).
#![forbid(unsafe_code)]

pub mod check;
pub mod diag;
pub mod eval;
pub mod ir;
pub mod types;

pub use check::{check, Checked, Options};
pub use diag::{Diagnostic, Severity};
pub use types::Ty;
