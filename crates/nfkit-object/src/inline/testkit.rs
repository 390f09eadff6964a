//! Instruction and map builders shared by the inline passes' unit tests.

use crate::image::{MapKind, MapSpec, MapType};
use nfkit_isa::{AluOp, CallKind, Insn, LddwKind, Operand, Reg, Size, Width};

/// `bpf_map_lookup_elem`.
pub const LOOKUP: i32 = 1;

pub fn mov(dst: Reg, src: Operand) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst,
        src,
    }
}

pub fn stx(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::Stx {
        size,
        dst,
        src,
        off,
    }
}

pub fn ldx(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::Ldx {
        size,
        signed: false,
        dst,
        src,
        off,
    }
}

/// `r2 = r10 + key_off; r1 = map (index); call bpf_map_lookup_elem`.
pub fn lookup_at(map: i32, key_off: i32) -> Vec<Insn> {
    vec![
        mov(Reg::R2, Operand::Reg(Reg::FP)),
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Add,
            dst: Reg::R2,
            src: Operand::Imm(key_off),
        },
        Insn::Lddw {
            kind: LddwKind::MapIdx,
            dst: Reg::R1,
            imm: map,
            next_imm: 0,
        },
        Insn::Call {
            kind: CallKind::Helper,
            imm: LOOKUP,
        },
    ]
}

/// A declared map of 16 entries, no flags, no initial contents.
pub fn declared_map(name: &str, map_type: MapType, key: u32, value: u32) -> MapSpec {
    MapSpec {
        name: name.into(),
        kind: MapKind::Declared,
        map_type,
        key_size: key,
        value_size: value,
        max_entries: 16,
        flags: 0,
        key_type_id: None,
        value_type_id: None,
        data: None,
        pin_by_name: false,
        inner: None,
    }
}
