//! The llvm syntax (llvm-objdump, clang inline asm): `r0 = 1`, `w0 += w1`,
//! `r0 = *(u32 *)(r1 + 4)`, `*(u8 *)(r10 - 1) = r2`, `if w1 > 3 goto +1`,
//! `lock *(u64 *)(r0 + 0) += r1`, `r0 = atomic_fetch_add((u64 *)(r1 + 0), r0)`,
//! `r0 = xchg_64(r1 + 0, r0)`, `r0 = cmpxchg_64(r1 + 0, r0, r2)`,
//! `r1 = 0 ll`, `r1 = sym ll`, `call 1`, `call -1`, `callx r2`.
//! nfkit extensions where llvm has no spelling: `call local +N`,
//! `call kfunc N`, `call helper -N`, `r0 = *(u8 *)skb[r1 + 4]`, and the
//! `lddw` pseudo sources (`r1 = map_fd(3) ll`).

use super::conformance::{address_spaces, named_call};
use super::cursor::Cursor;
use super::lexer::Tok;
use super::{AsmError, FixKind, Stmt};
use crate::insn::*;

/// A register and whether it was written `wN`.
type R = (Reg, bool);

fn reg(cur: &mut Cursor) -> Result<R, AsmError> {
    cur.reg_name(&['r', 'w'])
}

fn reg64(cur: &mut Cursor) -> Result<Reg, AsmError> {
    let col = cur.col();
    let (r, w) = reg(cur)?;
    if w {
        return cur.err_at(
            col,
            format!(
                "Invalid register w{}: a 64-bit register (r{}) is needed here",
                r.num(),
                r.num()
            ),
        );
    }
    Ok(r)
}

fn width(w: bool) -> Width {
    if w {
        Width::W32
    } else {
        Width::W64
    }
}

/// A register that must have the width of `dst`.
fn reg_like(cur: &mut Cursor, dst_w: bool) -> Result<Reg, AsmError> {
    let col = cur.col();
    let (r, w) = reg(cur)?;
    if w != dst_w {
        return cur.err_at(
            col,
            "Invalid register: r and w registers cannot be mixed in one instruction",
        );
    }
    Ok(r)
}

fn at_reg(cur: &Cursor) -> bool {
    matches!(cur.peek(), Some(Tok::Ident(s)) if super::cursor::looks_like_reg(s))
}

/// `(u32 *)`: the access size and signedness.
fn size_cast(cur: &mut Cursor) -> Result<(Size, bool), AsmError> {
    cur.expect_punct("(")?;
    let (ty, col) = cur.ident("type")?;
    let r = match ty.as_str() {
        "u8" => (Size::B, false),
        "u16" => (Size::H, false),
        "u32" => (Size::W, false),
        "u64" => (Size::DW, false),
        "s8" => (Size::B, true),
        "s16" => (Size::H, true),
        "s32" => (Size::W, true),
        _ => {
            return cur.err_at(
                col,
                format!("Invalid type `{ty}`: expected u8, u16, u32, u64, s8, s16 or s32"),
            )
        }
    };
    cur.expect_punct("*")?;
    cur.expect_punct(")")?;
    Ok(r)
}

/// `rN + off`, `rN - off` or `rN` (no parentheses).
fn addr(cur: &mut Cursor) -> Result<(Reg, i16), AsmError> {
    let r = reg64(cur)?;
    let off = if cur.is_punct("+") || cur.is_punct("-") {
        cur.off16("offset")?
    } else {
        0
    };
    Ok((r, off))
}

/// `(rN + off)`.
fn mem(cur: &mut Cursor) -> Result<(Reg, i16), AsmError> {
    cur.expect_punct("(")?;
    let a = addr(cur)?;
    cur.expect_punct(")")?;
    Ok(a)
}

/// A register of a memory access of `size` (`w` only below 64 bits).
fn data_reg(cur: &mut Cursor, size: Size) -> Result<Reg, AsmError> {
    let col = cur.col();
    let (r, w) = reg(cur)?;
    if w && size == Size::DW {
        return cur.err_at(col, "Invalid register: a 64-bit access needs an r register");
    }
    Ok(r)
}

