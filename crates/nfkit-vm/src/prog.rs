//! The pre-decoded program: one compact [`Op`] per instruction (an `lddw`
//! is one op), with jump targets resolved to op indices, immediates
//! pre-extended to the width the operation uses, and one opcode per
//! operation × operand kind × width, so the interpreter's dispatch does no
//! decoding at run time.

#![forbid(unsafe_code)]

use nfkit_isa::{AluOp, AtomicOp, ByteOrder, CallKind, Cond, Insn, LddwKind, Operand, Size, Width};

/// Operation codes of the pre-decoded form. `K` = immediate operand,
/// `X` = register operand; `32` = 32-bit ALU/JMP32.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Code {
    Add64K,
    Add64X,
    Sub64K,
    Sub64X,
    Mul64K,
    Mul64X,
    Div64K,
    Div64X,
    SDiv64K,
    SDiv64X,
    Or64K,
    Or64X,
    And64K,
    And64X,
    Lsh64K,
    Lsh64X,
    Rsh64K,
    Rsh64X,
    Mod64K,
    Mod64X,
    SMod64K,
    SMod64X,
    Xor64K,
    Xor64X,
    Mov64K,
    Mov64X,
    Arsh64K,
    Arsh64X,
    Neg64,
    MovSx64B,
    MovSx64H,
    MovSx64W,
    Add32K,
    Add32X,
    Sub32K,
    Sub32X,
    Mul32K,
    Mul32X,
    Div32K,
    Div32X,
    SDiv32K,
    SDiv32X,
    Or32K,
    Or32X,
    And32K,
    And32X,
    Lsh32K,
    Lsh32X,
    Rsh32K,
    Rsh32X,
    Mod32K,
    Mod32X,
    SMod32K,
    SMod32X,
    Xor32K,
    Xor32X,
    Mov32K,
    Mov32X,
    Arsh32K,
    Arsh32X,
    Neg32,
    MovSx32B,
    MovSx32H,
    /// `le16`/`le32`: truncate (the host is little-endian).
    Trunc16,
    Trunc32,
    /// `le64`: nothing to do.
    Nop,
    Swap16,
    Swap32,
    Swap64,
    LdxB,
    LdxH,
    LdxW,
    LdxDW,
    LdxSB,
    LdxSH,
    LdxSW,
    StB,
    StH,
    StW,
    StDW,
    StxB,
    StxH,
    StxW,
    StxDW,
    /// Atomic RMW; `aux` = [`atomic_code`], `imm` = size in bytes.
    Atomic,
    /// `dst = imm` (64-bit; map handles, map value addresses and function
    /// addresses already resolved to VM addresses).
    Lddw,
    /// Legacy packet loads; `aux` = size in bytes, `src` = index register
    /// (`LdInd`), `imm` = offset.
    LdAbs,
    LdInd,
    Ja,
    JeqK,
    JeqX,
    JgtK,
    JgtX,
    JgeK,
    JgeX,
    JsetK,
    JsetX,
    JneK,
    JneX,
    JsgtK,
    JsgtX,
    JsgeK,
    JsgeX,
    JltK,
    JltX,
    JleK,
    JleX,
    JsltK,
    JsltX,
    JsleK,
    JsleX,
    Jeq32K,
    Jeq32X,
    Jgt32K,
    Jgt32X,
    Jge32K,
    Jge32X,
    Jset32K,
    Jset32X,
    Jne32K,
    Jne32X,
    Jsgt32K,
    Jsgt32X,
    Jsge32K,
    Jsge32X,
    Jlt32K,
    Jlt32X,
    Jle32K,
    Jle32X,
    Jslt32K,
    Jslt32X,
    Jsle32K,
    Jsle32X,
    MayGoto,
    /// Helper call; `imm` = helper id.
    Call,
    /// Local call; `off` = target op.
    CallLocal,
    /// `callx dst`.
    Callx,
    Exit,
}

/// One pre-decoded instruction (16 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub code: Code,
    pub dst: u8,
    pub src: u8,
    pub aux: u8,
    /// Memory offset, or jump/call target op index.
    pub off: i32,
    /// Immediate, already extended for the operation's width.
    pub imm: u64,
}

/// Encoding of atomic operations in [`Op::aux`].
pub fn atomic_code(op: AtomicOp) -> u8 {
    match op {
        AtomicOp::Add { fetch } => fetch as u8,
        AtomicOp::Or { fetch } => 2 | fetch as u8,
        AtomicOp::And { fetch } => 4 | fetch as u8,
        AtomicOp::Xor { fetch } => 6 | fetch as u8,
        AtomicOp::Xchg => 8,
        AtomicOp::CmpXchg => 10,
    }
}

