//! Maps of an Image as ELF sections: declared maps as BTF-defined `.maps`
//! entries (the Image's own definitions when they still describe the map,
//! otherwise new `__uint`/`__type` definitions), global-data maps as their
//! sections again; plus the BTF types the writer synthesises.

use super::elf_out::{OutElf, OutSection, OutSymbol};
use super::unsupported;
use crate::btf::{Btf, Kind, Linkage, Member, Param, SecVar, Type, VarSecinfo, INT_SIGNED};
use crate::error::WriteError;
use crate::image::{Image, MapKind, MapSpec, MapType};
use crate::read::btf_map_def;
use object::elf;

/// Where a map of the Image went.
enum MapOut {
    Declared {
        symbol: usize,
        section: usize,
        offset: u64,
        values_off: Option<u64>,
    },
    Global {
        section: usize,
    },
}

/// The output places of the Image's maps (same indices as `Image::maps`).
pub(super) struct MapsLayout {
    maps: Vec<MapOut>,
}

impl MapsLayout {
    /// The symbol of declared map `map` (an `lddw` map index).
    pub fn declared_symbol(&self, map: i32) -> Option<usize> {
        match self.maps.get(usize::try_from(map).ok()?)? {
            MapOut::Declared { symbol, .. } => Some(*symbol),
            MapOut::Global { .. } => None,
        }
    }

    /// The output section of global-data map `map`.
    pub fn global_section(&self, map: i32) -> Option<usize> {
        match self.maps.get(usize::try_from(map).ok()?)? {
            MapOut::Global { section } => Some(*section),
            MapOut::Declared { .. } => None,
        }
    }

    /// Section and byte offset of slot `slot` of the `values` array of
    /// prog array `map`.
    pub fn values_slot(&self, map: usize, slot: u32) -> Option<(usize, u64)> {
        match self.maps.get(map)? {
            MapOut::Declared {
                section,
                offset,
                values_off: Some(v),
                ..
            } => Some((*section, offset + v + u64::from(slot) * 8)),
            _ => None,
        }
    }
}

/// The id of a type equal to `t`, adding it when there is none.
pub(super) fn intern(btf: &mut Btf, t: Type) -> u32 {
    match btf.types().iter().skip(1).position(|x| *x == t) {
        Some(i) => i as u32 + 1,
        None => btf.add(t),
    }
}

fn int(btf: &mut Btf, name: &str, size: u32, signed: bool) -> u32 {
    intern(
        btf,
        Type::new(
            name,
            Kind::Int {
                size,
                encoding: if signed { INT_SIGNED } else { 0 },
                offset: 0,
                bits: (size * 8) as u8,
            },
        ),
    )
}

/// `int (*)[value]`: how `__uint(name, value)` encodes an integer.
fn uint_field(btf: &mut Btf, value: u32) -> u32 {
    let elem = int(btf, "int", 4, true);
    let index = int(btf, "__ARRAY_SIZE_TYPE__", 4, false);
    let arr = intern(
        btf,
        Type::new(
            "",
            Kind::Array {
                elem,
                index,
                nelems: value,
            },
        ),
    );
    intern(btf, Type::new("", Kind::Ptr { ty: arr }))
}

/// A FUNC_PROTO for a function the Image has no BTF for: entry programs
/// get `int (void *ctx)` (the kernel types the main program's context
/// itself), static functions `long (void)` (the verifier follows their
/// callers' registers and does not check their prototype).
pub(super) fn synth_proto(btf: &mut Btf, is_entry: bool) -> u32 {
    if is_entry {
        let ret = int(btf, "int", 4, true);
        let ctx = intern(btf, Type::new("", Kind::Ptr { ty: 0 }));
        intern(
            btf,
            Type::new(
                "",
                Kind::FuncProto {
                    ret,
                    params: vec![Param {
                        name: "ctx".into(),
                        ty: ctx,
                    }],
                },
            ),
        )
    } else {
        let ret = int(btf, "long", 8, true);
        intern(
            btf,
            Type::new(
                "",
                Kind::FuncProto {
                    ret,
                    params: Vec::new(),
                },
            ),
        )
    }
}

