//! Counted loops (docs/language.md, "Loops"): the condition, an
//! iteration counter when the loop has a cap, `break` and `continue`.

use super::dynamic::nf_calls_stmt;
use super::emit::{alu, ldx, stx};
use super::{Gen, LoopCtx};
use crate::ir::{Expr, Stmt};
use nfkit_isa::{AluOp, Cond, Insn, Operand, Reg, Size};

impl Gen<'_> {
    /// A loop the verifier walks: the condition at the top, then (with
    /// a cap) the counter tested and incremented, the body, the step.
    pub(super) fn counted_loop(
        &mut self,
        s: &Stmt,
        cond: &Expr,
        body: &[Stmt],
        step: &[Stmt],
        cap: Option<(u32, usize)>,
        trips: u32,
    ) {
        // Dynamic mode: a loop with NF calls (segments resume inside it)
        // needs a counter even when its bound is proven; it lives in a
        // temporary slot.
        let mut temp = false;
        let counted: Option<(u32, i16)> = match cap {
            Some((n, counter)) => Some((n, self.local(counter))),
            None if self.dynamic.is_some()
                && !self.in_callback
                && nf_calls_stmt(self.prog, s, 1) > 0 =>
            {
                temp = true;
                Some((trips, self.alloc(8)))
            }
            None => None,
        };
        if let Some((_, o)) = counted {
            self.emit(Insn::St {
                size: Size::DW,
                dst: self.lreg(),
                off: o,
                imm: 0,
            });
        }
        let top = self.label();
        let brk = self.label();
        let cont = self.label();
        self.bind(top);
        self.branch_false(cond, brk);
        if let Some((n, o)) = counted {
            let r = self.lreg();
            self.emit(ldx(Size::DW, Reg::R1, r, o));
            let fault = self.fault;
            self.jcond(Cond::Ge, Reg::R1, Operand::Imm(n as i32), fault);
            self.emit(alu(AluOp::Add, Reg::R1, Operand::Imm(1)));
            self.emit(stx(Size::DW, r, o, Reg::R1));
        }
        let fi = self.frames.len() - 1;
        self.frames[fi].loops.push(LoopCtx {
            brk,
            cont,
            bound: counted,
        });
        self.block(body);
        self.frames[fi].loops.pop();
        self.bind(cont);
        self.block(step);
        self.jmp(top);
        self.bind(brk);
        if temp {
            self.free(8);
        }
    }
}
