//! Dead stack stores in an inlined entry program: stores into the
//! program's own stack frame (`r10`-relative) of bytes that nothing reads
//! before they are overwritten or the program ends. After inlining and
//! the lookups once (`lookups.rs`) the keys of the lookups that became
//! loads are still stored, and the spills of callee-saved registers whose
//! restore `dead.rs` removed are still made.
//!
//! Two passes: a forward one finds, for each instruction, which registers
//! (and 8-byte stack slots) hold a pointer into the stack and at which
//! offset; a backward one finds the stack bytes live after each
//! instruction, a byte being read by a load, an atomic, or a helper that
//! is given its address (a map key or value of known size; any other
//! helper counts as reading the whole stack). The analysis changes
//! nothing when a stack pointer goes where it cannot follow it: stored
//! outside the stack, into a narrow slot, through an unknown pointer,
//! computed with other than adds, or passed to a local call.

use super::body::Body;
use crate::image::MapSpec;
use nfkit_isa::{AluOp, CallKind, Insn, LddwKind, Operand, Width};
use std::collections::BTreeMap;

/// Bytes of the stack below `r10`.
const STACK: i64 = 512;

/// What the forward pass knows of a register or a spilled value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum V {
    /// Not a stack pointer.
    No,
    /// `r10 + k`.
    Fp(i64),
    /// Maybe a stack pointer, offset unknown.
    Any,
    /// `lddw` of map `i` (not a stack pointer).
    Map(usize),
}

impl V {
    fn is_ptr(self) -> bool {
        matches!(self, V::Fp(_) | V::Any)
    }

