//! Name and type compatibility between a local and a target BTF, as
//! libbpf decides it: flavours (`___suffix`) are ignored in type names,
//! integer sizes may differ, pointers and arrays compare their targets.

use crate::btf::{Btf, Kind, Member, Param, INT_SIGNED};

/// How deep type comparisons recurse before giving up (cyclic BTF).
const MAX_DEPTH: u32 = 32;

/// `name` without its flavour: `task_struct___v2` -> `task_struct` (the
/// part before the last `___` that is followed by a non-`_`).
pub fn essential_name(name: &str) -> &str {
    let b = name.as_bytes();
    if b.len() < 5 {
        return name;
    }
    for i in (0..=b.len() - 5).rev() {
        if b[i] != b'_' && &b[i + 1..i + 4] == b"___" && b[i + 4] != b'_' {
            return &name[..i + 1];
        }
    }
    name
}

/// Kinds CO-RE treats as the same (`ENUM` and `ENUM64` are one).
pub(super) fn same_kind(a: &Kind, b: &Kind) -> bool {
    let norm = |k: &Kind| match k {
        Kind::Enum64 { .. } => Kind::Enum {
            size: 0,
            signed: false,
            values: Vec::new(),
        }
        .number(),
        k => k.number(),
    };
    norm(a) == norm(b)
}

fn int_offset(k: &Kind) -> u8 {
    match k {
        Kind::Int { offset, .. } => *offset,
        _ => 0,
    }
}

fn strip(btf: &Btf, id: u32) -> Result<(u32, &Kind), String> {
    let id = btf.strip(id).map_err(|e| e.to_string())?;
    Ok((id, &btf.ty(id).map_err(|e| e.to_string())?.kind))
}

/// libbpf's `bpf_core_types_are_compat`: the types after typedefs and
/// modifiers have compatible kinds; composites and enums match by kind
/// alone (their names were matched already), integers unless they are
/// old-style bitfields, pointers/arrays/prototypes by what they contain.
pub(super) fn types_compat(local: &Btf, lid: u32, target: &Btf, tid: u32) -> Result<bool, String> {
    let (mut lid, mut tid) = (lid, tid);
    for _ in 0..MAX_DEPTH {
        let (_, lk) = strip(local, lid)?;
        let (_, tk) = strip(target, tid)?;
        if !same_kind(lk, tk) {
            return Ok(false);
        }
        match (lk, tk) {
            (Kind::Void, _)
            | (Kind::Struct { .. }, _)
            | (Kind::Union { .. }, _)
            | (Kind::Enum { .. }, _)
            | (Kind::Enum64 { .. }, _)
            | (Kind::Fwd { .. }, _) => return Ok(true),
            (Kind::Int { .. }, _) => return Ok(int_offset(lk) == 0 && int_offset(tk) == 0),
            (Kind::Ptr { ty: a }, Kind::Ptr { ty: b }) => (lid, tid) = (*a, *b),
            (Kind::Array { elem: a, .. }, Kind::Array { elem: b, .. }) => (lid, tid) = (*a, *b),
            (
                Kind::FuncProto {
                    ret: lr,
                    params: lp,
                },
                Kind::FuncProto {
                    ret: tr,
                    params: tp,
                },
            ) => {
                if !params_agree(lp, tp, |a, b| types_compat(local, a, target, b))? {
                    return Ok(false);
                }
                (lid, tid) = (*lr, *tr);
            }
            _ => return Ok(false),
        }
    }
    Err("type chain too deep".into())
}

/// libbpf's `bpf_core_fields_are_compat`: may a field of local type
/// `lid` be read as one of target type `tid`?
pub(super) fn fields_compat(local: &Btf, lid: u32, target: &Btf, tid: u32) -> Result<bool, String> {
    let (mut lid, mut tid) = (lid, tid);
    for _ in 0..MAX_DEPTH {
        let (_, lk) = strip(local, lid)?;
        let (_, tk) = strip(target, tid)?;
        let composite = |k: &Kind| matches!(k, Kind::Struct { .. } | Kind::Union { .. });
        if composite(lk) && composite(tk) {
            return Ok(true);
        }
        if !same_kind(lk, tk) {
            return Ok(false);
        }
        match (lk, tk) {
            (Kind::Ptr { .. }, _) | (Kind::Float { .. }, _) => return Ok(true),
            (Kind::Fwd { .. }, _) | (Kind::Enum { .. }, _) | (Kind::Enum64 { .. }, _) => {
                let ln = essential_name(local.name_of(lid_named(local, lid)));
                let tn = essential_name(target.name_of(lid_named(target, tid)));
                return Ok(ln.is_empty() || tn.is_empty() || ln == tn);
            }
            (Kind::Int { .. }, _) => return Ok(int_offset(lk) == 0 && int_offset(tk) == 0),
            (Kind::Array { elem: a, .. }, Kind::Array { elem: b, .. }) => (lid, tid) = (*a, *b),
            _ => return Ok(false),
        }
    }
    Err("type chain too deep".into())
}