/// A new BTF map definition struct for `m`; returns (struct id, byte
/// offset of `values` when `with_values`).
fn synth_def(btf: &mut Btf, m: &MapSpec, with_values: bool) -> (u32, Option<u64>) {
    let mut fields: Vec<(&str, u32)> = vec![("type", uint_field(btf, m.map_type.kernel_id()))];
    match m.key_type_id {
        Some(t) => fields.push(("key", intern(btf, Type::new("", Kind::Ptr { ty: t })))),
        None => fields.push(("key_size", uint_field(btf, m.key_size))),
    }
    match m.value_type_id {
        Some(t) => fields.push(("value", intern(btf, Type::new("", Kind::Ptr { ty: t })))),
        None => fields.push(("value_size", uint_field(btf, m.value_size))),
    }
    fields.push(("max_entries", uint_field(btf, m.max_entries)));
    if m.flags != 0 {
        fields.push(("map_flags", uint_field(btf, m.flags)));
    }
    if m.pin_by_name {
        fields.push(("pinning", uint_field(btf, 1)));
    }
    let mut members: Vec<Member> = fields
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| Member {
            name: (*name).to_string(),
            ty: *ty,
            bit_offset: i as u32 * 64,
            bitfield_size: 0,
        })
        .collect();
    let mut values_off = None;
    if with_values {
        let ret = int(btf, "int", 4, true);
        let proto = intern(
            btf,
            Type::new(
                "",
                Kind::FuncProto {
                    ret,
                    params: Vec::new(),
                },
            ),
        );
        let ptr = intern(btf, Type::new("", Kind::Ptr { ty: proto }));
        let index = int(btf, "__ARRAY_SIZE_TYPE__", 4, false);
        let arr = intern(
            btf,
            Type::new(
                "",
                Kind::Array {
                    elem: ptr,
                    index,
                    nelems: 0,
                },
            ),
        );
        let off = members.len() as u64 * 8;
        members.push(Member {
            name: "values".into(),
            ty: arr,
            bit_offset: off as u32 * 8,
            bitfield_size: 0,
        });
        values_off = Some(off);
    }
    let size = fields.len() as u32 * 8;
    (
        btf.add(Type::new("", Kind::Struct { size, members })),
        values_off,
    )
}

/// True when the Image's definition `var_ty` still reads back as `m`.
fn def_matches(btf: &Btf, m: &MapSpec, var_ty: u32, need_values: bool) -> Option<Option<u64>> {
    let (spec, values) = btf_map_def(btf, &m.name, var_ty).ok()?;
    let same = spec.map_type == m.map_type
        && spec.key_size == m.key_size
        && spec.value_size == m.value_size
        && spec.max_entries == m.max_entries
        && spec.flags == m.flags
        && spec.pin_by_name == m.pin_by_name
        && spec.key_type_id == m.key_type_id
        && spec.value_type_id == m.value_type_id;
    (same && (values.is_some() || !need_values)).then_some(values)
}

/// Section names libbpf (and our reader) take as global data.
pub(super) fn is_global_data(name: &str) -> bool {
    let prefixed = |p: &str| name == p || name.strip_prefix(p).is_some_and(|r| r.starts_with('.'));
    prefixed(".rodata") || prefixed(".data") || prefixed(".bss")
}

