//! Dead code in an inlined entry program (docs/cost.md, "Parse only what
//! is used"):
//! * stores into the info block (`nfkit_pktinfo`) of bytes the program
//!   never reads: the classifier fills every field, the chain's NFs read
//!   a few. The bytes read are found by following the block's pointer
//!   through registers and stack spills; the analysis gives up (changes
//!   nothing) wherever the pointer could go where it cannot follow it
//!   (a helper other than a map lookup, update or delete, a local call,
//!   a tail call, a store outside the stack, a load at an unknown offset);
//! * instructions without side effects whose result no one reads (the
//!   loads feeding those stores, the key set-up of lookups that
//!   `lookups.rs` turned into loads, argument registers no callee reads);
//! * stores into the program's own stack that nothing reads
//!   (`stack.rs`);
//! * jumps to the next instruction.
//!
//! The block is per-packet scratch (docs/abi.md 3): a static entry
//! program is the packet's whole run, so a byte it does not read after
//! storing it is read by no one.

use super::body::{live_out_by, use_def, Body};
use crate::image::MapSpec;
use nfkit_isa::{AluOp, AtomicOp, CallKind, Insn, LddwKind, Operand, Reg, Width};
use std::collections::BTreeMap;

/// What the analysis knows of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum V {
    /// Not a pointer into the info block.
    Other,
    /// The info block plus an offset (`None`: unknown offset).
    Pi(Option<i64>),
    /// `r10 + k`.
    Fp(i64),
    /// `lddw` of map `i`.
    Map(usize),
    /// Maybe a pointer into the info block.
    Unknown,
}

impl V {
    fn may_be_pi(self) -> bool {
        matches!(self, V::Pi(_) | V::Unknown)
    }

