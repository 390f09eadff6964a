//! Repeated lookups of one array-map element in an entry program (the
//! info block `nfkit_pktinfo[0]` and `nfkit_config[0]`, looked up by the
//! classifier and again by every inlined NF) done once: the entry looks
//! each element up first thing and keeps the pointer in a stack slot;
//! every lookup of the same element becomes a load of that slot. An
//! array element never moves and a per-CPU one is the same for the whole
//! run (the program runs on one CPU), so the pointer is what the lookup
//! would have given.

use super::body::Body;
use crate::image::{MapSpec, MapType};
use nfkit_isa::{AluOp, CallKind, Insn, LddwKind, Operand, Reg, Size, Width};
use std::collections::HashMap;

/// `bpf_map_lookup_elem`.
const LOOKUP: i32 = 1;

/// What the scan knows about a register.
#[derive(Clone, Copy, Default)]
struct Known {
    konst: Option<i64>,
    /// `r10 + k`.
    fp: Option<i64>,
    /// `lddw` of map `i`.
    map: Option<usize>,
}

/// Lookups in `b` of (map, key) with a constant key: (instruction, map, key).
pub(super) fn sites(b: &Body, maps: &[MapSpec]) -> Vec<(usize, usize, u32)> {
    let mut targets = vec![false; b.insns.len() + 1];
    for t in b.jump.iter().flatten() {
        targets[*t] = true;
    }
    let mut regs = [Known::default(); 11];
    // Stack bytes known: offset -> (size, value).
    let mut stack: HashMap<i64, (usize, i64)> = HashMap::new();
    let mut out = Vec::new();
    let reset = |regs: &mut [Known; 11], stack: &mut HashMap<i64, (usize, i64)>| {
        *regs = [Known::default(); 11];
        stack.clear();
    };
    let forget = |stack: &mut HashMap<i64, (usize, i64)>, at: i64, size: usize| {
        stack.retain(|&o, &mut (s, _)| o + s as i64 <= at || at + size as i64 <= o);
    };
    for (k, insn) in b.insns.iter().enumerate() {
        if targets[k] {
            reset(&mut regs, &mut stack);
        }
        regs[10] = Known {
            fp: Some(0),
            ..Known::default()
        };
        let r = |x: Reg| x.num() as usize;
        match *insn {
            Insn::Alu {
                width,
                op: AluOp::Mov,
                dst,
                src: Operand::Imm(v),
            } => {
                let v = match width {
                    Width::W64 => v as i64,
                    Width::W32 => v as u32 as i64,
                };
                regs[r(dst)] = Known {
                    konst: Some(v),
                    ..Known::default()
                };
            }
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst,
                src: Operand::Reg(s),
            } => regs[r(dst)] = regs[r(s)],
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst,
                src: Operand::Imm(v),
            } => {
                let d = &mut regs[r(dst)];
                d.fp = d.fp.map(|x| x + v as i64);
                d.konst = d.konst.map(|x| x.wrapping_add(v as i64));
                d.map = None;
            }
            Insn::Lddw {
                kind: LddwKind::MapIdx,
                dst,
                imm,
                ..
            } => {
                regs[r(dst)] = Known {
                    map: usize::try_from(imm).ok(),
                    ..Known::default()
                }
            }
            Insn::Alu { dst, .. }
            | Insn::Endian { dst, .. }
            | Insn::AddrSpaceCast { dst, .. }
            | Insn::Ldx { dst, .. }
            | Insn::Lddw { dst, .. } => regs[r(dst)] = Known::default(),
            Insn::Stx {
                size,
                dst,
                src,
                off,
            } => match regs[r(dst)].fp {
                Some(base) => {
                    let at = base + off as i64;
                    forget(&mut stack, at, size.bytes());
                    if let Some(v) = regs[r(src)].konst {
                        stack.insert(at, (size.bytes(), v));
                    }
                }
                None => stack.clear(),
            },
            Insn::St {
                size,
                dst,
                off,
                imm,
            } => match regs[r(dst)].fp {
                Some(base) => {
                    let at = base + off as i64;
                    forget(&mut stack, at, size.bytes());
                    stack.insert(at, (size.bytes(), imm as i64));
                }
                None => stack.clear(),
            },
            Insn::Atomic {
                size,
                dst,
                src,
                off,
                ..
            } => {
                match regs[r(dst)].fp {
                    Some(base) => forget(&mut stack, base + off as i64, size.bytes()),
                    None => stack.clear(),
                }
                regs[r(src)] = Known::default();
                regs[0] = Known::default();
            }
            Insn::Call {
                kind: CallKind::Helper,
                imm: LOOKUP,
            } => {
                if let (Some(m), Some(at)) = (regs[1].map, regs[2].fp) {
                    if let (Some(&(4, key)), Some(spec)) = (stack.get(&at), maps.get(m)) {
                        let array = matches!(spec.map_type, MapType::Array | MapType::PercpuArray);
                        if array && key >= 0 && (key as u64) < u64::from(spec.max_entries) {
                            out.push((k, m, key as u32));
                        }
                    }
                }
                for x in regs.iter_mut().take(6) {
                    *x = Known::default();
                }
            }
            Insn::Call { .. } | Insn::Callx { .. } | Insn::LdAbs { .. } | Insn::LdInd { .. } => {
                for x in regs.iter_mut().take(6) {
                    *x = Known::default();
                }
                // A helper may write through a pointer to the stack.
                stack.clear();
            }
            _ => {}
        }
        if insn.ends_block() {
            reset(&mut regs, &mut stack);
        }
    }
    out
}

