//! The bpf_conformance / uBPF syntax: `mnemonic operand, operand, ...` with
//! `%rN` registers, `[%rN+off]` memory operands, jump targets as `+N`, `-N`
//! or labels, `lock [fetch] op [mem], %rN` atomics and `call local`.
//! nfkit extensions for what the suite has no spelling for: `may_goto`,
//! `call kfunc N`, `addr_space_cast %rD, %rS, dst_as, src_as` and the
//! `lddw` pseudo sources (`lddw %r1, map_fd(3)`).

use super::cursor::Cursor;
use super::{AsmError, FixKind, Stmt};
use crate::helpers::helper_id;
use crate::insn::*;

/// What a mnemonic stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum M {
    Alu(AluOp, Width),
    Neg(Width),
    Endian(ByteOrder, u8),
    Ldx(Size, bool),
    St(Size),
    Stx(Size),
    LdAbs(Size),
    LdInd(Size),
    Lddw,
    Ja,
    Ja32,
    Jmp(Cond, Width),
    MayGoto,
    Call,
    Callx,
    Exit,
    AddrSpaceCast,
    Lock,
}

fn size_suffix(s: &str) -> Option<Size> {
    Some(match s {
        "b" => Size::B,
        "h" => Size::H,
        "w" => Size::W,
        "dw" => Size::DW,
        _ => return None,
    })
}

fn width_suffix(s: &str) -> Option<Width> {
    match s {
        "" | "64" => Some(Width::W64),
        "32" => Some(Width::W32),
        _ => None,
    }
}

const ALU_NAMES: &[(&str, AluOp)] = &[
    ("add", AluOp::Add),
    ("sub", AluOp::Sub),
    ("mul", AluOp::Mul),
    ("div", AluOp::Div),
    ("sdiv", AluOp::SDiv),
    ("or", AluOp::Or),
    ("and", AluOp::And),
    ("lsh", AluOp::Lsh),
    ("rsh", AluOp::Rsh),
    ("mod", AluOp::Mod),
    ("smod", AluOp::SMod),
    ("xor", AluOp::Xor),
    ("mov", AluOp::Mov),
    ("arsh", AluOp::Arsh),
];

const JMP_NAMES: &[(&str, Cond)] = &[
    ("jeq", Cond::Eq),
    ("jgt", Cond::Gt),
    ("jge", Cond::Ge),
    ("jset", Cond::Set),
    ("jne", Cond::Ne),
    ("jsgt", Cond::Sgt),
    ("jsge", Cond::Sge),
    ("jlt", Cond::Lt),
    ("jle", Cond::Le),
    ("jslt", Cond::Slt),
    ("jsle", Cond::Sle),
];

/// The conformance name of an ALU operation (64-bit form).
pub(crate) fn alu_name(op: AluOp) -> &'static str {
    ALU_NAMES
        .iter()
        .find(|(_, o)| *o == op)
        .map_or("neg", |(n, _)| n)
}

/// The conformance name of a jump condition (64-bit form).
pub(crate) fn jmp_name(c: Cond) -> &'static str {
    JMP_NAMES
        .iter()
        .find(|(_, o)| *o == c)
        .map_or("jeq", |(n, _)| n)
}