/// A function of the VM's program (its own boundaries: the Image's
/// functions split further at every call target, like the kernel's
/// subprograms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Func {
    pub name: String,
    /// First and one-past-last slot.
    pub start_slot: usize,
    pub end_slot: usize,
    /// First and one-past-last op.
    pub start_op: usize,
    pub end_op: usize,
}

/// The translated program.
#[derive(Clone, Debug)]
pub struct Program {
    pub ops: Vec<Op>,
    /// Slot of each op (for diagnostics and traces).
    pub op_slot: Vec<usize>,
    /// The original instruction of each op (for traces).
    pub insns: Vec<Insn>,
    pub funcs: Vec<Func>,
    /// Function index of each op.
    pub op_func: Vec<u32>,
    /// Per op: a packet load or store the checker proved in bounds on
    /// every run (from the entry's own context, after `data_end`
    /// comparisons): native code leaves out its run-time check.
    pub packet_proven: Vec<bool>,
    /// Ops that load an `xdp_md` field through the entry's own context
    /// on every run (the checker's proof): native code reads the field
    /// from its per-run table instead of checking the address.
    pub ctx_field: Vec<bool>,
}

impl Program {
    /// `function+offset` of op `pc`.
    pub fn location(&self, pc: usize) -> String {
        match (self.op_func.get(pc), self.op_slot.get(pc)) {
            (Some(&f), Some(&slot)) => match self.funcs.get(f as usize) {
                Some(func) => format!("{}+{}", func.name, slot - func.start_slot),
                None => format!("slot {slot}"),
            },
            _ => format!("op {pc}"),
        }
    }

    /// Slot of op `pc`.
    pub fn slot(&self, pc: usize) -> usize {
        self.op_slot.get(pc).copied().unwrap_or(usize::MAX)
    }
}

fn alu_code(width: Width, op: AluOp, reg: bool) -> Code {
    use Code::*;
    let pick = |k: Code, x: Code| if reg { x } else { k };
    match (width, op) {
        (Width::W64, AluOp::Add) => pick(Add64K, Add64X),
        (Width::W64, AluOp::Sub) => pick(Sub64K, Sub64X),
        (Width::W64, AluOp::Mul) => pick(Mul64K, Mul64X),
        (Width::W64, AluOp::Div) => pick(Div64K, Div64X),
        (Width::W64, AluOp::SDiv) => pick(SDiv64K, SDiv64X),
        (Width::W64, AluOp::Or) => pick(Or64K, Or64X),
        (Width::W64, AluOp::And) => pick(And64K, And64X),
        (Width::W64, AluOp::Lsh) => pick(Lsh64K, Lsh64X),
        (Width::W64, AluOp::Rsh) => pick(Rsh64K, Rsh64X),
        (Width::W64, AluOp::Mod) => pick(Mod64K, Mod64X),
        (Width::W64, AluOp::SMod) => pick(SMod64K, SMod64X),
        (Width::W64, AluOp::Xor) => pick(Xor64K, Xor64X),
        (Width::W64, AluOp::Mov) => pick(Mov64K, Mov64X),
        (Width::W64, AluOp::Arsh) => pick(Arsh64K, Arsh64X),
        (Width::W64, AluOp::Neg) => Neg64,
        (Width::W64, AluOp::MovSx(8)) => MovSx64B,
        (Width::W64, AluOp::MovSx(16)) => MovSx64H,
        (Width::W64, AluOp::MovSx(_)) => MovSx64W,
        (Width::W32, AluOp::Add) => pick(Add32K, Add32X),
        (Width::W32, AluOp::Sub) => pick(Sub32K, Sub32X),
        (Width::W32, AluOp::Mul) => pick(Mul32K, Mul32X),
        (Width::W32, AluOp::Div) => pick(Div32K, Div32X),
        (Width::W32, AluOp::SDiv) => pick(SDiv32K, SDiv32X),
        (Width::W32, AluOp::Or) => pick(Or32K, Or32X),
        (Width::W32, AluOp::And) => pick(And32K, And32X),
        (Width::W32, AluOp::Lsh) => pick(Lsh32K, Lsh32X),
        (Width::W32, AluOp::Rsh) => pick(Rsh32K, Rsh32X),
        (Width::W32, AluOp::Mod) => pick(Mod32K, Mod32X),
        (Width::W32, AluOp::SMod) => pick(SMod32K, SMod32X),
        (Width::W32, AluOp::Xor) => pick(Xor32K, Xor32X),
        (Width::W32, AluOp::Mov) => pick(Mov32K, Mov32X),
        (Width::W32, AluOp::Arsh) => pick(Arsh32K, Arsh32X),
        (Width::W32, AluOp::Neg) => Neg32,
        (Width::W32, AluOp::MovSx(8)) => MovSx32B,
        (Width::W32, AluOp::MovSx(_)) => MovSx32H,
    }
}

