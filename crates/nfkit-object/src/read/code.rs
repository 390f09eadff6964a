//! Code sections: split into functions by their `FUNC` symbols, with
//! relocations (and unrelocated relative calls) turned into symbolic
//! references, and `.BTF.ext` function/line info attached.

use super::elf::{Elf, Section, SymKind, Symbol, R_BPF_64_32, R_BPF_64_64, R_BPF_NONE};
use super::err;
use super::maps::Maps;
use crate::btf::ext::BtfExt;
use crate::btf::{Btf, Kind};
use crate::error::{Location, ReadError, ReadErrorKind};
use crate::image::LineInfo;
use crate::object::{Binding, FuncRef, ObjFunction, Reloc, RelocTarget};
use crate::progtype::prog_type_of_section;
use nfkit_isa::{CallKind, Insn, LddwKind, RawInsn};
use object::elf as e;

/// A decoded code section.
struct CodeSection {
    index: usize,
    name: String,
    insns: Vec<Insn>,
    /// Slot of each instruction.
    slots: Vec<usize>,
    /// For each slot, the instruction starting there (None: second half of lddw).
    insn_at_slot: Vec<Option<usize>>,
    /// Per instruction: its original src field (pseudo kind).
    raw: Vec<RawInsn>,
    /// Functions of this section: (first function index in the object, count).
    first_func: usize,
}

fn layout(loc: Location, msg: impl Into<String>) -> ReadError {
    err(loc, ReadErrorKind::Layout(msg.into()))
}

fn bad_rel(loc: Location, msg: impl Into<String>) -> ReadError {
    err(loc, ReadErrorKind::BadRelocation(msg.into()))
}

fn decode(sec: &Section<'_>) -> Result<CodeSection, ReadError> {
    let loc = Location::section(&sec.name);
    if !sec.data.len().is_multiple_of(8) {
        return Err(layout(
            loc,
            format!("code size {} is not a multiple of 8", sec.data.len()),
        ));
    }
    let raw =
        nfkit_isa::raw_slots(sec.data).map_err(|e| err(loc.clone(), ReadErrorKind::Decode(e)))?;
    let insns = nfkit_isa::decode_program(&raw).map_err(|d| {
        err(
            Location::at(&sec.name, d.index as u64 * 8),
            ReadErrorKind::Decode(d),
        )
    })?;
    let slots = nfkit_isa::slot_offsets(&insns);
    let mut insn_at_slot = vec![None; raw.len()];
    for (i, &s) in slots.iter().enumerate() {
        insn_at_slot[s] = Some(i);
    }
    let raw_first: Vec<RawInsn> = slots.iter().map(|&s| raw[s]).collect();
    Ok(CodeSection {
        index: sec.index,
        name: sec.name.clone(),
        insns,
        slots,
        insn_at_slot,
        raw: raw_first,
        first_func: 0,
    })
}

fn binding(s: &Symbol) -> Binding {
    match s.bind {
        e::STB_LOCAL => Binding::Local,
        e::STB_WEAK => Binding::Weak,
        _ => Binding::Global,
    }
}

