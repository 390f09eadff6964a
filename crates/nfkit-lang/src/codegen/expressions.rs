//! Expressions (docs/language.md, "Types and arithmetic"): the value
//! in r0 in the canonical form of its type; conditions compiled to
//! branches.

use super::emit::{alu, ldx, mov_imm, mov_reg, stx};
use super::{Gen, Label};
use crate::ir::{BinOp, CmpOp, Expr, ExprKind};
use crate::types::Ty;
use nfkit_isa::{AluOp, Cond, Insn, Operand, Reg, Size, Width};

impl Gen<'_> {
    /// Evaluates `e` into a new 8-byte stack slot (freed by the caller).
    pub(super) fn spill_expr(&mut self, e: &Expr) -> i16 {
        self.expr(e);
        let o = self.alloc(8);
        self.emit(stx(Size::DW, Reg::FP, o, Reg::R0));
        o
    }

    /// Brings r0 into the canonical form of `ty`.
    pub(super) fn normalize(&mut self, ty: Ty) {
        match ty {
            Ty::U64 | Ty::S64 => {}
            Ty::U32 => self.emit(Insn::Alu {
                width: Width::W32,
                op: AluOp::Mov,
                dst: Reg::R0,
                src: Operand::Reg(Reg::R0),
            }),
            Ty::U16 => self.emit(alu(AluOp::And, Reg::R0, Operand::Imm(0xffff))),
            Ty::U8 => self.emit(alu(AluOp::And, Reg::R0, Operand::Imm(0xff))),
            Ty::S8 | Ty::S16 | Ty::S32 => {
                let sh = 64 - ty.bits() as i32;
                self.emit(alu(AluOp::Lsh, Reg::R0, Operand::Imm(sh)));
                self.emit(alu(AluOp::Arsh, Reg::R0, Operand::Imm(sh)));
            }
            Ty::Bool => {
                self.emit(Insn::Jmp {
                    width: Width::W64,
                    cond: Cond::Eq,
                    dst: Reg::R0,
                    src: Operand::Imm(0),
                    off: 1,
                });
                self.emit(mov_imm(Reg::R0, 1));
            }
        }
    }

    /// A simple right operand: an immediate, or a local loaded into r1.
    fn operand(&mut self, e: &Expr) -> Option<Operand> {
        match &e.kind {
            ExprKind::Const(v)
                if (*v as i64) >= i32::MIN as i64 && (*v as i64) <= i32::MAX as i64 =>
            {
                Some(Operand::Imm(*v as i64 as i32))
            }
            ExprKind::Local(l) => {
                let o = self.local(*l);
                let r = self.lreg();
                self.emit(ldx(Size::DW, Reg::R1, r, o));
                Some(Operand::Reg(Reg::R1))
            }
            _ => None,
        }
    }

    /// r0 = a, and the second operand as an immediate or in r1.
    fn pair(&mut self, a: &Expr, b: &Expr) -> Operand {
        let simple = matches!(b.kind, ExprKind::Const(_) | ExprKind::Local(_));
        if simple {
            self.expr(a);
            if let Some(op) = self.operand(b) {
                return op;
            }
            self.konst(Reg::R1, b.as_const().unwrap_or(0));
            return Operand::Reg(Reg::R1);
        }
        let t = self.spill_expr(a);
        self.expr(b);
        self.emit(mov_reg(Reg::R1, Reg::R0));
        self.emit(ldx(Size::DW, Reg::R0, Reg::FP, t));
        self.free(8);
        Operand::Reg(Reg::R1)
    }

    /// The jump condition of a comparison.
    fn cond_of(op: CmpOp, signed: bool) -> Cond {
        match (op, signed) {
            (CmpOp::Eq, _) => Cond::Eq,
            (CmpOp::Ne, _) => Cond::Ne,
            (CmpOp::Lt, false) => Cond::Lt,
            (CmpOp::Le, false) => Cond::Le,
            (CmpOp::Gt, false) => Cond::Gt,
            (CmpOp::Ge, false) => Cond::Ge,
            (CmpOp::Lt, true) => Cond::Slt,
            (CmpOp::Le, true) => Cond::Sle,
            (CmpOp::Gt, true) => Cond::Sgt,
            (CmpOp::Ge, true) => Cond::Sge,
        }
    }

    /// The opposite comparison.
    pub(super) fn negate(op: CmpOp) -> CmpOp {
        match op {
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
        }
    }

    /// Jumps to `l` when `c` is false.
    pub(super) fn branch_false(&mut self, c: &Expr, l: Label) {
        match &c.kind {
            ExprKind::Cmp(op, a, b) => {
                let src = self.pair(a, b);
                let cond = Self::cond_of(Self::negate(*op), a.ty.signed());
                self.jcond(cond, Reg::R0, src, l);
            }
            ExprKind::Not(x) => self.branch_true(x, l),
            ExprKind::And(a, b) => {
                self.branch_false(a, l);
                self.branch_false(b, l);
            }
            ExprKind::Or(a, b) => {
                let t = self.label();
                self.branch_true(a, t);
                self.branch_false(b, l);
                self.bind(t);
            }
            _ => {
                self.expr(c);
                self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), l);
            }
        }
    }

    /// Jumps to `l` when `c` is true.
    fn branch_true(&mut self, c: &Expr, l: Label) {
        match &c.kind {
            ExprKind::Cmp(op, a, b) => {
                let src = self.pair(a, b);
                let cond = Self::cond_of(*op, a.ty.signed());
                self.jcond(cond, Reg::R0, src, l);
            }
            ExprKind::Not(x) => self.branch_false(x, l),
            ExprKind::Or(a, b) => {
                self.branch_true(a, l);
                self.branch_true(b, l);
            }
            ExprKind::And(a, b) => {
                let f = self.label();
                self.branch_false(a, f);
                self.branch_true(b, l);
                self.bind(f);
            }
            _ => {
                self.expr(c);
                self.jcond(Cond::Ne, Reg::R0, Operand::Imm(0), l);
            }
        }
    }

    /// The value of `e` into r0.
    pub(super) fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Const(v) => self.konst(Reg::R0, *v),
            ExprKind::Local(l) => {
                let o = self.local(*l);
                let r = self.lreg();
                self.emit(ldx(Size::DW, Reg::R0, r, o));
            }
            ExprKind::Bin(op, a, b) => self.binop(*op, e.ty, a, b),
            ExprKind::Neg(x) => {
                self.expr(x);
                self.emit(alu(AluOp::Neg, Reg::R0, Operand::Imm(0)));
                self.normalize(e.ty);
            }
            ExprKind::Inv(x) => {
                self.expr(x);
                self.emit(alu(AluOp::Xor, Reg::R0, Operand::Imm(-1)));
                self.normalize(e.ty);
            }
            ExprKind::Not(x) => {
                self.expr(x);
                self.emit(alu(AluOp::Xor, Reg::R0, Operand::Imm(1)));
            }
            ExprKind::Cmp(..) | ExprKind::And(..) | ExprKind::Or(..) => {
                let f = self.label();
                let end = self.label();
                self.branch_false(e, f);
                self.emit(mov_imm(Reg::R0, 1));
                self.jmp(end);
                self.bind(f);
                self.emit(mov_imm(Reg::R0, 0));
                self.bind(end);
            }
            ExprKind::IfExp(c, a, b) => {
                let f = self.label();
                let end = self.label();
                self.branch_false(c, f);
                self.expr(a);
                self.jmp(end);
                self.bind(f);
                self.expr(b);
                self.bind(end);
            }
            ExprKind::Cast(x) => {
                self.expr(x);
                self.normalize(e.ty);
            }
            ExprKind::CallNf { nf, args } => self.call_nf(*nf, args),
            ExprKind::CallChain { chain, args } => self.call_chain(*chain, args),
            ExprKind::PktRead { size, off } => self.pkt_read(*size, off),
            ExprKind::PktLen => self.pkt_len(),
            ExprKind::PktQueue => self.pkt_queue(),
            ExprKind::PktArrival => self.pkt_arrival(),
            ExprKind::PktInfo { off, size } => {
                self.pkt_info();
                self.emit(ldx(*size, Reg::R0, Reg::R0, *off));
            }
            ExprKind::MapGet { map, key, default } => self.map_get(*map, key, default.as_deref()),
            ExprKind::MapHas { map, key, negate } => self.map_has(*map, key, *negate),
        }
    }

    /// `a op b` in type `ty` into r0 (`x // 0 == 0`, `x % 0 == x`; shift
    /// counts modulo the width).
    fn binop(&mut self, op: BinOp, ty: Ty, a: &Expr, b: &Expr) {
        let signed = ty.signed();
        if matches!(op, BinOp::Div | BinOp::Mod) && b.as_const() == Some(0) {
            // x // 0 == 0, x % 0 == x.
            self.expr(a);
            if op == BinOp::Div {
                self.emit(mov_imm(Reg::R0, 0));
            }
            return;
        }
        let mut src = self.pair(a, b);
        let aop = match op {
            BinOp::Add => AluOp::Add,
            BinOp::Sub => AluOp::Sub,
            BinOp::Mul => AluOp::Mul,
            BinOp::Div => {
                if signed {
                    AluOp::SDiv
                } else {
                    AluOp::Div
                }
            }
            BinOp::Mod => {
                if signed {
                    AluOp::SMod
                } else {
                    AluOp::Mod
                }
            }
            BinOp::And => AluOp::And,
            BinOp::Or => AluOp::Or,
            BinOp::Xor => AluOp::Xor,
            BinOp::Shl => AluOp::Lsh,
            BinOp::Shr => {
                if signed {
                    AluOp::Arsh
                } else {
                    AluOp::Rsh
                }
            }
        };
        if matches!(op, BinOp::Shl | BinOp::Shr) {
            let mask = ty.bits() as i32 - 1;
            src = match src {
                Operand::Imm(k) => Operand::Imm(k & mask),
                Operand::Reg(r) => {
                    self.emit(alu(AluOp::And, r, Operand::Imm(mask)));
                    Operand::Reg(r)
                }
            };
        }
        if matches!(op, BinOp::Div | BinOp::Mod) {
            if let Operand::Imm(k) = src {
                // Register divisors only: the verifier and the VM agree on
                // x/0 with registers.
                self.emit(mov_imm(Reg::R1, k));
                src = Operand::Reg(Reg::R1);
            }
        }
        self.emit(alu(aop, Reg::R0, src));
        self.normalize(ty);
    }
}