    fn join(self, o: V) -> V {
        match (self, o) {
            (a, b) if a == b => a,
            (a, b) if a.is_ptr() || b.is_ptr() => V::Any,
            _ => V::No,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    regs: [V; 11],
    /// 8-byte slots (offset from r10) holding a stack pointer.
    spills: BTreeMap<i64, V>,
}

impl State {
    fn join(&self, o: &State) -> State {
        let mut regs = self.regs;
        for (r, x) in regs.iter_mut().zip(o.regs) {
            *r = r.join(x);
        }
        let mut spills = BTreeMap::new();
        for k in self.spills.keys().chain(o.spills.keys()) {
            let a = self.spills.get(k).copied().unwrap_or(V::No);
            let b = o.spills.get(k).copied().unwrap_or(V::No);
            let v = a.join(b);
            if v.is_ptr() {
                spills.insert(*k, v);
            }
        }
        State { regs, spills }
    }

    /// Bytes [at, at + n) overwritten with something that is not a pointer.
    fn clobber(&mut self, at: i64, n: i64) {
        self.spills.retain(|&o, _| o + 8 <= at || at + n <= o);
    }

    /// What an 8-byte load through a pointer of unknown offset may give.
    fn any_spill(&self) -> V {
        if self.spills.is_empty() {
            V::No
        } else {
            V::Any
        }
    }
}

/// Stack bytes as bits: bit i is the byte at `r10 - 512 + i`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bytes([u64; 8]);

impl Bytes {
    const ALL: Bytes = Bytes([u64::MAX; 8]);

    /// The bits of [lo, hi) (offsets from r10), clipped to the stack.
    fn range(lo: i64, hi: i64) -> Bytes {
        let mut b = Bytes::default();
        for x in lo.max(-STACK)..hi.min(0) {
            let i = (x + STACK) as usize;
            b.0[i / 64] |= 1 << (i % 64);
        }
        b
    }

    fn or(self, o: Bytes) -> Bytes {
        let mut r = self;
        for (a, b) in r.0.iter_mut().zip(o.0) {
            *a |= b;
        }
        r
    }

    fn minus(self, o: Bytes) -> Bytes {
        let mut r = self;
        for (a, b) in r.0.iter_mut().zip(o.0) {
            *a &= !b;
        }
        r
    }

    fn meets(self, o: Bytes) -> bool {
        self.0.iter().zip(o.0).any(|(a, b)| a & b != 0)
    }
}

const LOOKUP: i32 = 1;
const UPDATE: i32 = 2;
const DELETE: i32 = 3;

/// Argument registers of the helpers whose stack reads are known exactly
/// (map lookup, update, delete: key and value of the map's sizes) or that
/// take no stack memory (their arguments are scalars, maps, the context
/// or map values): the registers they read, r1 up.
fn helper_args(id: i32) -> Option<u16> {
    Some(match id {
        5 | 7 | 8 => 0,       // ktime_get_ns, get_prandom_u32, get_smp_processor_id
        93 | 94 => 1,         // spin_lock, spin_unlock
        1 | 3 | 23 | 54 => 2, // map_lookup_elem, map_delete_elem, redirect, xdp_adjust_meta
        12 | 51 => 3,         // tail_call, redirect_map
        2 => 4,               // map_update_elem
        _ => return None,
    })
}

/// The forward pass: the state before each reachable instruction;
/// `None` when a stack pointer escapes the analysis.
fn pointers(b: &Body) -> Option<Vec<Option<State>>> {
    let n = b.insns.len();
    let mut at: Vec<Option<State>> = vec![None; n];
    if n == 0 {
        return Some(at);
    }
    let mut entry = State {
        regs: [V::No; 11],
        spills: BTreeMap::new(),
    };
    entry.regs[10] = V::Fp(0);
    at[0] = Some(entry);
    let mut work = vec![0usize];
    let ri = |r: nfkit_isa::Reg| r.num() as usize;
    while let Some(k) = work.pop() {
        let Some(mut s) = at[k].clone() else { continue };
        let insn = b.insns[k];
        match insn {
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst,
                src: Operand::Reg(src),
            } => s.regs[ri(dst)] = s.regs[ri(src)],
            Insn::Alu {
                width: Width::W64,
                op: op @ (AluOp::Add | AluOp::Sub),
                dst,
                src: Operand::Imm(v),
            } => {
                let v = if op == AluOp::Add {
                    v as i64
                } else {
                    -(v as i64)
                };
                let d = &mut s.regs[ri(dst)];
                *d = match *d {
                    V::Fp(o) => V::Fp(o + v),
                    V::Any => V::Any,
                    _ => V::No,
                };
            }
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add | AluOp::Sub,
                dst,
                src: Operand::Reg(src),
            } => {
                let p = s.regs[ri(dst)].is_ptr() || s.regs[ri(src)].is_ptr();
                s.regs[ri(dst)] = if p { V::Any } else { V::No };
            }
            Insn::Alu {
                op: AluOp::Mov | AluOp::MovSx(_),
                dst,
                src: Operand::Imm(_),
                ..
            } => s.regs[ri(dst)] = V::No,
            Insn::Alu { dst, src, .. } => {
                let src_ptr = matches!(src, Operand::Reg(r) if s.regs[ri(r)].is_ptr());
                if src_ptr || s.regs[ri(dst)].is_ptr() {
                    return None;
                }
                s.regs[ri(dst)] = V::No;
            }
            Insn::Endian { dst, .. } => {
                if s.regs[ri(dst)].is_ptr() {
                    return None;
                }
                s.regs[ri(dst)] = V::No;
            }
            Insn::AddrSpaceCast { dst, src, .. } => {
                if s.regs[ri(src)].is_ptr() {
                    return None;
                }
                s.regs[ri(dst)] = V::No;
            }
            Insn::Ldx {
                size,
                dst,
                src,
                off,
                ..
            } => {
                s.regs[ri(dst)] = match s.regs[ri(src)] {
                    V::Fp(o) if size.bytes() == 8 => {
                        s.spills.get(&(o + off as i64)).copied().unwrap_or(V::No)
                    }
                    V::Any if size.bytes() == 8 => s.any_spill(),
                    _ => V::No,
                };
            }
            Insn::Stx {
                size,
                dst,
                src,
                off,
            } => {
                let len = size.bytes() as i64;
                let v = s.regs[ri(src)];
                match s.regs[ri(dst)] {
                    V::Fp(o) => {
                        let a = o + off as i64;
                        s.clobber(a, len);
                        if v.is_ptr() {
                            if len != 8 {
                                return None;
                            }
                            s.spills.insert(a, v);
                        }
                    }
                    _ if v.is_ptr() => return None,
                    V::Any => {
                        for x in s.spills.values_mut() {
                            *x = V::Any;
                        }
                    }
                    _ => {}
                }
            }
            Insn::St { size, dst, off, .. } => match s.regs[ri(dst)] {
                V::Fp(o) => s.clobber(o + off as i64, size.bytes() as i64),
                V::Any => {
                    for x in s.spills.values_mut() {
                        *x = V::Any;
                    }
                }
                _ => {}
            },
            Insn::Atomic {
                dst,
                src,
                off,
                size,
                ..
            } => {
                if s.regs[ri(src)].is_ptr() {
                    return None;
                }
                match s.regs[ri(dst)] {
                    V::Fp(o) => s.clobber(o + off as i64, size.bytes() as i64),
                    V::Any => {
                        for x in s.spills.values_mut() {
                            *x = V::Any;
                        }
                    }
                    _ => {}
                }
                // A fetch writes its source or r0 with a scalar.
                s.regs[ri(src)] = V::No;
                s.regs[0] = V::No;
            }
            Insn::Lddw { kind, dst, imm, .. } => {
                s.regs[ri(dst)] = match kind {
                    LddwKind::MapIdx => usize::try_from(imm).map(V::Map).unwrap_or(V::No),
                    _ => V::No,
                }
            }
            Insn::Call {
                kind: CallKind::Helper,
                imm,
            } => {
                if helper_args(imm).is_none() && (1..=5).any(|i| s.regs[i].is_ptr()) {
                    // It may write the stack memory it was given.
                    for x in s.spills.values_mut() {
                        *x = V::Any;
                    }
                }
                for r in s.regs.iter_mut().take(6) {
                    *r = V::No;
                }
            }
            Insn::Call { .. } | Insn::Callx { .. } => return None,
            Insn::LdAbs { .. } | Insn::LdInd { .. } => {
                for r in s.regs.iter_mut().take(6) {
                    *r = V::No;
                }
            }
            Insn::Ja { .. }
            | Insn::Gotol { .. }
            | Insn::Jmp { .. }
            | Insn::MayGoto { .. }
            | Insn::Exit => {}
        }
        s.regs[10] = V::Fp(0);
        let falls = !insn.ends_block() || matches!(insn, Insn::MayGoto { .. });
        let mut next = Vec::with_capacity(2);
        if falls && k + 1 < n {
            next.push(k + 1);
        }
        if let Some(t) = b.jump[k] {
            next.push(t);
        }
        for t in next {
            let merged = match &at[t] {
                None => s.clone(),
                Some(old) => old.join(&s),
            };
            if at[t].as_ref() != Some(&merged) {
                at[t] = Some(merged);
                work.push(t);
            }
        }
    }
    Some(at)
}

