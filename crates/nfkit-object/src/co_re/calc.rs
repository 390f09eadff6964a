//! The value each relocation kind takes for a spec (libbpf's
//! `bpf_core_calc_*_relo`), and the resolution of a local spec against
//! its match in a target (or no match).

use super::spec::Spec;
use super::{CoreKind, Resolution};
use crate::btf::{Btf, Kind, INT_SIGNED};

/// A value computed in one BTF.
struct Val {
    val: u64,
    /// Size of the accessed field for `byte_off` (0: not a plain field).
    size: u32,
    /// The field's type (after typedefs), when `size` is set.
    type_id: u32,
    validate: bool,
}

impl Val {
    fn new(val: u64) -> Val {
        Val {
            val,
            size: 0,
            type_id: 0,
            validate: true,
        }
    }
}

fn size(btf: &Btf, id: u32) -> Result<u32, String> {
    btf.size_of(id).map_err(|e| e.to_string())
}

/// The value of a field relocation for `spec` in `btf`.
fn field(btf: &Btf, spec: &Spec) -> Result<Val, String> {
    let last = spec.acc.last().ok_or("empty access")?;
    if last.name.is_none() {
        // The root, or an array element: no member to look at.
        let sz = size(btf, last.type_id)?;
        return match spec.kind {
            CoreKind::FieldByteOffset => Ok(Val {
                val: spec.bit_offset / 8,
                size: sz,
                type_id: last.type_id,
                validate: true,
            }),
            CoreKind::FieldByteSize => Ok(Val::new(u64::from(sz))),
            k => Err(format!(
                "{} cannot be applied to an array element",
                k.name()
            )),
        };
    }
    let m = btf
        .members(last.type_id)
        .ok()
        .and_then(|ms| ms.get(last.idx as usize))
        .ok_or("accessor names no member")?;
    let mt = btf.strip(m.ty).map_err(|e| e.to_string())?;
    let bit_off = spec.bit_offset;
    let mut bit_sz = u64::from(m.bitfield_size);
    let bitfield = bit_sz > 0;
    let (byte_off, byte_sz) = if bitfield {
        let mut byte_sz = u64::from(size(btf, mt)?).max(1);
        let mut byte_off = bit_off / 8 / byte_sz * byte_sz;
        while bit_off.saturating_add(bit_sz) - byte_off * 8 > byte_sz * 8 {
            if byte_sz >= 8 {
                return Err("bitfield cannot be read with a 64-bit load".into());
            }
            byte_sz *= 2;
            byte_off = bit_off / 8 / byte_sz * byte_sz;
        }
        (byte_off, byte_sz)
    } else {
        let byte_sz = u64::from(size(btf, mt)?);
        bit_sz = byte_sz * 8;
        (bit_off / 8, byte_sz)
    };
    let mut v = Val {
        val: 0,
        size: 0,
        type_id: 0,
        validate: !bitfield,
    };
    match spec.kind {
        CoreKind::FieldByteOffset => {
            v.val = byte_off;
            if !bitfield {
                v.size = byte_sz as u32;
                v.type_id = mt;
            }
        }
        CoreKind::FieldByteSize => v.val = byte_sz,
        CoreKind::FieldSigned => {
            v.val = u64::from(match &btf.ty(mt).map_err(|e| e.to_string())?.kind {
                Kind::Enum { signed, .. } | Kind::Enum64 { signed, .. } => *signed,
                Kind::Int { encoding, .. } => encoding & INT_SIGNED != 0,
                _ => false,
            });
            v.validate = true;
        }
        CoreKind::FieldLshiftU64 => {
            v.val = 64u64.wrapping_sub(bit_off.saturating_add(bit_sz) - byte_off * 8)
        }
        CoreKind::FieldRshiftU64 => {
            v.val = 64u64.wrapping_sub(bit_sz);
            v.validate = true;
        }
        k => return Err(format!("{} is not a field relocation", k.name())),
    }
    Ok(v)
}

/// The value of relocation kind `kind` for `spec` in `btf`; `spec`
/// `None`: no match in the target. `Ok(None)`: poison.
fn value(kind: CoreKind, found: Option<(&Btf, &Spec)>) -> Result<Option<Val>, String> {
    use CoreKind::*;
    let Some((btf, spec)) = found else {
        return Ok(match kind {
            FieldExists | EnumvalExists => Some(Val::new(0)),
            k if k.is_type() => Some(Val::new(0)),
            _ => None,
        });
    };
    Ok(Some(match kind {
        FieldExists | TypeExists | TypeMatches | EnumvalExists => Val::new(1),
        k if k.is_field() => field(btf, spec)?,
        TypeIdLocal | TypeIdTarget => Val::new(u64::from(spec.root)),
        TypeSize => Val::new(u64::from(size(btf, spec.root)?)),
        EnumvalValue => {
            let a = &spec.acc[0];
            let t = btf.ty(a.type_id).map_err(|e| e.to_string())?;
            match &t.kind {
                Kind::Enum { values, .. } | Kind::Enum64 { values, .. } => {
                    let v = values.get(a.idx as usize).ok_or("no such enumerator")?;
                    Val::new(v.value as u64)
                }
                _ => return Err("enum value relocation on a non-enum".into()),
            }
        }
        k => return Err(format!("unknown relocation kind {}", k.name())),
    }))
}

/// True when a field of local type `lt` read with a different size as
/// target type `tt` is still read right: pointers, or unsigned integers.
fn size_change_ok(local: &Btf, lt: u32, target: &Btf, tt: u32) -> bool {
    let kind = |b: &Btf, id: u32| b.get(id).map(|t| t.kind.clone());
    match (kind(local, lt), kind(target, tt)) {
        (Some(Kind::Ptr { .. }), Some(Kind::Ptr { .. })) => true,
        (Some(Kind::Int { encoding: a, .. }), Some(Kind::Int { encoding: b, .. })) => {
            a & INT_SIGNED == 0 && b & INT_SIGNED == 0
        }
        _ => false,
    }
}

/// The resolution of local spec `lspec` (in `local`) given its match in
/// the target, if any.
pub(super) fn relo(
    local: &Btf,
    lspec: &Spec,
    found: Option<(&Btf, &Spec)>,
) -> Result<Resolution, String> {
    let orig = value(lspec.kind, Some((local, lspec)))?.ok_or("local value")?;
    let new = value(lspec.kind, found)?;
    let (new_val, new_size, bad) = match (&new, found) {
        (Some(n), Some((tbtf, _))) => {
            let bad = n.size != orig.size && !size_change_ok(local, orig.type_id, tbtf, n.type_id);
            (Some(n.val), n.size, bad)
        }
        (Some(n), None) => (Some(n.val), n.size, false),
        (None, _) => (None, 0, false),
    };
    Ok(Resolution {
        orig: orig.val,
        new: new_val,
        validate: orig.validate,
        orig_size: orig.size,
        new_size,
        bad_size_change: bad,
    })
}