fn mnemonic(s: &str) -> Option<M> {
    let simple = match s {
        "lddw" => Some(M::Lddw),
        "ja" => Some(M::Ja),
        "ja32" => Some(M::Ja32),
        "may_goto" => Some(M::MayGoto),
        "call" => Some(M::Call),
        "callx" => Some(M::Callx),
        "exit" => Some(M::Exit),
        "addr_space_cast" => Some(M::AddrSpaceCast),
        "lock" => Some(M::Lock),
        "movsx832" => Some(M::Alu(AluOp::MovSx(8), Width::W32)),
        "movsx1632" => Some(M::Alu(AluOp::MovSx(16), Width::W32)),
        "movsx864" => Some(M::Alu(AluOp::MovSx(8), Width::W64)),
        "movsx1664" => Some(M::Alu(AluOp::MovSx(16), Width::W64)),
        "movsx3264" => Some(M::Alu(AluOp::MovSx(32), Width::W64)),
        _ => None,
    };
    if simple.is_some() {
        return simple;
    }
    if let Some(w) = s.strip_prefix("neg") {
        return width_suffix(w).map(M::Neg);
    }
    for (pre, order) in [
        ("le", ByteOrder::Le),
        ("be", ByteOrder::Be),
        ("bswap", ByteOrder::Swap),
        ("swap", ByteOrder::Swap),
    ] {
        if let Some(b) = s.strip_prefix(pre) {
            return match b {
                "16" => Some(M::Endian(order, 16)),
                "32" => Some(M::Endian(order, 32)),
                "64" => Some(M::Endian(order, 64)),
                _ => None,
            };
        }
    }
    if let Some(sz) = s.strip_prefix("ldxs") {
        if let Some(size) = size_suffix(sz).filter(|s| *s != Size::DW) {
            return Some(M::Ldx(size, true));
        }
    }
    if let Some(sz) = s.strip_prefix("ldx") {
        return size_suffix(sz).map(|s| M::Ldx(s, false));
    }
    if let Some(sz) = s.strip_prefix("stx") {
        return size_suffix(sz).map(M::Stx);
    }
    if let Some(sz) = s.strip_prefix("st") {
        return size_suffix(sz).map(M::St);
    }
    if let Some(sz) = s.strip_prefix("ldabs") {
        return size_suffix(sz).filter(|s| *s != Size::DW).map(M::LdAbs);
    }
    if let Some(sz) = s.strip_prefix("ldind") {
        return size_suffix(sz).filter(|s| *s != Size::DW).map(M::LdInd);
    }
    for (name, op) in ALU_NAMES {
        if let Some(w) = s.strip_prefix(name) {
            if let Some(w) = width_suffix(w) {
                return Some(M::Alu(*op, w));
            }
        }
    }
    for (name, c) in JMP_NAMES {
        if let Some(w) = s.strip_prefix(name) {
            if let Some(w) = width_suffix(w) {
                return Some(M::Jmp(*c, w));
            }
        }
    }
    None
}

/// True if `s` is a mnemonic of this syntax.
pub(crate) fn is_mnemonic(s: &str) -> bool {
    mnemonic(s).is_some()
}

/// `%rN` (the `%` may be left out).
fn reg(cur: &mut Cursor) -> Result<Reg, AsmError> {
    let had_percent = cur.eat_punct("%");
    let col = cur.col();
    match cur.reg_name(&['r']) {
        Ok((r, _)) => Ok(r),
        Err(e) if had_percent => match cur.ident("register") {
            Ok((name, _)) => cur.err_at(col, format!("Invalid register %{name}")),
            Err(_) => Err(e),
        },
        Err(e) => Err(e),
    }
}

fn at_reg(cur: &Cursor) -> bool {
    cur.is_punct("%")
        || matches!(cur.peek(), Some(super::lexer::Tok::Ident(s)) if super::cursor::looks_like_reg(s))
}

/// `%rN` or an immediate.
fn operand(cur: &mut Cursor) -> Result<Operand, AsmError> {
    if at_reg(cur) {
        Ok(Operand::Reg(reg(cur)?))
    } else {
        Ok(Operand::Imm(cur.imm32("immediate")?))
    }
}

/// `[%rN]`, `[%rN+off]` or `[%rN-off]`.
fn mem(cur: &mut Cursor) -> Result<(Reg, i16), AsmError> {
    if !cur.eat_punct("[") {
        return cur.err(format!(
            "Invalid memory operand: expected [%rN+offset], found {}",
            cur.describe()
        ));
    }
    let r = reg(cur)?;
    let off = if cur.is_punct("+") || cur.is_punct("-") {
        cur.off16("offset")?
    } else {
        0
    };
    cur.expect_punct("]")?;
    Ok((r, off))
}

/// A jump target: a signed number of slots or a label.
enum Target {
    Off(i64, usize),
    Label(String, usize),
}

fn target(cur: &mut Cursor) -> Result<Target, AsmError> {
    if cur.at_number() {
        let n = cur.number("jump offset")?;
        Ok(Target::Off(
            n.value.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            n.col,
        ))
    } else {
        let (name, col) = cur.ident("jump target")?;
        Ok(Target::Label(name, col))
    }
}

