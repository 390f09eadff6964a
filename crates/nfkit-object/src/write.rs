//! Writing an [`Image`] as an eBPF relocatable ELF object that libbpf
//! (`bpftool prog loadall`) loads and [`crate::read_object`] reads back.
//!
//! Layout: each entry program goes to its section (`xdp`, `tc`, ...;
//! entries sharing a section are consecutive), every other function to
//! `.text`. Declared maps go to `.maps` with BTF map definitions (the
//! Image's own definitions are reused when they still describe the map,
//! otherwise new ones are built; legacy `maps` are never written, libbpf
//! 1.x refuses them). Global-data maps become their sections again
//! (`.bss*` as NOBITS). `.BTF` is always written (an Image without BTF
//! gets a new one); `.BTF.ext` carries func_info for every function and
//! the line info. Entry programs and static functions without a BTF
//! `FUNC` get a synthesised one; a global non-entry function without one
//! is an error, because the kernel verifies global functions against
//! their prototype and none can be guessed.
//!
//! Relocations follow clang: map loads against the map symbol, global
//! data against the section symbol (offset in imm), calls across
//! sections against the callee's symbol (global) or `.text` (static),
//! function addresses against `.text` with the byte offset in imm.
//! Calls inside one section stay relative, without relocation.

mod btf_maps;
mod elf_out;

use crate::btf::ext::{BtfExt, FuncInfo, LineRecord, SectionInfo};
use crate::btf::{Btf, Kind, Linkage};
use crate::error::WriteError;
use crate::image::Image;
use crate::progtype::{default_section, prog_type_of_section};
use crate::read::{R_BPF_64_32, R_BPF_64_64, R_BPF_64_ABS64};
use elf_out::{OutElf, OutSection, OutSymbol};
use nfkit_isa::{CallKind, Insn, LddwKind};
use object::elf;

fn unsupported(what: impl Into<String>, why: impl Into<String>) -> WriteError {
    WriteError::Unsupported {
        what: what.into(),
        why: why.into(),
    }
}

/// Where each function goes.
struct Placement {
    /// Index into `sections` of the output code sections.
    section: usize,
    /// First slot inside that section.
    slot: usize,
}

