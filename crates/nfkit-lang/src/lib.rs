//! The chain language: Python-syntax chain scripts, checked and compiled
//! straight to eBPF (docs/language.md), linked with the NFs they call and
//! their classifier into an [`Image`].
//!
//! * [`diag`]: diagnostics with file:line:col, the line, a caret and help.
//! * [`types`]: the value types and their wrapping rules.
//! * [`ir`]: the typed IR, and [`ir::walk`], the one walk over it.
//! * [`cache`]: parsed NF objects kept across compiles.
//! * [`chain_object`]: compiled scripts as ELF objects with their manifest.
//! * [`check`](mod@check): parsing (rustpython-parser), name resolution, type checking
//!   (one file per section of docs/language.md).
//! * [`eval`]: the reference arithmetic (constant folding, tests).
//! * [`codegen`]: IR into eBPF instructions (the same sections).
//! * [`link`]: chains + NFs + classifier into an Image; stack budget;
//!   the control-plane writes the script implies.
//! * [`listing`]: the generated code as text with script lines.
//! * [`pipeline`], [`table`]: match-action tables and pipeline positions,
//!   expanded into chains and maps before checking.
//! * [`patterns`]: `Patterns(...)` sets and their tables in the Image.
#![forbid(unsafe_code)]

pub mod cache;
pub mod chain_object;
pub mod check;
pub mod codegen;
pub mod diag;
pub mod eval;
pub mod ir;
pub mod link;
pub mod listing;
pub mod patterns;
pub mod pipeline;
pub mod table;
pub mod types;

pub use check::{check, Checked, Options};
pub use codegen::DynSlots;
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
    /// Chains, NFs and classifier linked (and inlined, see
    /// [`link::Inline`]).
    pub image: Image,
    /// What inlining did (None when it was switched off).
    pub inline: Option<nfkit_object::InlineReport>,
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
    #[error("{file}: {cause}")]
    Gen {
        file: String,
        cause: codegen::GenError,
    },
    #[error("{file}: {cause}")]
    Link {
        file: String,
        cause: Box<link::LinkError>,
    },
    /// The pattern sets' tables could not go into the Image.
    #[error("{file}: {why}")]
    Patterns { file: String, why: String },
}

/// Checks and compiles `source` (named `file` in diagnostics), with
/// calls inlined ([`link::Inline::On`]).
pub fn compile(file: &str, source: &str, opts: &Options) -> Result<Compiled, CompileError> {
    compile_with(file, source, opts, link::Inline::On)
}

/// [`compile`] with inlining chosen; calls that stay calls although
/// inlining was asked for are reported as warnings.
pub fn compile_with(
    file: &str,
    source: &str,
    opts: &Options,
    inline: link::Inline,
) -> Result<Compiled, CompileError> {
    let checked = check::check(file, source, opts).map_err(CompileError::Script)?;
    let generated =
        codegen::generate(&checked.program, checked.hook.ctx_hook()).map_err(|source| {
            CompileError::Gen {
                file: file.to_string(),
                cause: source,
            }
        })?;
    let (mut image, object, report) = link::link_program(
        &checked.program,
        &generated,
        checked.hook,
        &opts.search,
        inline,
    )
    .map_err(|e| CompileError::Link {
        file: file.to_string(),
        cause: Box::new(e),
    })?;
    patterns::install(&checked.program.patterns, &mut image).map_err(|e| {
        CompileError::Patterns {
            file: file.to_string(),
            why: e.to_string(),
        }
    })?;
    let mut warnings = checked.warnings;
    let lines: Vec<&str> = checked.program.source.lines().collect();
    for k in report.iter().flat_map(|r| &r.kept) {
        // Said at the chain that makes the call (line 1 otherwise).
        let line = checked
            .program
            .chains
            .iter()
            .find(|c| c.name == k.caller)
            .map_or(1, |c| c.line.max(1));
        warnings.push(Diagnostic {
            severity: Severity::Warning,
            file: file.to_string(),
            line,
            col: 0,
            message: format!(
                "the call of {} in {} stays a call (not inlined): {}",
                k.callee, k.caller, k.reason
            ),
            help: "a call costs some 7 ns on this kernel; smaller stack frames let it be inlined"
                .into(),
            text: lines.get(line as usize - 1).unwrap_or(&"").to_string(),
        });
    }
    Ok(Compiled {
        program: checked.program,
        hook: checked.hook,
        warnings,
        generated,
        object,
        image,
        inline: report,
    })
}

