//! Maps and BTF of the objects merged: declared maps by name, global
//! data sections concatenated, BTF ids remapped.

use crate::btf::{Btf, MergeMap};
use crate::error::LinkError;
use crate::image::{MapKind, MapSpec};
use crate::object::Object;

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

/// The Image's maps, merged from the objects' maps.
pub(super) struct MergedMaps {
    pub(super) maps: Vec<MapSpec>,
    /// The object each map of `maps` first came from.
    pub(super) origin: Vec<usize>,
    /// Per object, per object map: (image map index, offset shift of the
    /// object's part of a concatenated data section).
    pub(super) index: Vec<Vec<(usize, u32)>>,
}

/// Merges the objects' maps: declared maps by name (same definition
/// required), global data sections of one name concatenated.
pub(super) fn merge_maps(objects: &[Object]) -> Result<MergedMaps, LinkError> {
    let mut merged = MergedMaps {
        maps: Vec::new(),
        origin: Vec::new(),
        index: Vec::new(),
    };
    for (oi, o) in objects.iter().enumerate() {
        let mut idx = Vec::with_capacity(o.maps.len());
        for m in &o.maps {
            idx.push(match &m.kind {
                MapKind::Declared => merged.add_declared(objects, oi, m)?,
                MapKind::Global { section, .. } => merged.add_global(oi, m, section)?,
            });
        }
        merged.index.push(idx);
    }
    Ok(merged)
}

impl MergedMaps {
    /// A new map from object `oi`; returns its (index, shift).
    fn push(&mut self, oi: usize, m: &MapSpec) -> (usize, u32) {
        self.maps.push(m.clone());
        self.origin.push(oi);
        (self.maps.len() - 1, 0)
    }

    /// Declared map `m` of object `oi`: one already declared with its name
    /// and definition, or a new one.
    fn add_declared(
        &mut self,
        objects: &[Object],
        oi: usize,
        m: &MapSpec,
    ) -> Result<(usize, u32), LinkError> {
        let found = self
            .maps
            .iter()
            .position(|x| x.kind == MapKind::Declared && x.name == m.name);
        match found {
            Some(i) if same_def(&self.maps[i], m) => Ok((i, 0)),
            Some(i) => Err(LinkError::MapMismatch {
                name: m.name.clone(),
                first: objects[self.origin[i]].origin.clone(),
                second: objects[oi].origin.clone(),
                first_def: map_def(&self.maps[i]),
                second_def: map_def(m),
            }),
            None => Ok(self.push(oi, m)),
        }
    }

    /// Global-data map `m` of object `oi`: appended (8-byte aligned) to
    /// the map of the same section, or a new one.
    fn add_global(
        &mut self,
        oi: usize,
        m: &MapSpec,
        section: &str,
    ) -> Result<(usize, u32), LinkError> {
        let found = self
            .maps
            .iter()
            .position(|x| matches!(&x.kind, MapKind::Global { section: s, .. } if s == section));
        let Some(i) = found else {
            return Ok(self.push(oi, m));
        };
        let target = &mut self.maps[i];
        let shift = target.value_size.div_ceil(DATA_ALIGN) * DATA_ALIGN;
        let size = u64::from(shift) + u64::from(m.value_size);
        if size > u64::from(u32::MAX) {
            return Err(LinkError::DataTooLarge {
                section: section.to_string(),
                size,
            });
        }
        let mut data = target.data.take().unwrap_or_default();
        data.resize(shift as usize, 0);
        data.extend_from_slice(m.data.as_deref().unwrap_or(&[]));
        data.resize(size as usize, 0);
        target.data = Some(data);
        target.value_size = size as u32;
        Ok((i, shift))
    }

    /// Points the maps' BTF ids into the merged BTF: key and value types
    /// of declared maps remapped, global data typed by its `DATASEC`.
    pub(super) fn retype(&mut self, btf: Option<&Btf>, btf_maps: &[Option<MergeMap>]) {
        for (i, m) in self.maps.iter_mut().enumerate() {
            let oi = self.origin[i];
            let remap = |id: Option<u32>| match (&btf_maps[oi], id) {
                (Some(mm), Some(id)) => Some(mm.map(id)),
                _ => None,
            };
            match &m.kind {
                MapKind::Declared => {
                    m.key_type_id = remap(m.key_type_id);
                    m.value_type_id = remap(m.value_type_id);
                    if let Some(inner) = m.inner.as_mut() {
                        let t = &mut inner.template;
                        t.key_type_id = remap(t.key_type_id);
                        t.value_type_id = remap(t.value_type_id);
                    }
                }
                MapKind::Global { section, .. } => {
                    m.key_type_id = None;
                    m.value_type_id = btf.and_then(|b| b.find_datasec(section));
                }
            }
        }
    }
}

/// Merges the objects' BTF (each object's `DATASEC` offsets shifted like
/// its part of the data sections); returns it and each object's id map.
pub(super) fn merge_btf(
    objects: &[Object],
    maps: &MergedMaps,
) -> (Option<Btf>, Vec<Option<MergeMap>>) {
    let mut btf: Option<Btf> = None;
    let mut btf_maps: Vec<Option<MergeMap>> = Vec::with_capacity(objects.len());
    for (oi, o) in objects.iter().enumerate() {
        let Some(ob) = &o.btf else {
            btf_maps.push(None);
            continue;
        };
        let base = btf.get_or_insert_with(Btf::new);
        let shifts = &maps.index[oi];
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
    (btf, btf_maps)
}