fn target(cur: &mut Cursor, insn: impl Fn(i64) -> Option<Insn>) -> Result<Stmt, AsmError> {
    let stmt = if cur.at_number() {
        let n = cur.number("jump offset")?;
        let v = n.value.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        match insn(v) {
            Some(i) => Stmt::done(i),
            None => return cur.err_at(n.col, format!("Invalid offset {v}: out of range")),
        }
    } else {
        let (name, col) = cur.ident("jump target")?;
        let zero = insn(0).ok_or_else(|| AsmError::new(cur.line, col, "Invalid jump"))?;
        Stmt::fix(zero, FixKind::Jump, name, col)
    };
    // llvm-objdump appends `<label>` to jump targets.
    if cur.eat_punct("<") {
        cur.ident("label")?;
        cur.expect_punct(">")?;
    }
    Ok(stmt)
}

fn off16(v: i64) -> Option<i16> {
    i16::try_from(v).ok()
}

/// Parses one instruction (labels already removed).
pub(crate) fn parse(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    let stmt = match cur.peek() {
        Some(Tok::Punct("*")) => store(cur)?,
        Some(Tok::Ident(s)) => match s.as_str() {
            "if" => cond_jump(cur)?,
            "goto" => {
                cur.bump();
                target(cur, |v| Some(Insn::Ja { off: off16(v)? }))?
            }
            "gotol" => {
                cur.bump();
                target(cur, |v| {
                    Some(Insn::Gotol {
                        imm: i32::try_from(v).ok()?,
                    })
                })?
            }
            "may_goto" => {
                cur.bump();
                target(cur, |v| Some(Insn::MayGoto { off: off16(v)? }))?
            }
            "exit" => {
                cur.bump();
                Stmt::done(Insn::Exit)
            }
            "callx" => {
                cur.bump();
                Stmt::done(Insn::Callx { reg: reg64(cur)? })
            }
            "call" => {
                cur.bump();
                call(cur)?
            }
            "lock" => {
                cur.bump();
                lock(cur)?
            }
            s if super::cursor::looks_like_reg(s) => assign(cur)?,
            _ => {
                return cur.err(format!(
                    "Invalid instruction: unknown mnemonic {}",
                    cur.describe()
                ))
            }
        },
        _ => {
            return cur.err(format!(
                "Invalid instruction: unexpected {}",
                cur.describe()
            ))
        }
    };
    cur.expect_end()?;
    Ok(stmt)
}

fn call(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    let kind = if cur.eat_ident("local") {
        Some(CallKind::Local)
    } else if cur.eat_ident("kfunc") {
        Some(CallKind::Kfunc)
    } else if cur.eat_ident("helper") {
        Some(CallKind::Helper)
    } else {
        None
    };
    if kind == Some(CallKind::Local) && !cur.at_number() {
        let (name, col) = cur.ident("call target")?;
        let insn = Insn::Call {
            kind: CallKind::Local,
            imm: -1,
        };
        return Ok(Stmt::fix(insn, FixKind::Call, name, col));
    }
    if kind.is_none() && !cur.at_number() {
        return named_call(cur);
    }
    let imm = cur.imm32("call immediate")?;
    // `call -1` is clang's pseudo call (a local call awaiting relocation).
    let kind = kind.unwrap_or(if imm < 0 {
        CallKind::Local
    } else {
        CallKind::Helper
    });
    Ok(Stmt::done(Insn::Call { kind, imm }))
}

/// `*(size *)(rN + off) = src`.
fn store(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    cur.expect_punct("*")?;
    let (size, signed) = size_cast(cur)?;
    if signed {
        return cur.err("Invalid store: stores take unsigned types (u8..u64)");
    }
    let (dst, off) = mem(cur)?;
    cur.expect_punct("=")?;
    if at_reg(cur) {
        let src = data_reg(cur, size)?;
        Ok(Stmt::done(Insn::Stx {
            size,
            dst,
            src,
            off,
        }))
    } else {
        let imm = cur.imm32("immediate")?;
        Ok(Stmt::done(Insn::St {
            size,
            dst,
            off,
            imm,
        }))
    }
}