/// A 16-bit jump: the instruction made by `f` with the offset, or a fix.
fn jump16(cur: &Cursor, t: Target, f: impl Fn(i16) -> Insn) -> Result<Stmt, AsmError> {
    match t {
        Target::Off(v, col) => match i16::try_from(v) {
            Ok(off) => Ok(Stmt::done(f(off))),
            Err(_) => cur.err_at(col, format!("Invalid offset {v}: out of 16-bit range")),
        },
        Target::Label(name, col) => Ok(Stmt::fix(f(0), FixKind::Jump, name, col)),
    }
}

fn sep(cur: &mut Cursor) -> Result<(), AsmError> {
    cur.expect_punct(",")
}

/// Operands each mnemonic takes.
fn arity(m: M) -> Option<usize> {
    Some(match m {
        M::Neg(_) | M::Endian(..) | M::LdAbs(_) | M::Ja | M::Ja32 | M::MayGoto | M::Callx => 1,
        M::Alu(..) | M::Ldx(..) | M::St(_) | M::Stx(_) | M::LdInd(_) | M::Lddw => 2,
        M::Jmp(..) => 3,
        M::AddrSpaceCast => 4,
        M::Exit => 0,
        M::Call | M::Lock => return None,
    })
}

/// The frame pointer may be copied, offset or used as a base; any other
/// arithmetic on it (`or %r0, %r10`) has no meaning and is refused.
pub(crate) fn fp_source_ok(op: AluOp) -> bool {
    matches!(op, AluOp::Mov | AluOp::Add | AluOp::Sub)
}

/// Parses one instruction (labels already removed).
pub(crate) fn parse(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    let (name, col) = cur.ident("mnemonic")?;
    let Some(m) = mnemonic(&name) else {
        return cur.err_at(col, format!("Invalid mnemonic `{name}`"));
    };
    if let Some(n) = arity(m) {
        let got = cur.count_operands();
        if got != n {
            return cur.err_at(
                col,
                format!("Invalid number of operands for {name}: expected {n}, found {got}"),
            );
        }
    }
    let stmt = operands(cur, m, &name)?;
    cur.expect_end()?;
    Ok(stmt)
}

/// The operands of the mnemonic `m` (spelt `name`, for errors), made into
/// its instruction; the operand count is already checked.
fn operands(cur: &mut Cursor, m: M, name: &str) -> Result<Stmt, AsmError> {
    Ok(match m {
        M::Alu(op, width) => alu(cur, op, width, name)?,
        M::Neg(width) => Stmt::done(Insn::Alu {
            width,
            op: AluOp::Neg,
            dst: reg(cur)?,
            src: Operand::Imm(0),
        }),
        M::Endian(order, bits) => Stmt::done(Insn::Endian {
            order,
            bits,
            dst: reg(cur)?,
        }),
        M::Ldx(size, signed) => ldx(cur, size, signed)?,
        M::St(size) => st(cur, size)?,
        M::Stx(size) => stx(cur, size)?,
        M::LdAbs(size) => Stmt::done(Insn::LdAbs {
            size,
            imm: cur.imm32("immediate")?,
        }),
        M::LdInd(size) => ld_ind(cur, size)?,
        M::Lddw => lddw(cur)?,
        M::Ja => {
            let t = target(cur)?;
            jump16(cur, t, |off| Insn::Ja { off })?
        }
        M::MayGoto => {
            let t = target(cur)?;
            jump16(cur, t, |off| Insn::MayGoto { off })?
        }
        M::Ja32 => ja32(cur)?,
        M::Jmp(cond, width) => cond_jump(cur, cond, width)?,
        M::Callx => Stmt::done(Insn::Callx { reg: reg(cur)? }),
        M::Exit => Stmt::done(Insn::Exit),
        M::AddrSpaceCast => addr_space_cast(cur)?,
        M::Call => call(cur)?,
        M::Lock => lock(cur)?,
    })
}