fn jmp_code(width: Width, cond: Cond, reg: bool) -> Code {
    use Code::*;
    let pick = |k: Code, x: Code| if reg { x } else { k };
    match (width, cond) {
        (Width::W64, Cond::Eq) => pick(JeqK, JeqX),
        (Width::W64, Cond::Gt) => pick(JgtK, JgtX),
        (Width::W64, Cond::Ge) => pick(JgeK, JgeX),
        (Width::W64, Cond::Set) => pick(JsetK, JsetX),
        (Width::W64, Cond::Ne) => pick(JneK, JneX),
        (Width::W64, Cond::Sgt) => pick(JsgtK, JsgtX),
        (Width::W64, Cond::Sge) => pick(JsgeK, JsgeX),
        (Width::W64, Cond::Lt) => pick(JltK, JltX),
        (Width::W64, Cond::Le) => pick(JleK, JleX),
        (Width::W64, Cond::Slt) => pick(JsltK, JsltX),
        (Width::W64, Cond::Sle) => pick(JsleK, JsleX),
        (Width::W32, Cond::Eq) => pick(Jeq32K, Jeq32X),
        (Width::W32, Cond::Gt) => pick(Jgt32K, Jgt32X),
        (Width::W32, Cond::Ge) => pick(Jge32K, Jge32X),
        (Width::W32, Cond::Set) => pick(Jset32K, Jset32X),
        (Width::W32, Cond::Ne) => pick(Jne32K, Jne32X),
        (Width::W32, Cond::Sgt) => pick(Jsgt32K, Jsgt32X),
        (Width::W32, Cond::Sge) => pick(Jsge32K, Jsge32X),
        (Width::W32, Cond::Lt) => pick(Jlt32K, Jlt32X),
        (Width::W32, Cond::Le) => pick(Jle32K, Jle32X),
        (Width::W32, Cond::Slt) => pick(Jslt32K, Jslt32X),
        (Width::W32, Cond::Sle) => pick(Jsle32K, Jsle32X),
    }
}

fn op(code: Code, dst: u8, src: u8, aux: u8, off: i32, imm: u64) -> Op {
    Op {
        code,
        dst,
        src,
        aux,
        off,
        imm,
    }
}

/// A source operand as the op form holds it: whether it is a register,
/// the register number, and the immediate extended once, at translation,
/// as the instruction's width reads it (sign-extended for 64-bit,
/// zero-extended 32 bits for 32-bit).
fn source(src: Operand, width: Width) -> (bool, u8, u64) {
    match src {
        Operand::Reg(r) => (true, r.num(), 0),
        Operand::Imm(i) => (
            false,
            0,
            match width {
                Width::W64 => i as i64 as u64,
                Width::W32 => i as u32 as u64,
            },
        ),
    }
}