/// `lock *(u64 *)(rN + off) op= rS`.
fn lock(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    cur.expect_punct("*")?;
    let (size, signed) = size_cast(cur)?;
    if signed || !matches!(size, Size::W | Size::DW) {
        return cur.err("Invalid atomic: atomics take u32 or u64");
    }
    let (dst, off) = mem(cur)?;
    let op = match cur.peek() {
        Some(Tok::Punct("+=")) => AtomicOp::Add { fetch: false },
        Some(Tok::Punct("|=")) => AtomicOp::Or { fetch: false },
        Some(Tok::Punct("&=")) => AtomicOp::And { fetch: false },
        Some(Tok::Punct("^=")) => AtomicOp::Xor { fetch: false },
        _ => {
            return cur.err(format!(
                "Invalid atomic operation {}: expected +=, |=, &= or ^=",
                cur.describe()
            ))
        }
    };
    cur.bump();
    let src = data_reg(cur, size)?;
    Ok(Stmt::done(Insn::Atomic {
        size,
        op,
        dst,
        src,
        off,
    }))
}

/// `if dst cond src goto target`.
fn cond_jump(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    cur.expect_ident("if")?;
    let (dst, w) = reg(cur)?;
    let signed = cur.eat_ident("s");
    let col = cur.col();
    let cond = match (cur.peek(), signed) {
        (Some(Tok::Punct("==")), false) => Cond::Eq,
        (Some(Tok::Punct("!=")), false) => Cond::Ne,
        (Some(Tok::Punct("&")), false) => Cond::Set,
        (Some(Tok::Punct(">")), false) => Cond::Gt,
        (Some(Tok::Punct(">=")), false) => Cond::Ge,
        (Some(Tok::Punct("<")), false) => Cond::Lt,
        (Some(Tok::Punct("<=")), false) => Cond::Le,
        (Some(Tok::Punct(">")), true) => Cond::Sgt,
        (Some(Tok::Punct(">=")), true) => Cond::Sge,
        (Some(Tok::Punct("<")), true) => Cond::Slt,
        (Some(Tok::Punct("<=")), true) => Cond::Sle,
        _ => {
            return cur.err_at(
                col,
                format!(
                    "Invalid condition {}: expected ==, !=, &, >, >=, <, <=, s>, s>=, s<, s<=",
                    cur.describe()
                ),
            )
        }
    };
    cur.bump();
    let src = reg_or_imm(cur, w)?;
    cur.expect_ident("goto")?;
    let width = width(w);
    target(cur, |v| {
        Some(Insn::Jmp {
            width,
            cond,
            dst,
            src,
            off: off16(v)?,
        })
    })
}

/// Compound assignment operators and their ALU operations.
fn compound(cur: &mut Cursor) -> Option<AluOp> {
    let signed = matches!(cur.peek(), Some(Tok::Ident(s)) if s == "s")
        && matches!(cur.peek_at(1), Some(Tok::Punct(">>=" | "/=" | "%=")));
    if signed {
        cur.bump();
    }
    let op = match (cur.peek(), signed) {
        (Some(Tok::Punct("+=")), false) => AluOp::Add,
        (Some(Tok::Punct("-=")), false) => AluOp::Sub,
        (Some(Tok::Punct("*=")), false) => AluOp::Mul,
        (Some(Tok::Punct("/=")), false) => AluOp::Div,
        (Some(Tok::Punct("|=")), false) => AluOp::Or,
        (Some(Tok::Punct("&=")), false) => AluOp::And,
        (Some(Tok::Punct("<<=")), false) => AluOp::Lsh,
        (Some(Tok::Punct(">>=")), false) => AluOp::Rsh,
        (Some(Tok::Punct("%=")), false) => AluOp::Mod,
        (Some(Tok::Punct("^=")), false) => AluOp::Xor,
        (Some(Tok::Punct(">>=")), true) => AluOp::Arsh,
        (Some(Tok::Punct("/=")), true) => AluOp::SDiv,
        (Some(Tok::Punct("%=")), true) => AluOp::SMod,
        _ => return None,
    };
    cur.bump();
    Some(op)
}

/// The destination register of an assignment, as written.
#[derive(Clone, Copy)]
struct Dst {
    reg: Reg,
    /// Written `wN`.
    w: bool,
    /// Its column, where errors about its width point.
    col: usize,
}