/// Writes `image` as an eBPF ELF object (see the module doc).
pub fn write_object(image: &Image) -> Result<Vec<u8>, WriteError> {
    let nf = image.functions.len();
    let starts = nfkit_isa::slot_offsets(&image.insns);
    // Functions tile the instructions in order; each one's instruction range.
    let mut ranges = Vec::with_capacity(nf);
    let mut next = 0usize;
    for f in &image.functions {
        let what = || format!("function '{}'", f.name);
        if f.start != next || f.len == 0 {
            return Err(unsupported(
                what(),
                format!(
                    "it covers slots {}..{}, but functions must follow each other from slot {next} without gaps",
                    f.start,
                    f.start.saturating_add(f.len)
                ),
            ));
        }
        let end = f.start.saturating_add(f.len);
        let a = starts.partition_point(|&s| s < f.start);
        let b = starts.partition_point(|&s| s < end);
        let splits = starts.get(b).is_some_and(|&s| s != end);
        if starts.get(a) != Some(&f.start)
            || splits
            || (b == starts.len() && end != image.slot_count())
        {
            return Err(unsupported(
                what(),
                "its bounds split an lddw or lie outside the instructions",
            ));
        }
        ranges.push(a..b);
        next = end;
    }
    if next != image.slot_count() {
        return Err(unsupported(
            format!("slots {next}..{}", image.slot_count()),
            "they belong to no function",
        ));
    }
    let func_at = |slot: i64| image.functions.iter().position(|f| f.start as i64 == slot);

    // Section of each function.
    let mut entry_of = vec![None; nf];
    for (ei, e) in image.entries.iter().enumerate() {
        let f = e.function;
        if f >= nf {
            return Err(unsupported(
                format!("entry {}", e.name),
                "its function does not exist",
            ));
        }
        entry_of[f] = Some(ei);
    }
    let mut code_names: Vec<String> = Vec::new();
    let mut func_section = Vec::with_capacity(nf);
    for entry in &entry_of {
        let name = match *entry {
            Some(ei) => {
                let e = &image.entries[ei];
                if e.section.is_empty() {
                    default_section(e.prog_type)
                } else if prog_type_of_section(&e.section) == Some(e.prog_type) {
                    e.section.clone()
                } else {
                    return Err(unsupported(
                        format!("entry {}", e.name),
                        format!(
                            "section '{}' does not give program type {}",
                            e.section,
                            e.prog_type.name()
                        ),
                    ));
                }
            }
            None => ".text".to_string(),
        };
        let idx = match code_names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                code_names.push(name);
                code_names.len() - 1
            }
        };
        func_section.push(idx);
    }
    // Function order inside sections: image order.
    let mut placement: Vec<Placement> = Vec::with_capacity(nf);
    let mut section_len = vec![0usize; code_names.len()];
    for (fi, f) in image.functions.iter().enumerate() {
        let s = func_section[fi];
        placement.push(Placement {
            section: s,
            slot: section_len[s],
        });
        section_len[s] += f.len;
    }

    let mut out = OutElf::default();
    let code_idx: Vec<usize> = code_names
        .iter()
        .map(|n| {
            out.add_section(OutSection {
                name: n.clone(),
                sh_type: elf::SHT_PROGBITS,
                flags: u64::from(elf::SHF_ALLOC | elf::SHF_EXECINSTR),
                align: 8,
                data: Vec::new(),
                nobits_size: 0,
                rels: Vec::new(),
            })
        })
        .collect();
    // Function symbols.
    let mut func_sym = Vec::with_capacity(nf);
    for (fi, f) in image.functions.iter().enumerate() {
        let global = f.global || entry_of[fi].is_some();
        func_sym.push(out.add_symbol(OutSymbol {
            name: f.name.clone(),
            section: Some(code_idx[placement[fi].section]),
            value: placement[fi].slot as u64 * 8,
            size: f.len as u64 * 8,
            st_type: elf::STT_FUNC,
            bind: if global {
                elf::STB_GLOBAL
            } else {
                elf::STB_LOCAL
            },
        }));
    }

    // Maps and their symbols.
    let mut btf = image.btf.clone().unwrap_or_default();
    let maps = btf_maps::layout_maps(image, &mut btf, &mut out)?;
    for init in &image.map_inits {
        let e = image.entries.get(init.entry).ok_or_else(|| {
            unsupported(
                format!("prog array slot {}", init.slot),
                "its entry does not exist",
            )
        })?;
        let (sec, off) = maps.values_slot(init.map, init.slot).ok_or_else(|| {
            unsupported(
                format!("prog array slot {}", init.slot),
                "the map has no 'values' to hold it",
            )
        })?;
        let sym = func_sym[e.function];
        out.sections[sec].rels.push((off, sym, R_BPF_64_ABS64));
    }

    // Code with relocations.
    for (fi, f) in image.functions.iter().enumerate() {
        let sec = code_idx[placement[fi].section];
        let base = placement[fi].slot;
        let mut local_slot = 0usize;
        for insn in &image.insns[ranges[fi].clone()] {
            let slot = base + local_slot;
            let image_slot = f.start + local_slot;
            let at = format!("{}+{}", f.name, local_slot);
            let mut ins = *insn;
            let mut rel: Option<(usize, u32)> = None;
            match *insn {
                Insn::Lddw {
                    kind,
                    dst,
                    imm,
                    next_imm,
                } => match kind {
                    LddwKind::Imm64 => {}
                    LddwKind::MapIdx => {
                        let sym = maps.declared_symbol(imm).ok_or_else(|| {
                            unsupported(
                                at.clone(),
                                format!("lddw of map {imm}, which is not a declared map"),
                            )
                        })?;
                        ins = Insn::lddw(dst, 0);
                        rel = Some((sym, R_BPF_64_64));
                    }
                    LddwKind::MapIdxValue => {
                        let gsec = maps.global_section(imm).ok_or_else(|| {
                            unsupported(
                                at.clone(),
                                format!("lddw into map {imm}, which is not global data"),
                            )
                        })?;
                        let size = image.maps.get(imm as usize).map_or(0, |m| m.value_size);
                        if next_imm < 0 || next_imm as u32 >= size {
                            return Err(unsupported(
                                at,
                                format!("offset {next_imm} is outside map {imm} ({size} bytes)"),
                            ));
                        }
                        ins = Insn::Lddw {
                            kind: LddwKind::Imm64,
                            dst,
                            imm: next_imm,
                            next_imm: 0,
                        };
                        rel = Some((out.section_symbol(gsec), R_BPF_64_64));
                    }
                    LddwKind::Func => {
                        let g = func_at(image_slot as i64 + 1 + imm as i64).ok_or_else(|| {
                            unsupported(at.clone(), "function address is not a function")
                        })?;
                        let gp = &placement[g];
                        if entry_of[g].is_some() {
                            return Err(unsupported(at, "the address of an entry program"));
                        }
                        ins = Insn::lddw(dst, gp.slot as u64 * 8);
                        rel = Some((out.section_symbol(code_idx[gp.section]), R_BPF_64_64));
                    }
                    LddwKind::MapFd | LddwKind::MapValue | LddwKind::BtfId => {
                        return Err(unsupported(
                            at,
                            "lddw with a map fd or BTF id (only map indices can be relocated)",
                        ));
                    }
                },
                Insn::Call {
                    kind: CallKind::Local,
                    imm,
                } => {
                    let g = func_at(image_slot as i64 + 1 + imm as i64)
                        .ok_or_else(|| unsupported(at.clone(), "call target is not a function"))?;
                    if entry_of[g].is_some() {
                        return Err(unsupported(
                            at,
                            format!("call of entry program {}", image.functions[g].name),
                        ));
                    }
                    let gp = &placement[g];
                    if gp.section == placement[fi].section {
                        ins = Insn::Call {
                            kind: CallKind::Local,
                            imm: (gp.slot as i64 - slot as i64 - 1) as i32,
                        };
                    } else if image.functions[g].global {
                        ins = Insn::Call {
                            kind: CallKind::Local,
                            imm: -1,
                        };
                        rel = Some((func_sym[g], R_BPF_64_32));
                    } else {
                        ins = Insn::Call {
                            kind: CallKind::Local,
                            imm: gp.slot as i32 - 1,
                        };
                        rel = Some((out.section_symbol(code_idx[gp.section]), R_BPF_64_32));
                    }
                }
                Insn::Call {
                    kind: CallKind::Kfunc,
                    ..
                } => return Err(unsupported(at, "kfunc calls")),
                _ => {}
            }
            if let Some((sym, t)) = rel {
                out.sections[sec].rels.push((slot as u64 * 8, sym, t));
            }
            for r in ins.encode() {
                out.sections[sec].data.extend_from_slice(&r.to_bytes());
            }
            local_slot += insn.slots();
        }
    }

    if !image.license.is_empty() {
        let mut data = image.license.as_bytes().to_vec();
        data.push(0);
        let sec = out.add_section(OutSection {
            name: "license".into(),
            sh_type: elf::SHT_PROGBITS,
            flags: u64::from(elf::SHF_ALLOC | elf::SHF_WRITE),
            align: 1,
            data,
            nobits_size: 0,
            rels: Vec::new(),
        });
        if btf.find_datasec("license").is_none() {
            out.add_symbol(OutSymbol {
                name: "LICENSE".into(),
                section: Some(sec),
                value: 0,
                size: image.license.len() as u64 + 1,
                st_type: elf::STT_OBJECT,
                bind: elf::STB_GLOBAL,
            });
        }
    }

    write_btf(image, &mut btf, &mut out, &placement, &code_names)?;
    out.finish()
}