/// Adds `.maps` (with its `DATASEC` in `btf`) and the global-data sections.
pub(super) fn layout_maps(
    image: &Image,
    btf: &mut Btf,
    out: &mut OutElf,
) -> Result<MapsLayout, WriteError> {
    let mut places: Vec<Option<MapOut>> = image.maps.iter().map(|_| None).collect();
    declared_maps(image, btf, out, &mut places)?;
    for (mi, m) in image.maps.iter().enumerate() {
        if let MapKind::Global { section, read_only } = &m.kind {
            let section = global_data_section(out, m, section, *read_only)?;
            places[mi] = Some(MapOut::Global { section });
        }
    }
    let maps = places
        .into_iter()
        .map(|p| p.ok_or_else(|| WriteError::Elf("a map was not placed".into())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MapsLayout { maps })
}

/// Adds `.maps` with a symbol and a `DATASEC` variable for each declared
/// map (8-byte aligned), placing them in `places`.
fn declared_maps(
    image: &Image,
    btf: &mut Btf,
    out: &mut OutElf,
    places: &mut [Option<MapOut>],
) -> Result<(), WriteError> {
    let declared: Vec<usize> = image
        .maps
        .iter()
        .enumerate()
        .filter(|(_, m)| m.kind == MapKind::Declared)
        .map(|(i, _)| i)
        .collect();
    if declared.is_empty() {
        return Ok(());
    }
    let old_vars = btf.datasec_vars(".maps");
    let sec = out.add_section(OutSection {
        name: ".maps".into(),
        sh_type: elf::SHT_PROGBITS,
        flags: u64::from(elf::SHF_ALLOC | elf::SHF_WRITE),
        align: 8,
        data: Vec::new(),
        nobits_size: 0,
        rels: Vec::new(),
    });
    let mut vars = Vec::with_capacity(declared.len());
    let mut offset = 0u64;
    for &mi in &declared {
        let m = &image.maps[mi];
        let def = map_definition(image, btf, mi, &old_vars)?;
        offset = offset.div_ceil(8) * 8;
        let too_big = || unsupported(format!("map '{}'", m.name), ".maps is over 4 GiB");
        vars.push(VarSecinfo {
            ty: def.var,
            offset: u32::try_from(offset).map_err(|_| too_big())?,
            size: u32::try_from(def.size).map_err(|_| too_big())?,
        });
        let symbol = out.add_symbol(OutSymbol {
            name: m.name.clone(),
            section: Some(sec),
            value: offset,
            size: def.size,
            st_type: elf::STT_OBJECT,
            bind: elf::STB_GLOBAL,
        });
        places[mi] = Some(MapOut::Declared {
            symbol,
            section: sec,
            offset,
            values_off: def.values_off,
        });
        offset += def.size;
    }
    let total =
        u32::try_from(offset).map_err(|_| unsupported("section '.maps'", "it is over 4 GiB"))?;
    if let Some(s) = out.sections.get_mut(sec) {
        s.data = vec![0; total as usize];
    }
    let kind = Kind::Datasec { size: total, vars };
    match btf.find_datasec(".maps").and_then(|id| btf.get_mut(id)) {
        Some(t) => t.kind = kind,
        None => {
            btf.add(Type::new(".maps", kind));
        }
    }
    Ok(())
}

/// A declared map's definition in `.maps`.
struct MapDef {
    /// Its BTF `VAR`.
    var: u32,
    /// Bytes in `.maps` (with room for the initial `values`).
    size: u64,
    /// Byte offset of the `values` array (prog arrays with initial slots).
    values_off: Option<u64>,
}

/// The definition of declared map `mi`: the Image's own when it still
/// reads back as the map (among `old_vars`, the old `.maps` variables),
/// else a new one. Initial slots need a prog array that holds them.
fn map_definition(
    image: &Image,
    btf: &mut Btf,
    mi: usize,
    old_vars: &[SecVar],
) -> Result<MapDef, WriteError> {
    let m = &image.maps[mi];
    if m.inner.is_some() {
        return Err(unsupported(
            format!("map '{}'", m.name),
            "maps of maps are not written (their inner definition and slots)",
        ));
    }
    let last_init = image
        .map_inits
        .iter()
        .filter(|i| i.map == mi)
        .map(|i| u64::from(i.slot) + 1)
        .max();
    if let Some(n) = last_init.filter(|&n| n > u64::from(m.max_entries)) {
        return Err(unsupported(
            format!("map '{}'", m.name),
            format!(
                "initial slot {} is beyond max_entries {}",
                n - 1,
                m.max_entries
            ),
        ));
    }
    if last_init.is_some() && (m.map_type != MapType::ProgArray || m.value_size != 4) {
        return Err(unsupported(
            format!("map '{}'", m.name),
            "initial slots need a prog array with 4-byte values",
        ));
    }
    let reused = old_vars.iter().filter(|v| v.name == m.name).find_map(|v| {
        let values = def_matches(btf, m, v.ty, last_init.is_some())?;
        Some((v.var_id, v.size, values))
    });
    let (var, size, values_off) = match reused {
        Some((var, size, values)) => (var, u64::from(size), values),
        None => {
            let (st, values) = synth_def(btf, m, last_init.is_some());
            let size = u64::from(btf.size_of(st).unwrap_or(0));
            let var = btf.add(Type::new(
                m.name.clone(),
                Kind::Var {
                    ty: st,
                    linkage: Linkage::Global,
                },
            ));
            (var, size, values)
        }
    };
    let size = match (values_off, last_init) {
        (Some(v), Some(n)) => size.max(v + n * 8),
        _ => size,
    };
    Ok(MapDef {
        var,
        size,
        values_off,
    })
}

/// The section of global-data map `m` (`section`, NOBITS for `.bss*`);
/// returns its index in `out`.
fn global_data_section(
    out: &mut OutElf,
    m: &MapSpec,
    section: &str,
    read_only: bool,
) -> Result<usize, WriteError> {
    if !is_global_data(section) {
        return Err(unsupported(
            format!("global data map '{}'", m.name),
            format!("section '{section}' is not .rodata*, .data* or .bss*"),
        ));
    }
    if m.value_size == 0 {
        return Err(unsupported(
            format!("global data map '{}'", m.name),
            "it is empty (an ELF section of 0 bytes is no map)",
        ));
    }
    if out.sections.iter().any(|s| s.name == *section) {
        return Err(unsupported(
            format!("global data map '{}'", m.name),
            format!("a second map for section '{section}'"),
        ));
    }
    let size = u64::from(m.value_size);
    let bss = section.starts_with(".bss");
    let mut data = if bss {
        Vec::new()
    } else {
        m.data.clone().unwrap_or_default()
    };
    if !bss {
        data.resize(m.value_size as usize, 0);
    }
    let write = if read_only { 0 } else { elf::SHF_WRITE };
    Ok(out.add_section(OutSection {
        name: section.to_string(),
        sh_type: if bss {
            elf::SHT_NOBITS
        } else {
            elf::SHT_PROGBITS
        },
        flags: u64::from(elf::SHF_ALLOC | write),
        align: 8,
        data,
        nobits_size: if bss { size } else { 0 },
        rels: Vec::new(),
    }))
}
