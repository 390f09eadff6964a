//! Instructions in the bpf_conformance syntax.

use super::{jump_text, pseudo_name, pseudo_text, signed, Ctx};
use crate::asm::conformance::{alu_name, jmp_name};
use crate::insn::*;

fn sz(size: Size) -> &'static str {
    match size {
        Size::B => "b",
        Size::H => "h",
        Size::W => "w",
        Size::DW => "dw",
    }
}

fn w32(width: Width) -> &'static str {
    match width {
        Width::W32 => "32",
        Width::W64 => "",
    }
}

fn mem(r: Reg, off: i16) -> String {
    if off < 0 {
        format!("[%r{}{off}]", r.num())
    } else {
        format!("[%r{}+{off}]", r.num())
    }
}

fn operand(o: Operand) -> String {
    match o {
        Operand::Reg(r) => format!("%r{}", r.num()),
        Operand::Imm(i) => i.to_string(),
    }
}

/// One instruction in the conformance syntax (`ctx`: its jump label and
/// symbol).
pub(crate) fn format(insn: &Insn, ctx: &Ctx) -> String {
    match *insn {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => alu(width, op, dst, src),
        Insn::Endian { order, bits, dst } => {
            format!("{}{bits} %r{}", endian(order), dst.num())
        }
        Insn::AddrSpaceCast {
            dst,
            src,
            dst_as,
            src_as,
        } => format!(
            "addr_space_cast %r{}, %r{}, {dst_as}, {src_as}",
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
            "ldx{}{} %r{}, {}",
            if signed { "s" } else { "" },
            sz(size),
            dst.num(),
            mem(src, off)
        ),
        Insn::St {
            size,
            dst,
            off,
            imm,
        } => format!("st{} {}, {imm}", sz(size), mem(dst, off)),
        Insn::Stx {
            size,
            dst,
            src,
            off,
        } => format!("stx{} {}, %r{}", sz(size), mem(dst, off), src.num()),
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
        Insn::LdAbs { size, imm } => format!("ldabs{} {imm}", sz(size)),
        Insn::LdInd { size, src, imm } => format!("ldind{} %r{}, {imm}", sz(size), src.num()),
        Insn::Ja { off } => format!("ja {}", jump_text(ctx, off as i64)),
        Insn::Gotol { imm } => format!("ja32 {}", jump_text(ctx, imm as i64)),
        Insn::MayGoto { off } => format!("may_goto {}", jump_text(ctx, off as i64)),
        Insn::Jmp {
            width,
            cond,
            dst,
            src,
            off,
        } => format!(
            "{}{} %r{}, {}, {}",
            jmp_name(cond),
            w32(width),
            dst.num(),
            operand(src),
            jump_text(ctx, off as i64)
        ),
        Insn::Call { kind, imm } => call(kind, imm, ctx),
        Insn::Callx { reg } => format!("call %r{}", reg.num()),
        Insn::Exit => "exit".to_string(),
    }
}

/// ALU operations: `add32 %r0, 1`, `neg %r1`, `movsx816 %r2, %r3`.
fn alu(width: Width, op: AluOp, dst: Reg, src: Operand) -> String {
    match op {
        AluOp::Neg => format!("neg{} %r{}", w32(width), dst.num()),
        AluOp::MovSx(bits) => {
            let wb = if width == Width::W32 { 32 } else { 64 };
            format!("movsx{bits}{wb} %r{}, {}", dst.num(), operand(src))
        }
        _ => format!(
            "{}{} %r{}, {}",
            alu_name(op),
            w32(width),
            dst.num(),
            operand(src)
        ),
    }
}

/// The mnemonic stem of a byte swap (`le16`, `be32`, `bswap64`).
fn endian(order: ByteOrder) -> &'static str {
    match order {
        ByteOrder::Le => "le",
        ByteOrder::Be => "be",
        ByteOrder::Swap => "bswap",
    }
}

/// Atomics: `lock [fetch] op[32] [%rN+off], %rS`.
fn atomic(size: Size, op: AtomicOp, dst: Reg, src: Reg, off: i16) -> String {
    let (fetch, name) = match op {
        AtomicOp::Add { fetch } => (fetch, "add"),
        AtomicOp::Or { fetch } => (fetch, "or"),
        AtomicOp::And { fetch } => (fetch, "and"),
        AtomicOp::Xor { fetch } => (fetch, "xor"),
        AtomicOp::Xchg => (false, "xchg"),
        AtomicOp::CmpXchg => (false, "cmpxchg"),
    };
    format!(
        "lock {}{name}{} {}, %r{}",
        if fetch { "fetch " } else { "" },
        if size == Size::W { "32" } else { "" },
        mem(dst, off),
        src.num()
    )
}

/// `lddw %r1, sym` (relocated), `lddw %r1, map_fd(3)` (pseudo source) or
/// `lddw %r1, 0x2a` (hexadecimal, as the suite writes it).
fn lddw(kind: LddwKind, dst: Reg, imm: i32, next_imm: i32, ctx: &Ctx) -> String {
    match (ctx.symbol, pseudo_name(kind)) {
        (Some(sym), _) => format!("lddw %r{}, {sym}", dst.num()),
        (None, Some(name)) => {
            format!("lddw %r{}, {}", dst.num(), pseudo_text(name, imm, next_imm))
        }
        (None, None) => format!("lddw %r{}, 0x{:x}", dst.num(), Insn::imm64(imm, next_imm)),
    }
}

/// Calls: `call 1` (helper), `call kfunc N`, and local calls by symbol,
/// label or offset.
fn call(kind: CallKind, imm: i32, ctx: &Ctx) -> String {
    match kind {
        CallKind::Helper => format!("call {imm}"),
        CallKind::Kfunc => format!("call kfunc {imm}"),
        CallKind::Local => match (ctx.symbol, &ctx.target) {
            (Some(sym), _) => format!("call local {sym}"),
            (None, Some(l)) => format!("call local {l}"),
            (None, None) => format!("call local {}", signed(imm as i64)),
        },
    }
}
