//! Loops run through `bpf_loop` (docs/language.md, "Loops"; the
//! implementation notes): the body as a callback that reaches the
//! chain's locals through a block of the caller's stack.

use super::emit::{alu, ldx, local_off, mov_imm, mov_reg, stx};
use super::{Frame, Gen, GenError, LoopCtx, Ref};
use crate::check::BPF_LOOP_MAX;
use crate::ir::walk::{walk_block, walk_stmt, Visit};
use crate::ir::{BinOp, Expr, ExprKind, Stmt, StmtKind};
use crate::types::Ty;
use nfkit_isa::{AluOp, Cond, Insn, LddwKind, Operand, Reg, Size};

/// Helper id of `bpf_loop`.
const LOOP: i32 = 181;

/// The caller's block of a `bpf_loop` (offsets from its start): the
/// spilled ctx, the status the callback leaves, the value of a `return`
/// or verdict, the start value of a `range` loop variable.
const BLK_CTX: i16 = 0;
const BLK_STATUS: i16 = 8;
const BLK_VALUE: i16 = 16;
const BLK_START: i16 = 24;
const BLK_SIZE: i32 = 32;

/// Statuses: still running (the iterations ran out: the cap), ended
/// (condition false or `break`), `return` with a value, the function's
/// exit with r0 (verdict), fault.
const ST_ENDED: i32 = 1;
const ST_RETURN: i32 = 2;
const ST_EXIT: i32 = 3;
const ST_FAULT: i32 = 4;

/// The loop variable of a `range` loop whose value can be derived from
/// the iteration index (`var = start + index * step`): (local, step,
/// type), when `step` is `var = var + const` and `body` never assigns
/// `var`. The verifier then sees an unknown index instead of a constant
/// that changes every iteration, and verifies the callback once.
fn derived_var(body: &[Stmt], step: &[Stmt]) -> Option<(usize, u64, Ty)> {
    let [Stmt {
        kind: StmtKind::Assign { local, value },
        ..
    }] = step
    else {
        return None;
    };
    let ExprKind::Bin(BinOp::Add, a, b) = &value.kind else {
        return None;
    };
    let c = b.as_const()?;
    let mut set = Vec::new();
    assigned(body, &mut set);
    if a.kind != ExprKind::Local(*local) || set.contains(local) {
        return None;
    }
    Some((*local, c, value.ty))
}

/// Adds the locals the statements of `body` assign to `out` (in the
/// order of their first assignment).
fn assigned(body: &[Stmt], out: &mut Vec<usize>) {
    struct Assigned<'o>(&'o mut Vec<usize>);
    impl Visit for Assigned<'_> {
        fn visit_stmt(&mut self, s: &Stmt) {
            if let StmtKind::Assign { local, .. } = s.kind {
                if !self.0.contains(&local) {
                    self.0.push(local);
                }
            }
            walk_stmt(self, s);
        }

        // Expressions assign nothing.
        fn visit_expr(&mut self, _: &Expr) {}
    }
    walk_block(&mut Assigned(out), body);
}

