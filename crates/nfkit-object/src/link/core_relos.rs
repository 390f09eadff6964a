//! CO-RE relocations applied while linking: each function's relocations
//! resolved against the target BTF and written into its instructions.
//! One that cannot be resolved poisons its instruction and is kept in
//! [`Image::core_sites`](crate::Image::core_sites) with its reason, so
//! only the programs that reach it are refused.

use crate::btf::MergeMap;
use crate::co_re::{self, CoreKind, Target};
use crate::image::CoreSite;
use crate::object::{ObjFunction, Object};
use nfkit_isa::Insn;

/// What CO-RE relocations are resolved with.
pub(super) struct CoreCx<'a> {
    /// The target BTF, or why there is none (the kernel's is missing).
    pub(super) target: Result<&'a Target, String>,
    /// Per object, its BTF ids in the Image's merged BTF.
    pub(super) btf_maps: &'a [Option<MergeMap>],
}

impl CoreCx<'_> {
    /// Applies the CO-RE relocations of function `f` of object `oi` to
    /// `body` (its relocated instructions), placed at image slot `start`;
    /// returns the sites, in image slots.
    pub(super) fn apply(
        &self,
        objects: &[Object],
        oi: usize,
        f: &ObjFunction,
        start: usize,
        body: &mut Vec<Insn>,
    ) -> Vec<CoreSite> {
        if f.core_relos.is_empty() {
            return Vec::new();
        }
        let slots = nfkit_isa::slot_offsets(body);
        let local = objects[oi].btf.as_ref();
        let mut sites = Vec::with_capacity(f.core_relos.len());
        let mut poisoned = Vec::new();
        for r in &f.core_relos {
            let Some(&slot) = slots.get(r.insn) else {
                sites.push(CoreSite {
                    slot: start,
                    function: f.name.clone(),
                    func_slot: r.insn,
                    what: format!("{} {}", r.kind.name(), r.access),
                    result: Err("relocation past the end of the function".into()),
                });
                continue;
            };
            let (what, result) = match local {
                Some(local) => {
                    let what = co_re::describe(local, r);
                    let res = self.resolve(local, oi, r, body[r.insn]);
                    (what.clone(), res.map_err(|e| format!("{what}: {e}")))
                }
                None => (
                    format!("{} {}", r.kind.name(), r.access),
                    Err("the object has no BTF".into()),
                ),
            };
            match &result {
                Ok((insn, _)) => body[r.insn] = *insn,
                Err(_) => poisoned.push(r.insn),
            }
            sites.push(CoreSite {
                slot: start + slot,
                function: f.name.clone(),
                func_slot: slot,
                what,
                result: result.map(|(_, v)| v),
            });
        }
        // Poison last, back to front: an lddw becomes two calls.
        poisoned.sort_unstable();
        poisoned.dedup();
        for &i in poisoned.iter().rev() {
            let p = co_re::poison(&body[i]);
            body.splice(i..=i, p);
        }
        sites
    }

    /// The patched instruction and the value written, or why not.
    fn resolve(
        &self,
        local: &crate::btf::Btf,
        oi: usize,
        r: &co_re::CoreRelo,
        insn: Insn,
    ) -> Result<(Insn, u64), String> {
        let target = self.target.as_ref().map_err(|e| e.clone())?;
        let mut res = co_re::resolve(local, r, target)?;
        if r.kind == CoreKind::TypeIdLocal {
            let mapped = self.btf_maps[oi].as_ref().map(|m| m.map(res.orig as u32));
            res.new = mapped.map(u64::from);
        }
        let Some(value) = res.new else {
            return Err(co_re::failure(r));
        };
        Ok((co_re::patch(insn, &res)?, value))
    }
}
