//! The assembler: text in either eBPF assembly syntax into [`Insn`]s.
//!
//! * [`Syntax::Conformance`]: the bpf_conformance/uBPF syntax
//!   (`mov %r0, 1`, `ldxw %r0, [%r1+4]`, `jeq %r1, 5, +2`, `lock fetch add`).
//! * [`Syntax::Llvm`]: the syntax of llvm-objdump and clang inline asm
//!   (`r0 = 1`, `w0 = w1`, `r0 = *(u32 *)(r1 + 4)`, `if r1 == 5 goto +2`).
//!
//! Both take labels (`name:`), `#`, `;` and `//` comments, decimal and hex
//! numbers. Without an explicit syntax it is detected from the first line
//! that only one syntax has (`exit`, `call N` and labels belong to both); a
//! file that then mixes in the other syntax is refused at that line.
//! Names that are neither labels nor helpers (`r1 = my_map ll`,
//! `call my_func`) become [`SymbolRef`]s of a [`Program`].

pub(crate) mod conformance;
mod cursor;
mod detect;
mod labels;
mod lexer;
mod llvm;

use crate::insn::Insn;

/// The two assembly syntaxes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Syntax {
    /// llvm-objdump / clang inline asm: `r0 = *(u32 *)(r1 + 4)`.
    #[default]
    Llvm,
    /// bpf_conformance / uBPF: `ldxw %r0, [%r1+4]`.
    Conformance,
}

impl Syntax {
    /// The syntax's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Syntax::Llvm => "llvm",
            Syntax::Conformance => "conformance",
        }
    }
}

impl std::str::FromStr for Syntax {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "llvm" => Ok(Syntax::Llvm),
            "conformance" | "ubpf" => Ok(Syntax::Conformance),
            _ => Err(format!("unknown syntax `{s}` (llvm or conformance)")),
        }
    }
}

/// An assembly error at a 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}:{col}: {message}")]
pub struct AsmError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl AsmError {
    pub(crate) fn new(line: usize, col: usize, message: impl Into<String>) -> Self {
        AsmError {
            line,
            col,
            message: message.into(),
        }
    }
}

/// A reference from the instruction at `slot` to a symbol the text does
/// not define: an `lddw` (`r1 = my_map ll`, imm left 0) or a local call
/// (`call my_func`, imm left -1), as clang leaves them for relocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SymbolRef {
    pub slot: usize,
    pub symbol: String,
}

/// Assembled instructions plus their unresolved symbol references.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Program {
    pub insns: Vec<Insn>,
    pub relocs: Vec<SymbolRef>,
}

/// What a label reference in an instruction is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FixKind {
    /// A jump target (offset or `gotol` imm).
    Jump,
    /// `call name`: a label (local call), else a symbol.
    Call,
    /// `lddw` of a name: a label (function address), else a symbol.
    Lddw,
}

/// A name an instruction refers to, resolved after all labels are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fix {
    pub kind: FixKind,
    pub name: String,
    pub col: usize,
}

/// One parsed instruction, maybe waiting for a label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stmt {
    pub insn: Insn,
    pub fix: Option<Fix>,
}

impl Stmt {
    pub(crate) fn done(insn: Insn) -> Stmt {
        Stmt { insn, fix: None }
    }
    pub(crate) fn fix(insn: Insn, kind: FixKind, name: String, col: usize) -> Stmt {
        Stmt {
            insn,
            fix: Some(Fix { kind, name, col }),
        }
    }
}

/// Assembles `text` into instructions. Symbolic references that the text
/// does not define are errors here (see [`assemble_program`]).
pub fn assemble(text: &str, syntax: Option<Syntax>) -> Result<Vec<Insn>, AsmError> {
    let (prog, lines) = labels::assemble_lines(text, syntax)?;
    if let Some(r) = prog.relocs.first() {
        let (line, col) = lines.get(&r.slot).copied().unwrap_or((1, 1));
        return Err(AsmError::new(
            line,
            col,
            format!("Invalid label: `{}` is not defined", r.symbol),
        ));
    }
    Ok(prog.insns)
}

/// Assembles `text`, keeping references to undefined symbols as
/// [`SymbolRef`]s (the way clang leaves map loads and calls for the linker).
pub fn assemble_program(text: &str, syntax: Option<Syntax>) -> Result<Program, AsmError> {
    labels::assemble_lines(text, syntax).map(|(p, _)| p)
}

/// The syntax `text` is written in, if any line tells.
pub fn detect_syntax(text: &str) -> Option<Syntax> {
    detect::detect(text)
}

/// Names the assembler reads as something else than a symbol.
pub(crate) fn is_reserved_name(s: &str) -> bool {
    cursor::looks_like_reg(s) || matches!(s, "ll" | "local" | "kfunc" | "helper" | "skb" | "exit")
}
