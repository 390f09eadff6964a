//! The linker: one or more [`Object`]s into one [`Image`].
//!
//! * Functions of all objects are concatenated (object order, then the
//!   order read). Static functions stay private to their object; global
//!   ones resolve by name across objects: a weak definition loses to a
//!   global one (and is dropped), two global definitions are an error.
//! * Declared maps with the same name and the same definition become one
//!   map (docs/abi.md §6); a different definition is an error naming both
//!   objects. Global data sections of the same name (`.rodata`, ...) are
//!   concatenated, each object's part 8-byte aligned; global variables
//!   (non-static) must be unique by name.
//! * Local calls and function addresses get relative offsets in the
//!   concatenated program; map references become map indices.
//! * BTF is merged (ids shifted, `DATASEC`s of one name merged), and
//!   line info shifted to image slots.

use crate::btf::{Btf, MergeMap};
use crate::error::{Error, LinkError};
use crate::image::{Entry, Function, Image, LineInfo, MapInit, MapKind, MapSpec};
use crate::object::{Binding, FuncRef, Object, RelocTarget};
use nfkit_isa::{Insn, LddwKind};
use std::collections::HashMap;
use std::path::Path;

/// Alignment of each object's part of a concatenated data section.
const DATA_ALIGN: u32 = 8;

fn map_def(m: &MapSpec) -> String {
    format!(
        "{} key {} value {} max_entries {} flags 0x{:x}{}",
        m.map_type.name(),
        m.key_size,
        m.value_size,
        m.max_entries,
        m.flags,
        if m.pin_by_name { " pinned" } else { "" }
    )
}

fn same_def(a: &MapSpec, b: &MapSpec) -> bool {
    a.map_type == b.map_type
        && a.key_size == b.key_size
        && a.value_size == b.value_size
        && a.max_entries == b.max_entries
        && a.flags == b.flags
        && a.pin_by_name == b.pin_by_name
}

