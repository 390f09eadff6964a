//! Writing a resolved value into the instruction that holds it, as
//! libbpf does: the imm of an ALU instruction with an immediate, the
//! offset (and, for a field of another size, the size) of a load or
//! store, the 64-bit imm of `lddw`.

use super::{Resolution, POISON_HELPER};
use nfkit_isa::{CallKind, Insn, LddwKind, Operand, Size};

/// The size of `bytes` bytes.
fn size_of_bytes(bytes: u32) -> Option<Size> {
    Some(match bytes {
        1 => Size::B,
        2 => Size::H,
        4 => Size::W,
        8 => Size::DW,
        _ => return None,
    })
}

/// The poisoned form of `insn` (a call of helper [`POISON_HELPER`] in
/// each of its slots): the kernel's verifier refuses it if reached.
pub fn poison(insn: &Insn) -> Vec<Insn> {
    let call = Insn::Call {
        kind: CallKind::Helper,
        imm: POISON_HELPER,
    };
    vec![call; insn.slots()]
}

/// `insn` with `res` applied (`res.new` must be set), or why it cannot be.
pub fn patch(insn: Insn, res: &Resolution) -> Result<Insn, String> {
    let new = res.new.ok_or("no value to patch in")?;
    let check = |got: i64| {
        if res.validate && got != res.orig as i64 && got as u32 as u64 != res.orig {
            Err(format!(
                "instruction holds {got}, the local types give {} (not a CO-RE site?)",
                res.orig
            ))
        } else {
            Ok(())
        }
    };
    let new_off = |off: i16| -> Result<i16, String> {
        check(i64::from(off))?;
        if res.bad_size_change {
            return Err(format!(
                "the field is {} bytes in the kernel, {} here, and not a pointer or unsigned integer: it cannot be read with another size",
                res.new_size, res.orig_size
            ));
        }
        i16::try_from(new).map_err(|_| format!("offset {new} does not fit an instruction"))
    };
    let new_size = |size: Size| -> Result<Size, String> {
        if res.new_size == res.orig_size {
            return Ok(size);
        }
        if size.bytes() as u32 != res.orig_size {
            return Err(format!(
                "accesses {} bytes of a {}-byte field",
                size.bytes(),
                res.orig_size
            ));
        }
        size_of_bytes(res.new_size).ok_or_else(|| format!("no load of {} bytes", res.new_size))
    };
    Ok(match insn {
        Insn::Alu {
            width,
            op,
            dst,
            src: Operand::Imm(imm),
        } => {
            check(i64::from(imm))?;
            Insn::Alu {
                width,
                op,
                dst,
                src: Operand::Imm(new as i32),
            }
        }
        Insn::Ldx {
            size,
            signed,
            dst,
            src,
            off,
        } => Insn::Ldx {
            off: new_off(off)?,
            size: new_size(size)?,
            signed,
            dst,
            src,
        },
        Insn::Stx {
            size,
            dst,
            src,
            off,
        } => Insn::Stx {
            off: new_off(off)?,
            size: new_size(size)?,
            dst,
            src,
        },
        Insn::St {
            size,
            dst,
            off,
            imm,
        } => Insn::St {
            off: new_off(off)?,
            size: new_size(size)?,
            dst,
            imm,
        },
        Insn::Atomic {
            size,
            op,
            dst,
            src,
            off,
        } if res.new_size == res.orig_size => Insn::Atomic {
            off: new_off(off)?,
            size,
            op,
            dst,
            src,
        },
        Insn::Lddw {
            kind: LddwKind::Imm64,
            dst,
            imm,
            next_imm,
        } => {
            check((imm as u32 as u64 | (u64::from(next_imm as u32) << 32)) as i64)?;
            Insn::Lddw {
                kind: LddwKind::Imm64,
                dst,
                imm: new as u32 as i32,
                next_imm: (new >> 32) as u32 as i32,
            }
        }
        other => return Err(format!("cannot relocate instruction {other:?}")),
    })
}