/// Rewrites entry body `b` (frame `frame` bytes) so that each element
/// looked up at least twice is looked up once, at the start; the number
/// of lookups removed, or `None` when nothing changed (or the slots would
/// not fit in `limit` bytes of stack).
pub(super) fn cache_lookups(
    b: &mut Body,
    maps: &[MapSpec],
    frame: u32,
    limit: u32,
) -> Option<usize> {
    let found = sites(b, maps);
    let mut groups: Vec<((usize, u32), Vec<usize>)> = Vec::new();
    for (k, m, key) in found {
        match groups.iter_mut().find(|(g, _)| *g == (m, key)) {
            Some((_, v)) => v.push(k),
            None => groups.push(((m, key), vec![k])),
        }
    }
    groups.retain(|(_, v)| v.len() >= 2);
    if groups.is_empty() {
        return None;
    }
    let base = i64::from(frame.div_ceil(8) * 8);
    let key_slot = base + 8 * (groups.len() as i64 + 1);
    if key_slot > i64::from(limit) {
        return None;
    }
    let slot = |g: usize| -(base + 8 * (g as i64 + 1));
    // The prologue: ctx kept in r6 (not yet used at the entry), each
    // element looked up into its slot.
    let mut pre = vec![Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst: Reg::R6,
        src: Operand::Reg(Reg::R1),
    }];
    for (g, ((m, key), _)) in groups.iter().enumerate() {
        pre.push(Insn::St {
            size: Size::W,
            dst: Reg::FP,
            off: -key_slot as i16,
            imm: *key as i32,
        });
        pre.push(Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R2,
            src: Operand::Reg(Reg::FP),
        });
        pre.push(Insn::Alu {
            width: Width::W64,
            op: AluOp::Add,
            dst: Reg::R2,
            src: Operand::Imm(-key_slot as i32),
        });
        pre.push(Insn::Lddw {
            kind: LddwKind::MapIdx,
            dst: Reg::R1,
            imm: *m as i32,
            next_imm: 0,
        });
        pre.push(Insn::Call {
            kind: CallKind::Helper,
            imm: LOOKUP,
        });
        pre.push(Insn::Stx {
            size: Size::DW,
            dst: Reg::FP,
            src: Reg::R0,
            off: slot(g) as i16,
        });
    }
    pre.push(Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst: Reg::R1,
        src: Operand::Reg(Reg::R6),
    });
    let mut removed = 0;
    for (g, (_, ks)) in groups.iter().enumerate() {
        for &k in ks {
            b.insns[k] = Insn::Ldx {
                size: Size::DW,
                signed: false,
                dst: Reg::R0,
                src: Reg::FP,
                off: slot(g) as i16,
            };
            removed += 1;
        }
    }
    let p = pre.len();
    let mut insns = pre;
    insns.append(&mut b.insns);
    b.insns = insns;
    let mut jump = vec![None; p];
    jump.extend(b.jump.iter().map(|j| j.map(|t| t + p)));
    b.jump = jump;
    let mut call = vec![None; p];
    call.append(&mut b.call);
    b.call = call;
    for (i, (k, _)) in b.lines.iter_mut().enumerate() {
        // The first record stays at the function's start.
        if i > 0 || *k > 0 {
            *k += p;
        }
    }
    for (k, _) in b.core.iter_mut() {
        *k += p;
    }
    Some(removed - groups.len())
}
