//! Merging another object's BTF into this one (used by the linker).
//!
//! Types are appended with their ids shifted. `DATASEC`s whose name is
//! already present are merged instead: their variables are appended to
//! the existing `DATASEC` with their offsets moved by the caller's
//! per-section shift (global data sections are concatenated by the
//! linker), and a non-static variable whose name is already listed is not
//! repeated (maps and the license shared by several objects).

use super::*;

/// How the ids of a merged BTF map to ids in the result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeMap {
    ids: Vec<u32>,
}

impl MergeMap {
    /// The new id of `old` (0 stays 0; unknown ids map to 0).
    pub fn map(&self, old: u32) -> u32 {
        self.ids.get(old as usize).copied().unwrap_or(0)
    }
}

impl Btf {
    /// Appends `other`'s types (see the module doc). `shift(section)`
    /// gives the offset of `other`'s part of a global data section.
    pub fn merge(&mut self, other: &Btf, shift: impl Fn(&str) -> u32) -> MergeMap {
        let mut ids = vec![0u32; other.types.len()];
        let mut next = self.len();
        let mut merged_into: Vec<Option<u32>> = vec![None; other.types.len()];
        for (old, t) in other.types.iter().enumerate().skip(1) {
            let existing = match t.kind {
                Kind::Datasec { .. } if !t.name.is_empty() => self.find_datasec(&t.name),
                _ => None,
            };
            match existing {
                Some(id) => {
                    ids[old] = id;
                    merged_into[old] = Some(id);
                }
                None => {
                    ids[old] = next;
                    next += 1;
                }
            }
        }
        let remap = |id: u32| ids.get(id as usize).copied().unwrap_or(0);
        let mut pending = Vec::new();
        for (old, t) in other.types.iter().enumerate().skip(1) {
            let mut t = t.clone();
            t.kind.map_refs(remap);
            match merged_into[old] {
                None => self.types.push(t),
                Some(target) => pending.push((target, t)),
            }
        }
        // Datasec merges last: the VARs they list are appended above.
        for (target, t) in pending {
            let Kind::Datasec { size, vars } = t.kind else {
                continue;
            };
            let delta = shift(&t.name);
            let names: Vec<(String, Linkage)> =
                vars.iter().map(|v| self.var_name_linkage(v.ty)).collect();
            let existing: Vec<String> = match self.get(target).map(|t| &t.kind) {
                Some(Kind::Datasec { vars, .. }) => vars
                    .iter()
                    .map(|v| self.var_name_linkage(v.ty))
                    .filter(|(_, l)| *l != Linkage::Static)
                    .map(|(n, _)| n)
                    .collect(),
                _ => Vec::new(),
            };
            if let Some(Type {
                kind:
                    Kind::Datasec {
                        size: tsize,
                        vars: tvars,
                    },
                ..
            }) = self.types.get_mut(target as usize)
            {
                for (v, (name, linkage)) in vars.into_iter().zip(names) {
                    if linkage != Linkage::Static && existing.contains(&name) {
                        continue;
                    }
                    tvars.push(VarSecinfo {
                        ty: v.ty,
                        offset: v.offset.saturating_add(delta),
                        size: v.size,
                    });
                }
                *tsize = (*tsize).max(size.saturating_add(delta));
            }
        }
        MergeMap { ids }
    }

    fn var_name_linkage(&self, id: u32) -> (String, Linkage) {
        match self.get(id) {
            Some(Type {
                name,
                kind: Kind::Var { linkage, .. } | Kind::Func { linkage, .. },
            }) => (name.clone(), *linkage),
            _ => (String::new(), Linkage::Static),
        }
    }
}
