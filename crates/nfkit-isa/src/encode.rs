//! Encoding [`Insn`] into raw slots. Encoding never fails: every `Insn`
//! value has exactly one encoding (the model cannot express reserved bits).

use crate::insn::*;
use crate::opcode::*;

fn width_class_alu(w: Width) -> u8 {
    match w {
        Width::W32 => CLS_ALU,
        Width::W64 => CLS_ALU64,
    }
}

fn width_class_jmp(w: Width) -> u8 {
    match w {
        Width::W32 => CLS_JMP32,
        Width::W64 => CLS_JMP,
    }
}

pub(crate) fn size_bits(s: Size) -> u8 {
    match s {
        Size::W => SZ_W,
        Size::H => SZ_H,
        Size::B => SZ_B,
        Size::DW => SZ_DW,
    }
}

pub(crate) fn cond_op(c: Cond) -> u8 {
    match c {
        Cond::Eq => JMP_JEQ,
        Cond::Gt => JMP_JGT,
        Cond::Ge => JMP_JGE,
        Cond::Set => JMP_JSET,
        Cond::Ne => JMP_JNE,
        Cond::Sgt => JMP_JSGT,
        Cond::Sge => JMP_JSGE,
        Cond::Lt => JMP_JLT,
        Cond::Le => JMP_JLE,
        Cond::Slt => JMP_JSLT,
        Cond::Sle => JMP_JSLE,
    }
}

/// ALU operation bits and the offset field value that goes with it.
fn alu_op(op: AluOp) -> (u8, i16) {
    match op {
        AluOp::Add => (ALU_ADD, 0),
        AluOp::Sub => (ALU_SUB, 0),
        AluOp::Mul => (ALU_MUL, 0),
        AluOp::Div => (ALU_DIV, 0),
        AluOp::SDiv => (ALU_DIV, 1),
        AluOp::Or => (ALU_OR, 0),
        AluOp::And => (ALU_AND, 0),
        AluOp::Lsh => (ALU_LSH, 0),
        AluOp::Rsh => (ALU_RSH, 0),
        AluOp::Neg => (ALU_NEG, 0),
        AluOp::Mod => (ALU_MOD, 0),
        AluOp::SMod => (ALU_MOD, 1),
        AluOp::Xor => (ALU_XOR, 0),
        AluOp::Mov => (ALU_MOV, 0),
        AluOp::MovSx(bits) => (ALU_MOV, bits as i16),
        AluOp::Arsh => (ALU_ARSH, 0),
    }
}

fn atomic_imm(op: AtomicOp) -> i32 {
    let f = |fetch: bool| if fetch { ATOMIC_FETCH } else { 0 };
    match op {
        AtomicOp::Add { fetch } => ATOMIC_ADD | f(fetch),
        AtomicOp::Or { fetch } => ATOMIC_OR | f(fetch),
        AtomicOp::And { fetch } => ATOMIC_AND | f(fetch),
        AtomicOp::Xor { fetch } => ATOMIC_XOR | f(fetch),
        AtomicOp::Xchg => ATOMIC_XCHG,
        AtomicOp::CmpXchg => ATOMIC_CMPXCHG,
    }
}

pub(crate) fn lddw_src(k: LddwKind) -> u8 {
    match k {
        LddwKind::Imm64 => PSEUDO_IMM64,
        LddwKind::MapFd => PSEUDO_MAP_FD,
        LddwKind::MapValue => PSEUDO_MAP_VALUE,
        LddwKind::BtfId => PSEUDO_BTF_ID,
        LddwKind::Func => PSEUDO_FUNC,
        LddwKind::MapIdx => PSEUDO_MAP_IDX,
        LddwKind::MapIdxValue => PSEUDO_MAP_IDX_VALUE,
    }
}