pub(crate) fn read_functions(
    elf: &Elf<'_>,
    maps: &Maps,
    btf: Option<&Btf>,
    ext: Option<&BtfExt>,
) -> Result<Vec<ObjFunction>, ReadError> {
    let mut functions: Vec<ObjFunction> = Vec::new();
    let mut code: Vec<CodeSection> = Vec::new();
    // Pass 1: split every code section into functions.
    for sec in elf
        .sections
        .iter()
        .filter(|s| s.is_code() && !s.data.is_empty())
    {
        let loc = Location::section(&sec.name);
        if sec.has_rela {
            return Err(err(
                loc,
                ReadErrorKind::Unsupported("RELA relocations".into()),
            ));
        }
        let prog_type = if sec.name == ".text" {
            None
        } else {
            Some(prog_type_of_section(&sec.name).ok_or_else(|| {
                err(
                    loc.clone(),
                    ReadErrorKind::Unsupported(format!(
                        "unknown program section '{}' (no program type follows from it)",
                        sec.name
                    )),
                )
            })?)
        };
        let mut cs = decode(sec)?;
        cs.first_func = functions.len();
        let mut syms: Vec<&Symbol> = elf
            .symbols_in(sec.index)
            .map(|(_, s)| s)
            .filter(|s| s.kind == SymKind::Func)
            .collect();
        syms.sort_by_key(|s| s.value);
        if syms.first().map(|s| s.value) != Some(0) {
            return Err(layout(
                Location::at(&sec.name, 0),
                "code is not covered by a function symbol",
            ));
        }
        let nslots = cs.insn_at_slot.len();
        for (k, s) in syms.iter().enumerate() {
            let floc = Location::at(&sec.name, s.value).with_symbol(&s.name);
            if s.value % 8 != 0 {
                return Err(layout(floc, "function is not 8-byte aligned"));
            }
            let start = (s.value / 8) as usize;
            let end = match syms.get(k + 1) {
                Some(n) => (n.value / 8) as usize,
                None => nslots,
            };
            if start >= end || end > nslots {
                return Err(layout(
                    floc,
                    "function overlaps another or lies outside the section",
                ));
            }
            let (Some(first), true) = (
                cs.insn_at_slot.get(start).copied().flatten(),
                end == nslots || cs.insn_at_slot.get(end).copied().flatten().is_some(),
            ) else {
                return Err(layout(floc, "function boundary splits an lddw"));
            };
            let last = match end == nslots {
                true => cs.insns.len(),
                false => cs.insn_at_slot[end].unwrap_or(cs.insns.len()),
            };
            let bind = binding(s);
            if prog_type.is_some() && bind == Binding::Local {
                return Err(err(
                    floc,
                    ReadErrorKind::Unsupported(
                        "static functions in program sections (make the program global)".into(),
                    ),
                ));
            }
            functions.push(ObjFunction {
                name: s.name.clone(),
                section: sec.name.clone(),
                section_slot: start,
                insns: cs.insns[first..last].to_vec(),
                binding: bind,
                prog_type,
                btf_id: None,
                relocs: Vec::new(),
                line_info: Vec::new(),
            });
        }
        code.push(cs);
    }
    // Pass 2: relocations and relative calls.
    for cs in &code {
        let sec = &elf.sections[cs.index];
        let nfuncs = functions[cs.first_func..]
            .iter()
            .take_while(|f| f.section == cs.name)
            .count();
        let func_of_insn = |insn: usize| -> (usize, usize) {
            let slot = cs.slots[insn];
            let k = functions[cs.first_func..cs.first_func + nfuncs]
                .partition_point(|f| f.section_slot <= slot)
                .saturating_sub(1);
            let fi = cs.first_func + k;
            let first_insn = cs.insn_at_slot[functions[fi].section_slot].unwrap_or(0);
            (fi, insn - first_insn)
        };
        let func_at_slot = |section: usize, slot: usize| -> Option<usize> {
            functions
                .iter()
                .position(|f| f.section == elf.section_name(section) && f.section_slot == slot)
        };
        let mut relocated = vec![false; cs.insns.len()];
        let mut new_relocs: Vec<(usize, Reloc)> = Vec::new();
        for r in &sec.rels {
            let sym = &elf.symbols[r.sym];
            let loc = Location::at(&cs.name, r.offset).with_symbol(&sym.name);
            if r.rtype == R_BPF_NONE {
                continue;
            }
            if r.offset % 8 != 0 {
                return Err(bad_rel(loc, "offset is not on an instruction"));
            }
            let slot = (r.offset / 8) as usize;
            let Some(Some(insn)) = cs.insn_at_slot.get(slot).copied() else {
                return Err(bad_rel(
                    loc,
                    "offset is outside the section or inside an lddw",
                ));
            };
            if relocated[insn] {
                return Err(bad_rel(loc, "second relocation on one instruction"));
            }
            relocated[insn] = true;
            let target = reloc_target(elf, maps, cs, insn, r.rtype, sym, &loc, &func_at_slot)?;
            let (fi, local) = func_of_insn(insn);
            new_relocs.push((
                fi,
                Reloc {
                    insn: local,
                    target,
                },
            ));
        }
        // Unrelocated pseudo instructions.
        for (i, insn) in cs.insns.iter().enumerate() {
            if relocated[i] {
                continue;
            }
            let loc = Location::at(&cs.name, cs.slots[i] as u64 * 8);
            let rel_target = match insn {
                Insn::Call {
                    kind: CallKind::Local,
                    imm,
                }
                | Insn::Lddw {
                    kind: LddwKind::Func,
                    imm,
                    ..
                } => {
                    let t = cs.slots[i] as i64 + 1 + *imm as i64;
                    let f = usize::try_from(t)
                        .ok()
                        .and_then(|t| func_at_slot(cs.index, t))
                        .ok_or_else(|| {
                            bad_rel(
                                loc.clone(),
                                format!("call target {t} is not the start of a function in this section"),
                            )
                        })?;
                    Some(if matches!(insn, Insn::Call { .. }) {
                        RelocTarget::Call(FuncRef::Index(f))
                    } else {
                        RelocTarget::FuncAddr(FuncRef::Index(f))
                    })
                }
                Insn::Call {
                    kind: CallKind::Kfunc,
                    ..
                } => {
                    return Err(err(loc, ReadErrorKind::Unsupported("kfunc calls".into())));
                }
                Insn::Lddw { kind, .. } if *kind != LddwKind::Imm64 => {
                    return Err(bad_rel(
                        loc,
                        format!(
                            "lddw with pseudo source {} has no relocation",
                            cs.raw[i].src
                        ),
                    ));
                }
                _ => None,
            };
            if let Some(target) = rel_target {
                let (fi, local) = func_of_insn(i);
                new_relocs.push((
                    fi,
                    Reloc {
                        insn: local,
                        target,
                    },
                ));
            }
        }
        for (fi, r) in new_relocs {
            functions[fi].relocs.push(r);
        }
    }
    for f in &mut functions {
        f.relocs.sort_by_key(|r| r.insn);
    }
    if let Some(ext) = ext {
        attach_ext(&mut functions, ext, btf)?;
    }
    Ok(functions)
}

