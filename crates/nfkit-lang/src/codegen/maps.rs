//! Maps (docs/language.md, "Maps"): lookups, updates, atomic
//! read-modify-writes, deletes.

use super::emit::{alu, ldx, mov_imm, stx};
use super::{Gen, ObjMap};
use crate::ir::{Expr, MapRmw};
use crate::types::Ty;
use nfkit_isa::{AluOp, AtomicOp, Cond, Insn, Operand, Reg, Size, Width};

/// Helper ids of the map helpers.
pub(super) const MAP_LOOKUP: i32 = 1;
const MAP_UPDATE: i32 = 2;
const MAP_DELETE: i32 = 3;

/// The memory size of a map value of type `ty`.
pub fn map_size(ty: Ty) -> Size {
    match ty.bytes() {
        1 => Size::B,
        2 => Size::H,
        4 => Size::W,
        _ => Size::DW,
    }
}

impl Gen<'_> {
    /// `m[k] op= v`: atomic on 32- and 64-bit values, inserted with
    /// `BPF_NOEXIST` when absent.
    pub(super) fn map_rmw(&mut self, map: usize, key: &[Expr], op: MapRmw, value: &Expr) {
        let vt = self.prog.maps[map].value;
        let (k, kb) = self.spill_key(map, key);
        self.expr(value);
        if op == MapRmw::Sub {
            self.emit(alu(AluOp::Neg, Reg::R0, Operand::Imm(0)));
        }
        let v = self.alloc(8);
        self.emit(stx(Size::DW, Reg::FP, v, Reg::R0));
        self.load_map(Reg::R1, ObjMap::User(map));
        self.fp_addr(Reg::R2, k);
        self.call_helper(MAP_LOOKUP);
        let l_ins = self.label();
        let l_end = self.label();
        self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), l_ins);
        self.emit(ldx(Size::DW, Reg::R1, Reg::FP, v));
        let size = map_size(vt);
        let aop = match op {
            MapRmw::Add | MapRmw::Sub => AtomicOp::Add { fetch: false },
            MapRmw::Or => AtomicOp::Or { fetch: false },
            MapRmw::And => AtomicOp::And { fetch: false },
            MapRmw::Xor => AtomicOp::Xor { fetch: false },
        };
        if matches!(size, Size::W | Size::DW) {
            self.emit(Insn::Atomic {
                size,
                op: aop,
                dst: Reg::R0,
                src: Reg::R1,
                off: 0,
            });
        } else {
            let aluop = match op {
                MapRmw::Add | MapRmw::Sub => AluOp::Add,
                MapRmw::Or => AluOp::Or,
                MapRmw::And => AluOp::And,
                MapRmw::Xor => AluOp::Xor,
            };
            self.emit(ldx(size, Reg::R2, Reg::R0, 0));
            self.emit(alu(aluop, Reg::R2, Operand::Reg(Reg::R1)));
            self.emit(stx(size, Reg::R0, 0, Reg::R2));
        }
        self.jmp(l_end);
        self.bind(l_ins);
        if op == MapRmw::And {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: v,
                imm: 0,
            });
        }
        self.load_map(Reg::R1, ObjMap::User(map));
        self.fp_addr(Reg::R2, k);
        self.fp_addr(Reg::R3, v);
        self.emit(mov_imm(Reg::R4, 1)); // BPF_NOEXIST
        self.call_helper(MAP_UPDATE);
        self.bind(l_end);
        self.free(kb + 8);
    }

    /// `m[k] = v`.
    pub(super) fn map_set(&mut self, map: usize, key: &[Expr], value: &Expr) {
        let (k, kb) = self.spill_key(map, key);
        let v = self.spill_expr(value);
        self.load_map(Reg::R1, ObjMap::User(map));
        self.fp_addr(Reg::R2, k);
        self.fp_addr(Reg::R3, v);
        self.emit(mov_imm(Reg::R4, 0));
        self.call_helper(MAP_UPDATE);
        self.free(kb + 8);
    }

    /// `del m[k]`.
    pub(super) fn map_del(&mut self, map: usize, key: &[Expr]) {
        let (k, kb) = self.spill_key(map, key);
        self.load_map(Reg::R1, ObjMap::User(map));
        self.fp_addr(Reg::R2, k);
        self.call_helper(MAP_DELETE);
        self.free(kb);
    }

    /// `m[k]` (0 when absent) or `m.get(k, d)`: the value in r0.
    pub(super) fn map_get(&mut self, map: usize, key: &[Expr], default: Option<&Expr>) {
        let vt = self.prog.maps[map].value;
        let d = default.map(|d| self.spill_expr(d));
        let (k, kb) = self.spill_key(map, key);
        self.load_map(Reg::R1, ObjMap::User(map));
        self.fp_addr(Reg::R2, k);
        self.call_helper(MAP_LOOKUP);
        let miss = self.label();
        let end = self.label();
        self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), miss);
        self.emit(ldx(map_size(vt), Reg::R0, Reg::R0, 0));
        self.normalize(vt);
        self.jmp(end);
        self.bind(miss);
        match d {
            Some(o) => self.emit(ldx(Size::DW, Reg::R0, Reg::FP, o)),
            None => self.emit(mov_imm(Reg::R0, 0)),
        }
        self.bind(end);
        self.free(kb + if d.is_some() { 8 } else { 0 });
    }

    /// `k in m` (`negate`: `not in`): 1 or 0 in r0.
    pub(super) fn map_has(&mut self, map: usize, key: &[Expr], negate: bool) {
        let (k, kb) = self.spill_key(map, key);
        self.load_map(Reg::R1, ObjMap::User(map));
        self.fp_addr(Reg::R2, k);
        self.call_helper(MAP_LOOKUP);
        // r0 = (r0 != 0) ^ negate
        self.emit(Insn::Jmp {
            width: Width::W64,
            cond: Cond::Eq,
            dst: Reg::R0,
            src: Operand::Imm(0),
            off: 1,
        });
        self.emit(mov_imm(Reg::R0, 1));
        if negate {
            self.emit(alu(AluOp::Xor, Reg::R0, Operand::Imm(1)));
        }
        self.free(kb);
    }

    /// Evaluates the key of map `map` into new stack bytes (freed by the
    /// caller): an integer key in an 8-byte slot (the map reads its low
    /// bytes), a tuple key as its struct with the padding zeroed (hash
    /// maps compare every byte). Its offset and the bytes allocated.
    fn spill_key(&mut self, map: usize, key: &[Expr]) -> (i16, i32) {
        let d = &self.prog.maps[map];
        if let ([k], true) = (key, d.tuple.is_empty()) {
            return (self.spill_expr(k), 8);
        }
        let (offs, size) = d.key_layout();
        let bytes = size.div_ceil(8) as i32 * 8;
        let o = self.alloc(bytes);
        for j in 0..bytes as i16 / 8 {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: o + 8 * j,
                imm: 0,
            });
        }
        for (k, off) in key.iter().zip(offs) {
            self.expr(k);
            self.emit(stx(map_size(k.ty), Reg::FP, o + off as i16, Reg::R0));
        }
        (o, bytes)
    }
}