impl Dst {
    /// Fails unless the destination was written `rN`: for instructions with
    /// no 32-bit form (`lddw`, packet loads, `addr_space_cast`).
    fn need64(self, cur: &Cursor) -> Result<(), AsmError> {
        if self.w {
            cur.err_at(
                self.col,
                format!(
                    "Invalid register w{}: this instruction needs r{}",
                    self.reg.num(),
                    self.reg.num()
                ),
            )
        } else {
            Ok(())
        }
    }

    /// Reads a register that must repeat the destination (`r1 = be16 r1`,
    /// the value operand of the fetching atomics).
    fn same(self, cur: &mut Cursor) -> Result<(), AsmError> {
        let col = cur.col();
        let (r, _) = reg(cur)?;
        if r != self.reg {
            return cur.err_at(
                col,
                format!(
                    "Invalid register: must be the destination r{}",
                    self.reg.num()
                ),
            );
        }
        Ok(())
    }

    /// Fails when a `wN` destination meets a 64-bit access (`what` names it).
    fn fits(self, cur: &Cursor, size: Size, what: &str) -> Result<(), AsmError> {
        if self.w && size == Size::DW {
            return cur.err_at(self.col, format!("Invalid register: {what}"));
        }
        Ok(())
    }

    /// The ALU instruction `op` on the destination, at its width.
    fn alu(self, op: AluOp, src: Operand) -> Stmt {
        Stmt::done(Insn::Alu {
            width: width(self.w),
            op,
            dst: self.reg,
            src,
        })
    }
}

/// A register of the width `w`, or a 32-bit immediate: the source of an ALU
/// operation or a comparison.
fn reg_or_imm(cur: &mut Cursor, w: bool) -> Result<Operand, AsmError> {
    Ok(if at_reg(cur) {
        Operand::Reg(reg_like(cur, w)?)
    } else {
        Operand::Imm(cur.imm32("immediate")?)
    })
}

/// Everything that starts with a destination register: compound ALU
/// operations (`r0 += 1`) and the plain assignments after `=`.
fn assign(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    let col = cur.col();
    let (reg, w) = reg(cur)?;
    let dst = Dst { reg, w, col };
    if let Some(op) = compound(cur) {
        let src = reg_or_imm(cur, w)?;
        return Ok(dst.alu(op, src));
    }
    if !cur.eat_punct("=") {
        return cur.err(format!(
            "Invalid instruction: expected `=` or an operator like `+=`, found {}",
            cur.describe()
        ));
    }
    if cur.is_punct("-")
        && matches!(cur.peek_at(1), Some(Tok::Ident(s)) if super::cursor::looks_like_reg(s))
    {
        return negation(cur, dst);
    }
    if cur.is_punct("(") {
        return sign_extend(cur, dst);
    }
    if cur.eat_punct("*") {
        return load(cur, dst);
    }
    if let Some(Tok::Ident(name)) = cur.peek() {
        return named_source(cur, dst, name);
    }
    if cur.at_number() {
        return immediate(cur, dst);
    }
    cur.err(format!("Invalid operand {}", cur.describe()))
}

/// `rN = -rN`: negation (llvm spells `neg` as an assignment to itself).
fn negation(cur: &mut Cursor, dst: Dst) -> Result<Stmt, AsmError> {
    cur.expect_punct("-")?;
    let col = cur.col();
    let src = reg_like(cur, dst.w)?;
    if src != dst.reg {
        return cur.err_at(
            col,
            "Invalid negation: the source must be the destination register",
        );
    }
    Ok(dst.alu(AluOp::Neg, Operand::Imm(0)))
}

/// `rN = (s8)rM`: the sign-extending move.
fn sign_extend(cur: &mut Cursor, dst: Dst) -> Result<Stmt, AsmError> {
    cur.expect_punct("(")?;
    let (ty, col) = cur.ident("type")?;
    let bits = match ty.as_str() {
        "s8" => 8,
        "s16" => 16,
        "s32" if !dst.w => 32,
        _ => {
            return cur.err_at(
                col,
                format!(
                    "Invalid sign extension `({ty})`: expected (s8), (s16) or (s32) (64-bit only)"
                ),
            )
        }
    };
    cur.expect_punct(")")?;
    let src = reg_like(cur, dst.w)?;
    Ok(dst.alu(AluOp::MovSx(bits), Operand::Reg(src)))
}

