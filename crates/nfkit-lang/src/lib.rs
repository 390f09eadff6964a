//! The chain language: Python-syntax chain scripts, checked and compiled
//! straight to eBPF (docs/language.md), linked with the NFs they call and
//! their classifier into an [`Image`].
//!
//! * [`diag`]: diagnostics with file:line:col, the line, a caret and help.
//! * [`types`]: the value types and their wrapping rules.
//! * [`ir`]: the typed IR.
//! * [`cache`]: parsed NF objects kept across compiles.
//! * [`check`]: parsing (rustpython-parser), name resolution, type checking.
//! * [`eval`]: the reference arithmetic (constant folding, tests).
//! * [`codegen`]: IR into eBPF instructions.
//! * [`link`]: chains + NFs + classifier into an Image; stack budget;
//!   the control-plane writes the script implies.
//! * [`listing`]: the generated code as text with script lines.
#![forbid(unsafe_code)]

pub mod cache;
pub mod check;
pub mod codegen;
pub mod diag;
pub mod eval;
pub mod ir;
pub mod link;
pub mod listing;
pub mod runner;
pub mod types;

pub use check::{check, Checked, Options};
pub use diag::{Diagnostic, Severity};
pub use types::Ty;

use nfkit_nf::Hook;
use nfkit_object::{Image, Object};

/// A compiled script.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub program: ir::Program,
    pub hook: Hook,
    pub warnings: Vec<Diagnostic>,
    /// The generated functions (before linking).
    pub generated: codegen::Generated,
    /// The generated code as an object (chains and dispatcher).
    pub object: Object,
    /// Chains, NFs and classifier linked.
    pub image: Image,
}

impl Compiled {
    /// The entry program (the classifier), if the script configures one.
    pub fn entry(&self) -> Option<&str> {
        self.program.classifier.as_ref().map(|c| c.name.as_str())
    }

    /// Map writes the control plane does before running (classifier
    /// table, default and fault actions).
    pub fn control_plane(&self) -> Vec<link::MapWrite> {
        link::control_plane(&self.program)
    }
}

/// Why a script did not compile.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// An error in the script (rendered with its place).
    #[error("{0}")]
    Script(Box<Diagnostic>),
    #[error("{file}: {source}")]
    Gen {
        file: String,
        source: codegen::GenError,
    },
    #[error("{file}: {source}")]
    Link {
        file: String,
        source: link::LinkError,
    },
}

/// Checks and compiles `source` (named `file` in diagnostics).
pub fn compile(file: &str, source: &str, opts: &Options) -> Result<Compiled, CompileError> {
    let checked = check::check(file, source, opts).map_err(CompileError::Script)?;
    let generated =
        codegen::generate(&checked.program, checked.hook).map_err(|source| CompileError::Gen {
            file: file.to_string(),
            source,
        })?;
    let (image, object) =
        link::link_program(&checked.program, &generated, checked.hook, &opts.search).map_err(
            |source| CompileError::Link {
                file: file.to_string(),
                source,
            },
        )?;
    Ok(Compiled {
        program: checked.program,
        hook: checked.hook,
        warnings: checked.warnings,
        generated,
        object,
        image,
    })
}
