//! Statements (docs/language.md, "Chains").

use super::emit::{alu, stx};
use super::Gen;
use crate::check::BPF_LOOP_ABOVE;
use crate::ir::{Stmt, StmtKind};
use nfkit_isa::{AluOp, Operand, Reg, Size};

impl Gen<'_> {
    /// The code of a block of statements.
    pub(super) fn block(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    /// The code of one statement (its line recorded for the line info).
    fn stmt(&mut self, s: &Stmt) {
        self.lines.push((self.insns.len(), s.line, s.col));
        match &s.kind {
            StmtKind::Assign { local, value } => {
                self.expr(value);
                let o = self.local(*local);
                let r = self.lreg();
                self.emit(stx(Size::DW, r, o, Reg::R0));
            }
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::If { cond, then, els } => {
                let l_else = self.label();
                let l_end = self.label();
                self.branch_false(cond, l_else);
                self.block(then);
                if !els.is_empty() {
                    self.jmp(l_end);
                }
                self.bind(l_else);
                self.block(els);
                self.bind(l_end);
            }
            StmtKind::Loop {
                cond,
                body,
                step,
                cap,
                trips,
            } => match cap {
                Some((n, _)) if *n > BPF_LOOP_ABOVE => self.bpf_loop(s, cond, body, step, *n),
                _ => self.counted_loop(s, cond, body, step, *cap, *trips),
            },
            StmtKind::Break => {
                if let Some(l) = self.frame().loops.last().map(|l| l.brk) {
                    self.jmp(l);
                }
            }
            StmtKind::Continue => {
                if let Some(l) = self.frame().loops.last().map(|l| l.cont) {
                    self.jmp(l);
                }
            }
            StmtKind::Return(e) => {
                self.expr(e);
                match self.frame().ret {
                    Some(l) => self.jmp(l),
                    None => {
                        // A plain value has bit 63 clear.
                        self.emit(alu(AluOp::Lsh, Reg::R0, Operand::Imm(1)));
                        self.emit(alu(AluOp::Rsh, Reg::R0, Operand::Imm(1)));
                        let l = self.exit;
                        self.jmp(l);
                    }
                }
            }
            StmtKind::Verdict(e) => {
                self.expr(e);
                let l = self.exit;
                self.jmp(l);
            }
            StmtKind::MapSet { map, key, value } => self.map_set(*map, key, value),
            StmtKind::MapDel { map, key } => self.map_del(*map, key),
            StmtKind::MapRmw {
                map,
                key,
                op,
                value,
            } => self.map_rmw(*map, key, *op, value),
            StmtKind::PktWrite { size, off, value } => self.pkt_write(*size, off, value),
        }
    }
}