/// `rN = *(size *)(rM + off)` (after the `*`): a memory load, or a legacy
/// packet load when the address is `skb[...]`.
fn load(cur: &mut Cursor, dst: Dst) -> Result<Stmt, AsmError> {
    let (size, signed) = size_cast(cur)?;
    if cur.eat_ident("skb") {
        return packet_load(cur, dst, size, signed);
    }
    let (src, off) = mem(cur)?;
    dst.fits(cur, size, "a 64-bit load needs an r register")?;
    if signed && dst.w {
        return cur.err_at(
            dst.col,
            "Invalid register: sign-extending loads need an r register",
        );
    }
    Ok(Stmt::done(Insn::Ldx {
        size,
        signed,
        dst: dst.reg,
        src,
        off,
    }))
}

/// `r0 = *(u8 *)skb[rN + imm]` or `skb[imm]` (after `skb`): the legacy
/// `ld_ind` and `ld_abs` packet loads.
fn packet_load(cur: &mut Cursor, dst: Dst, size: Size, signed: bool) -> Result<Stmt, AsmError> {
    dst.need64(cur)?;
    if dst.reg != Reg::R0 || signed || size == Size::DW {
        return cur.err("Invalid packet load: r0 = *(u8|u16|u32 *)skb[...] only");
    }
    cur.expect_punct("[")?;
    let insn = if at_reg(cur) {
        let src = reg64(cur)?;
        let imm = if cur.at_number() {
            cur.imm32("offset")?
        } else {
            0
        };
        Insn::LdInd { size, src, imm }
    } else {
        Insn::LdAbs {
            size,
            imm: cur.imm32("offset")?,
        }
    };
    cur.expect_punct("]")?;
    Ok(Stmt::done(insn))
}

/// A source that starts with a name: `lddw` pseudo sources, byte swaps,
/// the atomics that return a value, `addr_space_cast`, a symbol (`sym ll`)
/// or a register (a move).
fn named_source(cur: &mut Cursor, dst: Dst, name: &str) -> Result<Stmt, AsmError> {
    let name_col = cur.col();
    if let Some(insn) = cur.pseudo_lddw(dst.reg)? {
        dst.need64(cur)?;
        cur.eat_ident("ll");
        return Ok(Stmt::done(insn));
    }
    if let Some((order, bits)) = endian_op(name) {
        cur.bump();
        dst.same(cur)?;
        return Ok(Stmt::done(Insn::Endian {
            order,
            bits,
            dst: dst.reg,
        }));
    }
    if let Some(op) = fetch_op(name) {
        cur.bump();
        return fetch_atomic(cur, dst, op);
    }
    if let Some((op, size)) = xchg_op(name) {
        cur.bump();
        return xchg(cur, dst, op, size);
    }
    if name == "addr_space_cast" {
        cur.bump();
        return addr_space_cast(cur, dst);
    }
    if !super::cursor::looks_like_reg(name) {
        cur.bump();
        return symbol_load(cur, dst, name, name_col);
    }
    let src = reg_like(cur, dst.w)?;
    Ok(dst.alu(AluOp::Mov, Operand::Reg(src)))
}

/// The byte-swap functions: `le16`..`be64` (to an order) and `bswap16`..`64`.
fn endian_op(name: &str) -> Option<(ByteOrder, u8)> {
    Some(match name {
        "le16" => (ByteOrder::Le, 16),
        "le32" => (ByteOrder::Le, 32),
        "le64" => (ByteOrder::Le, 64),
        "be16" => (ByteOrder::Be, 16),
        "be32" => (ByteOrder::Be, 32),
        "be64" => (ByteOrder::Be, 64),
        "bswap16" => (ByteOrder::Swap, 16),
        "bswap32" => (ByteOrder::Swap, 32),
        "bswap64" => (ByteOrder::Swap, 64),
        _ => return None,
    })
}

/// The `atomic_fetch_*` functions.
fn fetch_op(name: &str) -> Option<AtomicOp> {
    Some(match name {
        "atomic_fetch_add" => AtomicOp::Add { fetch: true },
        "atomic_fetch_or" => AtomicOp::Or { fetch: true },
        "atomic_fetch_and" => AtomicOp::And { fetch: true },
        "atomic_fetch_xor" => AtomicOp::Xor { fetch: true },
        _ => return None,
    })
}

