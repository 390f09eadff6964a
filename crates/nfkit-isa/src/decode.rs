//! Decoding raw slots into [`Insn`]s. Every reserved field must be zero and
//! every field must hold a value the ISA defines; anything else is a
//! [`DecodeError`] naming the slot, the opcode and the field.

use crate::insn::*;
use crate::opcode::*;
use std::fmt;

/// Which part of an instruction a decode error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Opcode,
    Dst,
    Src,
    Offset,
    Imm,
    /// The second slot of an `lddw`.
    NextSlot,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Opcode => "opcode",
            Field::Dst => "dst register",
            Field::Src => "src register",
            Field::Offset => "offset",
            Field::Imm => "immediate",
            Field::NextSlot => "second slot of lddw",
        })
    }
}

/// Why a slot does not decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    #[error("unknown opcode")]
    UnknownOpcode,
    #[error("reserved field {field} must be 0, is {value}")]
    Reserved { field: Field, value: i64 },
    #[error("invalid {field} {value}: {why}")]
    Invalid {
        field: Field,
        value: i64,
        why: &'static str,
    },
    #[error("lddw is missing its second slot (program ends)")]
    TruncatedLddw,
    #[error("program length {0} bytes is not a multiple of 8")]
    Length(usize),
}

/// A decode error at slot `index` (0-based) with opcode `code`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("instruction {index} (opcode 0x{code:02x}): {kind}")]
pub struct DecodeError {
    pub index: usize,
    pub code: u8,
    pub kind: DecodeErrorKind,
}

type R<T> = Result<T, DecodeErrorKind>;

fn reserved(field: Field, value: i64) -> R<()> {
    if value == 0 {
        Ok(())
    } else {
        Err(DecodeErrorKind::Reserved { field, value })
    }
}

fn invalid<T>(field: Field, value: i64, why: &'static str) -> R<T> {
    Err(DecodeErrorKind::Invalid { field, value, why })
}

fn reg(field: Field, n: u8) -> R<Reg> {
    match Reg::new(n) {
        Some(r) => Ok(r),
        None => invalid(field, n as i64, "registers are r0..r10"),
    }
}

fn size_of(code: u8) -> Size {
    match code & SZ_MASK {
        SZ_W => Size::W,
        SZ_H => Size::H,
        SZ_B => Size::B,
        _ => Size::DW,
    }
}

fn cond_of(op: u8) -> Option<Cond> {
    Some(match op {
        JMP_JEQ => Cond::Eq,
        JMP_JGT => Cond::Gt,
        JMP_JGE => Cond::Ge,
        JMP_JSET => Cond::Set,
        JMP_JNE => Cond::Ne,
        JMP_JSGT => Cond::Sgt,
        JMP_JSGE => Cond::Sge,
        JMP_JLT => Cond::Lt,
        JMP_JLE => Cond::Le,
        JMP_JSLT => Cond::Slt,
        JMP_JSLE => Cond::Sle,
        _ => return None,
    })
}

