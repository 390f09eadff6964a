//! Access specs: the path an access string (`0:1:2`) takes through a
//! local type, as accessors with the bit offset it reaches, and the same
//! path found by member names in a target type.

use super::compat::{essential_name, fields_compat, types_compat, types_match};
use super::{CoreKind, CoreRelo};
use crate::btf::{Btf, Kind, Member};

/// Longest access string (libbpf's `BPF_CORE_SPEC_MAX_LEN`).
const MAX_LEN: usize = 64;

/// One step of a spec: an index into the type `type_id` (a member of a
/// struct/union, an element of an array, the root's array index, or an
/// enumerator), named for members and enumerators.
#[derive(Clone, Debug)]
pub(super) struct Accessor {
    pub type_id: u32,
    pub idx: u32,
    pub name: Option<String>,
}

/// A resolved access path in one BTF.
#[derive(Clone, Debug)]
pub(super) struct Spec {
    pub kind: CoreKind,
    /// The type the access starts from (as the relocation names it).
    pub root: u32,
    /// Named members, array indices (the first one on the root) or the
    /// enumerator; anonymous members are skipped.
    pub acc: Vec<Accessor>,
    /// Bit offset of the accessed field from the start of the root.
    pub bit_offset: u64,
}

fn size(btf: &Btf, id: u32) -> Result<u64, String> {
    btf.size_of(id).map(u64::from).map_err(|e| e.to_string())
}

fn strip(btf: &Btf, id: u32) -> Result<(u32, &Kind), String> {
    let id = btf.strip(id).map_err(|e| e.to_string())?;
    Ok((id, &btf.ty(id).map_err(|e| e.to_string())?.kind))
}

fn members(k: &Kind) -> Option<&[Member]> {
    match k {
        Kind::Struct { members, .. } | Kind::Union { members, .. } => Some(members),
        _ => None,
    }
}

/// An array of no elements that is the last member the previous
/// accessor named (a flexible array).
fn is_flex(btf: &Btf, prev: Option<&Accessor>, nelems: u32) -> bool {
    let Some(p) = prev.filter(|p| p.name.is_some() && nelems == 0) else {
        return false;
    };
    btf.get(p.type_id)
        .and_then(|t| members(&t.kind))
        .is_some_and(|m| p.idx as usize + 1 == m.len())
}

/// The numbers of an access string.
fn raw_indices(access: &str) -> Result<Vec<u32>, String> {
    let raw: Vec<u32> = access
        .split(':')
        .map(|s| {
            s.parse::<u32>()
                .map_err(|_| format!("bad access string '{access}'"))
        })
        .collect::<Result<_, _>>()?;
    if raw.is_empty() || raw.len() > MAX_LEN {
        return Err(format!("bad access string '{access}'"));
    }
    Ok(raw)
}

impl Spec {
    /// The spec of `relo` in its local types (libbpf's `bpf_core_parse_spec`).
    pub fn parse(btf: &Btf, relo: &CoreRelo) -> Result<Spec, String> {
        let mut spec = Spec {
            kind: relo.kind,
            root: relo.type_id,
            acc: Vec::new(),
            bit_offset: 0,
        };
        if let CoreKind::Other(k) = relo.kind {
            return Err(format!("unknown relocation kind {k}"));
        }
        if relo.type_id == 0 {
            return Err("relocation of type void".into());
        }
        if relo.kind.is_type() {
            if relo.access != "0" {
                return Err(format!("type relocation with access '{}'", relo.access));
            }
            return Ok(spec);
        }
        let raw = raw_indices(&relo.access)?;
        let (mut id, t) = strip(btf, relo.type_id)?;
        spec.acc.push(Accessor {
            type_id: id,
            idx: raw[0],
            name: None,
        });
        if relo.kind.is_enumval() {
            let values = match t {
                Kind::Enum { values, .. } | Kind::Enum64 { values, .. } => values,
                k => return Err(format!("enum value relocation on a {}", k.name())),
            };
            let v = values
                .get(raw[0] as usize)
                .filter(|_| raw.len() == 1)
                .ok_or_else(|| format!("enumerator {} of {}", relo.access, values.len()))?;
            spec.acc[0].name = Some(v.name.clone());
            return Ok(spec);
        }
        spec.bit_offset = u64::from(raw[0]).wrapping_mul(size(btf, id)? * 8);
        for &idx in &raw[1..] {
            let (sid, t) = strip(btf, id)?;
            if let Some(ms) = members(t) {
                let m = ms
                    .get(idx as usize)
                    .ok_or_else(|| format!("member {idx} of a type of {}", ms.len()))?;
                spec.bit_offset = spec.bit_offset.wrapping_add(u64::from(m.bit_offset));
                if !m.name.is_empty() {
                    spec.acc.push(Accessor {
                        type_id: sid,
                        idx,
                        name: Some(m.name.clone()),
                    });
                }
                id = m.ty;
            } else if let Kind::Array { elem, nelems, .. } = t {
                let (eid, _) = strip(btf, *elem)?;
                if !is_flex(btf, spec.acc.last(), *nelems) && idx >= *nelems {
                    return Err(format!("index {idx} of an array of {nelems}"));
                }
                spec.acc.push(Accessor {
                    type_id: eid,
                    idx,
                    name: None,
                });
                spec.bit_offset = spec
                    .bit_offset
                    .wrapping_add(u64::from(idx).wrapping_mul(size(btf, eid)? * 8));
                id = eid;
            } else {
                return Err(format!("access into a {}", t.name()));
            }
        }
        Ok(spec)
    }