impl Gen<'_> {
    /// A loop through `bpf_loop(cap + 1, cb, &blk, 0)`; the
    /// callback ends the loop (returns 1) on a false condition, `break`,
    /// `return`, a verdict or a fault, and with index == cap (the cap
    /// exceeded: a fault).
    pub(super) fn bpf_loop(
        &mut self,
        s: &Stmt,
        cond: &Expr,
        body: &[Stmt],
        step: &[Stmt],
        cap: u32,
    ) {
        if self.in_callback {
            let e = GenError::NestedLoop {
                chain: self.name.clone(),
                line: s.line,
            };
            self.error.get_or_insert(e);
            return;
        }
        let blk = self.alloc(BLK_SIZE);
        let (base, reg, chain, ret) = {
            let f = self.frame();
            (f.base, f.reg, f.chain, f.ret)
        };
        let derived = derived_var(body, step);
        self.emit(stx(Size::DW, Reg::FP, blk + BLK_CTX, Reg::R9));
        for off in [BLK_STATUS, BLK_VALUE] {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: blk + off,
                imm: 0,
            });
        }
        if let Some((l, _, _)) = derived {
            self.emit(ldx(Size::DW, Reg::R0, reg, local_off(base, l)));
            self.emit(stx(Size::DW, Reg::FP, blk + BLK_START, Reg::R0));
        }
        // The callback: locals through the block pointer.
        let index = self.cb_next + self.callbacks.len();
        let name = format!("{}__loop{}", self.name, self.callbacks.len());
        let (prog, hook) = (self.prog, self.hook);
        let mut sub = Gen::new(prog, hook, &mut *self.maps, &name);
        sub.in_callback = true;
        sub.inline_path = self.inline_path.clone();
        let frame = Frame {
            base: base - blk as i32,
            reg: Reg::R8,
            ret: None,
            chain,
            loops: Vec::new(),
        };
        sub.callback(s, frame, cond, body, step, cap, derived);
        match sub.finish() {
            Ok(f) => self.callbacks.push(f),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        let nr = cap.saturating_add(1).min(BPF_LOOP_MAX);
        self.emit(mov_imm(Reg::R1, nr as i32));
        self.refs.push((self.insns.len(), Ref::FuncAddr(index)));
        self.emit(Insn::Lddw {
            kind: LddwKind::Func,
            dst: Reg::R2,
            imm: 0,
            next_imm: 0,
        });
        self.fp_addr(Reg::R3, blk);
        self.emit(mov_imm(Reg::R4, 0));
        self.call_helper(LOOP);
        // How the loop ended.
        let after = self.label();
        let (exit, fault) = (self.exit, self.fault);
        self.emit(ldx(Size::DW, Reg::R1, Reg::FP, blk + BLK_STATUS));
        self.jcond(Cond::Eq, Reg::R1, Operand::Imm(ST_ENDED), after);
        self.emit(ldx(Size::DW, Reg::R0, Reg::FP, blk + BLK_VALUE));
        self.jcond(Cond::Eq, Reg::R1, Operand::Imm(ST_EXIT), exit);
        // Still running (the cap) or a fault.
        self.jcond(Cond::Ne, Reg::R1, Operand::Imm(ST_RETURN), fault);
        match ret {
            Some(l) => self.jmp(l),
            None => {
                // A plain value has bit 63 clear.
                self.emit(alu(AluOp::Lsh, Reg::R0, Operand::Imm(1)));
                self.emit(alu(AluOp::Rsh, Reg::R0, Operand::Imm(1)));
                self.jmp(exit);
            }
        }
        self.bind(after);
        self.free(BLK_SIZE);
    }

    /// The body of a `bpf_loop` callback (r1 = index, r2 = the block).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn callback(
        &mut self,
        s: &Stmt,
        mut frame: Frame,
        cond: &Expr,
        body: &[Stmt],
        step: &[Stmt],
        cap: u32,
        derived: Option<(usize, u64, Ty)>,
    ) {
        self.lines.push((0, s.line, s.col));
        self.emit(mov_reg(Reg::R7, Reg::R1));
        self.emit(mov_reg(Reg::R8, Reg::R2));
        self.emit(ldx(Size::DW, Reg::R9, Reg::R8, BLK_CTX));
        let done = self.label();
        let cont = self.label();
        let ret = self.label();
        frame.ret = Some(ret);
        frame.loops.push(LoopCtx {
            brk: done,
            cont,
            bound: None,
        });
        self.frames.push(frame);
        if let Some((l, stepv, ty)) = derived {
            // var = start + index * step
            self.emit(mov_reg(Reg::R0, Reg::R7));
            self.konst(Reg::R1, stepv);
            self.emit(alu(AluOp::Mul, Reg::R0, Operand::Reg(Reg::R1)));
            self.emit(ldx(Size::DW, Reg::R1, Reg::R8, BLK_START));
            self.emit(alu(AluOp::Add, Reg::R0, Operand::Reg(Reg::R1)));
            self.normalize(ty);
            let o = self.local(l);
            self.emit(stx(Size::DW, Reg::R8, o, Reg::R0));
        }
        // The verifier verifies the callback until its state at the call
        // repeats; a local that changes every iteration (a counter started
        // at a constant) would make it walk every iteration. Adding the
        // index >> 23 (always 0: bpf_loop runs at most 2^23 iterations,
        // unknown to the verifier) makes every local the loop assigns an
        // unknown value of its type; no generated check relies on a
        // local's range.
        let mut carried = Vec::new();
        assigned(body, &mut carried);
        assigned(step, &mut carried);
        carried.retain(|l| derived.is_none_or(|d| d.0 != *l));
        if !carried.is_empty() {
            self.emit(mov_reg(Reg::R6, Reg::R7));
            self.emit(alu(AluOp::Rsh, Reg::R6, Operand::Imm(23)));
        }
        for l in carried {
            let ty = self.prog.chains[self.frame().chain].locals[l].1;
            let o = self.local(l);
            self.emit(ldx(Size::DW, Reg::R0, Reg::R8, o));
            self.emit(alu(AluOp::Add, Reg::R0, Operand::Reg(Reg::R6)));
            self.normalize(ty);
            self.emit(stx(Size::DW, Reg::R8, o, Reg::R0));
        }
        self.branch_false(cond, done);
        let fault = self.fault;
        self.jcond(Cond::Ge, Reg::R7, Operand::Imm(cap as i32), fault);
        self.block(body);
        self.bind(cont);
        if derived.is_none() {
            self.block(step);
        }
        self.emit(mov_imm(Reg::R0, 0));
        self.emit(Insn::Exit);
        let status = |g: &mut Gen, st: i32| {
            g.emit(Insn::St {
                size: Size::DW,
                dst: Reg::R8,
                off: BLK_STATUS,
                imm: st,
            });
            g.emit(mov_imm(Reg::R0, 1));
            g.emit(Insn::Exit);
        };
        self.bind(done);
        status(self, ST_ENDED);
        self.bind(ret);
        self.emit(stx(Size::DW, Reg::R8, BLK_VALUE, Reg::R0));
        status(self, ST_RETURN);
        self.bind(self.exit);
        self.emit(stx(Size::DW, Reg::R8, BLK_VALUE, Reg::R0));
        status(self, ST_EXIT);
        self.bind(self.fault);
        status(self, ST_FAULT);
        self.frames.pop();
    }
}
