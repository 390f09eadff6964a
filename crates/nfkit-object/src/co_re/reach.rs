//! Which poisoned instructions an entry can reach. The kernel's verifier
//! skips the branch a known constant rules out, which is how programs
//! guard kernel-dependent code (`if (bpf_core_field_exists(...))`): once
//! relocated, the guard is `r1 = 0; if r1 == 0 goto skip`. This walk does
//! the same with constants from immediate moves and `lddw`, so such a
//! guarded poison does not refuse the program, while one on a path that
//! can run does.

use super::POISON_HELPER;
use crate::image::Image;
use nfkit_isa::{AluOp, CallKind, Cond, Insn, LddwKind, Operand, Width};

/// Known register values (r0-r10) on the way into an instruction.
type Regs = [Option<u64>; 11];

/// The value of `src`, if known.
fn operand(r: &Regs, src: Operand) -> Option<u64> {
    match src {
        Operand::Imm(i) => Some(i as i64 as u64),
        Operand::Reg(s) => r[s.num() as usize],
    }
}

/// Whether `a cond b` holds (`None`: unknown).
fn decide(width: Width, cond: Cond, a: Option<u64>, b: Option<u64>) -> Option<bool> {
    let (mut a, mut b) = (a?, b?);
    let (sa, sb) = match width {
        Width::W32 => {
            a &= 0xffff_ffff;
            b &= 0xffff_ffff;
            (i64::from(a as u32 as i32), i64::from(b as u32 as i32))
        }
        Width::W64 => (a as i64, b as i64),
    };
    Some(match cond {
        Cond::Eq => a == b,
        Cond::Ne => a != b,
        Cond::Gt => a > b,
        Cond::Ge => a >= b,
        Cond::Lt => a < b,
        Cond::Le => a <= b,
        Cond::Set => a & b != 0,
        Cond::Sgt => sa > sb,
        Cond::Sge => sa >= sb,
        Cond::Slt => sa < sb,
        Cond::Sle => sa <= sb,
    })
}

/// `r` after `insn` (registers it writes become unknown, except
/// constants moved in).
fn step(mut r: Regs, insn: &Insn) -> Regs {
    match *insn {
        Insn::Alu {
            width,
            op: AluOp::Mov,
            dst,
            src,
        } => {
            r[dst.num() as usize] = operand(&r, src).map(|v| match width {
                Width::W32 => v & 0xffff_ffff,
                Width::W64 => v,
            });
        }
        Insn::Lddw {
            kind: LddwKind::Imm64,
            dst,
            imm,
            next_imm,
        } => {
            r[dst.num() as usize] =
                Some(u64::from(imm as u32) | (u64::from(next_imm as u32) << 32));
        }
        Insn::Alu { dst, .. }
        | Insn::Endian { dst, .. }
        | Insn::AddrSpaceCast { dst, .. }
        | Insn::Ldx { dst, .. }
        | Insn::Lddw { dst, .. } => r[dst.num() as usize] = None,
        Insn::Atomic { src, .. } => {
            r[0] = None;
            r[src.num() as usize] = None;
        }
        Insn::Call { .. } | Insn::Callx { .. } | Insn::LdAbs { .. } | Insn::LdInd { .. } => {
            r[..6].fill(None);
        }
        _ => {}
    }
    r
}

/// Slots of the poisoned instructions that entry `entry` of `image` may
/// execute, in slot order.
pub fn poisons_reached(image: &Image, entry: usize) -> Vec<usize> {
    let poison = Insn::Call {
        kind: CallKind::Helper,
        imm: POISON_HELPER,
    };
    if !image.insns.contains(&poison) {
        return Vec::new();
    }
    let Some(e) = image.entries.get(entry) else {
        return Vec::new();
    };
    let Some(f) = image.functions.get(e.function) else {
        return Vec::new();
    };
    let slots = nfkit_isa::slot_offsets(&image.insns);
    let index_of = |slot: i64| {
        usize::try_from(slot)
            .ok()
            .and_then(|s| slots.binary_search(&s).ok())
    };
    let mut state: Vec<Option<Regs>> = vec![None; image.insns.len()];
    let mut work = Vec::new();
    let enter = |i: usize, r: Regs, state: &mut Vec<Option<Regs>>, work: &mut Vec<usize>| {
        let merged = match state[i] {
            None => r,
            Some(old) => std::array::from_fn(|k| if old[k] == r[k] { old[k] } else { None }),
        };
        if state[i] != Some(merged) {
            state[i] = Some(merged);
            work.push(i);
        }
    };
    if let Some(i) = index_of(f.start as i64) {
        enter(i, [None; 11], &mut state, &mut work);
    }
    let mut out = Vec::new();
    while let Some(i) = work.pop() {
        let (Some(r), Some(insn)) = (state[i], image.insns.get(i)) else {
            continue;
        };
        let next_slot = slots[i] as i64 + insn.slots() as i64;
        if let Insn::Call {
            kind: CallKind::Helper,
            imm: POISON_HELPER,
        } = insn
        {
            out.push(slots[i]);
            continue;
        }
        if let Some(t) = insn.call_offset().and_then(|o| index_of(next_slot + o)) {
            enter(t, [None; 11], &mut state, &mut work);
        }
        let after = step(r, insn);
        let (fall, jump) = match *insn {
            Insn::Exit => (false, false),
            Insn::Ja { .. } | Insn::Gotol { .. } => (false, true),
            Insn::Jmp {
                width,
                cond,
                dst,
                src,
                ..
            } => match decide(width, cond, r[dst.num() as usize], operand(&r, src)) {
                Some(taken) => (!taken, taken),
                None => (true, true),
            },
            Insn::MayGoto { .. } => (true, true),
            _ => (true, false),
        };
        if fall {
            if let Some(t) = index_of(next_slot) {
                enter(t, after, &mut state, &mut work);
            }
        }
        if jump {
            if let Some(t) = insn.jump_offset().and_then(|o| index_of(next_slot + o)) {
                enter(t, after, &mut state, &mut work);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