fn decode_alu(r: RawInsn, width: Width) -> R<Insn> {
    let op = r.code & OP_MASK;
    let is_x = r.code & SRC_MASK == SRC_X;
    let dst = reg(Field::Dst, r.dst)?;
    if op == ALU_END {
        // le/be in ALU (the src bit picks the order), bswap in ALU64 (src bit 0).
        let order = match (width, is_x) {
            (Width::W32, false) => ByteOrder::Le,
            (Width::W32, true) => ByteOrder::Be,
            (Width::W64, false) => ByteOrder::Swap,
            (Width::W64, true) => return Err(DecodeErrorKind::UnknownOpcode),
        };
        reserved(Field::Src, r.src as i64)?;
        reserved(Field::Offset, r.off as i64)?;
        if !matches!(r.imm, 16 | 32 | 64) {
            return invalid(
                Field::Imm,
                r.imm as i64,
                "byte swap width must be 16, 32 or 64",
            );
        }
        return Ok(Insn::Endian {
            order,
            bits: r.imm as u8,
            dst,
        });
    }
    if op == ALU_NEG {
        if is_x {
            return Err(DecodeErrorKind::UnknownOpcode);
        }
        reserved(Field::Src, r.src as i64)?;
        reserved(Field::Offset, r.off as i64)?;
        reserved(Field::Imm, r.imm as i64)?;
        return Ok(Insn::Alu {
            width,
            op: AluOp::Neg,
            dst,
            src: Operand::Imm(0),
        });
    }
    let base = match op {
        ALU_ADD => AluOp::Add,
        ALU_SUB => AluOp::Sub,
        ALU_MUL => AluOp::Mul,
        ALU_DIV => AluOp::Div,
        ALU_OR => AluOp::Or,
        ALU_AND => AluOp::And,
        ALU_LSH => AluOp::Lsh,
        ALU_RSH => AluOp::Rsh,
        ALU_MOD => AluOp::Mod,
        ALU_XOR => AluOp::Xor,
        ALU_MOV => AluOp::Mov,
        ALU_ARSH => AluOp::Arsh,
        _ => return Err(DecodeErrorKind::UnknownOpcode),
    };
    // The offset field selects signed div/mod, sign-extending mov, and
    // addr_space_cast; it is reserved everywhere else.
    let op = match (base, r.off) {
        (_, 0) => base,
        (AluOp::Div, 1) => AluOp::SDiv,
        (AluOp::Mod, 1) => AluOp::SMod,
        (AluOp::Mov, 1) if is_x && width == Width::W64 => {
            let src = reg(Field::Src, r.src)?;
            if r.imm == 0 {
                return invalid(
                    Field::Offset,
                    1,
                    "mov with offset 1 is addr_space_cast, which needs a non-zero address space pair in imm",
                );
            }
            let v = r.imm as u32;
            return Ok(Insn::AddrSpaceCast {
                dst,
                src,
                dst_as: (v >> 16) as u16,
                src_as: v as u16,
            });
        }
        (AluOp::Mov, 8 | 16) if is_x => AluOp::MovSx(r.off as u8),
        (AluOp::Mov, 32) if is_x && width == Width::W64 => AluOp::MovSx(32),
        (AluOp::Div | AluOp::Mod, _) => {
            return invalid(
                Field::Offset,
                r.off as i64,
                "div/mod take offset 0 (unsigned) or 1 (signed)",
            )
        }
        (AluOp::Mov, _) if is_x => return invalid(
            Field::Offset,
            r.off as i64,
            "mov takes offset 0, 8/16/32 (sign extension; 32 only in ALU64) or 1 (addr_space_cast)",
        ),
        _ => {
            return Err(DecodeErrorKind::Reserved {
                field: Field::Offset,
                value: r.off as i64,
            })
        }
    };
    let src = if is_x {
        reserved(Field::Imm, r.imm as i64)?;
        Operand::Reg(reg(Field::Src, r.src)?)
    } else {
        reserved(Field::Src, r.src as i64)?;
        Operand::Imm(r.imm)
    };
    Ok(Insn::Alu {
        width,
        op,
        dst,
        src,
    })
}