/// `op %rD, %rS|imm` (`name` is the mnemonic, for errors). `movsx` needs a
/// register source, and the frame pointer is refused as a source of
/// arithmetic other than mov/add/sub.
fn alu(cur: &mut Cursor, op: AluOp, width: Width, name: &str) -> Result<Stmt, AsmError> {
    let dst = reg(cur)?;
    sep(cur)?;
    let src_col = cur.col();
    let src = operand(cur)?;
    if let AluOp::MovSx(_) = op {
        if !matches!(src, Operand::Reg(_)) {
            return cur.err_at(
                src_col,
                format!("Invalid operand for {name}: expected a register"),
            );
        }
    }
    if src == Operand::Reg(Reg::FP) && !fp_source_ok(op) {
        return cur.err_at(
            src_col,
            format!("Invalid operand %r10 for {name}: the frame pointer can only be moved, added, subtracted or used as a memory base"),
        );
    }
    Ok(Stmt::done(Insn::Alu {
        width,
        op,
        dst,
        src,
    }))
}

/// `ldx[s]{b,h,w,dw} %rD, [%rS+off]`.
fn ldx(cur: &mut Cursor, size: Size, signed: bool) -> Result<Stmt, AsmError> {
    let dst = reg(cur)?;
    sep(cur)?;
    let (src, off) = mem(cur)?;
    Ok(Stmt::done(Insn::Ldx {
        size,
        signed,
        dst,
        src,
        off,
    }))
}

/// `st{b,h,w,dw} [%rD+off], imm`.
fn st(cur: &mut Cursor, size: Size) -> Result<Stmt, AsmError> {
    let (dst, off) = mem(cur)?;
    sep(cur)?;
    let imm = cur.imm32("immediate")?;
    Ok(Stmt::done(Insn::St {
        size,
        dst,
        off,
        imm,
    }))
}

/// `stx{b,h,w,dw} [%rD+off], %rS`.
fn stx(cur: &mut Cursor, size: Size) -> Result<Stmt, AsmError> {
    let (dst, off) = mem(cur)?;
    sep(cur)?;
    let src = reg(cur)?;
    Ok(Stmt::done(Insn::Stx {
        size,
        dst,
        src,
        off,
    }))
}

/// `ldind{b,h,w} %rS, imm`: the legacy indirect packet load.
fn ld_ind(cur: &mut Cursor, size: Size) -> Result<Stmt, AsmError> {
    let src = reg(cur)?;
    sep(cur)?;
    Ok(Stmt::done(Insn::LdInd {
        size,
        src,
        imm: cur.imm32("immediate")?,
    }))
}

/// `lddw %rD, imm64`, `lddw %rD, map_fd(N)` (pseudo sources) or
/// `lddw %rD, symbol` (left for relocation).
fn lddw(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    let dst = reg(cur)?;
    sep(cur)?;
    Ok(if let Some(insn) = cur.pseudo_lddw(dst)? {
        Stmt::done(insn)
    } else if cur.at_number() {
        Stmt::done(Insn::lddw(dst, cur.imm64("immediate")?))
    } else {
        let (sym, col) = cur.ident("lddw operand")?;
        Stmt::fix(Insn::lddw(dst, 0), FixKind::Lddw, sym, col)
    })
}

/// `ja32 target`: `gotol`, with a 32-bit offset.
fn ja32(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    Ok(match target(cur)? {
        Target::Off(v, col) => match i32::try_from(v) {
            Ok(imm) => Stmt::done(Insn::Gotol { imm }),
            Err(_) => return cur.err_at(col, format!("Invalid offset {v}: out of 32-bit range")),
        },
        Target::Label(l, col) => Stmt::fix(Insn::Gotol { imm: 0 }, FixKind::Jump, l, col),
    })
}

/// `jCOND %rD, %rS|imm, target`.
fn cond_jump(cur: &mut Cursor, cond: Cond, width: Width) -> Result<Stmt, AsmError> {
    let dst = reg(cur)?;
    sep(cur)?;
    let src = operand(cur)?;
    sep(cur)?;
    let t = target(cur)?;
    jump16(cur, t, |off| Insn::Jmp {
        width,
        cond,
        dst,
        src,
        off,
    })
}

/// `addr_space_cast %rD, %rS, dst_as, src_as`.
fn addr_space_cast(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    let dst = reg(cur)?;
    sep(cur)?;
    let src = reg(cur)?;
    sep(cur)?;
    let (dst_as, src_as) = address_spaces(cur)?;
    Ok(Stmt::done(Insn::AddrSpaceCast {
        dst,
        src,
        dst_as,
        src_as,
    }))
}

