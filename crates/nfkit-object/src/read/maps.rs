//! Map definitions: legacy `maps` (`struct bpf_map_def`, one per symbol),
//! BTF-defined `.maps` (read as libbpf does: `__uint` fields are pointers
//! to arrays whose length is the value, `__type` fields are pointers to
//! the key/value type), and global-data sections (`.rodata*`, `.data*`,
//! `.bss*`), each a single-entry array map named after its section.

use super::elf::{Elf, Section, SymKind, R_BPF_64_ABS64};
use super::notes::Notes;
use super::{err, MAX_DATA_SECTION};
use crate::btf::{Btf, Kind, Member};
use crate::error::{Location, ReadError, ReadErrorKind};
use crate::image::{InnerMaps, InnerSlot, MapKind, MapSpec, MapType};
use crate::object::{Binding, DataSymbol, FuncRef, ObjFunction, ObjMapInit};
use object::elf as e;
use std::collections::HashMap;

/// `BPF_F_RDONLY_PROG`: set on `.rodata` maps.
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;
/// `LIBBPF_PIN_BY_NAME`.
const PIN_BY_NAME: u32 = 1;

/// Where a declared map's definition lives.
pub(crate) struct DeclaredAt {
    pub section: usize,
    pub offset: u64,
    pub size: u64,
    /// Byte offset of the `values` array inside the definition.
    pub values_off: Option<u64>,
}

/// The maps of an object being read.
pub(crate) struct Maps {
    pub specs: Vec<MapSpec>,
    /// For `specs[i]` with `i < declared.len()`.
    pub declared: Vec<DeclaredAt>,
    pub global_by_section: HashMap<usize, usize>,
    pub data_symbols: Vec<DataSymbol>,
}

impl Maps {
    /// The declared map whose definition starts at `offset` of `section`.
    pub fn declared_at(&self, section: usize, offset: u64) -> Option<usize> {
        self.declared
            .iter()
            .position(|d| d.section == section && d.offset == offset)
    }
}

fn bad(loc: Location, msg: impl Into<String>) -> ReadError {
    err(loc, ReadErrorKind::BadMap(msg.into()))
}

pub(crate) fn is_global_data(name: &str) -> bool {
    let prefixed = |p: &str| name == p || name.strip_prefix(p).is_some_and(|r| r.starts_with('.'));
    prefixed(".rodata") || prefixed(".data") || prefixed(".bss")
}

fn binding(bind: u8) -> Binding {
    match bind {
        e::STB_LOCAL => Binding::Local,
        e::STB_WEAK => Binding::Weak,
        _ => Binding::Global,
    }
}

/// The object's maps; a map or section that cannot be read is refused or,
/// when tolerant, noted and left out (the others are still read).
pub(crate) fn read_maps(
    elf: &Elf<'_>,
    btf: Option<&Btf>,
    notes: &mut Notes,
) -> Result<Maps, ReadError> {
    let mut maps = Maps {
        specs: Vec::new(),
        declared: Vec::new(),
        global_by_section: HashMap::new(),
        data_symbols: Vec::new(),
    };
    for sec in &elf.sections {
        if sec.name == "maps" {
            notes.tolerate(legacy_maps(elf, sec, &mut maps))?;
        } else if sec.name == ".maps" {
            let r = btf_maps(elf, sec, btf, &mut maps, notes);
            notes.tolerate(r)?;
        }
    }
    for sec in &elf.sections {
        if is_global_data(&sec.name) && sec.is_alloc() && !sec.is_code() && sec.size > 0 {
            notes.tolerate(global_map(elf, sec, btf, &mut maps))?;
        }
    }
    for sec in &elf.sections {
        if let Some(name) = sec.name.strip_prefix(crate::initial::SECTION_PREFIX) {
            notes.tolerate(initial_contents(sec, name, &mut maps))?;
        }
    }
    Ok(maps)
}