/// The exchange functions and their access sizes.
fn xchg_op(name: &str) -> Option<(AtomicOp, Size)> {
    Some(match name {
        "xchg_64" => (AtomicOp::Xchg, Size::DW),
        "xchg32_32" => (AtomicOp::Xchg, Size::W),
        "cmpxchg_64" => (AtomicOp::CmpXchg, Size::DW),
        "cmpxchg32_32" => (AtomicOp::CmpXchg, Size::W),
        _ => return None,
    })
}

/// `rN = atomic_fetch_add((u64 *)(rM + off), rN)` (after the name).
fn fetch_atomic(cur: &mut Cursor, dst: Dst, op: AtomicOp) -> Result<Stmt, AsmError> {
    cur.expect_punct("(")?;
    let (size, signed) = size_cast(cur)?;
    if signed || !matches!(size, Size::W | Size::DW) {
        return cur.err("Invalid atomic: atomics take u32 or u64");
    }
    dst.fits(cur, size, "a 64-bit atomic needs r registers")?;
    let (base, off) = mem(cur)?;
    cur.expect_punct(",")?;
    dst.same(cur)?;
    cur.expect_punct(")")?;
    Ok(Stmt::done(Insn::Atomic {
        size,
        op,
        dst: base,
        src: dst.reg,
        off,
    }))
}

/// `rN = xchg_64(rM + off, rN)` and `r0 = cmpxchg_64(rM + off, r0, rS)`
/// (after the name).
fn xchg(cur: &mut Cursor, dst: Dst, op: AtomicOp, size: Size) -> Result<Stmt, AsmError> {
    dst.fits(cur, size, "a 64-bit atomic needs r registers")?;
    cur.expect_punct("(")?;
    let (base, off) = addr(cur)?;
    cur.expect_punct(",")?;
    let src = if op == AtomicOp::CmpXchg {
        if dst.reg != Reg::R0 {
            return cur.err_at(
                dst.col,
                "Invalid register: cmpxchg returns its result in r0",
            );
        }
        dst.same(cur)?;
        cur.expect_punct(",")?;
        data_reg(cur, size)?
    } else {
        dst.same(cur)?;
        dst.reg
    };
    cur.expect_punct(")")?;
    Ok(Stmt::done(Insn::Atomic {
        size,
        op,
        dst: base,
        src,
        off,
    }))
}

/// `rN = addr_space_cast(rM, dst_as, src_as)` (after the name).
fn addr_space_cast(cur: &mut Cursor, dst: Dst) -> Result<Stmt, AsmError> {
    dst.need64(cur)?;
    cur.expect_punct("(")?;
    let src = reg64(cur)?;
    cur.expect_punct(",")?;
    let (dst_as, src_as) = address_spaces(cur)?;
    cur.expect_punct(")")?;
    Ok(Stmt::done(Insn::AddrSpaceCast {
        dst: dst.reg,
        src,
        dst_as,
        src_as,
    }))
}

/// `rN = symbol ll` (after the name): an `lddw` the linker fills in.
fn symbol_load(cur: &mut Cursor, dst: Dst, name: &str, col: usize) -> Result<Stmt, AsmError> {
    dst.need64(cur)?;
    if !cur.eat_ident("ll") {
        return cur.err(format!(
            "Invalid operand `{name}`: a symbol load is written `r{} = {name} ll`",
            dst.reg.num()
        ));
    }
    Ok(Stmt::fix(
        Insn::lddw(dst.reg, 0),
        FixKind::Lddw,
        name.to_string(),
        col,
    ))
}

/// `rN = imm` (a move) or `rN = imm ll` (a 64-bit `lddw`).
fn immediate(cur: &mut Cursor, dst: Dst) -> Result<Stmt, AsmError> {
    // Look ahead for `ll` (after a possible sign).
    let is_ll = matches!(cur.peek_at(1), Some(Tok::Ident(s)) if s == "ll")
        || matches!(cur.peek_at(2), Some(Tok::Ident(s)) if s == "ll");
    if is_ll {
        dst.need64(cur)?;
        let v = cur.imm64("immediate")?;
        cur.expect_ident("ll")?;
        return Ok(Stmt::done(Insn::lddw(dst.reg, v)));
    }
    let imm = cur.imm32("immediate")?;
    Ok(dst.alu(AluOp::Mov, Operand::Imm(imm)))
}