/// The id `id` strips to (for its name), or `id` itself.
fn lid_named(btf: &Btf, id: u32) -> u32 {
    btf.strip(id).unwrap_or(id)
}

/// Flavour-less names equal; an anonymous target only matches an
/// anonymous local.
fn names_match(local: &str, target: &str) -> bool {
    if target.is_empty() {
        return local.is_empty();
    }
    essential_name(local) == essential_name(target)
}

/// As many parameters on both sides, and `same` holds for each pair of
/// parameter types.
fn params_agree(
    lp: &[Param],
    tp: &[Param],
    mut same: impl FnMut(u32, u32) -> Result<bool, String>,
) -> Result<bool, String> {
    if lp.len() != tp.len() {
        return Ok(false);
    }
    for (a, b) in lp.iter().zip(tp) {
        if !same(a.ty, b.ty)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Every local member has a target member of the same name whose type
/// `same` accepts (and the target has at least as many members).
fn members_match(
    lm: &[Member],
    tm: &[Member],
    mut same: impl FnMut(u32, u32) -> Result<bool, String>,
) -> Result<bool, String> {
    if lm.len() > tm.len() {
        return Ok(false);
    }
    for m in lm {
        let mut found = false;
        for n in tm.iter().filter(|n| names_match(&m.name, &n.name)) {
            if same(m.ty, n.ty)? {
                found = true;
                break;
            }
        }
        if !found {
            return Ok(false);
        }
    }
    Ok(true)
}

/// libbpf's `bpf_core_types_match` (`bpf_core_type_matches`): a stricter
/// comparison than [`types_compat`]: names, integer size and sign, array
/// lengths, enumerators and members (by name, recursively) must agree.
pub(super) fn types_match(
    local: &Btf,
    lid: u32,
    target: &Btf,
    tid: u32,
    behind_ptr: bool,
    depth: u32,
) -> Result<bool, String> {
    if depth == 0 {
        return Err("type chain too deep".into());
    }
    let (l, lk) = strip(local, lid)?;
    let (t, tk) = strip(target, tid)?;
    if !names_match(local.name_of(l), target.name_of(t)) {
        return Ok(false);
    }
    let next = |a: u32, b: u32, ptr: bool| types_match(local, a, target, b, ptr, depth - 1);
    Ok(match (lk, tk) {
        (Kind::Void, tk) => matches!(tk, Kind::Void),
        (Kind::Fwd { union: lu }, tk) => match tk {
            Kind::Fwd { union: tu } => lu == tu,
            Kind::Struct { .. } if behind_ptr => !lu,
            Kind::Union { .. } if behind_ptr => *lu,
            _ => false,
        },
        (
            Kind::Enum {
                size: ls,
                values: lv,
                ..
            }
            | Kind::Enum64 {
                size: ls,
                values: lv,
                ..
            },
            Kind::Enum {
                size: ts,
                values: tv,
                ..
            }
            | Kind::Enum64 {
                size: ts,
                values: tv,
                ..
            },
        ) => {
            ls == ts
                && lv
                    .iter()
                    .all(|l| tv.iter().any(|t| names_match(&l.name, &t.name)))
        }
        (Kind::Struct { members: lm, .. }, Kind::Struct { members: tm, .. })
        | (Kind::Union { members: lm, .. }, Kind::Union { members: tm, .. }) => {
            behind_ptr || members_match(lm, tm, |a, b| next(a, b, false))?
        }
        (Kind::Struct { .. }, Kind::Fwd { union }) if behind_ptr => !union,
        (Kind::Union { .. }, Kind::Fwd { union }) if behind_ptr => *union,
        (
            Kind::Int {
                size: ls,
                encoding: le,
                ..
            },
            Kind::Int {
                size: ts,
                encoding: te,
                ..
            },
        ) => ls == ts && (le & INT_SIGNED) == (te & INT_SIGNED),
        (Kind::Ptr { ty: a }, Kind::Ptr { ty: b }) => next(*a, *b, true)?,
        (
            Kind::Array {
                elem: a,
                nelems: ln,
                ..
            },
            Kind::Array {
                elem: b,
                nelems: tn,
                ..
            },
        ) => ln == tn && next(*a, *b, behind_ptr)?,
        (
            Kind::FuncProto {
                ret: lr,
                params: lp,
            },
            Kind::FuncProto {
                ret: tr,
                params: tp,
            },
        ) => params_agree(lp, tp, |a, b| next(a, b, behind_ptr))? && next(*lr, *tr, behind_ptr)?,
        (Kind::Float { size: a }, Kind::Float { size: b }) => a == b,
        _ => false,
    })
}