#[allow(clippy::too_many_arguments)]
fn reloc_target(
    elf: &Elf<'_>,
    maps: &Maps,
    cs: &CodeSection,
    insn: usize,
    rtype: u32,
    sym: &Symbol,
    loc: &Location,
    func_at_slot: &dyn Fn(usize, usize) -> Option<usize>,
) -> Result<RelocTarget, ReadError> {
    let ins = cs.insns[insn];
    let raw = cs.raw[insn];
    let named = |s: &Symbol| s.kind == SymKind::Func && !s.is_local() && !s.name.is_empty();
    match rtype {
        R_BPF_64_64 => {
            let Insn::Lddw { imm, .. } = ins else {
                return Err(bad_rel(
                    loc.clone(),
                    "R_BPF_64_64 on an instruction that is not lddw",
                ));
            };
            if raw.src != 0 && raw.src != 4 {
                return Err(bad_rel(
                    loc.clone(),
                    format!("relocated lddw already has pseudo source {}", raw.src),
                ));
            }
            let Some(sidx) = sym.section else {
                if sym.name.is_empty() {
                    return Err(bad_rel(
                        loc.clone(),
                        "relocation against an undefined unnamed symbol",
                    ));
                }
                return Err(err(
                    loc.clone(),
                    ReadErrorKind::Unsupported(
                        "lddw of an extern symbol (kconfig/ksym externs)".into(),
                    ),
                ));
            };
            let tsec = &elf.sections[sidx];
            if let Some(m) = maps.declared_at(sidx, sym.value) {
                return Ok(RelocTarget::Map(m));
            }
            if tsec.name == ".maps" || tsec.name == "maps" {
                return Err(bad_rel(
                    loc.clone(),
                    "symbol is not the start of a map definition",
                ));
            }
            if let Some(&m) = maps.global_by_section.get(&sidx) {
                let off = (sym.value as i64).wrapping_add(imm as i64);
                let size = maps.specs[m].value_size as i64;
                if off < 0 || off >= size.max(1) {
                    return Err(bad_rel(
                        loc.clone(),
                        format!(
                            "offset {off} is outside section '{}' ({size} bytes)",
                            tsec.name
                        ),
                    ));
                }
                return Ok(RelocTarget::MapValue {
                    map: m,
                    offset: off as u32,
                });
            }
            if tsec.is_code() {
                let byte = (sym.value as i64).wrapping_add(imm as i64);
                if byte < 0 || byte % 8 != 0 {
                    return Err(bad_rel(
                        loc.clone(),
                        format!("function address {byte} is not an instruction"),
                    ));
                }
                if named(sym) && imm == 0 {
                    return Ok(RelocTarget::FuncAddr(FuncRef::Named(sym.name.clone())));
                }
                let f = func_at_slot(sidx, (byte / 8) as usize).ok_or_else(|| {
                    bad_rel(
                        loc.clone(),
                        format!(
                            "function address {byte} in '{}' is not a function",
                            tsec.name
                        ),
                    )
                })?;
                return Ok(RelocTarget::FuncAddr(FuncRef::Index(f)));
            }
            Err(err(
                loc.clone(),
                ReadErrorKind::UnknownSymbolSection(tsec.name.clone()),
            ))
        }
        R_BPF_64_32 => {
            let Insn::Call { kind, imm } = ins else {
                return Err(bad_rel(
                    loc.clone(),
                    "R_BPF_64_32 on an instruction that is not a call",
                ));
            };
            match kind {
                CallKind::Local => {}
                CallKind::Kfunc => {
                    return Err(err(
                        loc.clone(),
                        ReadErrorKind::Unsupported("kfunc calls".into()),
                    ))
                }
                CallKind::Helper => {
                    return Err(bad_rel(loc.clone(), "R_BPF_64_32 on a helper call"));
                }
            }
            let Some(sidx) = sym.section else {
                if sym.name.is_empty() {
                    return Err(bad_rel(loc.clone(), "call of an undefined unnamed symbol"));
                }
                return Ok(RelocTarget::Call(FuncRef::Named(sym.name.clone())));
            };
            let tsec = &elf.sections[sidx];
            if !tsec.is_code() {
                return Err(err(
                    loc.clone(),
                    ReadErrorKind::UnknownSymbolSection(tsec.name.clone()),
                ));
            }
            let target = sym.value as i64 / 8 + imm as i64 + 1;
            if named(sym) && imm == -1 {
                return Ok(RelocTarget::Call(FuncRef::Named(sym.name.clone())));
            }
            let f = usize::try_from(target)
                .ok()
                .filter(|_| sym.value.is_multiple_of(8))
                .and_then(|t| func_at_slot(sidx, t))
                .ok_or_else(|| {
                    bad_rel(
                        loc.clone(),
                        format!(
                            "call target slot {target} in '{}' is not the start of a function",
                            tsec.name
                        ),
                    )
                })?;
            Ok(RelocTarget::Call(FuncRef::Index(f)))
        }
        t => Err(err(loc.clone(), ReadErrorKind::RelocationType(t))),
    }
}

/// Attaches `.BTF.ext` func_info (function BTF ids) and line_info.
fn attach_ext(
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
    Ok(())
}