/// A `.nfkit.init.NAME` section: the initial contents of declared map
/// NAME ([`crate::initial`]).
fn initial_contents(sec: &Section<'_>, name: &str, maps: &mut Maps) -> Result<(), ReadError> {
    let loc = Location::section(&sec.name);
    let Some(spec) = maps
        .specs
        .iter_mut()
        .find(|m| m.kind == MapKind::Declared && m.name == name)
    else {
        return Err(bad(
            loc,
            format!("initial contents of '{name}', which is not a declared map"),
        ));
    };
    crate::initial::check(spec, sec.data.len()).map_err(|why| bad(loc, why))?;
    spec.data = Some(sec.data.to_vec());
    Ok(())
}

/// Symbols naming maps in a maps section, by offset.
fn map_symbols<'e>(elf: &'e Elf<'_>, sec: &Section<'_>) -> Vec<&'e super::elf::Symbol> {
    let mut syms: Vec<_> = elf
        .symbols_in(sec.index)
        .map(|(_, s)| s)
        .filter(|s| matches!(s.kind, SymKind::Object | SymKind::NoType) && !s.name.is_empty())
        .collect();
    syms.sort_by_key(|s| s.value);
    syms
}

fn legacy_maps(elf: &Elf<'_>, sec: &Section<'_>, maps: &mut Maps) -> Result<(), ReadError> {
    let syms = map_symbols(elf, sec);
    if syms.is_empty() {
        return Ok(());
    }
    let default_size = sec.size / syms.len() as u64;
    for s in syms {
        let loc = Location::at(&sec.name, s.value).with_symbol(&s.name);
        let size = if s.size != 0 { s.size } else { default_size };
        if size < 16 {
            return Err(bad(
                loc,
                format!("definition is {size} bytes, struct bpf_map_def needs at least 16"),
            ));
        }
        let def = usize::try_from(s.value)
            .ok()
            .zip(usize::try_from(size).ok())
            .and_then(|(o, n)| sec.data.get(o..o.checked_add(n)?))
            .ok_or_else(|| bad(loc.clone(), "definition is outside the section"))?;
        let word = |i: usize| -> u32 {
            def.get(i * 4..i * 4 + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .unwrap_or(0)
        };
        if def.iter().skip(20).any(|&b| b != 0) {
            return Err(bad(
                loc,
                "fields after map_flags (inner map, NUMA node, pinning) are not supported",
            ));
        }
        let map_type = MapType::from_kernel_id(word(0))
            .ok_or_else(|| bad(loc.clone(), format!("unknown map type {}", word(0))))?;
        maps.specs.push(MapSpec {
            name: s.name.clone(),
            kind: MapKind::Declared,
            map_type,
            key_size: word(1),
            value_size: word(2),
            max_entries: word(3),
            flags: word(4),
            key_type_id: None,
            value_type_id: None,
            data: None,
            pin_by_name: false,
            inner: None,
        });
        maps.declared.push(DeclaredAt {
            section: sec.index,
            offset: s.value,
            size,
            values_off: None,
        });
    }
    Ok(())
}

fn btf_maps(
    elf: &Elf<'_>,
    sec: &Section<'_>,
    btf: Option<&Btf>,
    maps: &mut Maps,
    notes: &mut Notes,
) -> Result<(), ReadError> {
    let Some(btf) = btf else {
        if map_symbols(elf, sec).is_empty() {
            return Ok(());
        }
        return Err(bad(
            Location::section(&sec.name),
            "BTF-defined maps need a .BTF section (compile with -g)",
        ));
    };
    let vars = btf.datasec_vars(".maps");
    for v in vars {
        let sym = elf
            .symbols_in(sec.index)
            .find(|(_, s)| s.name == v.name)
            .map(|(_, s)| s);
        let offset = sym.map(|s| s.value).unwrap_or(v.offset as u64);
        let loc = Location::at(".maps", offset).with_symbol(&v.name);
        let def = btf_map_def(btf, &v.name, v.ty).map_err(|m| bad(loc, m));
        let Some((spec, values_off)) = notes.tolerate(def)? else {
            continue;
        };
        maps.specs.push(spec);
        maps.declared.push(DeclaredAt {
            section: sec.index,
            offset,
            size: u64::from(v.size),
            values_off,
        });
    }
    Ok(())
}

/// The integer of a `__uint(name, val)` field: `int (*name)[val]`.
fn uint_field(btf: &Btf, ty: u32, field: &str) -> Result<u32, String> {
    let p = btf.strip(ty).map_err(|e| e.to_string())?;
    let Some(Kind::Ptr { ty: arr }) = btf.get(p).map(|t| &t.kind) else {
        return Err(format!(
            "field '{field}' is not a pointer to an array (__uint)"
        ));
    };
    let a = btf.strip(*arr).map_err(|e| e.to_string())?;
    match btf.get(a).map(|t| &t.kind) {
        Some(Kind::Array { nelems, .. }) => Ok(*nelems),
        _ => Err(format!(
            "field '{field}' is not a pointer to an array (__uint)"
        )),
    }
}

/// The type of a `__type(name, T)` field: `T *name`.
fn type_field(btf: &Btf, ty: u32, field: &str) -> Result<(u32, u32), String> {
    let p = btf.strip(ty).map_err(|e| e.to_string())?;
    let Some(Kind::Ptr { ty: target }) = btf.get(p).map(|t| &t.kind) else {
        return Err(format!("field '{field}' is not a pointer (__type)"));
    };
    let size = btf
        .size_of(*target)
        .map_err(|e| format!("field '{field}': {e}"))?;
    Ok((*target, size))
}

/// The fields of a BTF map definition read so far.
#[derive(Default)]
struct DefFields {
    map_type: Option<MapType>,
    key_size: Option<u32>,
    value_size: Option<u32>,
    key_type: Option<u32>,
    value_type: Option<u32>,
    max_entries: u32,
    flags: u32,
    pinning: u32,
    values_off: Option<u64>,
    /// `__array(values, struct inner)`: the inner map definition.
    inner: Option<MapSpec>,
}

impl DefFields {
    /// Reads member `m` (`last`: the struct's last member).
    fn read(&mut self, btf: &Btf, m: &Member, last: bool) -> Result<(), String> {
        let f = m.name.as_str();
        match f {
            "type" => {
                let t = uint_field(btf, m.ty, f)?;
                self.map_type =
                    Some(MapType::from_kernel_id(t).ok_or(format!("unknown map type {t}"))?);
            }
            "max_entries" => self.max_entries = uint_field(btf, m.ty, f)?,
            "map_flags" => self.flags = uint_field(btf, m.ty, f)?,
            "pinning" => self.pinning = uint_field(btf, m.ty, f)?,
            "numa_node" | "map_extra" => {
                if uint_field(btf, m.ty, f)? != 0 {
                    return Err(format!("field '{f}' is not supported"));
                }
            }
            "key_size" => self.key_size = Some(uint_field(btf, m.ty, f)?),
            "value_size" => self.value_size = Some(uint_field(btf, m.ty, f)?),
            "key" => {
                let (t, s) = type_field(btf, m.ty, f)?;
                if self.key_size.is_some_and(|k| k != s) {
                    return Err(format!(
                        "key_size {} disagrees with key type size {s}",
                        self.key_size.unwrap_or(0)
                    ));
                }
                self.key_type = Some(t);
                self.key_size = Some(s);
            }
            "value" => {
                let (t, s) = type_field(btf, m.ty, f)?;
                if self.value_size.is_some_and(|v| v != s) {
                    return Err(format!(
                        "value_size {} disagrees with value type size {s}",
                        self.value_size.unwrap_or(0)
                    ));
                }
                self.value_type = Some(t);
                self.value_size = Some(s);
            }
            "values" => {
                if !last {
                    return Err("'values' must be the last field".into());
                }
                if !m.bit_offset.is_multiple_of(8) {
                    return Err("'values' is not byte aligned".into());
                }
                self.values_off = Some(u64::from(m.bit_offset / 8));
                self.inner = inner_def(btf, m.ty)?;
            }
            other => return Err(format!("unknown map definition field '{other}'")),
        }
        Ok(())
    }

    /// Initial `values` are only for prog arrays (4-byte values, keys 4
    /// bytes unless given).
    fn check_values(&mut self, map_type: MapType) -> Result<(), String> {
        if self.values_off.is_none() {
            return Ok(());
        }
        match map_type {
            MapType::ProgArray => {
                if self.value_size.is_some_and(|v| v != 4) {
                    return Err("a prog array's value_size must be 4".into());
                }
                self.value_size = Some(4);
                self.key_size = Some(self.key_size.unwrap_or(4));
                Ok(())
            }
            MapType::ArrayOfMaps | MapType::HashOfMaps => {
                if self.inner.is_none() {
                    return Err("'values' of a map of maps must be pointers to a map definition (__array(values, struct ...))".into());
                }
                if self.value_size.is_some_and(|v| v != 4) {
                    return Err("a map of maps' value_size must be 4".into());
                }
                self.value_size = Some(4);
                self.key_size = Some(self.key_size.unwrap_or(4));
                Ok(())
            }
            t => Err(format!(
                "'values' is only valid for prog arrays, not {}",
                t.name()
            )),
        }
    }
}

/// The inner map definition of `values` (`struct inner *values[]`), when
/// its elements point to a struct; `None` for prog arrays' function
/// pointers.
fn inner_def(btf: &Btf, ty: u32) -> Result<Option<MapSpec>, String> {
    let a = btf.strip(ty).map_err(|e| e.to_string())?;
    let Some(Kind::Array { elem, .. }) = btf.get(a).map(|t| &t.kind) else {
        return Err("'values' is not an array".into());
    };
    let p = btf.strip(*elem).map_err(|e| e.to_string())?;
    let Some(Kind::Ptr { ty: target }) = btf.get(p).map(|t| &t.kind) else {
        return Err("'values' is not an array of pointers".into());
    };
    let t = btf.strip(*target).map_err(|e| e.to_string())?;
    if !matches!(btf.get(t).map(|t| &t.kind), Some(Kind::Struct { .. })) {
        return Ok(None);
    }
    let name = btf
        .get(t)
        .map(|x| x.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "inner".to_string());
    let (spec, values) =
        btf_map_def(btf, &name, t).map_err(|e| format!("inner map definition: {e}"))?;
    if values.is_some() {
        return Err("inner map definition: maps of maps of maps are not supported".into());
    }
    Ok(Some(spec))
}

/// Reads one BTF map definition (the struct type of a `.maps` variable).
/// Returns the spec and the byte offset of its `values` array, if any.
pub(crate) fn btf_map_def(
    btf: &Btf,
    name: &str,
    ty: u32,
) -> Result<(MapSpec, Option<u64>), String> {
    let members = btf.members(ty).map_err(|e| e.to_string())?.to_vec();
    let mut d = DefFields::default();
    for (i, m) in members.iter().enumerate() {
        d.read(btf, m, i + 1 == members.len())?;
    }
    let map_type = d.map_type.ok_or("no map type (__uint(type, ...))")?;
    if matches!(map_type, MapType::ArrayOfMaps | MapType::HashOfMaps) && d.values_off.is_none() {
        return Err(
            "a map of maps needs its inner map definition (__array(values, struct ...))".into(),
        );
    }
    d.check_values(map_type)?;
    let inner = d.inner.take().map(|template| {
        Box::new(InnerMaps {
            template,
            slots: Vec::new(),
        })
    });
    if d.pinning > PIN_BY_NAME {
        return Err(format!(
            "pinning {} is not supported (0 or LIBBPF_PIN_BY_NAME)",
            d.pinning
        ));
    }
    Ok((
        MapSpec {
            name: name.to_string(),
            kind: MapKind::Declared,
            map_type,
            key_size: d.key_size.unwrap_or(0),
            value_size: d.value_size.unwrap_or(0),
            max_entries: d.max_entries,
            flags: d.flags,
            key_type_id: d.key_type,
            value_type_id: d.value_type,
            data: None,
            pin_by_name: d.pinning == PIN_BY_NAME,
            inner,
        },
        d.values_off,
    ))
}

fn global_map(
    elf: &Elf<'_>,
    sec: &Section<'_>,
    btf: Option<&Btf>,
    maps: &mut Maps,
) -> Result<(), ReadError> {
    let loc = Location::section(&sec.name);
    if sec.size > MAX_DATA_SECTION {
        return Err(bad(
            loc,
            format!("{} bytes of global data is too large", sec.size),
        ));
    }
    let data = if sec.sh_type == e::SHT_NOBITS {
        vec![0u8; sec.size as usize]
    } else {
        sec.data.to_vec()
    };
    let read_only = sec.name.starts_with(".rodata");
    let idx = maps.specs.len();
    maps.specs.push(MapSpec {
        name: sec.name.clone(),
        kind: MapKind::Global {
            section: sec.name.clone(),
            read_only,
        },
        map_type: MapType::Array,
        key_size: 4,
        value_size: data.len() as u32,
        max_entries: 1,
        flags: if read_only { BPF_F_RDONLY_PROG } else { 0 },
        key_type_id: None,
        value_type_id: btf.and_then(|b| b.find_datasec(&sec.name)),
        data: Some(data),
        pin_by_name: false,
        inner: None,
    });
    maps.global_by_section.insert(sec.index, idx);
    for (_, s) in elf.symbols_in(sec.index) {
        if s.kind != SymKind::Object || s.is_local() || s.name.is_empty() {
            continue;
        }
        maps.data_symbols.push(DataSymbol {
            name: s.name.clone(),
            map: idx,
            offset: s.value as u32,
            size: s.size as u32,
            binding: binding(s.bind),
        });
    }
    Ok(())
}

/// Prog array contents from `__array(values, ...)` initialisers: the
/// `R_BPF_64_ABS64` relocations of `.maps`. Those of maps of maps name
/// declared maps: they become the outer map's initial slots.
pub(crate) fn read_map_inits(
    elf: &Elf<'_>,
    maps: &mut Maps,
    functions: &[ObjFunction],
) -> Result<Vec<ObjMapInit>, ReadError> {
    let mut out = Vec::new();
    for sec in elf
        .sections
        .iter()
        .filter(|s| s.name == ".maps" || s.name == "maps")
    {
        for r in &sec.rels {
            let sym = &elf.symbols[r.sym];
            let loc = Location::at(&sec.name, r.offset).with_symbol(&sym.name);
            if r.rtype != R_BPF_64_ABS64 {
                return Err(err(loc, ReadErrorKind::RelocationType(r.rtype)));
            }
            let found = maps.declared.iter().enumerate().find(|(_, d)| {
                d.section == sec.index
                    && r.offset >= d.offset
                    && r.offset < d.offset + d.size.max(1)
            });
            let Some((map, d)) = found else {
                return Err(bad(loc, "relocation outside every map definition"));
            };
            let Some(values) = d.values_off else {
                return Err(bad(loc, "relocation in a map definition without 'values'"));
            };
            let rel = r.offset - d.offset;
            if rel < values || (rel - values) % 8 != 0 {
                return Err(bad(loc, "relocation is not on a 'values' slot"));
            }
            let slot = ((rel - values) / 8) as u32;
            if slot >= maps.specs[map].max_entries {
                return Err(bad(loc, format!("slot {slot} is beyond max_entries")));
            }
            if maps.specs[map].inner.is_some() {
                let inner = sym
                    .section
                    .and_then(|s| maps.declared_at(s, sym.value))
                    .map(|i| maps.specs[i].name.clone())
                    .ok_or_else(|| bad(loc.clone(), "map of maps value is not a declared map"))?;
                if let Some(im) = maps.specs[map].inner.as_mut() {
                    im.slots.push(InnerSlot { slot, map: inner });
                }
                continue;
            }
            let target_sec = sym.section.map(|s| elf.section_name(s).to_string());
            let func = functions.iter().position(|f| {
                Some(&f.section) == target_sec.as_ref()
                    && (f.section_slot as u64) * 8 == sym.value
                    && f.prog_type.is_some()
            });
            let target = match func {
                Some(i) => FuncRef::Index(i),
                None if sym.section.is_none() && !sym.name.is_empty() => {
                    FuncRef::Named(sym.name.clone())
                }
                None => return Err(bad(loc, "prog array value is not a program of this object")),
            };
            out.push(ObjMapInit { map, slot, target });
        }
    }
    Ok(out)
}