fn decode_jmp(r: RawInsn, width: Width) -> R<Insn> {
    let op = r.code & OP_MASK;
    let is_x = r.code & SRC_MASK == SRC_X;
    match op {
        JMP_JA => {
            if is_x {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            reserved(Field::Dst, r.dst as i64)?;
            reserved(Field::Src, r.src as i64)?;
            match width {
                Width::W64 => {
                    reserved(Field::Imm, r.imm as i64)?;
                    Ok(Insn::Ja { off: r.off })
                }
                Width::W32 => {
                    reserved(Field::Offset, r.off as i64)?;
                    Ok(Insn::Gotol { imm: r.imm })
                }
            }
        }
        JMP_CALL => {
            if width == Width::W32 {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            reserved(Field::Offset, r.off as i64)?;
            if is_x {
                reserved(Field::Src, r.src as i64)?;
                if r.imm != 0 {
                    return invalid(
                        Field::Imm,
                        r.imm as i64,
                        "callx takes its register in dst (the LLVM < 19 encoding with the register in imm is not supported)",
                    );
                }
                return Ok(Insn::Callx {
                    reg: reg(Field::Dst, r.dst)?,
                });
            }
            reserved(Field::Dst, r.dst as i64)?;
            let kind = match r.src {
                CALL_HELPER => CallKind::Helper,
                CALL_LOCAL => CallKind::Local,
                CALL_KFUNC => CallKind::Kfunc,
                s => {
                    return invalid(
                        Field::Src,
                        s as i64,
                        "call src must be 0 (helper), 1 (local) or 2 (kfunc)",
                    )
                }
            };
            Ok(Insn::Call { kind, imm: r.imm })
        }
        JMP_EXIT => {
            if width == Width::W32 || is_x {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            reserved(Field::Dst, r.dst as i64)?;
            reserved(Field::Src, r.src as i64)?;
            reserved(Field::Offset, r.off as i64)?;
            reserved(Field::Imm, r.imm as i64)?;
            Ok(Insn::Exit)
        }
        JMP_JCOND => {
            if width == Width::W32 || is_x {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            reserved(Field::Dst, r.dst as i64)?;
            // src 0 is BPF_MAY_GOTO, the only defined condition.
            if r.src != 0 {
                return invalid(
                    Field::Src,
                    r.src as i64,
                    "the only JCOND condition is may_goto (0)",
                );
            }
            reserved(Field::Imm, r.imm as i64)?;
            Ok(Insn::MayGoto { off: r.off })
        }
        _ => {
            let cond = cond_of(op).ok_or(DecodeErrorKind::UnknownOpcode)?;
            let dst = reg(Field::Dst, r.dst)?;
            let src = if is_x {
                reserved(Field::Imm, r.imm as i64)?;
                Operand::Reg(reg(Field::Src, r.src)?)
            } else {
                reserved(Field::Src, r.src as i64)?;
                Operand::Imm(r.imm)
            };
            Ok(Insn::Jmp {
                width,
                cond,
                dst,
                src,
                off: r.off,
            })
        }
    }
}

fn decode_ld(r: RawInsn, next: Option<RawInsn>) -> R<Insn> {
    let size = size_of(r.code);
    match r.code & MODE_MASK {
        MODE_IMM if size == Size::DW => {
            let dst = reg(Field::Dst, r.dst)?;
            reserved(Field::Offset, r.off as i64)?;
            let kind = match r.src {
                PSEUDO_IMM64 => LddwKind::Imm64,
                PSEUDO_MAP_FD => LddwKind::MapFd,
                PSEUDO_MAP_VALUE => LddwKind::MapValue,
                PSEUDO_BTF_ID => LddwKind::BtfId,
                PSEUDO_FUNC => LddwKind::Func,
                PSEUDO_MAP_IDX => LddwKind::MapIdx,
                PSEUDO_MAP_IDX_VALUE => LddwKind::MapIdxValue,
                s => {
                    return invalid(
                        Field::Src,
                        s as i64,
                        "lddw src must be a pseudo source 0..6",
                    )
                }
            };
            let n = next.ok_or(DecodeErrorKind::TruncatedLddw)?;
            if n.code != 0 || n.dst != 0 || n.src != 0 || n.off != 0 {
                return invalid(
                    Field::NextSlot,
                    n.code as i64,
                    "the second slot of lddw must have opcode, registers and offset 0",
                );
            }
            Ok(Insn::Lddw {
                kind,
                dst,
                imm: r.imm,
                next_imm: n.imm,
            })
        }
        MODE_ABS if size != Size::DW => {
            reserved(Field::Dst, r.dst as i64)?;
            reserved(Field::Src, r.src as i64)?;
            reserved(Field::Offset, r.off as i64)?;
            Ok(Insn::LdAbs { size, imm: r.imm })
        }
        MODE_IND if size != Size::DW => {
            reserved(Field::Dst, r.dst as i64)?;
            reserved(Field::Offset, r.off as i64)?;
            Ok(Insn::LdInd {
                size,
                src: reg(Field::Src, r.src)?,
                imm: r.imm,
            })
        }
        _ => Err(DecodeErrorKind::UnknownOpcode),
    }
}

fn decode_mem(r: RawInsn) -> R<Insn> {
    let size = size_of(r.code);
    let mode = r.code & MODE_MASK;
    let dst = reg(Field::Dst, r.dst)?;
    match (r.code & CLS_MASK, mode) {
        (CLS_LDX, MODE_MEM) | (CLS_LDX, MODE_MEMSX) => {
            let signed = mode == MODE_MEMSX;
            if signed && size == Size::DW {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            reserved(Field::Imm, r.imm as i64)?;
            Ok(Insn::Ldx {
                size,
                signed,
                dst,
                src: reg(Field::Src, r.src)?,
                off: r.off,
            })
        }
        (CLS_ST, MODE_MEM) => {
            reserved(Field::Src, r.src as i64)?;
            Ok(Insn::St {
                size,
                dst,
                off: r.off,
                imm: r.imm,
            })
        }
        (CLS_STX, MODE_MEM) => {
            reserved(Field::Imm, r.imm as i64)?;
            Ok(Insn::Stx {
                size,
                dst,
                src: reg(Field::Src, r.src)?,
                off: r.off,
            })
        }
        (CLS_STX, MODE_ATOMIC) => {
            if !matches!(size, Size::W | Size::DW) {
                return Err(DecodeErrorKind::UnknownOpcode);
            }
            let fetch = r.imm & ATOMIC_FETCH != 0;
            let op = match r.imm {
                ATOMIC_XCHG => AtomicOp::Xchg,
                ATOMIC_CMPXCHG => AtomicOp::CmpXchg,
                i if i & !ATOMIC_FETCH == ATOMIC_ADD => AtomicOp::Add { fetch },
                i if i & !ATOMIC_FETCH == ATOMIC_OR => AtomicOp::Or { fetch },
                i if i & !ATOMIC_FETCH == ATOMIC_AND => AtomicOp::And { fetch },
                i if i & !ATOMIC_FETCH == ATOMIC_XOR => AtomicOp::Xor { fetch },
                i => return invalid(Field::Imm, i as i64, "unknown atomic operation"),
            };
            Ok(Insn::Atomic {
                size,
                op,
                dst,
                src: reg(Field::Src, r.src)?,
                off: r.off,
            })
        }
        _ => Err(DecodeErrorKind::UnknownOpcode),
    }
}

/// Decodes the instruction starting at `slots[0]` (an `lddw` also consumes
/// `slots[1]`).
pub fn decode_one(slots: &[RawInsn]) -> Result<Insn, DecodeErrorKind> {
    let r = *slots.first().ok_or(DecodeErrorKind::Length(0))?;
    let next = slots.get(1).copied();
    match r.code & CLS_MASK {
        CLS_ALU => decode_alu(r, Width::W32),
        CLS_ALU64 => decode_alu(r, Width::W64),
        CLS_JMP => decode_jmp(r, Width::W64),
        CLS_JMP32 => decode_jmp(r, Width::W32),
        CLS_LD => decode_ld(r, next),
        _ => decode_mem(r),
    }
}

/// Decodes a whole program of raw slots.
pub fn decode_program(slots: &[RawInsn]) -> Result<Vec<Insn>, DecodeError> {
    let mut out = Vec::with_capacity(slots.len());
    let mut i = 0;
    while i < slots.len() {
        let insn = decode_one(&slots[i..]).map_err(|kind| DecodeError {
            index: i,
            code: slots[i].code,
            kind,
        })?;
        i += insn.slots();
        out.push(insn);
    }
    Ok(out)
}

/// Splits little-endian bytes into raw slots.
pub fn raw_slots(bytes: &[u8]) -> Result<Vec<RawInsn>, DecodeError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(DecodeError {
            index: bytes.len() / 8,
            code: bytes[bytes.len() / 8 * 8],
            kind: DecodeErrorKind::Length(bytes.len()),
        });
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            RawInsn::from_bytes(b)
        })
        .collect())
}

/// Decodes a program from little-endian bytes.
pub fn decode_bytes(bytes: &[u8]) -> Result<Vec<Insn>, DecodeError> {
    decode_program(&raw_slots(bytes)?)
}