    /// This (local) spec found in target type `root` of `target`: `None`
    /// when the target type does not have the same path (libbpf's
    /// `bpf_core_spec_match`).
    pub fn match_in(&self, local: &Btf, target: &Btf, root: u32) -> Result<Option<Spec>, String> {
        let mut t = Spec {
            kind: self.kind,
            root,
            acc: Vec::new(),
            bit_offset: 0,
        };
        if self.kind.is_type() {
            return Ok(self.type_matches(local, target, root)?.then_some(t));
        }
        if !self.kind.is_enumval() {
            return self.match_field(local, target, root);
        }
        let (tid, tk) = strip(target, root)?;
        let values = match tk {
            Kind::Enum { values, .. } | Kind::Enum64 { values, .. } => values,
            _ => return Ok(None),
        };
        let want = essential_name(self.acc[0].name.as_deref().unwrap_or(""));
        Ok(values
            .iter()
            .position(|v| essential_name(&v.name) == want)
            .map(|i| {
                t.acc.push(Accessor {
                    type_id: tid,
                    idx: i as u32,
                    name: Some(values[i].name.clone()),
                });
                t
            }))
    }

    /// A field spec found in target type `root` (see [`Spec::match_in`]).
    fn match_field(&self, local: &Btf, target: &Btf, root: u32) -> Result<Option<Spec>, String> {
        let mut t = Spec {
            kind: self.kind,
            root,
            acc: Vec::new(),
            bit_offset: 0,
        };
        let mut tid = root;
        for (i, la) in self.acc.iter().enumerate() {
            if i > 0 {
                if la.name.is_some() {
                    match match_member(local, la, target, tid, &mut t, 0)? {
                        Some(next) => tid = next,
                        None => return Ok(None),
                    }
                    continue;
                }
                let (_, tk) = strip(target, tid)?;
                let Kind::Array { elem, nelems, .. } = tk else {
                    return Ok(None);
                };
                if !is_flex(target, t.acc.last(), *nelems) && la.idx >= *nelems {
                    return Ok(None);
                }
                tid = strip(target, *elem)?.0;
            }
            if t.acc.len() >= MAX_LEN {
                return Err("access too deep".into());
            }
            t.acc.push(Accessor {
                type_id: tid,
                idx: la.idx,
                name: None,
            });
            t.bit_offset = t
                .bit_offset
                .wrapping_add(u64::from(la.idx).wrapping_mul(size(target, tid)? * 8));
        }
        Ok(Some(t))
    }

    /// Whether target type `root` matches for a type-based relocation.
    fn type_matches(&self, local: &Btf, target: &Btf, root: u32) -> Result<bool, String> {
        if self.kind == CoreKind::TypeMatches {
            types_match(local, self.root, target, root, false, 32)
        } else {
            types_compat(local, self.root, target, root)
        }
    }
}

/// Finds the member local accessor `la` names in target composite `tid`,
/// descending into anonymous members; pushes its accessor onto `t` and
/// returns the member's type. `None`: not there, or not compatible.
fn match_member(
    local: &Btf,
    la: &Accessor,
    target: &Btf,
    tid: u32,
    t: &mut Spec,
    depth: u32,
) -> Result<Option<u32>, String> {
    if depth > 32 {
        return Err("anonymous members nested too deep".into());
    }
    let (sid, tk) = strip(target, tid)?;
    let Some(tms) = members(tk) else {
        return Ok(None);
    };
    let lm = local
        .get(la.type_id)
        .and_then(|x| members(&x.kind))
        .and_then(|ms| ms.get(la.idx as usize))
        .ok_or("local accessor names no member")?;
    for (i, m) in tms.iter().enumerate() {
        if m.name.is_empty() {
            let saved = t.bit_offset;
            t.bit_offset = t.bit_offset.wrapping_add(u64::from(m.bit_offset));
            if let Some(found) = match_member(local, la, target, m.ty, t, depth + 1)? {
                return Ok(Some(found));
            }
            t.bit_offset = saved;
        } else if m.name == lm.name {
            if !fields_compat(local, lm.ty, target, m.ty)? {
                return Ok(None);
            }
            t.bit_offset = t.bit_offset.wrapping_add(u64::from(m.bit_offset));
            t.acc.push(Accessor {
                type_id: sid,
                idx: i as u32,
                name: Some(m.name.clone()),
            });
            return Ok(Some(m.ty));
        }
    }
    Ok(None)
}

/// `struct iphdr::daddr`, `struct x::a[2].b`, `enum e::VAL`, `struct x`.
pub(super) fn describe(btf: &Btf, relo: &CoreRelo) -> String {
    let root = btf.c_type(relo.type_id);
    if relo.kind.is_type() {
        return root;
    }
    let Ok(spec) = Spec::parse(btf, relo) else {
        return root;
    };
    if relo.kind.is_enumval() {
        return format!("{root}::{}", spec.acc[0].name.clone().unwrap_or_default());
    }
    let mut path = String::new();
    if spec.acc[0].idx != 0 {
        path.push_str(&format!("[{}]", spec.acc[0].idx));
    }
    for a in &spec.acc[1..] {
        match &a.name {
            Some(n) if path.is_empty() => path.push_str(n),
            Some(n) => path.push_str(&format!(".{n}")),
            None => path.push_str(&format!("[{}]", a.idx)),
        }
    }
    if path.is_empty() {
        root
    } else if path.starts_with('[') && spec.acc.len() == 1 {
        format!("{root}{path}")
    } else {
        format!("{root}::{path}")
    }
}
