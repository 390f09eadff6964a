//! Instructions in the llvm syntax.

use super::{jump_text, pseudo_name, pseudo_text, signed, Ctx};
use crate::insn::*;

fn reg(r: Reg, w: bool) -> String {
    if w {
        format!("w{}", r.num())
    } else {
        format!("r{}", r.num())
    }
}

fn ty(size: Size, signed: bool) -> String {
    format!("{}{}", if signed { 's' } else { 'u' }, size.bits())
}

/// `r1 + 4` / `r1 - 4`.
fn addr(r: Reg, off: i16) -> String {
    if off < 0 {
        format!("r{} - {}", r.num(), -(off as i32))
    } else {
        format!("r{} + {off}", r.num())
    }
}

fn operand(o: Operand, w: bool) -> String {
    match o {
        Operand::Reg(r) => reg(r, w),
        Operand::Imm(i) => i.to_string(),
    }
}

fn alu_op(op: AluOp) -> &'static str {
    match op {
        AluOp::Add => "+=",
        AluOp::Sub => "-=",
        AluOp::Mul => "*=",
        AluOp::Div => "/=",
        AluOp::SDiv => "s/=",
        AluOp::Or => "|=",
        AluOp::And => "&=",
        AluOp::Lsh => "<<=",
        AluOp::Rsh => ">>=",
        AluOp::Mod => "%=",
        AluOp::SMod => "s%=",
        AluOp::Xor => "^=",
        AluOp::Arsh => "s>>=",
        AluOp::Mov | AluOp::MovSx(_) | AluOp::Neg => "=",
    }
}

fn cond(c: Cond) -> &'static str {
    match c {
        Cond::Eq => "==",
        Cond::Gt => ">",
        Cond::Ge => ">=",
        Cond::Set => "&",
        Cond::Ne => "!=",
        Cond::Sgt => "s>",
        Cond::Sge => "s>=",
        Cond::Lt => "<",
        Cond::Le => "<=",
        Cond::Slt => "s<",
        Cond::Sle => "s<=",
    }
}

fn endian(order: ByteOrder) -> &'static str {
    match order {
        ByteOrder::Le => "le",
        ByteOrder::Be => "be",
        ByteOrder::Swap => "bswap",
    }
}

fn fetch_name(op: AtomicOp) -> Option<&'static str> {
    match op {
        AtomicOp::Add { fetch: true } => Some("atomic_fetch_add"),
        AtomicOp::Or { fetch: true } => Some("atomic_fetch_or"),
        AtomicOp::And { fetch: true } => Some("atomic_fetch_and"),
        AtomicOp::Xor { fetch: true } => Some("atomic_fetch_xor"),
        _ => None,
    }
}

/// One instruction in the llvm syntax (`ctx`: its jump label and symbol).
pub(crate) fn format(insn: &Insn, ctx: &Ctx) -> String {
    match *insn {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => alu(width, op, dst, src),
        Insn::Endian { order, bits, dst } => {
            format!("r{0} = {1}{bits} r{0}", dst.num(), endian(order))
        }
        Insn::AddrSpaceCast {
            dst,
            src,
            dst_as,
            src_as,
        } => format!(
            "r{} = addr_space_cast(r{}, {dst_as}, {src_as})",
            dst.num(),
            src.num()
        ),
        Insn::Ldx {
            size,
            signed,
            dst,
            src,
            off,
        } => format!(
            "r{} = *({} *)({})",
            dst.num(),
            ty(size, signed),
            addr(src, off)
        ),
        Insn::St {
            size,
            dst,
            off,
            imm,
        } => format!("*({} *)({}) = {imm}", ty(size, false), addr(dst, off)),
        Insn::Stx {
            size,
            dst,
            src,
            off,
        } => format!(
            "*({} *)({}) = r{}",
            ty(size, false),
            addr(dst, off),
            src.num()
        ),
        Insn::Atomic {
            size,
            op,
            dst,
            src,
            off,
        } => atomic(size, op, dst, src, off),
        Insn::Lddw {
            kind,
            dst,
            imm,
            next_imm,
        } => lddw(kind, dst, imm, next_imm, ctx),
        Insn::LdAbs { size, imm } => format!("r0 = *({} *)skb[{imm}]", ty(size, false)),
        Insn::LdInd { size, src, imm } => ld_ind(size, src, imm),
        Insn::Ja { off } => format!("goto {}", jump_text(ctx, off as i64)),
        Insn::Gotol { imm } => format!("gotol {}", jump_text(ctx, imm as i64)),
        Insn::MayGoto { off } => format!("may_goto {}", jump_text(ctx, off as i64)),
        Insn::Jmp {
            width,
            cond: c,
            dst,
            src,
            off,
        } => {
            let w = width == Width::W32;
            format!(
                "if {} {} {} goto {}",
                reg(dst, w),
                cond(c),
                operand(src, w),
                jump_text(ctx, off as i64)
            )
        }
        Insn::Call { kind, imm } => call(kind, imm, ctx),
        Insn::Callx { reg } => format!("callx r{}", reg.num()),
        Insn::Exit => "exit".to_string(),
    }
}