/// Links `objects` into an Image (see the module doc).
pub fn link(objects: &[Object]) -> Result<Image, LinkError> {
    if objects.is_empty() {
        return Err(LinkError::NoObjects);
    }
    // 1. Global symbols: name -> (object, function).
    let mut globals: HashMap<&str, (usize, usize, Binding)> = HashMap::new();
    for (oi, o) in objects.iter().enumerate() {
        for (fi, f) in o.functions.iter().enumerate() {
            if f.binding == Binding::Local {
                continue;
            }
            match globals.get(f.name.as_str()).copied() {
                None => {
                    globals.insert(&f.name, (oi, fi, f.binding));
                }
                Some((po, _, pb)) => match (pb, f.binding) {
                    (Binding::Global, Binding::Global) => {
                        return Err(LinkError::DuplicateSymbol {
                            symbol: f.name.clone(),
                            first: objects[po].origin.clone(),
                            second: o.origin.clone(),
                        })
                    }
                    (Binding::Weak, Binding::Global) => {
                        globals.insert(&f.name, (oi, fi, f.binding));
                    }
                    _ => {}
                },
            }
        }
    }
    let mut data_names: HashMap<&str, usize> = HashMap::new();
    for (oi, o) in objects.iter().enumerate() {
        for d in &o.data_symbols {
            if let Some(&po) = data_names.get(d.name.as_str()) {
                return Err(LinkError::DuplicateSymbol {
                    symbol: d.name.clone(),
                    first: objects[po].origin.clone(),
                    second: o.origin.clone(),
                });
            }
            data_names.insert(&d.name, oi);
        }
    }
    let kept = |oi: usize, fi: usize| -> bool {
        let f = &objects[oi].functions[fi];
        f.binding == Binding::Local
            || globals
                .get(f.name.as_str())
                .is_some_and(|&(wo, wf, _)| wo == oi && wf == fi)
    };

    // 2. Maps.
    let mut maps: Vec<MapSpec> = Vec::new();
    let mut map_origin: Vec<usize> = Vec::new();
    // (image index, offset shift) per object map.
    let mut map_index: Vec<Vec<(usize, u32)>> = Vec::new();
    for (oi, o) in objects.iter().enumerate() {
        let mut idx = Vec::with_capacity(o.maps.len());
        for m in &o.maps {
            match &m.kind {
                MapKind::Declared => {
                    let found = maps
                        .iter()
                        .position(|x| x.kind == MapKind::Declared && x.name == m.name);
                    match found {
                        Some(i) if same_def(&maps[i], m) => idx.push((i, 0)),
                        Some(i) => {
                            return Err(LinkError::MapMismatch {
                                name: m.name.clone(),
                                first: objects[map_origin[i]].origin.clone(),
                                second: o.origin.clone(),
                                first_def: map_def(&maps[i]),
                                second_def: map_def(m),
                            })
                        }
                        None => {
                            idx.push((maps.len(), 0));
                            maps.push(m.clone());
                            map_origin.push(oi);
                        }
                    }
                }
                MapKind::Global { section, .. } => {
                    let found = maps.iter().position(
                        |x| matches!(&x.kind, MapKind::Global { section: s, .. } if s == section),
                    );
                    match found {
                        None => {
                            idx.push((maps.len(), 0));
                            maps.push(m.clone());
                            map_origin.push(oi);
                        }
                        Some(i) => {
                            let target = &mut maps[i];
                            let shift = target.value_size.div_ceil(DATA_ALIGN) * DATA_ALIGN;
                            let size = u64::from(shift) + u64::from(m.value_size);
                            if size > u64::from(u32::MAX) {
                                return Err(LinkError::DataTooLarge {
                                    section: section.clone(),
                                    size,
                                });
                            }
                            let mut data = target.data.take().unwrap_or_default();
                            data.resize(shift as usize, 0);
                            data.extend_from_slice(m.data.as_deref().unwrap_or(&[]));
                            data.resize(size as usize, 0);
                            target.data = Some(data);
                            target.value_size = size as u32;
                            idx.push((i, shift));
                        }
                    }
                }
            }
        }
        map_index.push(idx);
    }

    // 3. BTF.
    let mut btf: Option<Btf> = None;
    let mut btf_maps: Vec<Option<MergeMap>> = Vec::with_capacity(objects.len());
    for (oi, o) in objects.iter().enumerate() {
        let Some(ob) = &o.btf else {
            btf_maps.push(None);
            continue;
        };
        let base = btf.get_or_insert_with(Btf::new);
        let shifts = &map_index[oi];
        let shift_of = |section: &str| -> u32 {
            o.maps
                .iter()
                .zip(shifts)
                .find(
                    |(m, _)| matches!(&m.kind, MapKind::Global { section: s, .. } if s == section),
                )
                .map(|(_, &(_, s))| s)
                .unwrap_or(0)
        };
        btf_maps.push(Some(base.merge(ob, shift_of)));
    }
    for (i, m) in maps.iter_mut().enumerate() {
        let oi = map_origin[i];
        let remap = |id: Option<u32>| match (&btf_maps[oi], id) {
            (Some(mm), Some(id)) => Some(mm.map(id)),
            _ => None,
        };
        match &m.kind {
            MapKind::Declared => {
                m.key_type_id = remap(m.key_type_id);
                m.value_type_id = remap(m.value_type_id);
            }
            MapKind::Global { section, .. } => {
                m.key_type_id = None;
                m.value_type_id = btf.as_ref().and_then(|b| b.find_datasec(section));
            }
        }
    }

    // 4. Function layout.
    let mut func_index: Vec<Vec<Option<usize>>> = Vec::new();
    let mut functions: Vec<Function> = Vec::new();
    let mut placed: Vec<(usize, usize)> = Vec::new();
    let mut slot = 0usize;
    for (oi, o) in objects.iter().enumerate() {
        let mut idx = vec![None; o.functions.len()];
        for (fi, f) in o.functions.iter().enumerate() {
            if !kept(oi, fi) {
                continue;
            }
            idx[fi] = Some(functions.len());
            let len = f.slot_len();
            functions.push(Function {
                name: f.name.clone(),
                start: slot,
                len,
                global: f.binding != Binding::Local,
                btf_id: match (&btf_maps[oi], f.btf_id) {
                    (Some(mm), Some(id)) => Some(mm.map(id)),
                    _ => None,
                },
                origin: o.origin.clone(),
            });
            placed.push((oi, fi));
            slot += len;
        }
        func_index.push(idx);
    }
    let resolve = |oi: usize, r: &FuncRef| -> Option<usize> {
        match r {
            FuncRef::Index(i) => match func_index[oi].get(*i).copied().flatten() {
                Some(g) => Some(g),
                None => {
                    let name = &objects[oi].functions.get(*i)?.name;
                    let &(wo, wf, _) = globals.get(name.as_str())?;
                    func_index[wo][wf]
                }
            },
            FuncRef::Named(name) => {
                let &(wo, wf, _) = globals.get(name.as_str())?;
                func_index[wo][wf]
            }
        }
    };

    // 5. Instructions with references resolved.
    let mut insns: Vec<Insn> = Vec::with_capacity(slot);
    let mut line_info: Vec<LineInfo> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    for (gi, &(oi, fi)) in placed.iter().enumerate() {
        let o = &objects[oi];
        let f = &o.functions[fi];
        let start = functions[gi].start;
        let slots = nfkit_isa::slot_offsets(&f.insns);
        let mut body = f.insns.clone();
        for r in &f.relocs {
            let Some(ins) = body.get_mut(r.insn) else {
                return Err(LinkError::BadReference {
                    object: o.origin.clone(),
                    function: f.name.clone(),
                    slot: r.insn,
                    why: "relocation past the end of the function".into(),
                });
            };
            let at = start + slots[r.insn];
            let err = |why: String| LinkError::BadReference {
                object: o.origin.clone(),
                function: f.name.clone(),
                slot: slots[r.insn],
                why,
            };
            let dst = match *ins {
                Insn::Lddw { dst, .. } => Some(dst),
                _ => None,
            };
            let func_target = |fr: &FuncRef| -> Result<i32, LinkError> {
                let g = resolve(oi, fr).ok_or_else(|| LinkError::UndefinedSymbol {
                    object: o.origin.clone(),
                    function: f.name.clone(),
                    slot: slots[r.insn],
                    symbol: match fr {
                        FuncRef::Named(n) => n.clone(),
                        FuncRef::Index(i) => o
                            .functions
                            .get(*i)
                            .map(|f| f.name.clone())
                            .unwrap_or_default(),
                    },
                })?;
                let rel = functions[g].start as i64 - (at as i64 + 1);
                i32::try_from(rel)
                    .map_err(|_| err(format!("call offset {rel} does not fit 32 bits")))
            };
            match &r.target {
                RelocTarget::Map(m) | RelocTarget::MapValue { map: m, .. } => {
                    let (gm, shift) = *map_index[oi]
                        .get(*m)
                        .ok_or_else(|| err(format!("map {m} does not exist")))?;
                    let dst = dst.ok_or_else(|| err("map reference on a non-lddw".into()))?;
                    *ins = match r.target {
                        RelocTarget::MapValue { offset, .. } => Insn::Lddw {
                            kind: LddwKind::MapIdxValue,
                            dst,
                            imm: gm as i32,
                            next_imm: offset.wrapping_add(shift) as i32,
                        },
                        _ => Insn::Lddw {
                            kind: LddwKind::MapIdx,
                            dst,
                            imm: gm as i32,
                            next_imm: 0,
                        },
                    };
                }
                RelocTarget::Call(fr) => {
                    let imm = func_target(fr)?;
                    *ins = Insn::Call {
                        kind: nfkit_isa::CallKind::Local,
                        imm,
                    };
                }
                RelocTarget::FuncAddr(fr) => {
                    let imm = func_target(fr)?;
                    let dst = dst.ok_or_else(|| err("function address on a non-lddw".into()))?;
                    *ins = Insn::Lddw {
                        kind: LddwKind::Func,
                        dst,
                        imm,
                        next_imm: 0,
                    };
                }
            }
        }
        insns.extend(body);
        line_info.extend(f.line_info.iter().map(|l| LineInfo {
            slot: l.slot + start,
            ..l.clone()
        }));
        if let Some(pt) = f.prog_type {
            entries.push(Entry {
                name: f.name.clone(),
                section: f.section.clone(),
                prog_type: pt,
                function: gi,
            });
        }
    }

    // 6. Prog array contents.
    let mut map_inits: Vec<MapInit> = Vec::new();
    for (oi, o) in objects.iter().enumerate() {
        for mi in &o.map_inits {
            let Some(&(map, _)) = map_index[oi].get(mi.map) else {
                continue;
            };
            let bad = |target: String| LinkError::BadMapInit {
                object: o.origin.clone(),
                map: maps[map].name.clone(),
                slot: mi.slot,
                target,
            };
            let name = match &mi.target {
                FuncRef::Named(n) => n.clone(),
                FuncRef::Index(i) => o
                    .functions
                    .get(*i)
                    .map(|f| f.name.clone())
                    .unwrap_or_default(),
            };
            let g = resolve(oi, &mi.target).ok_or_else(|| bad(name.clone()))?;
            let entry = entries
                .iter()
                .position(|e| e.function == g)
                .ok_or_else(|| bad(name))?;
            if !map_inits.iter().any(|x| x.map == map && x.slot == mi.slot) {
                map_inits.push(MapInit {
                    map,
                    slot: mi.slot,
                    entry,
                });
            }
        }
    }

    let license = objects
        .iter()
        .map(|o| o.license.clone())
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    line_info.sort_by_key(|l| l.slot);
    Ok(Image {
        insns,
        functions,
        entries,
        maps,
        btf,
        line_info,
        license,
        map_inits,
    })
}

/// Reads and links object files.
pub fn link_files<P: AsRef<Path>>(paths: &[P]) -> Result<Image, Error> {
    let mut objects = Vec::with_capacity(paths.len());
    for p in paths {
        objects.push(crate::read_file(p.as_ref())?);
    }
    Ok(link(&objects)?)
}

impl Image {
    /// The Image of one object (linked on its own).
    pub fn from_object(object: &Object) -> Result<Image, LinkError> {
        link(std::slice::from_ref(object))
    }

    /// Reads ELF bytes and links them on their own; `origin` names the
    /// object in diagnostics.
    pub fn from_elf(bytes: &[u8], origin: &str) -> Result<Image, Error> {
        let o = crate::read_object(bytes, origin).map_err(|source| Error::Read {
            path: origin.to_string(),
            source: Box::new(source),
        })?;
        Ok(link(std::slice::from_ref(&o))?)
    }

    /// Reads an object file and links it on its own.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Image, Error> {
        link_files(&[path])
    }
}