/// `dst_as, src_as` of an addr_space_cast (not both 0).
pub(crate) fn address_spaces(cur: &mut Cursor) -> Result<(u16, u16), AsmError> {
    let col = cur.col();
    let d = cur.number("address space")?;
    cur.expect_punct(",")?;
    let s = cur.number("address space")?;
    let (Ok(d), Ok(s)) = (u16::try_from(d.value), u16::try_from(s.value)) else {
        return cur.err_at(col, "Invalid address space: must be 0..65535");
    };
    if d == 0 && s == 0 {
        return cur.err_at(
            col,
            "Invalid address spaces: addr_space_cast needs a non-zero address space",
        );
    }
    Ok((d, s))
}

/// `call N`, `call name`, `call local target`, `call kfunc N`, `call %rN`.
fn call(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    if cur.at_end() {
        return cur.err("Invalid number of operands for call: expected 1, found 0");
    }
    if at_reg(cur) {
        return Ok(Stmt::done(Insn::Callx { reg: reg(cur)? }));
    }
    if cur.eat_ident("local") {
        return match target(cur)? {
            Target::Off(v, col) => match i32::try_from(v) {
                Ok(imm) => Ok(Stmt::done(Insn::Call {
                    kind: CallKind::Local,
                    imm,
                })),
                Err(_) => cur.err_at(col, format!("Invalid offset {v}: out of 32-bit range")),
            },
            Target::Label(l, col) => Ok(Stmt::fix(
                Insn::Call {
                    kind: CallKind::Local,
                    imm: -1,
                },
                FixKind::Call,
                l,
                col,
            )),
        };
    }
    if cur.eat_ident("kfunc") {
        let imm = cur.imm32("kfunc id")?;
        return Ok(Stmt::done(Insn::Call {
            kind: CallKind::Kfunc,
            imm,
        }));
    }
    if cur.eat_ident("helper") {
        let imm = cur.imm32("helper id")?;
        return Ok(Stmt::done(Insn::Call {
            kind: CallKind::Helper,
            imm,
        }));
    }
    if cur.at_number() {
        let imm = cur.imm32("helper id")?;
        return Ok(Stmt::done(Insn::Call {
            kind: CallKind::Helper,
            imm,
        }));
    }
    named_call(cur)
}

/// `call name`: a label (local call), else a helper name, else a symbol
/// (local call left for relocation).
pub(crate) fn named_call(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    let (name, col) = cur.ident("call target")?;
    if let Some(id) = helper_id(&name) {
        // Stays a helper call unless a label of that name turns up.
        let insn = Insn::Call {
            kind: CallKind::Helper,
            imm: id,
        };
        return Ok(Stmt::fix(insn, FixKind::Call, name, col));
    }
    Ok(Stmt::fix(
        Insn::Call {
            kind: CallKind::Local,
            imm: -1,
        },
        FixKind::Call,
        name,
        col,
    ))
}

/// `lock [fetch] op[32] [%rN+off], %rS`.
fn lock(cur: &mut Cursor) -> Result<Stmt, AsmError> {
    let bad = |cur: &Cursor| cur.err("Invalid number of operands for lock");
    let fetch = cur.eat_ident("fetch");
    let Some(super::lexer::Tok::Ident(opname)) = cur.peek() else {
        return bad(cur);
    };
    let op_col = cur.col();
    let opname = opname.clone();
    cur.bump();
    let (base, size) = match opname.strip_suffix("32") {
        Some(b) => (b, Size::W),
        None => (opname.strip_suffix("64").unwrap_or(&opname), Size::DW),
    };
    let op = match base {
        "add" => AtomicOp::Add { fetch },
        "or" => AtomicOp::Or { fetch },
        "and" => AtomicOp::And { fetch },
        "xor" => AtomicOp::Xor { fetch },
        "xchg" => AtomicOp::Xchg,
        "cmpxchg" => AtomicOp::CmpXchg,
        _ => return cur.err_at(op_col, format!("Invalid atomic operation `{opname}`")),
    };
    if cur.count_operands() != 2 {
        return bad(cur);
    }
    let (dst, off) = mem(cur)?;
    sep(cur)?;
    let src = reg(cur)?;
    Ok(Stmt::done(Insn::Atomic {
        size,
        op,
        dst,
        src,
        off,
    }))
}