    fn join(self, o: V) -> V {
        match (self, o) {
            (a, b) if a == b => a,
            (V::Pi(_), V::Pi(_)) => V::Pi(None),
            (a, b) if a.may_be_pi() || b.may_be_pi() => V::Unknown,
            _ => V::Other,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    regs: [V; 11],
    /// 8-byte stack slots (offset from r10) holding something other than `Other`.
    stack: BTreeMap<i64, V>,
}

impl State {
    fn join(&self, o: &State) -> State {
        let mut regs = self.regs;
        for (r, x) in regs.iter_mut().zip(o.regs) {
            *r = r.join(x);
        }
        let mut stack = BTreeMap::new();
        for k in self.stack.keys().chain(o.stack.keys()) {
            let a = self.stack.get(k).copied().unwrap_or(V::Other);
            let b = o.stack.get(k).copied().unwrap_or(V::Other);
            let v = a.join(b);
            if v != V::Other {
                stack.insert(*k, v);
            }
        }
        State { regs, stack }
    }

    /// Stack bytes [at, at + n) overwritten with something not tracked.
    fn clobber(&mut self, at: i64, n: i64) {
        self.stack.retain(|&o, _| o + 8 <= at || at + n <= o);
    }
}

/// Helpers the analysis knows: their argument count (registers the
/// verifier reads) and that they write no stack memory.
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

const LOOKUP: i32 = 1;
const UPDATE: i32 = 2;
const DELETE: i32 = 3;

/// Bytes of the info block live after each instruction of the body (read
/// later on some path before being overwritten) and its stores into the
/// block at known offsets (instruction, first byte, bytes); `None` when
/// the pointer goes where the analysis cannot follow it.
#[allow(clippy::type_complexity)]
fn pi_accesses(
    b: &Body,
    maps: &[MapSpec],
    pi_map: usize,
) -> Option<(Vec<u128>, Vec<(usize, i64, i64)>)> {
    let size = maps.get(pi_map)?.value_size as usize;
    let n = b.insns.len();
    let mut at: Vec<Option<State>> = vec![None; n];
    let mut entry = State {
        regs: [V::Other; 11],
        stack: BTreeMap::new(),
    };
    entry.regs[10] = V::Fp(0);
    at[0] = Some(entry);
    let mut work = vec![0usize];
    // A read of the block must be inside it (else: give up).
    let mark = |lo: i64, len: i64| -> Option<()> {
        let hi = lo.checked_add(len)?;
        if lo < 0 || hi > size as i64 {
            return None;
        }
        Some(())
    };
    while let Some(k) = work.pop() {
        let Some(mut s) = at[k].clone() else { continue };
        let insn = b.insns[k];
        let ri = |r: Reg| r.num() as usize;
        match insn {
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst,
                src: Operand::Reg(src),
            } => s.regs[ri(dst)] = s.regs[ri(src)],
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst,
                src: Operand::Imm(v),
            } => {
                let v = v as i64;
                let d = &mut s.regs[ri(dst)];
                *d = match *d {
                    V::Pi(o) => V::Pi(o.map(|o| o + v)),
                    V::Fp(o) => V::Fp(o + v),
                    V::Unknown => V::Unknown,
                    _ => V::Other,
                };
            }
            // The verifier allows pointer arithmetic with 64-bit add and
            // sub only; any other result is a scalar.
            Insn::Alu {
                width: Width::W64,
                op: op @ (AluOp::Add | AluOp::Sub),
                dst,
                src: Operand::Reg(src),
            } => {
                let src_pi = op == AluOp::Add && s.regs[ri(src)].may_be_pi();
                let d = &mut s.regs[ri(dst)];
                *d = if d.may_be_pi() || src_pi {
                    V::Unknown
                } else {
                    V::Other
                };
            }
            Insn::Alu { dst, .. } => s.regs[ri(dst)] = V::Other,
            Insn::Endian { dst, .. } | Insn::AddrSpaceCast { dst, .. } => {
                s.regs[ri(dst)] = V::Other
            }
            Insn::Ldx {
                size: sz,
                dst,
                src,
                off,
                ..
            } => {
                let len = sz.bytes() as i64;
                s.regs[ri(dst)] = match s.regs[ri(src)] {
                    V::Pi(Some(o)) => {
                        mark(o + off as i64, len)?;
                        V::Other
                    }
                    V::Pi(None) | V::Unknown => return None,
                    V::Fp(o) if len == 8 => {
                        s.stack.get(&(o + off as i64)).copied().unwrap_or(V::Other)
                    }
                    _ => V::Other,
                };
            }
            Insn::Stx {
                size: sz,
                dst,
                src,
                off,
            } => {
                let len = sz.bytes() as i64;
                let v = s.regs[ri(src)];
                match s.regs[ri(dst)] {
                    V::Fp(o) => {
                        let a = o + off as i64;
                        s.clobber(a, len);
                        if v != V::Other {
                            if len != 8 {
                                return None;
                            }
                            s.stack.insert(a, v);
                        }
                    }
                    _ if v != V::Other => return None,
                    _ => {}
                }
            }
            Insn::St {
                size: sz, dst, off, ..
            } => {
                if let V::Fp(o) = s.regs[ri(dst)] {
                    s.clobber(o + off as i64, sz.bytes() as i64);
                }
            }
            Insn::Atomic {
                size: sz,
                op,
                dst,
                src,
                off,
            } => {
                let len = sz.bytes() as i64;
                if s.regs[ri(src)] != V::Other {
                    return None;
                }
                match s.regs[ri(dst)] {
                    V::Pi(Some(o)) => mark(o + off as i64, len)?,
                    V::Pi(None) | V::Unknown => return None,
                    V::Fp(o) => s.clobber(o + off as i64, len),
                    _ => {}
                }
                match op {
                    AtomicOp::CmpXchg => s.regs[0] = V::Other,
                    AtomicOp::Xchg
                    | AtomicOp::Add { fetch: true }
                    | AtomicOp::Or { fetch: true }
                    | AtomicOp::And { fetch: true }
                    | AtomicOp::Xor { fetch: true } => s.regs[ri(src)] = V::Other,
                    _ => {}
                }
            }
            Insn::Lddw { kind, dst, imm, .. } => {
                s.regs[ri(dst)] = match kind {
                    LddwKind::MapIdx => usize::try_from(imm).map(V::Map).unwrap_or(V::Other),
                    LddwKind::Func => return None,
                    _ => V::Other,
                }
            }
            Insn::Call {
                kind: CallKind::Helper,
                imm,
            } => {
                let nargs = helper_args(imm).unwrap_or(5);
                let arg = |i: usize| s.regs[i];
                let key_of = |m: V| match m {
                    V::Map(m) => maps.get(m).map(|x| x.key_size as i64),
                    _ => None,
                };
                for i in 1..=nargs as usize {
                    let v = arg(i);
                    if !v.may_be_pi() {
                        continue;
                    }
                    let V::Pi(Some(o)) = v else { return None };
                    let len = match (imm, i) {
                        (LOOKUP | UPDATE | DELETE, 2) => key_of(arg(1))?,
                        (UPDATE, 3) => match arg(1) {
                            V::Map(m) => maps.get(m)?.value_size as i64,
                            _ => return None,
                        },
                        _ => return None,
                    };
                    mark(o, len)?;
                }
                if imm == 12 {
                    return None;
                }
                if helper_args(imm).is_none() {
                    // It may write any stack memory it was given.
                    for v in s.stack.values_mut() {
                        *v = V::Unknown;
                    }
                }
                let r0 = if imm == LOOKUP && arg(1) == V::Map(pi_map) {
                    V::Pi(Some(0))
                } else {
                    V::Other
                };
                for r in s.regs.iter_mut().take(6) {
                    *r = V::Other;
                }
                s.regs[0] = r0;
            }
            Insn::Call { .. } | Insn::Callx { .. } => return None,
            Insn::LdAbs { .. } | Insn::LdInd { .. } => {
                for r in s.regs.iter_mut().take(6) {
                    *r = V::Other;
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
    // Every access is at a known offset inside the block (the forward
    // pass gave up otherwise): per instruction, the bytes it reads and
    // the ones it overwrites.
    if size > 128 {
        return None;
    }
    let bits = |lo: i64, len: i64| -> u128 {
        (lo.max(0)..(lo + len).min(size as i64)).fold(0, |m, x| m | 1u128 << x)
    };
    let mut stores = Vec::new();
    let mut rw = vec![(0u128, 0u128); n];
    for (k, insn) in b.insns.iter().enumerate() {
        let Some(s) = at[k].as_ref() else { continue };
        let pi = |r: Reg| match s.regs[r.num() as usize] {
            V::Pi(Some(o)) => Some(o),
            _ => None,
        };
        rw[k] = match *insn {
            Insn::Stx { size, dst, off, .. } | Insn::St { size, dst, off, .. } => match pi(dst) {
                Some(o) => {
                    let len = size.bytes() as i64;
                    stores.push((k, o + off as i64, len));
                    (0, bits(o + off as i64, len))
                }
                None => (0, 0),
            },
            Insn::Ldx { size, src, off, .. } => match pi(src) {
                Some(o) => (bits(o + off as i64, size.bytes() as i64), 0),
                None => (0, 0),
            },
            Insn::Atomic { size, dst, off, .. } => match pi(dst) {
                Some(o) => (bits(o + off as i64, size.bytes() as i64), 0),
                None => (0, 0),
            },
            Insn::Call {
                kind: CallKind::Helper,
                imm,
            } => {
                let map = match s.regs[1] {
                    V::Map(m) => maps.get(m),
                    _ => None,
                };
                let mut r = 0;
                if let (Some(o), Some(m)) = (pi(Reg::R2), map) {
                    if matches!(imm, LOOKUP | UPDATE | DELETE) {
                        r |= bits(o, m.key_size as i64);
                    }
                }
                if let (Some(o), Some(m), UPDATE) = (pi(Reg::R3), map, imm) {
                    r |= bits(o, m.value_size as i64);
                }
                (r, 0)
            }
            _ => (0, 0),
        };
    }
    // Bytes live after each instruction; none at the end (the block is
    // the packet's scratch).
    let mut live_in = vec![0u128; n];
    let mut live_out = vec![0u128; n];
    loop {
        let mut changed = false;
        for k in (0..n).rev() {
            let insn = &b.insns[k];
            let mut o = 0;
            let falls = !insn.ends_block() || matches!(insn, Insn::MayGoto { .. });
            if falls && k + 1 < n {
                o |= live_in[k + 1];
            }
            if let Some(t) = b.jump[k] {
                o |= live_in[t];
            }
            let i = rw[k].0 | (o & !rw[k].1);
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
    Some((live_out, stores))
}

/// Registers each instruction reads and writes, helper calls reading
/// only their arguments.
fn use_def_exact(i: &Insn) -> (u16, u16) {
    match *i {
        Insn::Call {
            kind: CallKind::Helper,
            imm,
        } => match helper_args(imm) {
            Some(n) => (((1u16 << (n + 1)) - 1) & !1, 0b11_1111),
            None => use_def(i),
        },
        _ => use_def(i),
    }
}

/// Registers live after each instruction; at an exit only r0.
fn live_out(b: &Body) -> Vec<u16> {
    live_out_by(b, use_def_exact)
}

/// The register an instruction without side effects defines.
fn pure_def(i: &Insn) -> Option<Reg> {
    match *i {
        Insn::Alu { dst, .. } | Insn::Endian { dst, .. } | Insn::Ldx { dst, .. } => Some(dst),
        Insn::Lddw { kind, dst, .. } if !matches!(kind, LddwKind::Func | LddwKind::BtfId) => {
            Some(dst)
        }
        _ => None,
    }
}

/// `b` without the instructions `del` marks: jumps to a removed one go
/// to the next one kept.
fn compact(b: &mut Body, del: &[bool]) {
    let n = b.insns.len();
    let mut newidx = vec![0usize; n + 1];
    let mut c = 0;
    for k in 0..n {
        newidx[k] = c;
        if !del[k] {
            c += 1;
        }
    }
    newidx[n] = c;
    let mut out = Body::default();
    for (k, _) in del.iter().enumerate().filter(|(_, d)| !**d) {
        out.insns.push(b.insns[k]);
        out.jump.push(b.jump[k].map(|t| newidx[t]));
        out.call.push(b.call[k]);
    }
    out.lines = b
        .lines
        .iter()
        .map(|(k, l)| (newidx[*k].min(c.saturating_sub(1)), l.clone()))
        .collect();
    out.core = b
        .core
        .iter()
        .filter(|(k, _)| !del[*k])
        .map(|(k, c)| (newidx[*k], c.clone()))
        .collect();
    *b = out;
}

/// Keeps every line record of `b` when `del` removes instructions: a
/// removed instruction's record moves to the next instruction kept, and
/// where that one already gets a record (its own or a later removed
/// one's), the removed instruction stays as a `ja +0` holding its record
/// instead (the kernel's verifier drops such no-ops at load time, after
/// moving their line records itself). Without this a function whose first
/// instruction was dead lost the script line of its `def`. Returns how
/// many instructions became no-ops.
fn keep_lines(b: &mut Body, del: &mut [bool]) -> usize {
    let n = b.insns.len();
    let mut has = vec![false; n];
    for (k, _) in &b.lines {
        if let Some(h) = has.get_mut(*k) {
            *h = true;
        }
    }
    let mut nops = 0;
    // Whether the next instruction kept after `k` already gets a record.
    let mut taken = false;
    for k in (0..n).rev() {
        if !del[k] {
            taken = has[k];
        } else if has[k] {
            if taken {
                del[k] = false;
                if b.insns[k] != (Insn::Ja { off: 0 }) || b.jump[k] != Some(k + 1) {
                    nops += 1;
                }
                b.insns[k] = Insn::Ja { off: 0 };
                b.jump[k] = Some(k + 1);
                b.call[k] = None;
                b.core.retain(|(c, _)| *c != k);
            }
            taken = true;
        }
    }
    nops
}

/// What [`remove_dead`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Removed {
    /// Stores of info-block bytes no one reads.
    pub pi_stores: usize,
    /// Stores into the program's stack no one reads (`stack.rs`).
    pub stack_stores: usize,
    /// Instructions in all (those stores included).
    pub insns: usize,
}

/// Removes the dead code of entry body `b` (see the module doc); the
/// info block's stores only when `private_info` (the program is the
/// packet's whole run, so no one else reads the block).
pub(super) fn remove_dead(b: &mut Body, maps: &[MapSpec], private_info: bool) -> Removed {
    let pi_map = maps
        .iter()
        .position(|m| m.name == "nfkit_pktinfo")
        .filter(|_| private_info);
    let mut removed = Removed::default();
    loop {
        let n = b.insns.len();
        let mut del = vec![false; n];
        if let Some((live, stores)) = pi_map.and_then(|m| pi_accesses(b, maps, m)) {
            let size = pi_map
                .and_then(|m| maps.get(m))
                .map_or(0, |m| m.value_size as i64);
            for (k, lo, len) in stores {
                let mask = (lo.max(0)..(lo + len).min(size)).fold(0u128, |m, x| m | 1u128 << x);
                if lo >= 0 && lo + len <= size && live[k] & mask == 0 {
                    del[k] = true;
                    removed.pi_stores += 1;
                }
            }
        }
        for k in super::stack::dead_stack_stores(b, maps) {
            if !del[k] {
                del[k] = true;
                removed.stack_stores += 1;
            }
        }
        let live = live_out(b);
        for k in 0..n {
            if let Some(r) = pure_def(&b.insns[k]) {
                if r != Reg::FP && live[k] & (1 << r.num()) == 0 {
                    del[k] = true;
                }
            }
            let to_next = b.jump[k] == Some(k + 1)
                && matches!(b.insns[k], Insn::Ja { .. } | Insn::Jmp { .. });
            if to_next {
                del[k] = true;
            }
        }
        // The last instruction stays (a jump target may be past the others).
        if let Some(last) = del.last_mut() {
            *last = false;
        }
        let nops = keep_lines(b, &mut del);
        let count = del.iter().filter(|&&d| d).count();
        if count == 0 && nops == 0 {
            return removed;
        }
        removed.insns += count;
        compact(b, &del);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{LineInfo, MapType};
    use crate::inline::testkit::{declared_map, ldx, lookup_at, mov, stx};
    use nfkit_isa::Size;

    fn body(insns: Vec<Insn>, jump: Vec<Option<usize>>) -> Body {
        let n = insns.len();
        Body {
            insns,
            jump,
            call: vec![None; n],
            lines: Vec::new(),
            core: Vec::new(),
        }
    }

    /// Looks the info block (map 0) up into r6 (spilled to fp-16 and
    /// filled back), stores a field at +48 and one at +0, reads +0 back
    /// through the filled pointer into a key of map 1 at +0 (16 bytes),
    /// then calls `helper` with r1 = the block's pointer.
    fn program(helper: i32) -> Vec<Insn> {
        let mut p = vec![Insn::St {
            size: Size::W,
            dst: Reg::FP,
            off: -4,
            imm: 0,
        }];
        p.extend(lookup_at(0, -4));
        p.extend([
            stx(Size::DW, Reg::FP, Reg::R0, -16),
            mov(Reg::R1, Operand::Imm(7)),
            // 7: the info block's pointer, filled from the stack
            ldx(Size::DW, Reg::R6, Reg::FP, -16),
            stx(Size::W, Reg::R6, Reg::R1, 48),
            stx(Size::W, Reg::R6, Reg::R1, 0),
            // A key read from the block by a lookup of map 1 (16 bytes).
            Insn::Lddw {
                kind: LddwKind::MapIdx,
                dst: Reg::R1,
                imm: 1,
                next_imm: 0,
            },
            mov(Reg::R2, Operand::Reg(Reg::R6)),
            Insn::Call {
                kind: CallKind::Helper,
                imm: LOOKUP,
            },
            mov(Reg::R1, Operand::Reg(Reg::R6)),
            Insn::Call {
                kind: CallKind::Helper,
                imm: helper,
            },
            mov(Reg::R0, Operand::Imm(0)),
            Insn::Exit,
        ]);
        p
    }

    fn maps() -> Vec<MapSpec> {
        vec![
            declared_map("nfkit_pktinfo", MapType::PercpuArray, 4, 80),
            declared_map("m", MapType::Hash, 16, 8),
        ]
    }

    fn line(slot: usize, text: &str) -> LineInfo {
        LineInfo {
            slot,
            file: "t.py".into(),
            line: slot as u32 + 1,
            col: 0,
            text: text.into(),
        }
    }

    #[test]
    fn a_removed_instruction_keeps_its_line_record() {
        // 0: dead (r2 never read), the `def`'s line; 1: its own line.
        let p = vec![
            mov(Reg::R2, Operand::Imm(5)),
            mov(Reg::R0, Operand::Imm(0)),
            Insn::Exit,
        ];
        let mut b = body(p, vec![None; 3]);
        b.lines = vec![(0, line(0, "def f():")), (1, line(1, "return 0"))];
        remove_dead(&mut b, &maps(), true);
        assert_eq!(b.insns[0], Insn::Ja { off: 0 }, "{:?}", b.insns);
        assert_eq!(b.jump[0], Some(1));
        let texts: Vec<(usize, &str)> =
            b.lines.iter().map(|(k, l)| (*k, l.text.as_str())).collect();
        assert_eq!(texts, vec![(0, "def f():"), (1, "return 0")]);

        // Without a record of its own, the next instruction takes the
        // removed one's and nothing stays in its place.
        let p = vec![
            mov(Reg::R2, Operand::Imm(5)),
            mov(Reg::R0, Operand::Imm(0)),
            Insn::Exit,
        ];
        let mut b = body(p, vec![None; 3]);
        b.lines = vec![(0, line(0, "def f():"))];
        let r = remove_dead(&mut b, &maps(), true);
        assert_eq!(r.insns, 1);
        assert_eq!(b.insns.len(), 2, "{:?}", b.insns);
        assert_eq!(b.lines.len(), 1);
        assert_eq!(b.lines[0].0, 0);
    }

    #[test]
    fn a_store_no_one_reads_goes_and_a_read_one_stays() {
        // ktime_get_ns(5) reads no argument: the block is not passed.
        let p = program(5);
        let n = p.len();
        let mut b = body(p, vec![None; n]);
        let r = remove_dead(&mut b, &maps(), true);
        assert_eq!(r.pi_stores, 1, "{:?}", b.insns);
        let stores: Vec<i16> = b
            .insns
            .iter()
            .filter_map(|i| match *i {
                Insn::Stx {
                    dst: Reg::R6, off, ..
                } => Some(off),
                _ => None,
            })
            .collect();
        assert_eq!(stores, vec![0]);
        // The dead `r1 = r6` before the helper without arguments went too.
        assert!(!b.insns.contains(&mov(Reg::R1, Operand::Reg(Reg::R6))));
    }

    #[test]
    fn the_block_passed_to_a_helper_it_does_not_know_keeps_every_store() {
        // bpf_probe_read_kernel(113): the analysis cannot tell what it reads.
        let p = program(113);
        let n = p.len();
        let mut b = body(p, vec![None; n]);
        let r = remove_dead(&mut b, &maps(), true);
        assert_eq!(r.pi_stores, 0);
        let stores = b
            .insns
            .iter()
            .filter(|i| matches!(i, Insn::Stx { dst: Reg::R6, .. }))
            .count();
        assert_eq!(stores, 2);
    }

    #[test]
    fn a_jump_to_a_removed_instruction_lands_on_the_next_one_kept() {
        // 0: r1 = 1; 1: if r1 == 0 goto 3; 2: r2 = 5 (dead); 3: r3 = 1
        // (dead); 4: r0 = 0; 5: exit
        let insns = vec![
            mov(Reg::R1, Operand::Imm(1)),
            Insn::Jmp {
                width: Width::W64,
                cond: nfkit_isa::Cond::Eq,
                dst: Reg::R1,
                src: Operand::Imm(0),
                off: 1,
            },
            mov(Reg::R2, Operand::Imm(5)),
            mov(Reg::R3, Operand::Imm(1)),
            mov(Reg::R0, Operand::Imm(0)),
            Insn::Exit,
        ];
        let jump = vec![None, Some(3), None, None, None, None];
        let mut b = body(insns, jump);
        remove_dead(&mut b, &maps(), true);
        // The dead moves went, then the jump to the next instruction,
        // then the r1 it tested.
        assert_eq!(b.insns, vec![mov(Reg::R0, Operand::Imm(0)), Insn::Exit]);
        assert_eq!(b.jump, vec![None, None]);
    }

    /// Looks the block up into r6, clears its 8 bytes at 64, runs
    /// `between` (which sets r7), stores the byte at 67 and returns it
    /// plus r7.
    fn clear_then_byte(between: Insn) -> Vec<Insn> {
        let mut p = vec![Insn::St {
            size: Size::W,
            dst: Reg::FP,
            off: -4,
            imm: 0,
        }];
        p.extend(lookup_at(0, -4));
        p.extend([
            mov(Reg::R6, Operand::Reg(Reg::R0)),
            mov(Reg::R1, Operand::Imm(0)),
            stx(Size::DW, Reg::R6, Reg::R1, 64),
            between,
            mov(Reg::R1, Operand::Imm(1)),
            stx(Size::B, Reg::R6, Reg::R1, 67),
            ldx(Size::B, Reg::R0, Reg::R6, 67),
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Add,
                dst: Reg::R0,
                src: Operand::Reg(Reg::R7),
            },
            Insn::Exit,
        ]);
        p
    }

    fn stores_at(b: &Body) -> Vec<i16> {
        b.insns
            .iter()
            .filter_map(|i| match *i {
                Insn::Stx {
                    dst: Reg::R6, off, ..
                } => Some(off),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_clear_overwritten_before_its_byte_is_read_goes() {
        let p = clear_then_byte(mov(Reg::R7, Operand::Imm(0)));
        let n = p.len();
        let mut b = body(p, vec![None; n]);
        let r = remove_dead(&mut b, &maps(), true);
        assert_eq!(r.pi_stores, 1, "{:?}", b.insns);
        assert_eq!(stores_at(&b), vec![67]);
    }

    #[test]
    fn a_clear_whose_byte_is_read_before_the_overwrite_stays() {
        // r7 = the byte at 65, read after the clear and before the store
        // at 67: the clear gives it its value.
        let p = clear_then_byte(ldx(Size::B, Reg::R7, Reg::R6, 65));
        let n = p.len();
        let mut b = body(p, vec![None; n]);
        let r = remove_dead(&mut b, &maps(), true);
        assert_eq!(r.pi_stores, 0, "{:?}", b.insns);
        assert_eq!(stores_at(&b), vec![64, 67]);
    }
}
