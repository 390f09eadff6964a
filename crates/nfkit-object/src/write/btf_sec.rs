//! `.BTF` and `.BTF.ext`: the ELF symbols libbpf looks up for `DATASEC`
//! variables, func_info for every function (with `FUNC`s synthesised
//! where the Image has none), and line info.

use super::btf_maps;
use super::elf_out::{OutElf, OutSection, OutSymbol};
use super::layout::CodeLayout;
use super::unsupported;
use crate::btf::ext::{BtfExt, FuncInfo, LineRecord, SectionInfo};
use crate::btf::{Btf, Kind, Linkage, VarSecinfo};
use crate::error::WriteError;
use crate::image::Image;
use object::elf;

/// Adds `.BTF` and `.BTF.ext` (func_info for every function, line info
/// with a record at every function start), and the ELF symbols libbpf
/// needs for `DATASEC` variables.
pub(super) fn write_btf(
    image: &Image,
    btf: &mut Btf,
    out: &mut OutElf,
    layout: &CodeLayout,
) -> Result<(), WriteError> {
    datasec_symbols(btf, out)?;
    let ext = BtfExt {
        func_info: func_info(image, btf, layout)?
            .into_iter()
            .filter(|s| !s.records.is_empty())
            .collect(),
        line_info: line_info(image, layout)
            .into_iter()
            .filter(|s| !s.records.is_empty())
            .collect(),
        core_relos: Vec::new(),
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

/// Symbols for the global variables of every `DATASEC` but `.maps` (libbpf
/// looks each one up), and each written `DATASEC`'s size set to its
/// section's.
fn datasec_symbols(btf: &mut Btf, out: &mut OutElf) -> Result<(), WriteError> {
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
            check_unwritten_datasec(btf, out, &sname, vars)?;
            continue;
        };
        let size = out.sections[sec]
            .data
            .len()
            .max(out.sections[sec].nobits_size as usize) as u32;
        let syms = global_vars(btf, vars);
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
    Ok(())
}

/// (name, offset, size) of the global variables among `vars`.
fn global_vars(btf: &Btf, vars: &[VarSecinfo]) -> Vec<(String, u32, u32)> {
    let mut syms = Vec::new();
    for v in vars {
        if let Some(Kind::Var { linkage, .. }) = btf.get(v.ty).map(|t| &t.kind) {
            if *linkage == Linkage::Global {
                syms.push((btf.name_of(v.ty).to_string(), v.offset, v.size));
            }
        }
    }
    syms
}

/// A `DATASEC` whose section is not written (legacy `maps`, whose maps
/// moved to `.maps`): libbpf still looks up the symbol of each global
/// variable, so they must exist elsewhere.
fn check_unwritten_datasec(
    btf: &Btf,
    out: &OutElf,
    sname: &str,
    vars: &[VarSecinfo],
) -> Result<(), WriteError> {
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
    match missing {
        Some(v) => Err(unsupported(
            format!("BTF DATASEC '{sname}'"),
            format!(
                "variable '{}' is in no section of the Image",
                btf.name_of(v.ty)
            ),
        )),
        None => Ok(()),
    }
}

/// One empty `SectionInfo` per code section.
fn per_section<T>(layout: &CodeLayout) -> Vec<SectionInfo<T>> {
    layout
        .names
        .iter()
        .map(|n| SectionInfo {
            section: n.clone(),
            records: Vec::new(),
        })
        .collect()
}

/// func_info of every function, by section and offset.
fn func_info(
    image: &Image,
    btf: &mut Btf,
    layout: &CodeLayout,
) -> Result<Vec<SectionInfo<FuncInfo>>, WriteError> {
    let mut func_info: Vec<SectionInfo<FuncInfo>> = per_section(layout);
    let mut protos = ProtoCache::default();
    for (fi, p) in layout.placement.iter().enumerate() {
        func_info[p.section].records.push(FuncInfo {
            insn_off: p.slot as u32 * 8,
            type_id: func_id(image, btf, fi, &mut protos)?,
        });
    }
    for s in &mut func_info {
        s.records.sort_by_key(|r| r.insn_off);
    }
    Ok(func_info)
}

/// The synthesised `FUNC_PROTO`s, [static, entry], made on first use.
#[derive(Default)]
struct ProtoCache([Option<u32>; 2]);

/// The `FUNC` of function `fi`: the Image's, or a new one for entries and
/// static functions (a global function without one is an error).
fn func_id(
    image: &Image,
    btf: &mut Btf,
    fi: usize,
    protos: &mut ProtoCache,
) -> Result<u32, WriteError> {
    let f = &image.functions[fi];
    let is_entry = image.entries.iter().any(|e| e.function == fi);
    if let Some(id) = f
        .btf_id
        .filter(|&id| matches!(btf.get(id).map(|t| &t.kind), Some(Kind::Func { .. })))
    {
        return Ok(id);
    }
    if f.global && !is_entry {
        return Err(unsupported(
            format!("global function '{}'", f.name),
            "it has no BTF FUNC (the kernel verifies global functions against their BTF prototype; give it one or make it static)",
        ));
    }
    let proto = *protos.0[usize::from(is_entry)]
        .get_or_insert_with(|| btf_maps::synth_proto(btf, is_entry));
    Ok(btf.add(crate::btf::Type::new(
        f.name.clone(),
        Kind::Func {
            proto,
            linkage: if is_entry {
                Linkage::Global
            } else {
                Linkage::Static
            },
        },
    )))
}

/// The Image's line info by section, with a record at every function
/// start (none at all when the Image has no line info).
fn line_info(image: &Image, layout: &CodeLayout) -> Vec<SectionInfo<LineRecord>> {
    let mut line_info: Vec<SectionInfo<LineRecord>> = per_section(layout);
    if image.line_info.is_empty() {
        return line_info;
    }
    for (fi, f) in image.functions.iter().enumerate() {
        let p = &layout.placement[fi];
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
    line_info
}
