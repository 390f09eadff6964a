//! Calls (docs/language.md, "Calls and verdicts"): NF calls are real
//! calls (a verdict ends the chain), chain calls are inlined with their
//! own frame of locals.

use super::emit::{ldx, local_off, mov_imm, mov_reg, stx};
use super::{Frame, Gen};
use crate::ir::{Expr, ExprKind};
use nfkit_isa::{Cond, Insn, Operand, Reg, Size};

/// An NF argument: a constant, or the stack temporary it was evaluated into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Arg {
    Const(u64),
    Slot(i16),
}

impl Gen<'_> {
    /// A call of NF `nf` (a tail call in dynamic mode); a verdict or a
    /// fault (bit 63 set) ends the whole chain.
    pub(super) fn call_nf(&mut self, nf: usize, args: &[Expr]) {
        // Constants go straight into their registers (the inlined NF
        // sees them; the verifier then drops its dead branches; in
        // dynamic mode the call site's own entry loads them), the rest
        // through stack temporaries.
        let mut slots = Vec::new();
        let mut spilled = 0;
        for a in args {
            match a.kind {
                ExprKind::Const(v) => slots.push(Arg::Const(v)),
                _ => {
                    slots.push(Arg::Slot(self.spill_expr(a)));
                    spilled += 1;
                }
            }
        }
        if self.dynamic.is_some() {
            self.tail_call_nf(nf, &slots);
        } else {
            let regs = [Reg::R2, Reg::R3, Reg::R4, Reg::R5];
            for (i, r) in regs.into_iter().enumerate() {
                match slots.get(i) {
                    Some(&Arg::Slot(o)) => self.emit(ldx(Size::DW, r, Reg::FP, o)),
                    Some(&Arg::Const(v)) => self.konst(r, v),
                    None => self.emit(mov_imm(r, 0)),
                }
            }
            self.emit(mov_reg(Reg::R1, Reg::R9));
            let sym = self.prog.nfs[nf].symbol.clone();
            self.call_local(sym);
        }
        self.free(8 * spilled);
        // A verdict or a fault ends the whole chain.
        let exit = self.exit;
        self.jcond(Cond::Slt, Reg::R0, Operand::Imm(0), exit);
    }

    /// Chain `chain` inlined: its locals in a new frame above the
    /// arguments, `return` jumping to the end.
    pub(super) fn call_chain(&mut self, chain: usize, args: &[Expr]) {
        let callee = &self.prog.chains[chain];
        let n = callee.locals.len() as i32;
        let nparams = callee.params.len();
        // Arguments are evaluated in the caller's frame into temporaries.
        let mut tmps = Vec::new();
        for a in args {
            tmps.push(self.spill_expr(a));
        }
        let before = self.used;
        self.alloc(8 * n);
        let base = before;
        for (i, &t) in tmps.iter().enumerate().take(nparams) {
            self.emit(ldx(Size::DW, Reg::R0, Reg::FP, t));
            self.emit(stx(Size::DW, Reg::FP, local_off(-base, i), Reg::R0));
        }
        for i in nparams..callee.locals.len() {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: local_off(-base, i),
                imm: 0,
            });
        }
        let ret = self.label();
        self.frames.push(Frame {
            base: -base,
            reg: Reg::FP,
            ret: Some(ret),
            chain,
            loops: Vec::new(),
        });
        self.inline_path.push(callee.name.clone());
        let body = &self.prog.chains[chain].body;
        self.block(body);
        self.emit(mov_imm(Reg::R0, 0));
        self.bind(ret);
        self.frames.pop();
        self.free(8 * n);
        self.free(8 * tmps.len() as i32);
    }
}
