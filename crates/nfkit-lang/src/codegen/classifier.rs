//! The classifier's side (docs/language.md, "Module level"): the
//! dispatcher `nfkit_dispatch(ctx, chain_id)` it calls.

use super::emit::mov_imm;
use super::{GenFunc, Ref};
use nfkit_isa::{CallKind, Cond, Insn, Operand, Reg, Width};

/// `nfkit_dispatch(ctx, chain_id, ...)`: calls the chain with that id
/// (`chains[id]`: the index of its generated function).
pub(super) fn dispatcher(chains: &[usize]) -> GenFunc {
    let mut insns = Vec::new();
    let mut refs = Vec::new();
    // if r2 == k goto call_k (patched below)
    let n = chains.len();
    for (k, _) in chains.iter().enumerate() {
        // Each call block is 6 instructions; the jumps skip the remaining
        // tests and the default return (2 instructions).
        let off = (n - k - 1) + 2 + k * 6;
        insns.push(Insn::Jmp {
            width: Width::W64,
            cond: Cond::Eq,
            dst: Reg::R2,
            src: Operand::Imm(k as i32),
            off: off as i16,
        });
    }
    insns.push(mov_imm(Reg::R0, 0));
    insns.push(Insn::Exit);
    for &c in chains {
        for r in [Reg::R2, Reg::R3, Reg::R4, Reg::R5] {
            insns.push(mov_imm(r, 0));
        }
        refs.push((insns.len(), Ref::Func(c)));
        insns.push(Insn::Call {
            kind: CallKind::Local,
            imm: -1,
        });
        insns.push(Insn::Exit);
    }
    GenFunc {
        name: "nfkit_dispatch".into(),
        insns,
        refs,
        lines: Vec::new(),
        stack: 0,
        global: true,
        slot: None,
        callback: false,
    }
}