/// Stack bytes instruction `i` reads and the ones it overwrites whole,
/// in state `s`.
fn reads_writes(i: &Insn, s: &State, maps: &[MapSpec]) -> (Bytes, Bytes) {
    let at = |r: nfkit_isa::Reg| s.regs[r.num() as usize];
    let none = Bytes::default();
    match *i {
        Insn::Ldx { size, src, off, .. } => match at(src) {
            V::Fp(o) => {
                let a = o + off as i64;
                (Bytes::range(a, a + size.bytes() as i64), none)
            }
            V::Any => (Bytes::ALL, none),
            _ => (none, none),
        },
        Insn::Stx { size, dst, off, .. } | Insn::St { size, dst, off, .. } => match at(dst) {
            V::Fp(o) => {
                let a = o + off as i64;
                (none, Bytes::range(a, a + size.bytes() as i64))
            }
            _ => (none, none),
        },
        Insn::Atomic { size, dst, off, .. } => match at(dst) {
            V::Fp(o) => {
                let a = o + off as i64;
                (Bytes::range(a, a + size.bytes() as i64), none)
            }
            V::Any => (Bytes::ALL, none),
            _ => (none, none),
        },
        Insn::Call {
            kind: CallKind::Helper,
            imm,
        } => {
            let nargs = helper_args(imm).unwrap_or(5);
            let map = match at(nfkit_isa::Reg::R1) {
                V::Map(m) => maps.get(m),
                _ => None,
            };
            let mut read = none;
            for r in 1..=nargs as usize {
                let len = match (imm, r, map) {
                    (LOOKUP | UPDATE | DELETE, 2, Some(m)) => Some(m.key_size as i64),
                    (UPDATE, 3, Some(m)) => Some(m.value_size as i64),
                    _ => None,
                };
                match (s.regs[r], len) {
                    (V::Fp(o), Some(len)) => read = read.or(Bytes::range(o, o + len)),
                    (v, _) if v.is_ptr() => return (Bytes::ALL, none),
                    _ => {}
                }
            }
            (read, none)
        }
        // Not reached: the forward pass gave up on local calls.
        Insn::Call { .. } | Insn::Callx { .. } => (Bytes::ALL, none),
        _ => (none, none),
    }
}