/// Translates one instruction. `target(rel)` maps a relative slot offset
/// (from the next slot) to an op index; the checker has already made sure
/// every target exists, so a missing one cannot happen here (it yields op
/// 0, which is never reached). `func_addr(rel)` is the address of the
/// function there.
pub fn translate(insn: &Insn, target: impl Fn(i64) -> usize, func_addr: impl Fn(i64) -> u64) -> Op {
    use Code::*;
    match *insn {
        Insn::Alu {
            width,
            op: aop,
            dst,
            src,
        } => {
            let (reg, s, imm) = source(src, width);
            op(alu_code(width, aop, reg), dst.num(), s, 0, 0, imm)
        }
        Insn::Endian { order, bits, dst } => {
            let code = match (order, bits) {
                (ByteOrder::Le, 16) => Trunc16,
                (ByteOrder::Le, 32) => Trunc32,
                (ByteOrder::Le, _) => Nop,
                (_, 16) => Swap16,
                (_, 32) => Swap32,
                _ => Swap64,
            };
            op(code, dst.num(), 0, 0, 0, 0)
        }
        // Rejected by the checker; never reached.
        Insn::AddrSpaceCast { dst, .. } => op(Nop, dst.num(), 0, 0, 0, 0),
        Insn::Ldx { .. } | Insn::St { .. } | Insn::Stx { .. } | Insn::Atomic { .. } => mem_op(insn),
        Insn::Lddw {
            kind,
            dst,
            imm,
            next_imm,
        } => lddw_op(kind, dst.num(), imm, next_imm, func_addr),
        Insn::LdAbs { size, imm } => op(LdAbs, 0, 0, size.bytes() as u8, 0, imm as i64 as u64),
        Insn::LdInd { size, src, imm } => op(
            LdInd,
            0,
            src.num(),
            size.bytes() as u8,
            0,
            imm as i64 as u64,
        ),
        Insn::Ja { off } => op(Ja, 0, 0, 0, target(off as i64) as i32, 0),
        Insn::Gotol { imm } => op(Ja, 0, 0, 0, target(imm as i64) as i32, 0),
        Insn::Jmp {
            width,
            cond,
            dst,
            src,
            off,
        } => {
            let (reg, s, imm) = source(src, width);
            op(
                jmp_code(width, cond, reg),
                dst.num(),
                s,
                0,
                target(off as i64) as i32,
                imm,
            )
        }
        Insn::MayGoto { off } => op(MayGoto, 0, 0, 0, target(off as i64) as i32, 0),
        Insn::Call { kind, imm } => match kind {
            CallKind::Local => op(CallLocal, 0, 0, 0, target(imm as i64) as i32, 0),
            // Kfuncs are rejected by the checker.
            _ => op(Call, 0, 0, 0, 0, imm as i64 as u64),
        },
        Insn::Callx { reg } => op(Callx, reg.num(), 0, 0, 0, 0),
        Insn::Exit => op(Exit, 0, 0, 0, 0, 0),
    }
}

/// The op of a load, store or atomic.
fn mem_op(insn: &Insn) -> Op {
    use Code::*;
    match *insn {
        Insn::Ldx {
            size,
            signed,
            dst,
            src,
            off,
        } => {
            let code = match (size, signed) {
                (Size::B, false) => LdxB,
                (Size::H, false) => LdxH,
                (Size::W, false) => LdxW,
                (Size::DW, _) => LdxDW,
                (Size::B, true) => LdxSB,
                (Size::H, true) => LdxSH,
                (Size::W, true) => LdxSW,
            };
            op(code, dst.num(), src.num(), 0, off as i32, 0)
        }
        Insn::St {
            size,
            dst,
            off,
            imm,
        } => {
            let code = match size {
                Size::B => StB,
                Size::H => StH,
                Size::W => StW,
                Size::DW => StDW,
            };
            op(code, dst.num(), 0, 0, off as i32, imm as i64 as u64)
        }
        Insn::Stx {
            size,
            dst,
            src,
            off,
        } => {
            let code = match size {
                Size::B => StxB,
                Size::H => StxH,
                Size::W => StxW,
                Size::DW => StxDW,
            };
            op(code, dst.num(), src.num(), 0, off as i32, 0)
        }
        Insn::Atomic {
            size,
            op: aop,
            dst,
            src,
            off,
        } => op(
            Atomic,
            dst.num(),
            src.num(),
            atomic_code(aop),
            off as i32,
            size.bytes() as u64,
        ),
        // `translate` passes memory instructions only.
        _ => op(Nop, 0, 0, 0, 0, 0),
    }
}

/// The op of an `lddw` of `kind`: a map handle, a map value's address, a
/// function's address, or the constant.
fn lddw_op(kind: LddwKind, dst: u8, imm: i32, next_imm: i32, func_addr: impl Fn(i64) -> u64) -> Op {
    use Code::*;
    match kind {
        LddwKind::MapIdxValue => op(
            Lddw,
            dst,
            0,
            0,
            0,
            crate::mem::addr(
                crate::mem::MAP_BASE.wrapping_add(imm as u32),
                next_imm as u32 as u64,
            ),
        ),
        LddwKind::MapIdx => op(
            Lddw,
            dst,
            0,
            0,
            0,
            crate::mem::addr(crate::mem::MAP_HANDLES, imm as u32 as u64),
        ),
        LddwKind::Func => op(Lddw, dst, 0, 0, 0, func_addr(imm as i64)),
        _ => op(Lddw, dst, 0, 0, 0, Insn::imm64(imm, next_imm)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_is_compact() {
        assert_eq!(std::mem::size_of::<Op>(), 16);
    }
}
