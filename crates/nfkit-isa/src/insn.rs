//! The structured instruction model: one [`Insn`] per eBPF instruction
//! (`lddw` is one `Insn` that occupies two 8-byte slots), plus the raw
//! 8-byte slot [`RawInsn`]. Jump and call offsets are kept exactly as
//! encoded (relative, in slots), so decode → encode is the identity.

use std::fmt;

/// A register number, 0..=10 (r10 is the read-only frame pointer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(u8);

impl Reg {
    /// The frame pointer.
    pub const FP: Reg = Reg(10);
    pub const R0: Reg = Reg(0);
    pub const R1: Reg = Reg(1);
    pub const R2: Reg = Reg(2);
    pub const R3: Reg = Reg(3);
    pub const R4: Reg = Reg(4);
    pub const R5: Reg = Reg(5);
    pub const R6: Reg = Reg(6);
    pub const R7: Reg = Reg(7);
    pub const R8: Reg = Reg(8);
    pub const R9: Reg = Reg(9);

    /// A register, if `n` names one (0..=10).
    pub const fn new(n: u8) -> Option<Reg> {
        if n <= 10 {
            Some(Reg(n))
        } else {
            None
        }
    }

    /// The register number.
    pub const fn num(self) -> u8 {
        self.0
    }
}

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// The second operand of ALU and conditional-jump instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    Reg(Reg),
    Imm(i32),
}

/// Operand width of ALU (`ALU` vs `ALU64`) and jump (`JMP32` vs `JMP`) classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    W32,
    W64,
}

/// Memory access size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    B,
    H,
    W,
    DW,
}

impl Size {
    /// Size in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
            Size::DW => 8,
        }
    }

    /// Size in bits.
    pub const fn bits(self) -> u32 {
        (self.bytes() * 8) as u32
    }

    /// The size of `n` bytes, if it is one.
    pub const fn from_bytes(n: usize) -> Option<Size> {
        match n {
            1 => Some(Size::B),
            2 => Some(Size::H),
            4 => Some(Size::W),
            8 => Some(Size::DW),
            _ => None,
        }
    }
}

/// Arithmetic operations. `SDiv`/`SMod` are `div`/`mod` with offset 1;
/// `MovSx(bits)` is `mov` with offset 8, 16 or 32 (register source only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    SDiv,
    Or,
    And,
    Lsh,
    Rsh,
    Neg,
    Mod,
    SMod,
    Xor,
    Mov,
    MovSx(u8),
    Arsh,
}

/// Byte-order operations: `le`/`be` (ALU class, convert to that order and
/// zero-extend) and unconditional `bswap` (ALU64 class).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    Le,
    Be,
    Swap,
}

/// Conditions of conditional jumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    Eq,
    Gt,
    Ge,
    Set,
    Ne,
    Sgt,
    Sge,
    Lt,
    Le,
    Slt,
    Sle,
}

/// Atomic read-modify-write operations (imm field of `STX | ATOMIC`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add {
        fetch: bool,
    },
    Or {
        fetch: bool,
    },
    And {
        fetch: bool,
    },
    Xor {
        fetch: bool,
    },
    /// Always fetches.
    Xchg,
    /// Compares r0 with memory; always fetches into r0.
    CmpXchg,
}

/// What the 64-bit immediate of an `lddw` means (its src field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LddwKind {
    /// A plain 64-bit constant.
    Imm64,
    /// imm = map fd.
    MapFd,
    /// imm = map fd, next imm = offset into the value of key 0.
    MapValue,
    /// imm = BTF id of a kernel variable.
    BtfId,
    /// imm = instruction offset of a function (relative, like `call local`).
    Func,
    /// imm = index into the program's map table.
    MapIdx,
    /// imm = index into the program's map table, next imm = value offset.
    MapIdxValue,
}

/// Kinds of `call` with an immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// imm = helper id.
    Helper,
    /// imm = relative slot offset of a program-local function.
    Local,
    /// imm = BTF id of a kernel function.
    Kfunc,
}