/// Stores of `b` into its own stack of bytes no one reads afterwards
/// (see the module doc); empty when the analysis cannot tell.
pub(super) fn dead_stack_stores(b: &Body, maps: &[MapSpec]) -> Vec<usize> {
    let Some(states) = pointers(b) else {
        return Vec::new();
    };
    let n = b.insns.len();
    let rw: Vec<(Bytes, Bytes)> = (0..n)
        .map(|k| match &states[k] {
            Some(s) => reads_writes(&b.insns[k], s, maps),
            None => (Bytes::default(), Bytes::default()),
        })
        .collect();
    let mut live_in = vec![Bytes::default(); n + 1];
    let mut live_out = vec![Bytes::default(); n];
    loop {
        let mut changed = false;
        for k in (0..n).rev() {
            let insn = &b.insns[k];
            let mut o = Bytes::default();
            let falls = !insn.ends_block() || matches!(insn, Insn::MayGoto { .. });
            if falls && k + 1 < n {
                o = o.or(live_in[k + 1]);
            }
            if let Some(t) = b.jump[k] {
                o = o.or(live_in[t]);
            }
            let (r, w) = rw[k];
            let i = r.or(o.minus(w));
            if o != live_out[k] || i != live_in[k] {
                live_out[k] = o;
                live_in[k] = i;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    (0..n)
        .filter(|&k| {
            let (size, dst, off) = match b.insns[k] {
                Insn::Stx { size, dst, off, .. } | Insn::St { size, dst, off, .. } => {
                    (size, dst, off)
                }
                _ => return false,
            };
            let Some(V::Fp(o)) = states[k].as_ref().map(|s| s.regs[dst.num() as usize]) else {
                return false;
            };
            let a = o + off as i64;
            let len = size.bytes() as i64;
            a >= -STACK && a + len <= 0 && !Bytes::range(a, a + len).meets(live_out[k])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::MapType;
    use crate::inline::testkit::{declared_map, ldx, lookup_at, mov, stx};
    use nfkit_isa::{Reg, Size};

    fn body(insns: Vec<Insn>) -> Body {
        let n = insns.len();
        Body {
            insns,
            jump: vec![None; n],
            call: vec![None; n],
            lines: Vec::new(),
            core: Vec::new(),
        }
    }

    fn st(off: i16, imm: i32) -> Insn {
        Insn::St {
            size: Size::W,
            dst: Reg::FP,
            off,
            imm,
        }
    }

    fn call(imm: i32) -> Insn {
        Insn::Call {
            kind: CallKind::Helper,
            imm,
        }
    }

    fn end() -> [Insn; 2] {
        [mov(Reg::R0, Operand::Imm(0)), Insn::Exit]
    }

    fn maps() -> Vec<MapSpec> {
        vec![declared_map("m", MapType::Hash, 8, 8)]
    }

    #[test]
    fn a_store_read_later_stays_and_one_read_by_no_one_goes() {
        let mut p = vec![
            st(-8, 1),                          // 0: read by 2
            st(-16, 2),                         // 1: read by no one
            ldx(Size::W, Reg::R1, Reg::FP, -8), // 2
        ];
        p.extend(end());
        assert_eq!(dead_stack_stores(&body(p), &maps()), vec![1]);
    }

    #[test]
    fn a_store_overwritten_before_any_read_goes() {
        let mut p = vec![
            st(-8, 1),                          // 0: overwritten by 1
            st(-8, 2),                          // 1: read by 2
            ldx(Size::W, Reg::R1, Reg::FP, -8), // 2
        ];
        p.extend(end());
        assert_eq!(dead_stack_stores(&body(p), &maps()), vec![0]);
    }

    #[test]
    fn a_store_only_half_overwritten_stays() {
        let mut p = vec![
            stx(Size::DW, Reg::FP, Reg::R1, -8), // 0: its low half read by 2
            st(-4, 2),                           // 1: overwrites the high half
            ldx(Size::DW, Reg::R2, Reg::FP, -8), // 2
        ];
        p.extend(end());
        assert!(dead_stack_stores(&body(p), &maps()).is_empty());
    }

    #[test]
    fn a_key_a_map_lookup_reads_stays_and_bytes_past_the_key_do_not() {
        // The map's key is 8 bytes at fp-16: the stores at -16 and -12
        // are read by the lookup, the one at -8 is not.
        let mut p = vec![st(-16, 1), st(-12, 2), st(-8, 3)];
        p.extend(lookup_at(0, -16));
        p.extend(end());
        assert_eq!(dead_stack_stores(&body(p), &maps()), vec![2]);
    }

    #[test]
    fn a_slot_passed_to_an_unknown_helper_keeps_every_store() {
        // bpf_probe_read_kernel(113) with r1 = fp-8.
        let mut p = vec![
            st(-8, 1),
            st(-40, 1),
            mov(Reg::R1, Operand::Reg(Reg::FP)),
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst: Reg::R1,
                src: Operand::Imm(-8),
            },
            call(113),
        ];
        p.extend(end());
        assert!(dead_stack_stores(&body(p), &maps()).is_empty());
    }

    #[test]
    fn a_read_through_a_spilled_stack_pointer_keeps_its_store() {
        // r1 = fp-8 spilled to fp-24, filled into r2, read through r2.
        let mut p = vec![
            st(-8, 1),
            mov(Reg::R1, Operand::Reg(Reg::FP)),
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst: Reg::R1,
                src: Operand::Imm(-8),
            },
            stx(Size::DW, Reg::FP, Reg::R1, -24),
            ldx(Size::DW, Reg::R2, Reg::FP, -24),
            ldx(Size::W, Reg::R3, Reg::R2, 0),
        ];
        p.extend(end());
        assert!(dead_stack_stores(&body(p), &maps()).is_empty());
    }

    #[test]
    fn a_stack_pointer_stored_outside_the_stack_stops_the_analysis() {
        // *(u64 *)(r6 + 0) = fp-8: someone may read fp-8 through it.
        let mut p = vec![
            st(-8, 1),
            st(-16, 1),
            mov(Reg::R1, Operand::Reg(Reg::FP)),
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst: Reg::R1,
                src: Operand::Imm(-8),
            },
            stx(Size::DW, Reg::R6, Reg::R1, 0),
        ];
        p.extend(end());
        assert!(dead_stack_stores(&body(p), &maps()).is_empty());
    }

    #[test]
    fn a_store_read_on_one_branch_stays() {
        // 0: *(fp-8) = 1; 1: if r1 == 0 goto 3; 2: r2 = *(fp-8); 3: exit path
        let p = vec![
            st(-8, 1),
            Insn::Jmp {
                width: Width::W64,
                cond: nfkit_isa::Cond::Eq,
                dst: Reg::R1,
                src: Operand::Imm(0),
                off: 1,
            },
            ldx(Size::W, Reg::R2, Reg::FP, -8),
            mov(Reg::R0, Operand::Imm(0)),
            Insn::Exit,
        ];
        let mut b = body(p);
        b.jump[1] = Some(3);
        assert!(dead_stack_stores(&b, &maps()).is_empty());
    }
}
