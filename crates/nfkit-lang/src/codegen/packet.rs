//! Packet access (docs/language.md, "Packet"): bounds-checked reads and
//! writes per hook, the packet info block, per-CPU slots.

use super::emit::{alu, ldx, mov_imm, mov_reg, stx};
use super::maps::MAP_LOOKUP;
use super::{Gen, Label, ObjMap};
use crate::ir::Expr;
use nfkit_isa::{AluOp, ByteOrder, Cond, Insn, Operand, Reg, Size};
use nfkit_nf::Hook;

/// Helper ids of the skb byte helpers.
const SKB_STORE_BYTES: i32 = 9;
const SKB_LOAD_BYTES: i32 = 26;
const SKB_LOAD_BYTES_RELATIVE: i32 = 68;

/// Largest packet offset a chain can access: the verifier tracks packet
/// ranges only while offset + size stays below 64 KiB; larger offsets
/// are a fault.
pub const MAX_PKT_OFF: i32 = 0x7fff;

impl Gen<'_> {
    /// Loads data / data_end of the context into r1 / r2 (XDP, TC).
    fn pkt_ptrs(&mut self) {
        let (d, e) = match self.hook {
            Hook::Xdp | Hook::Switch => (0, 4),
            _ => (76, 80),
        };
        self.emit(ldx(Size::W, Reg::R1, Reg::R9, d));
        self.emit(ldx(Size::W, Reg::R2, Reg::R9, e));
    }

    /// With the offset in r0: r1 = packet pointer with `size` readable
    /// bytes, or a jump to `miss`.
    fn pkt_check(&mut self, size: Size, miss: Label) {
        self.jcond(Cond::Gt, Reg::R0, Operand::Imm(MAX_PKT_OFF), miss);
        self.pkt_ptrs();
        self.emit(alu(AluOp::Add, Reg::R1, Operand::Reg(Reg::R0)));
        self.emit(mov_reg(Reg::R3, Reg::R1));
        self.emit(alu(AluOp::Add, Reg::R3, Operand::Imm(size.bytes() as i32)));
        self.jcond(Cond::Gt, Reg::R3, Operand::Reg(Reg::R2), miss);
    }

    /// Network to host order (or back) of a `size` value in `r`.
    fn swap(&mut self, r: Reg, size: Size) {
        if size != Size::B {
            self.emit(Insn::Endian {
                order: ByteOrder::Be,
                bits: size.bits() as u8,
                dst: r,
            });
        }
    }

    /// `Packet.read_uN(off)` into r0 (a fault when out of bounds).
    pub(super) fn pkt_read(&mut self, size: Size, off: &Expr) {
        self.expr(off);
        let fault = self.fault;
        match self.hook {
            Hook::Xdp | Hook::Switch => {
                self.pkt_check(size, fault);
                self.emit(ldx(size, Reg::R0, Reg::R1, 0));
            }
            Hook::Tc => {
                // Direct access when the bytes are in the linear part, else
                // bpf_skb_load_bytes.
                let slow = self.label();
                let done = self.label();
                let o = self.alloc(8);
                self.emit(stx(Size::DW, Reg::FP, o, Reg::R0));
                self.pkt_check(size, slow);
                self.emit(ldx(size, Reg::R0, Reg::R1, 0));
                self.jmp(done);
                self.bind(slow);
                self.jcond(Cond::Gt, Reg::R0, Operand::Imm(MAX_PKT_OFF), fault);
                self.emit(mov_reg(Reg::R2, Reg::R0));
                self.emit(mov_reg(Reg::R1, Reg::R9));
                self.fp_addr(Reg::R3, o);
                self.emit(mov_imm(Reg::R4, size.bytes() as i32));
                self.call_helper(SKB_LOAD_BYTES);
                self.jcond(Cond::Ne, Reg::R0, Operand::Imm(0), fault);
                self.emit(ldx(size, Reg::R0, Reg::FP, o));
                self.bind(done);
                self.free(8);
            }
            Hook::Socket => {
                let o = self.alloc(8);
                self.jcond(Cond::Gt, Reg::R0, Operand::Imm(MAX_PKT_OFF), fault);
                self.emit(mov_reg(Reg::R2, Reg::R0));
                self.emit(mov_reg(Reg::R1, Reg::R9));
                self.fp_addr(Reg::R3, o);
                self.emit(mov_imm(Reg::R4, size.bytes() as i32));
                self.emit(mov_imm(Reg::R5, 1)); // BPF_HDR_START_NET
                self.call_helper(SKB_LOAD_BYTES_RELATIVE);
                self.jcond(Cond::Ne, Reg::R0, Operand::Imm(0), fault);
                self.emit(ldx(size, Reg::R0, Reg::FP, o));
                self.free(8);
            }
        }
        self.swap(Reg::R0, size);
    }

    /// `Packet.write_uN(off, value)` (a fault when out of bounds).
    pub(super) fn pkt_write(&mut self, size: Size, off: &Expr, value: &Expr) {
        let v = self.spill_expr(value);
        self.expr(off);
        let fault = self.fault;
        match self.hook {
            Hook::Xdp | Hook::Switch => {
                self.pkt_check(size, fault);
                self.emit(ldx(Size::DW, Reg::R3, Reg::FP, v));
                self.swap(Reg::R3, size);
                self.emit(stx(size, Reg::R1, 0, Reg::R3));
            }
            _ => {
                // bpf_skb_store_bytes handles linear and paged data alike.
                self.jcond(Cond::Gt, Reg::R0, Operand::Imm(MAX_PKT_OFF), fault);
                self.emit(mov_reg(Reg::R2, Reg::R0));
                self.emit(ldx(Size::DW, Reg::R3, Reg::FP, v));
                self.swap(Reg::R3, size);
                self.emit(stx(Size::DW, Reg::FP, v, Reg::R3));
                self.emit(mov_reg(Reg::R1, Reg::R9));
                self.fp_addr(Reg::R3, v);
                self.emit(mov_imm(Reg::R4, size.bytes() as i32));
                self.emit(mov_imm(Reg::R5, 0));
                self.call_helper(SKB_STORE_BYTES);
                self.jcond(Cond::Ne, Reg::R0, Operand::Imm(0), fault);
            }
        }
        self.free(8);
    }

    /// r0 = pointer to the packet info block (or a fault).
    pub(super) fn pkt_info(&mut self) {
        self.percpu_slot(ObjMap::PktInfo);
    }

    /// r0 = pointer to this hook's and nesting depth's slot of per-CPU
    /// map `m` (the info block, the call frame), or a fault.
    pub(super) fn percpu_slot(&mut self, m: ObjMap) {
        let k = self.alloc(8);
        if self.hook.ctx_hook() == Hook::Xdp {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: k,
                imm: 0,
            });
        } else {
            // slot = hook * 4 + min(depth - 1, 3) (depth from nfkit_nest).
            let hid = self.hook.id() as i32;
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: k,
                imm: hid,
            });
            self.load_map(Reg::R1, ObjMap::Nest);
            self.fp_addr(Reg::R2, k);
            self.call_helper(MAP_LOOKUP);
            let zero = self.label();
            let set = self.label();
            self.emit(mov_imm(Reg::R1, 0));
            self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), set);
            self.emit(ldx(Size::W, Reg::R1, Reg::R0, 0));
            self.jcond(Cond::Eq, Reg::R1, Operand::Imm(0), set);
            self.emit(alu(AluOp::Sub, Reg::R1, Operand::Imm(1)));
            self.jcond(Cond::Le, Reg::R1, Operand::Imm(3), set);
            self.emit(mov_imm(Reg::R1, 3));
            self.bind(zero);
            self.bind(set);
            self.emit(alu(AluOp::Add, Reg::R1, Operand::Imm(hid * 4)));
            self.emit(stx(Size::DW, Reg::FP, k, Reg::R1));
        }
        self.load_map(Reg::R1, m);
        self.fp_addr(Reg::R2, k);
        self.call_helper(MAP_LOOKUP);
        let fault = self.fault;
        self.jcond(Cond::Eq, Reg::R0, Operand::Imm(0), fault);
        self.free(8);
    }

    /// `Packet.arrival`: `nf_now()` of the packet: the info block's time
    /// when set (a pinned clock, or read before), else
    /// `bpf_ktime_get_ns()`, kept there (flag `NF_PI_NOW`).
    pub(super) fn pkt_arrival(&mut self) {
        let cached = self.label();
        self.pkt_info();
        self.emit(ldx(Size::B, Reg::R1, Reg::R0, 67));
        self.jcond(Cond::Set, Reg::R1, Operand::Imm(0x20), cached);
        self.call_helper(5);
        let t = self.alloc(8);
        self.emit(stx(Size::DW, Reg::FP, t, Reg::R0));
        self.pkt_info();
        self.emit(ldx(Size::DW, Reg::R1, Reg::FP, t));
        self.free(8);
        self.emit(stx(Size::DW, Reg::R0, 72, Reg::R1));
        self.emit(ldx(Size::B, Reg::R1, Reg::R0, 67));
        self.emit(alu(AluOp::Or, Reg::R1, Operand::Imm(0x20)));
        self.emit(stx(Size::B, Reg::R0, 67, Reg::R1));
        self.bind(cached);
        self.emit(ldx(Size::DW, Reg::R0, Reg::R0, 72));
    }

    /// `Packet.queue`: `xdp_md.rx_queue_index` on XDP (the switch: the
    /// port's receive queue), `skb->queue_mapping` otherwise.
    pub(super) fn pkt_queue(&mut self) {
        let off = if self.hook.ctx_hook() == Hook::Xdp {
            16
        } else {
            8
        };
        self.emit(ldx(Size::W, Reg::R0, Reg::R9, off));
    }

    /// `Packet.len`: from the info block on XDP, `skb->len` otherwise.
    pub(super) fn pkt_len(&mut self) {
        if self.hook.ctx_hook() == Hook::Xdp {
            self.pkt_info();
            self.emit(ldx(Size::W, Reg::R0, Reg::R0, 48));
        } else {
            self.emit(ldx(Size::W, Reg::R0, Reg::R9, 0));
        }
    }
}