/// One eBPF instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insn {
    /// `dst op= src`; `Neg` ignores the operand (encoded as `Imm(0)`).
    Alu {
        width: Width,
        op: AluOp,
        dst: Reg,
        src: Operand,
    },
    /// `dst = le16/be32/bswap64 dst`.
    Endian {
        order: ByteOrder,
        bits: u8,
        dst: Reg,
    },
    /// `dst = addr_space_cast(src, dst_as, src_as)` (ALU64 MOV X, offset 1).
    AddrSpaceCast {
        dst: Reg,
        src: Reg,
        dst_as: u16,
        src_as: u16,
    },
    /// `dst = *(size *)(src + off)`, sign-extended when `signed` (MEMSX).
    Ldx {
        size: Size,
        signed: bool,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    /// `*(size *)(dst + off) = imm`.
    St {
        size: Size,
        dst: Reg,
        off: i16,
        imm: i32,
    },
    /// `*(size *)(dst + off) = src`.
    Stx {
        size: Size,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    /// Atomic RMW on `*(size *)(dst + off)` with `src` (size W or DW).
    Atomic {
        size: Size,
        op: AtomicOp,
        dst: Reg,
        src: Reg,
        off: i16,
    },
    /// 64-bit immediate load, two slots: `imm` is the first slot's imm,
    /// `next_imm` the second's.
    Lddw {
        kind: LddwKind,
        dst: Reg,
        imm: i32,
        next_imm: i32,
    },
    /// Legacy `r0 = ntoh(*(size *)(skb->data + imm))`.
    LdAbs { size: Size, imm: i32 },
    /// Legacy `r0 = ntoh(*(size *)(skb->data + src + imm))`.
    LdInd { size: Size, src: Reg, imm: i32 },
    /// `goto +off`.
    Ja { off: i16 },
    /// `gotol +imm` (JMP32 class JA, 32-bit offset).
    Gotol { imm: i32 },
    /// `if dst cond src goto +off`.
    Jmp {
        width: Width,
        cond: Cond,
        dst: Reg,
        src: Operand,
        off: i16,
    },
    /// `may_goto +off`: the kernel's bounded-loop escape (JMP | JCOND).
    MayGoto { off: i16 },
    /// `call imm`.
    Call { kind: CallKind, imm: i32 },
    /// `callx reg`: call the helper whose id is in `reg`.
    Callx { reg: Reg },
    /// `exit`.
    Exit,
}

impl Insn {
    /// Number of 8-byte slots the instruction occupies (2 for `lddw`).
    pub const fn slots(&self) -> usize {
        match self {
            Insn::Lddw { .. } => 2,
            _ => 1,
        }
    }

    /// The full 64-bit immediate of an `lddw` (`next_imm:imm`).
    pub fn imm64(imm: i32, next_imm: i32) -> u64 {
        ((next_imm as u32 as u64) << 32) | imm as u32 as u64
    }

    /// Splits a 64-bit immediate into `(imm, next_imm)` for an `lddw`.
    pub fn split_imm64(v: u64) -> (i32, i32) {
        (v as u32 as i32, (v >> 32) as u32 as i32)
    }

    /// An `lddw` of a plain 64-bit constant.
    pub fn lddw(dst: Reg, v: u64) -> Insn {
        let (imm, next_imm) = Insn::split_imm64(v);
        Insn::Lddw {
            kind: LddwKind::Imm64,
            dst,
            imm,
            next_imm,
        }
    }

    /// The relative slot offset of a jump, if the instruction is one
    /// (target slot = this slot + 1 + offset). Calls are not jumps.
    pub fn jump_offset(&self) -> Option<i64> {
        match *self {
            Insn::Ja { off } | Insn::Jmp { off, .. } | Insn::MayGoto { off } => Some(off as i64),
            Insn::Gotol { imm } => Some(imm as i64),
            _ => None,
        }
    }

    /// The relative slot offset of a local call or of an `lddw` of a
    /// function address (target slot = this slot + 1 + offset).
    pub fn call_offset(&self) -> Option<i64> {
        match *self {
            Insn::Call {
                kind: CallKind::Local,
                imm,
            } => Some(imm as i64),
            Insn::Lddw {
                kind: LddwKind::Func,
                imm,
                ..
            } => Some(imm as i64),
            _ => None,
        }
    }

    /// True for instructions after which execution never falls through.
    pub fn ends_block(&self) -> bool {
        matches!(self, Insn::Ja { .. } | Insn::Gotol { .. } | Insn::Exit)
    }
}

/// One raw 8-byte instruction slot, fields as encoded (little-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RawInsn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl RawInsn {
    /// Decodes the fields of one 8-byte slot.
    pub fn from_bytes(b: [u8; 8]) -> RawInsn {
        RawInsn {
            code: b[0],
            dst: b[1] & 0x0f,
            src: b[1] >> 4,
            off: i16::from_le_bytes([b[2], b[3]]),
            imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// The 8 bytes of the slot (little-endian). `dst` and `src` must fit
    /// in 4 bits; higher bits are dropped.
    pub fn to_bytes(self) -> [u8; 8] {
        let off = self.off.to_le_bytes();
        let imm = self.imm.to_le_bytes();
        [
            self.code,
            (self.dst & 0x0f) | (self.src << 4),
            off[0],
            off[1],
            imm[0],
            imm[1],
            imm[2],
            imm[3],
        ]
    }

    /// The slot as a little-endian 64-bit word (the conformance suite's
    /// `-- raw` form).
    pub fn to_u64(self) -> u64 {
        u64::from_le_bytes(self.to_bytes())
    }

    /// The slot from a little-endian 64-bit word.
    pub fn from_u64(v: u64) -> RawInsn {
        RawInsn::from_bytes(v.to_le_bytes())
    }
}

/// Slot index of every instruction of `insns` (the index of its first slot).
pub fn slot_offsets(insns: &[Insn]) -> Vec<usize> {
    let mut out = Vec::with_capacity(insns.len());
    let mut slot = 0;
    for i in insns {
        out.push(slot);
        slot += i.slots();
    }
    out
}

/// Total number of slots of `insns`.
pub fn slot_count(insns: &[Insn]) -> usize {
    insns.iter().map(Insn::slots).sum()
}
