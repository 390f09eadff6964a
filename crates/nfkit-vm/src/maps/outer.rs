//! Maps of maps (`array_of_maps`, `hash_of_maps`): each slot holds the
//! index of a map of the VM (in the Image's map table) whose definition
//! matches the outer map's inner template, as the kernel checks an inner
//! map fd against its `inner_map_fd`. A program's lookup gives the inner
//! map's handle, which the map helpers take like any map pointer.

#![forbid(unsafe_code)]

use super::{hash, MapError};
use nfkit_object::{MapSpec, MapType};

/// The slots of a map of maps.
#[derive(Debug)]
pub struct OuterMap {
    /// Key -> inner map index (4-byte values), index-keyed for arrays.
    pub slots: hash::HashMap,
    /// Indices of the maps that may be put in a slot.
    pub allowed: Vec<u32>,
}

/// Whether map `m` fits template `t` as the kernel's `bpf_map_meta_equal`
/// requires: same type, key and value size, flags and (unless the
/// template says `BPF_F_INNER_MAP`) maximum entries.
pub fn fits(t: &MapSpec, m: &MapSpec) -> bool {
    const BPF_F_INNER_MAP: u32 = 1 << 12;
    t.map_type == m.map_type
        && t.key_size == m.key_size
        && t.value_size == m.value_size
        && t.flags == m.flags
        && (t.flags & BPF_F_INNER_MAP != 0 || t.max_entries == m.max_entries)
}

impl OuterMap {
    pub fn new(spec: &MapSpec) -> Result<OuterMap, String> {
        if spec.value_size != 4 {
            return Err("a map of maps needs 4-byte values".into());
        }
        if spec.map_type == MapType::ArrayOfMaps && spec.key_size != 4 {
            return Err("an array of maps needs 4-byte keys".into());
        }
        if spec.inner.is_none() {
            return Err("a map of maps needs its inner map definition".into());
        }
        Ok(OuterMap {
            slots: hash::HashMap::new(spec, 1)?,
            allowed: Vec::new(),
        })
    }

    /// The inner map at `key`.
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let v = self.slots.read_all(key)?;
        Some(u32::from_le_bytes(v.get(..4)?.try_into().ok()?))
    }

    /// Puts map `inner` (an index of the VM's map table) at `key`.
    pub fn set(&self, key: &[u8], inner: &[u8], flags: u64) -> Result<(), MapError> {
        let b: [u8; 4] = inner.try_into().map_err(|_| {
            MapError::Invalid(format!("value is {} bytes, expected 4", inner.len()))
        })?;
        let i = u32::from_le_bytes(b);
        if !self.allowed.contains(&i) {
            return Err(MapError::Invalid(format!(
                "map #{i} does not match the inner map definition"
            )));
        }
        self.slots.update(key, &b, flags, None)
    }
}
