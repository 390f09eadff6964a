//! The disassembler: [`Insn`]s into text that the assembler reads back to
//! the same instructions. llvm syntax by default, conformance on request;
//! jump and local-call targets get `L<slot>:` labels, helper calls a
//! comment with the helper's name, and callers can add per-slot labels and
//! comments (function names, source lines) through [`DisasmOptions::annotate`].
//!
//! Known limit: the conformance syntax refuses frame-pointer arithmetic
//! other than mov/add/sub (`or %r0, %r10`), so such instructions only
//! round-trip through the llvm syntax.

mod conformance;
mod llvm;

use crate::asm::Syntax;
use crate::helpers::helper_name;
use crate::insn::*;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Something printed before the instruction at a slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Annotation {
    /// `name:` (e.g. a function's name). Must be a valid label name and
    /// unique, or the text will not re-assemble.
    Label(String),
    /// A comment line.
    Comment(String),
}

/// How to disassemble.
pub struct DisasmOptions<'a> {
    pub syntax: Syntax,
    /// Print `L<slot>:` labels at jump and call targets (else numeric offsets).
    pub labels: bool,
    /// Comment helper calls with the helper's name.
    pub helper_names: bool,
    /// Symbols by slot (relocations): an `lddw` of 0 prints as
    /// `r1 = sym ll`, a local call of -1 as `call local sym`; elsewhere
    /// the symbol becomes a comment. A relocated call gets no label.
    pub symbols: BTreeMap<usize, String>,
    /// Labels and comments to print before the instruction at a slot.
    pub annotate: Option<&'a dyn Fn(usize) -> Vec<Annotation>>,
}

impl Default for DisasmOptions<'_> {
    fn default() -> Self {
        DisasmOptions {
            syntax: Syntax::Llvm,
            labels: true,
            helper_names: true,
            symbols: BTreeMap::new(),
            annotate: None,
        }
    }
}

impl DisasmOptions<'_> {
    /// Defaults with another syntax.
    pub fn with_syntax(syntax: Syntax) -> Self {
        DisasmOptions {
            syntax,
            ..Default::default()
        }
    }
}

/// How an instruction's target and symbol are to be printed.
pub(crate) struct Ctx<'a> {
    /// The label of the jump/call target, if labelled.
    pub target: Option<String>,
    /// The symbol of this slot, if it can be printed in place.
    pub symbol: Option<&'a str>,
}

/// A valid label/symbol name for the assembler.
fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == '.')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !crate::asm::is_reserved_name(s)
}

fn label_name(slot: usize) -> String {
    format!("L{slot}")
}

/// The slot an instruction at `slot` jumps or calls to, if any.
fn target_slot(insn: &Insn, slot: usize) -> Option<i64> {
    let off = match insn {
        Insn::Call {
            kind: CallKind::Local,
            ..
        } => insn.call_offset(),
        _ => insn.jump_offset(),
    }?;
    Some(slot as i64 + 1 + off)
}

/// Formats one instruction without labels or symbols.
pub fn format_insn(insn: &Insn, syntax: Syntax) -> String {
    let ctx = Ctx {
        target: None,
        symbol: None,
    };
    match syntax {
        Syntax::Llvm => llvm::format(insn, &ctx),
        Syntax::Conformance => conformance::format(insn, &ctx),
    }
}

/// Disassembles `insns` into text, one instruction per line.
pub fn disassemble(insns: &[Insn], opts: &DisasmOptions) -> String {
    let slots = slot_offsets(insns);
    let total = slot_count(insns);
    let starts: BTreeSet<usize> = slots.iter().copied().chain([total]).collect();
    let mut labelled = BTreeSet::new();
    if opts.labels {
        for (insn, &slot) in insns.iter().zip(&slots) {
            // A relocated instruction's immediate is not an offset yet.
            if opts.symbols.contains_key(&slot) {
                continue;
            }
            if let Some(t) = target_slot(insn, slot) {
                if let Ok(t) = usize::try_from(t) {
                    if starts.contains(&t) {
                        labelled.insert(t);
                    }
                }
            }
        }
    }
    let comment = match opts.syntax {
        Syntax::Llvm => ";",
        Syntax::Conformance => "#",
    };
    let mut out = String::new();
    let annotate = |out: &mut String, slot: usize| {
        if let Some(f) = opts.annotate {
            for a in f(slot) {
                match a {
                    Annotation::Label(l) => {
                        let _ = writeln!(out, "{l}:");
                    }
                    Annotation::Comment(c) => {
                        for line in c.lines() {
                            let _ = writeln!(out, "{comment} {line}");
                        }
                    }
                }
            }
        }
        if labelled.contains(&slot) {
            let _ = writeln!(out, "{}:", label_name(slot));
        }
    };
    for (insn, &slot) in insns.iter().zip(&slots) {
        annotate(&mut out, slot);
        let target = target_slot(insn, slot)
            .filter(|_| !opts.symbols.contains_key(&slot))
            .and_then(|t| usize::try_from(t).ok())
            .filter(|t| labelled.contains(t))
            .map(label_name);
        let sym = opts.symbols.get(&slot).map(String::as_str);
        let printable = sym.filter(|s| {
            is_name(s)
                && matches!(
                    insn,
                    Insn::Lddw {
                        kind: LddwKind::Imm64,
                        imm: 0,
                        next_imm: 0,
                        ..
                    } | Insn::Call {
                        kind: CallKind::Local,
                        imm: -1,
                    }
                )
        });
        let ctx = Ctx {
            target: if printable.is_some() { None } else { target },
            symbol: printable,
        };
        let text = match opts.syntax {
            Syntax::Llvm => llvm::format(insn, &ctx),
            Syntax::Conformance => conformance::format(insn, &ctx),
        };
        let mut note = Vec::new();
        if let (Some(s), None) = (sym, printable) {
            note.push(s.to_string());
        }
        if opts.helper_names {
            if let Insn::Call {
                kind: CallKind::Helper,
                imm,
            } = insn
            {
                if let Some(n) = helper_name(*imm) {
                    note.push(format!("bpf_{n}"));
                }
            }
        }
        if note.is_empty() {
            let _ = writeln!(out, "    {text}");
        } else {
            let _ = writeln!(out, "    {text} {comment} {}", note.join(", "));
        }
    }
    annotate(&mut out, total);
    out
}

/// `+N` or `-N`.
pub(crate) fn signed(v: i64) -> String {
    if v >= 0 {
        format!("+{v}")
    } else {
        v.to_string()
    }
}

/// `label` or `+N`.
pub(crate) fn jump_text(ctx: &Ctx, off: i64) -> String {
    ctx.target.clone().unwrap_or_else(|| signed(off))
}

/// The name of an `lddw` pseudo source, if not a plain constant.
pub(crate) fn pseudo_name(kind: LddwKind) -> Option<&'static str> {
    Some(match kind {
        LddwKind::Imm64 => return None,
        LddwKind::MapFd => "map_fd",
        LddwKind::MapValue => "map_value",
        LddwKind::BtfId => "btf_id",
        LddwKind::Func => "func",
        LddwKind::MapIdx => "map_idx",
        LddwKind::MapIdxValue => "map_idx_value",
    })
}

/// `kind(imm)` or `kind(imm, next)`.
pub(crate) fn pseudo_text(name: &str, imm: i32, next_imm: i32) -> String {
    if next_imm == 0 {
        format!("{name}({imm})")
    } else {
        format!("{name}({imm}, {next_imm})")
    }
}
