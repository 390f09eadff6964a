//! The assembler's driver: lines → labels and statements → slots, then
//! label references resolved into offsets or left as symbol references.

use super::cursor::Cursor;
use super::detect::{classify, split_labels};
use super::lexer::tokenize;
use super::{conformance, llvm, AsmError, FixKind, Program, Stmt, SymbolRef, Syntax};
use crate::insn::{CallKind, Insn, LddwKind};
use std::collections::HashMap;

/// Slot → (line, column) of the instruction that starts there (the
/// column of its label or symbol if it names one).
pub(crate) type SlotLines = HashMap<usize, (usize, usize)>;

/// A parsed statement and where it came from.
struct Placed {
    stmt: Stmt,
    slot: usize,
    line: usize,
    col: usize,
}

/// Assembles `text`; also returns slot → (line, col) for callers' messages.
pub(crate) fn assemble_lines(
    text: &str,
    syntax: Option<Syntax>,
) -> Result<(Program, SlotLines), AsmError> {
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let toks = tokenize(line, i + 1)?;
        lines.push((i + 1, line.chars().count(), toks));
    }
    let syntax = match syntax {
        Some(s) => s,
        None => detect_checked(&lines)?,
    };

    let mut labels: HashMap<String, (usize, usize)> = HashMap::new();
    let mut placed: Vec<Placed> = Vec::new();
    let mut slot = 0usize;
    for (line_no, len, toks) in &lines {
        let (defs, rest) = split_labels(toks);
        for (name, col) in defs {
            if let Some((_, prev)) = labels.get(&name) {
                return Err(AsmError::new(
                    *line_no,
                    col,
                    format!("Invalid label `{name}`: already defined on line {prev}"),
                ));
            }
            labels.insert(name, (slot, *line_no));
        }
        let Some(first) = rest.first() else { continue };
        let col = first.col;
        let mut cur = Cursor::new(rest, *line_no, *len);
        let stmt = match syntax {
            Syntax::Conformance => conformance::parse(&mut cur)?,
            Syntax::Llvm => llvm::parse(&mut cur)?,
        };
        let slots = stmt.insn.slots();
        placed.push(Placed {
            stmt,
            slot,
            line: *line_no,
            col,
        });
        slot += slots;
    }
    if placed.is_empty() {
        let line = lines.len().max(1);
        return Err(AsmError::new(line, 1, "Invalid program: no instructions"));
    }
    resolve(placed, &labels)
}

/// The syntax of the first line that tells; a later line in the other
/// syntax is an error.
fn detect_checked(lines: &[(usize, usize, Vec<super::lexer::Token>)]) -> Result<Syntax, AsmError> {
    let mut found: Option<(Syntax, usize)> = None;
    for (line_no, _, toks) in lines {
        let rest = split_labels(toks).1;
        let Some(s) = classify(rest) else { continue };
        match found {
            None => found = Some((s, *line_no)),
            Some((f, at)) if f != s => {
                let col = rest.first().map_or(1, |t| t.col);
                return Err(AsmError::new(
                    *line_no,
                    col,
                    format!(
                        "Invalid syntax: this line is in the {} syntax but line {at} is in the {} syntax (a file uses one syntax)",
                        s.name(),
                        f.name()
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(found.map_or(Syntax::Llvm, |(s, _)| s))
}

fn resolve(
    placed: Vec<Placed>,
    labels: &HashMap<String, (usize, usize)>,
) -> Result<(Program, SlotLines), AsmError> {
    let mut prog = Program::default();
    let mut where_ = HashMap::new();
    for (i, p) in placed.iter().enumerate() {
        let col = p.stmt.fix.as_ref().map_or(p.col, |f| f.col);
        where_.insert(p.slot, (p.line, col));
        let mut insn = p.stmt.insn;
        if let Some(fix) = &p.stmt.fix {
            let err = |msg: String| AsmError::new(p.line, fix.col, msg);
            let target = labels.get(&fix.name).map(|(s, _)| *s);
            let rel = |t: usize| t as i64 - (p.slot as i64 + 1);
            match fix.kind {
                FixKind::Jump => {
                    let t = match target {
                        Some(t) => t,
                        // bpf_conformance's `jeq %r1, 0xb, exit`: the next `exit`.
                        None if fix.name == "exit" => placed
                            .get(i + 1..)
                            .unwrap_or_default()
                            .iter()
                            .find(|q| q.stmt.insn == Insn::Exit)
                            .map(|q| q.slot)
                            .ok_or_else(|| {
                                err("Invalid label `exit`: no exit instruction follows".into())
                            })?,
                        None => {
                            return Err(err(format!(
                                "Invalid label: `{}` is not defined",
                                fix.name
                            )))
                        }
                    };
                    insn = set_jump(insn, rel(t)).ok_or_else(|| {
                        err(format!(
                            "Invalid offset: label `{}` is {} slots away, out of range",
                            fix.name,
                            rel(t)
                        ))
                    })?;
                }
                FixKind::Call => match target {
                    Some(t) => {
                        let imm = i32::try_from(rel(t))
                            .map_err(|_| err("Invalid offset: call out of range".into()))?;
                        insn = Insn::Call {
                            kind: CallKind::Local,
                            imm,
                        };
                    }
                    // A helper named in the text.
                    None if matches!(
                        insn,
                        Insn::Call {
                            kind: CallKind::Helper,
                            ..
                        }
                    ) => {}
                    None => prog.relocs.push(SymbolRef {
                        slot: p.slot,
                        symbol: fix.name.clone(),
                    }),
                },
                FixKind::Lddw => match (target, insn) {
                    (Some(t), Insn::Lddw { dst, .. }) => {
                        let imm = i32::try_from(rel(t))
                            .map_err(|_| err("Invalid offset: function out of range".into()))?;
                        insn = Insn::Lddw {
                            kind: LddwKind::Func,
                            dst,
                            imm,
                            next_imm: 0,
                        };
                    }
                    _ => prog.relocs.push(SymbolRef {
                        slot: p.slot,
                        symbol: fix.name.clone(),
                    }),
                },
            }
        }
        prog.insns.push(insn);
    }
    Ok((prog, where_))
}

/// `insn` with its jump offset set to `off`, if it fits.
fn set_jump(insn: Insn, off: i64) -> Option<Insn> {
    let o16 = i16::try_from(off).ok();
    Some(match insn {
        Insn::Ja { .. } => Insn::Ja { off: o16? },
        Insn::MayGoto { .. } => Insn::MayGoto { off: o16? },
        Insn::Gotol { .. } => Insn::Gotol {
            imm: i32::try_from(off).ok()?,
        },
        Insn::Jmp {
            width,
            cond,
            dst,
            src,
            ..
        } => Insn::Jmp {
            width,
            cond,
            dst,
            src,
            off: o16?,
        },
        other => other,
    })
}
