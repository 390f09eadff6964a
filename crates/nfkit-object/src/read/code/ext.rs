//! `.BTF.ext` func_info (function BTF ids) and line_info onto the
//! functions read.

use crate::btf::ext::BtfExt;
use crate::btf::{Btf, Kind};
use crate::co_re::{CoreKind, CoreRelo};
use crate::error::{Location, ReadError, ReadErrorKind};
use crate::image::LineInfo;
use crate::object::ObjFunction;
use crate::read::err;

/// Attaches `.BTF.ext` func_info (function BTF ids) and line_info.
pub(super) fn attach_ext(
    functions: &mut [ObjFunction],
    ext: &BtfExt,
    btf: Option<&Btf>,
) -> Result<(), ReadError> {
    for sec in &ext.func_info {
        for r in &sec.records {
            let loc = Location::at(&sec.section, u64::from(r.insn_off));
            let f = functions
                .iter_mut()
                .find(|f| {
                    f.section == sec.section && (f.section_slot as u64) * 8 == u64::from(r.insn_off)
                })
                .ok_or_else(|| {
                    err(
                        loc.clone(),
                        ReadErrorKind::Btf(crate::btf::BtfError::Ext(
                            "func_info for an offset that starts no function".into(),
                        )),
                    )
                })?;
            let is_func = btf
                .and_then(|b| b.get(r.type_id))
                .is_some_and(|t| matches!(t.kind, Kind::Func { .. }));
            if !is_func {
                return Err(err(
                    loc.with_symbol(&f.name),
                    ReadErrorKind::Btf(crate::btf::BtfError::Ext(format!(
                        "func_info type {} is not a FUNC",
                        r.type_id
                    ))),
                ));
            }
            f.btf_id = Some(r.type_id);
        }
    }
    // Each function's slot length once (not per line record: objects have
    // thousands of records).
    let lens: Vec<usize> = functions.iter().map(|f| f.slot_len()).collect();
    for sec in &ext.line_info {
        for r in &sec.records {
            let slot = (r.insn_off / 8) as usize;
            let f = functions.iter_mut().zip(&lens).find_map(|(f, &len)| {
                (f.section == sec.section && slot >= f.section_slot && slot < f.section_slot + len)
                    .then_some(f)
            });
            let Some(f) = f else {
                return Err(err(
                    Location::at(&sec.section, u64::from(r.insn_off)),
                    ReadErrorKind::Btf(crate::btf::BtfError::Ext(
                        "line_info outside every function".into(),
                    )),
                ));
            };
            f.line_info.push(LineInfo {
                slot: slot - f.section_slot,
                file: r.file.clone(),
                line: r.line,
                col: r.col,
                text: r.text.clone(),
            });
        }
    }
    for f in functions.iter_mut() {
        f.line_info.sort_by_key(|l| l.slot);
    }
    attach_core(functions, ext, &lens)
}

/// Attaches `.BTF.ext` CO-RE relocations to the instructions they patch.
fn attach_core(
    functions: &mut [ObjFunction],
    ext: &BtfExt,
    lens: &[usize],
) -> Result<(), ReadError> {
    for sec in &ext.core_relos {
        // A section whose code is not read (no function of it) keeps its
        // relocations to itself.
        if !functions.iter().any(|f| f.section == sec.section) {
            continue;
        }
        for r in &sec.records {
            let slot = (r.insn_off / 8) as usize;
            let loc = || Location::at(&sec.section, u64::from(r.insn_off));
            let f = functions.iter_mut().zip(lens).find_map(|(f, &len)| {
                (f.section == sec.section && slot >= f.section_slot && slot < f.section_slot + len)
                    .then_some(f)
            });
            let Some(f) = f else {
                return Err(err(
                    loc(),
                    ReadErrorKind::Btf(crate::btf::BtfError::Ext(
                        "CO-RE relocation outside every function".into(),
                    )),
                ));
            };
            let rel = slot - f.section_slot;
            let Ok(insn) = nfkit_isa::slot_offsets(&f.insns).binary_search(&rel) else {
                return Err(err(
                    loc().with_symbol(&f.name),
                    ReadErrorKind::Btf(crate::btf::BtfError::Ext(
                        "CO-RE relocation in the middle of an lddw".into(),
                    )),
                ));
            };
            f.core_relos.push(CoreRelo {
                insn,
                kind: CoreKind::from_u32(r.kind),
                type_id: r.type_id,
                access: r.access.clone(),
            });
        }
    }
    Ok(())
}