/// ALU operations: `r0 += 1`, `w1 = -w1`, `r2 = (s8)r3`.
fn alu(width: Width, op: AluOp, dst: Reg, src: Operand) -> String {
    let w = width == Width::W32;
    let d = reg(dst, w);
    match op {
        AluOp::Neg => format!("{d} = -{d}"),
        AluOp::MovSx(bits) => format!("{d} = (s{bits}){}", operand(src, w)),
        _ => format!("{d} {} {}", alu_op(op), operand(src, w)),
    }
}

/// Atomics: `lock *(u64 *)(r1 + 0) += r2` without a result, otherwise a
/// function-call form (`r2 = atomic_fetch_add((u64 *)(r1 + 0), r2)`,
/// `xchg_64`, `cmpxchg_64`).
fn atomic(size: Size, op: AtomicOp, dst: Reg, src: Reg, off: i16) -> String {
    let w = size == Size::W;
    let s = reg(src, w);
    let t = ty(size, false);
    let a = addr(dst, off);
    let sfx = if w { "32_32" } else { "_64" };
    match op {
        AtomicOp::Add { fetch: false } => format!("lock *({t} *)({a}) += {s}"),
        AtomicOp::Or { fetch: false } => format!("lock *({t} *)({a}) |= {s}"),
        AtomicOp::And { fetch: false } => format!("lock *({t} *)({a}) &= {s}"),
        AtomicOp::Xor { fetch: false } => format!("lock *({t} *)({a}) ^= {s}"),
        AtomicOp::Xchg => format!("{s} = xchg{sfx}({a}, {s})"),
        AtomicOp::CmpXchg => {
            let r0 = reg(Reg::R0, w);
            format!("{r0} = cmpxchg{sfx}({a}, {r0}, {s})")
        }
        _ => format!(
            "{s} = {}(({t} *)({a}), {s})",
            fetch_name(op).unwrap_or("atomic_fetch_add")
        ),
    }
}

/// `r1 = sym ll` (relocated), `r1 = map_fd(3) ll` (pseudo source) or
/// `r1 = 42 ll`.
fn lddw(kind: LddwKind, dst: Reg, imm: i32, next_imm: i32, ctx: &Ctx) -> String {
    match (ctx.symbol, pseudo_name(kind)) {
        (Some(sym), _) => format!("r{} = {sym} ll", dst.num()),
        (None, Some(name)) => {
            format!("r{} = {} ll", dst.num(), pseudo_text(name, imm, next_imm))
        }
        (None, None) => format!("r{} = {} ll", dst.num(), Insn::imm64(imm, next_imm)),
    }
}

/// The legacy indirect packet load: `r0 = *(u8 *)skb[r1 + 4]`.
fn ld_ind(size: Size, src: Reg, imm: i32) -> String {
    let t = ty(size, false);
    match imm {
        0 => format!("r0 = *({t} *)skb[r{}]", src.num()),
        i if i < 0 => format!("r0 = *({t} *)skb[r{} - {}]", src.num(), -(i as i64)),
        i => format!("r0 = *({t} *)skb[r{} + {i}]", src.num()),
    }
}

/// Calls: `call 1` (helper), `call kfunc N`, and local calls by symbol,
/// label or offset (`call -1` is clang's unrelocated local call).
fn call(kind: CallKind, imm: i32, ctx: &Ctx) -> String {
    match kind {
        CallKind::Helper if imm >= 0 => format!("call {imm}"),
        CallKind::Helper => format!("call helper {imm}"),
        CallKind::Kfunc => format!("call kfunc {imm}"),
        CallKind::Local => match (ctx.symbol, &ctx.target) {
            (Some(sym), _) => format!("call local {sym}"),
            (None, Some(l)) => format!("call local {l}"),
            (None, None) if imm < 0 => format!("call {imm}"),
            (None, None) => format!("call local {}", signed(imm as i64)),
        },
    }
}