fn raw(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> RawInsn {
    RawInsn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

/// ALU operations: a register (`X`) or immediate (`K`) source; `sdiv`,
/// `smod` and `movsx` are told apart by the offset field.
fn alu(width: Width, op: AluOp, dst: Reg, src: Operand) -> RawInsn {
    let (bits, off) = alu_op(op);
    let cls = width_class_alu(width);
    match src {
        Operand::Reg(s) => raw(cls | SRC_X | bits, dst.num(), s.num(), off, 0),
        Operand::Imm(imm) => raw(cls | SRC_K | bits, dst.num(), 0, off, imm),
    }
}

/// Byte swaps: in the 32-bit ALU class the source bit picks the byte order
/// (`le`/`be`); the unconditional `bswap` is the 64-bit class.
fn endian(order: ByteOrder, bits: u8, dst: Reg) -> RawInsn {
    let code = match order {
        ByteOrder::Le => CLS_ALU | SRC_K | ALU_END,
        ByteOrder::Be => CLS_ALU | SRC_X | ALU_END,
        ByteOrder::Swap => CLS_ALU64 | SRC_K | ALU_END,
    };
    raw(code, dst.num(), 0, 0, bits as i32)
}

/// `addr_space_cast`: a 64-bit register `mov` with offset 1, the two
/// address spaces packed into the immediate (destination high).
fn addr_space_cast(dst: Reg, src: Reg, dst_as: u16, src_as: u16) -> RawInsn {
    raw(
        CLS_ALU64 | SRC_X | ALU_MOV,
        dst.num(),
        src.num(),
        1,
        ((dst_as as u32) << 16 | src_as as u32) as i32,
    )
}

/// Loads from memory; sign-extending loads have their own mode (`MEMSX`).
fn ldx(size: Size, signed: bool, dst: Reg, src: Reg, off: i16) -> RawInsn {
    let mode = if signed { MODE_MEMSX } else { MODE_MEM };
    raw(
        CLS_LDX | mode | size_bits(size),
        dst.num(),
        src.num(),
        off,
        0,
    )
}

/// Conditional jumps against a register (`X`) or an immediate (`K`).
fn cond_jump(width: Width, cond: Cond, dst: Reg, src: Operand, off: i16) -> RawInsn {
    let cls = width_class_jmp(width);
    match src {
        Operand::Reg(s) => raw(cls | SRC_X | cond_op(cond), dst.num(), s.num(), off, 0),
        Operand::Imm(imm) => raw(cls | SRC_K | cond_op(cond), dst.num(), 0, off, imm),
    }
}

/// Calls: the source field tells helpers, local (pc-relative) calls and
/// kfuncs apart.
fn call(kind: CallKind, imm: i32) -> RawInsn {
    let src = match kind {
        CallKind::Helper => CALL_HELPER,
        CallKind::Local => CALL_LOCAL,
        CallKind::Kfunc => CALL_KFUNC,
    };
    raw(CALL, 0, src, 0, imm)
}

impl Insn {
    /// Appends the instruction's slots to `out`.
    pub fn encode_into(&self, out: &mut Vec<RawInsn>) {
        let r = match *self {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => alu(width, op, dst, src),
            Insn::Endian { order, bits, dst } => endian(order, bits, dst),
            Insn::AddrSpaceCast {
                dst,
                src,
                dst_as,
                src_as,
            } => addr_space_cast(dst, src, dst_as, src_as),
            Insn::Ldx {
                size,
                signed,
                dst,
                src,
                off,
            } => ldx(size, signed, dst, src, off),
            Insn::St {
                size,
                dst,
                off,
                imm,
            } => raw(CLS_ST | MODE_MEM | size_bits(size), dst.num(), 0, off, imm),
            Insn::Stx {
                size,
                dst,
                src,
                off,
            } => raw(
                CLS_STX | MODE_MEM | size_bits(size),
                dst.num(),
                src.num(),
                off,
                0,
            ),
            Insn::Atomic {
                size,
                op,
                dst,
                src,
                off,
            } => raw(
                CLS_STX | MODE_ATOMIC | size_bits(size),
                dst.num(),
                src.num(),
                off,
                atomic_imm(op),
            ),
            Insn::Lddw {
                kind,
                dst,
                imm,
                next_imm,
            } => {
                out.push(raw(LDDW, dst.num(), lddw_src(kind), 0, imm));
                raw(0, 0, 0, 0, next_imm)
            }
            Insn::LdAbs { size, imm } => raw(CLS_LD | MODE_ABS | size_bits(size), 0, 0, 0, imm),
            Insn::LdInd { size, src, imm } => {
                raw(CLS_LD | MODE_IND | size_bits(size), 0, src.num(), 0, imm)
            }
            Insn::Ja { off } => raw(CLS_JMP | JMP_JA, 0, 0, off, 0),
            Insn::Gotol { imm } => raw(CLS_JMP32 | JMP_JA, 0, 0, 0, imm),
            Insn::Jmp {
                width,
                cond,
                dst,
                src,
                off,
            } => cond_jump(width, cond, dst, src, off),
            Insn::MayGoto { off } => raw(CLS_JMP | JMP_JCOND, 0, 0, off, 0),
            Insn::Call { kind, imm } => call(kind, imm),
            Insn::Callx { reg } => raw(CALLX, reg.num(), 0, 0, 0),
            Insn::Exit => raw(EXIT, 0, 0, 0, 0),
        };
        out.push(r);
    }

    /// The instruction's slots.
    pub fn encode(&self) -> Vec<RawInsn> {
        let mut v = Vec::with_capacity(2);
        self.encode_into(&mut v);
        v
    }
}

/// Encodes a program into raw slots.
pub fn encode_program(insns: &[Insn]) -> Vec<RawInsn> {
    let mut out = Vec::with_capacity(slot_count(insns));
    for i in insns {
        i.encode_into(&mut out);
    }
    out
}

/// Encodes a program into little-endian bytes (8 per slot).
pub fn encode_bytes(insns: &[Insn]) -> Vec<u8> {
    encode_program(insns)
        .into_iter()
        .flat_map(RawInsn::to_bytes)
        .collect()
}