/// A script compiled for dynamic mode (docs/abi.md §5): the chains as
/// segments composed through tail calls with the NFs' dynamic entries.
#[derive(Clone, Debug)]
pub struct DynCompiled {
    pub program: ir::Program,
    pub hook: Hook,
    pub warnings: Vec<Diagnostic>,
    pub generated: codegen::Generated,
    /// The whole dynamic program: classifier `entry`, segments, NF
    /// dynamic entries; `map_inits` fill `nfkit_progs`.
    pub image: Image,
    /// The dynamic classifier (`dyn_<classifier>`), the program to attach.
    pub entry: String,
    /// The slot of every NF's dynamic entry.
    pub nf_slots: std::collections::BTreeMap<String, u32>,
}

impl DynCompiled {
    /// Map writes the control plane does before running.
    pub fn control_plane(&self) -> Vec<link::MapWrite> {
        link::control_plane(&self.program)
    }

    /// `(segment program, slot)` of every chain segment; a chain's first
    /// segment has its chain id as slot.
    pub fn segments(&self) -> Vec<(String, u32)> {
        self.generated
            .funcs
            .iter()
            .filter_map(|f| f.slot.map(|s| (f.name.clone(), s)))
            .collect()
    }

    /// `(NF symbol, dynamic entry program, slot)` of every NF called.
    pub fn nf_entries(&self) -> Vec<(String, String, u32)> {
        self.program
            .nfs
            .iter()
            .filter_map(|nf| {
                let slot = *self.nf_slots.get(&nf.symbol)?;
                Some((nf.symbol.clone(), format!("dyn_{}", nf.name), slot))
            })
            .collect()
    }
}

/// Checks and compiles `source` for dynamic mode, placing segments and
/// NFs in the slots `slots` allows (NFs already in `slots.nfs` keep
/// their slots).
pub fn compile_dynamic(
    file: &str,
    source: &str,
    opts: &Options,
    slots: &DynSlots,
) -> Result<DynCompiled, CompileError> {
    let checked = check::check(file, source, opts).map_err(CompileError::Script)?;
    let gen_err = |source| CompileError::Gen {
        file: file.to_string(),
        cause: source,
    };
    let generated = codegen::generate_dynamic(&checked.program, checked.hook.ctx_hook(), slots)
        .map_err(gen_err)?;
    let (mut image, _) = link::link_dynamic(
        &checked.program,
        &generated,
        checked.hook,
        &opts.search,
        if slots.shared_entries {
            link::Inline::Off
        } else if !slots.passes {
            link::Inline::NoPasses
        } else {
            link::Inline::On
        },
    )
    .map_err(|e| CompileError::Link {
        file: file.to_string(),
        cause: Box::new(e),
    })?;
    patterns::install(&checked.program.patterns, &mut image).map_err(|e| {
        CompileError::Patterns {
            file: file.to_string(),
            why: e.to_string(),
        }
    })?;
    let entry = checked
        .program
        .classifier
        .as_ref()
        .map(|c| format!("dyn_{}", c.name))
        .unwrap_or_default();
    let nf_slots = generated.nf_slots.clone();
    Ok(DynCompiled {
        program: checked.program,
        hook: checked.hook,
        warnings: checked.warnings,
        generated,
        image,
        entry,
        nf_slots,
    })
}
