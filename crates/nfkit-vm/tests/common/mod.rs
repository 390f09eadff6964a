//! Small constructors for hand-written test programs.
#![allow(dead_code)]

use nfkit_isa::*;
use nfkit_object::{Image, MapKind, MapSpec, MapType, ProgType};

pub fn r(n: u8) -> Reg {
    Reg::new(n).expect("register")
}
pub fn alu64(op: AluOp, d: u8, imm: i32) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op,
        dst: r(d),
        src: Operand::Imm(imm),
    }
}
pub fn alu64r(op: AluOp, d: u8, s: u8) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op,
        dst: r(d),
        src: Operand::Reg(r(s)),
    }
}
pub fn alu32(op: AluOp, d: u8, imm: i32) -> Insn {
    Insn::Alu {
        width: Width::W32,
        op,
        dst: r(d),
        src: Operand::Imm(imm),
    }
}
pub fn alu32r(op: AluOp, d: u8, s: u8) -> Insn {
    Insn::Alu {
        width: Width::W32,
        op,
        dst: r(d),
        src: Operand::Reg(r(s)),
    }
}
pub fn mov(d: u8, imm: i32) -> Insn {
    alu64(AluOp::Mov, d, imm)
}
pub fn movr(d: u8, s: u8) -> Insn {
    alu64r(AluOp::Mov, d, s)
}
pub fn ldx(size: Size, d: u8, s: u8, off: i16) -> Insn {
    Insn::Ldx {
        size,
        signed: false,
        dst: r(d),
        src: r(s),
        off,
    }
}
pub fn stx(size: Size, d: u8, s: u8, off: i16) -> Insn {
    Insn::Stx {
        size,
        dst: r(d),
        src: r(s),
        off,
    }
}
pub fn st(size: Size, d: u8, off: i16, imm: i32) -> Insn {
    Insn::St {
        size,
        dst: r(d),
        off,
        imm,
    }
}
pub fn jmp(cond: Cond, d: u8, imm: i32, off: i16) -> Insn {
    Insn::Jmp {
        width: Width::W64,
        cond,
        dst: r(d),
        src: Operand::Imm(imm),
        off,
    }
}
pub fn jmpr(cond: Cond, d: u8, s: u8, off: i16) -> Insn {
    Insn::Jmp {
        width: Width::W64,
        cond,
        dst: r(d),
        src: Operand::Reg(r(s)),
        off,
    }
}
pub fn ja(off: i16) -> Insn {
    Insn::Ja { off }
}
pub fn call(id: i32) -> Insn {
    Insn::Call {
        kind: CallKind::Helper,
        imm: id,
    }
}
pub fn call_local(off: i32) -> Insn {
    Insn::Call {
        kind: CallKind::Local,
        imm: off,
    }
}
pub fn exit() -> Insn {
    Insn::Exit
}
pub fn lddw(d: u8, v: u64) -> Insn {
    Insn::lddw(r(d), v)
}
pub fn map_ptr(d: u8, idx: i32) -> Insn {
    Insn::Lddw {
        kind: LddwKind::MapIdx,
        dst: r(d),
        imm: idx,
        next_imm: 0,
    }
}
pub fn map_value(d: u8, idx: i32, off: i32) -> Insn {
    Insn::Lddw {
        kind: LddwKind::MapIdxValue,
        dst: r(d),
        imm: idx,
        next_imm: off,
    }
}
pub fn func_ptr(d: u8, off: i32) -> Insn {
    Insn::Lddw {
        kind: LddwKind::Func,
        dst: r(d),
        imm: off,
        next_imm: 0,
    }
}

pub fn map(name: &str, t: MapType, key: u32, value: u32, max: u32) -> MapSpec {
    MapSpec {
        name: name.into(),
        kind: MapKind::Declared,
        map_type: t,
        key_size: key,
        value_size: value,
        max_entries: max,
        flags: 0,
        key_type_id: None,
        value_type_id: None,
        data: None,
        pin_by_name: false,
        inner: None,
    }
}

pub fn image(t: ProgType, insns: Vec<Insn>, maps: Vec<MapSpec>) -> Image {
    let mut img = Image::from_insns("prog", t, insns);
    img.maps = maps;
    img
}

/// An Ethernet/IPv4/UDP frame of `len` bytes (at least 42).
pub fn udp_frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12] = 0x08;
    f[14] = 0x45;
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&[198, 18, 0, 2]);
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&53u16.to_be_bytes());
    f
}

pub mod gen;