/// Adds `.BTF` and `.BTF.ext` (func_info for every function, line info
/// with a record at every function start), and the ELF symbols libbpf
/// needs for `DATASEC` variables.
fn write_btf(
    image: &Image,
    btf: &mut Btf,
    out: &mut OutElf,
    placement: &[Placement],
    code_names: &[String],
) -> Result<(), WriteError> {
    // Symbols for DATASEC variables (libbpf looks each one up).
    for id in 1..btf.len() {
        let Some(t) = btf.get(id) else { continue };
        let Kind::Datasec { vars, .. } = &t.kind else {
            continue;
        };
        let sname = t.name.clone();
        if sname == ".maps" {
            continue; // map symbols are written with the maps
        }
        let Some(sec) = out.sections.iter().position(|s| s.name == sname) else {
            // A section that is not written (legacy `maps`, whose maps
            // moved to `.maps`): libbpf still looks up the symbol of each
            // global variable, so they must exist elsewhere.
            let missing = vars.iter().find(|v| {
                let global = matches!(
                    btf.get(v.ty).map(|t| &t.kind),
                    Some(Kind::Var {
                        linkage: Linkage::Global,
                        ..
                    })
                );
                let name = btf.name_of(v.ty);
                global
                    && !out
                        .symbols
                        .iter()
                        .any(|s| s.name == name && s.st_type == elf::STT_OBJECT)
            });
            if let Some(v) = missing {
                return Err(unsupported(
                    format!("BTF DATASEC '{sname}'"),
                    format!(
                        "variable '{}' is in no section of the Image",
                        btf.name_of(v.ty)
                    ),
                ));
            }
            continue;
        };
        let size = out.sections[sec]
            .data
            .len()
            .max(out.sections[sec].nobits_size as usize) as u32;
        let mut syms = Vec::new();
        for v in vars {
            if let Some(Kind::Var { linkage, .. }) = btf.get(v.ty).map(|t| &t.kind) {
                if *linkage == Linkage::Global {
                    syms.push((btf.name_of(v.ty).to_string(), v.offset, v.size));
                }
            }
        }
        for (name, off, sz) in syms {
            if !out
                .symbols
                .iter()
                .any(|s| s.name == name && s.section == Some(sec))
            {
                out.add_symbol(OutSymbol {
                    name,
                    section: Some(sec),
                    value: u64::from(off),
                    size: u64::from(sz),
                    st_type: elf::STT_OBJECT,
                    bind: elf::STB_GLOBAL,
                });
            }
        }
        if let Some(Kind::Datasec { size: s, .. }) = btf.get_mut(id).map(|t| &mut t.kind) {
            *s = size;
        }
    }
    // func_info, synthesising FUNCs for functions without one.
    let mut func_info: Vec<SectionInfo<FuncInfo>> = code_names
        .iter()
        .map(|n| SectionInfo {
            section: n.clone(),
            records: Vec::new(),
        })
        .collect();
    let mut proto_cache: [Option<u32>; 2] = [None, None];
    for (fi, f) in image.functions.iter().enumerate() {
        let is_entry = image.entries.iter().any(|e| e.function == fi);
        let id = match f
            .btf_id
            .filter(|&id| matches!(btf.get(id).map(|t| &t.kind), Some(Kind::Func { .. })))
        {
            Some(id) => id,
            None if f.global && !is_entry => {
                return Err(unsupported(
                    format!("global function '{}'", f.name),
                    "it has no BTF FUNC (the kernel verifies global functions against their BTF prototype; give it one or make it static)",
                ));
            }
            None => {
                let proto = match proto_cache[usize::from(is_entry)] {
                    Some(p) => p,
                    None => {
                        let p = btf_maps::synth_proto(btf, is_entry);
                        proto_cache[usize::from(is_entry)] = Some(p);
                        p
                    }
                };
                btf.add(crate::btf::Type::new(
                    f.name.clone(),
                    Kind::Func {
                        proto,
                        linkage: if is_entry {
                            Linkage::Global
                        } else {
                            Linkage::Static
                        },
                    },
                ))
            }
        };
        func_info[placement[fi].section].records.push(FuncInfo {
            insn_off: placement[fi].slot as u32 * 8,
            type_id: id,
        });
    }
    for s in &mut func_info {
        s.records.sort_by_key(|r| r.insn_off);
    }
    // line_info, with a record at every function start.
    let mut line_info: Vec<SectionInfo<LineRecord>> = code_names
        .iter()
        .map(|n| SectionInfo {
            section: n.clone(),
            records: Vec::new(),
        })
        .collect();
    if !image.line_info.is_empty() {
        for (fi, f) in image.functions.iter().enumerate() {
            let p = &placement[fi];
            let lines: Vec<_> = image
                .line_info
                .iter()
                .filter(|l| l.slot >= f.start && l.slot < f.start + f.len)
                .collect();
            let recs = &mut line_info[p.section].records;
            if lines.first().is_none_or(|l| l.slot != f.start) {
                recs.push(LineRecord {
                    insn_off: p.slot as u32 * 8,
                    file: String::new(),
                    text: String::new(),
                    line: 0,
                    col: 0,
                });
            }
            for l in lines {
                recs.push(LineRecord {
                    insn_off: (p.slot + (l.slot - f.start)) as u32 * 8,
                    file: l.file.clone(),
                    text: l.text.clone(),
                    line: l.line,
                    col: l.col,
                });
            }
        }
        for s in &mut line_info {
            s.records.sort_by_key(|r| r.insn_off);
        }
    }
    let ext = BtfExt {
        func_info: func_info
            .into_iter()
            .filter(|s| !s.records.is_empty())
            .collect(),
        line_info: line_info
            .into_iter()
            .filter(|s| !s.records.is_empty())
            .collect(),
        core_relo_count: 0,
    };
    btf.validate()
        .map_err(|e| unsupported("BTF", e.to_string()))?;
    let (btf_bytes, ext_bytes) = btf.encode_with(|strings| ext.encode(strings));
    for (name, data) in [(".BTF", btf_bytes), (".BTF.ext", ext_bytes)] {
        out.add_section(OutSection {
            name: name.into(),
            sh_type: elf::SHT_PROGBITS,
            flags: 0,
            align: 4,
            data,
            nobits_size: 0,
            rels: Vec::new(),
        });
    }
    Ok(())
}
