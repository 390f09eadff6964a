//! [`MapAccess`] for deployed kernel maps: found through the state file,
//! opened from their pins, typed by the descriptions recorded at deploy
//! time (or by their sizes for older state files).

use super::access::{is_per_cpu, no_such_key_bytes, Entry, MapAccess, MapError, MapInfo};
use super::types::ValueType;
use nfkit_abi::AttachPoint;
use nfkit_kernel::deploy::{self as kdeploy, MapRecord, Paths};
use nfkit_kernel::KMap;
use nfkit_object::MapType;

/// A kernel map with its types: a deployed one (typed by its record) or
/// one of a program loaded for a test run (typed by the Image).
pub struct KernelMap {
    map: KMap,
    info: MapInfo,
}

impl KernelMap {
    /// `map`, typed by `info`.
    pub fn new(map: KMap, info: MapInfo) -> KernelMap {
        KernelMap { map, info }
    }

    /// The deployed map `name` (on `dev`, at `hook`, when it is deployed
    /// on several).
    pub fn find(
        paths: &Paths,
        name: &str,
        dev: Option<&str>,
        hook: Option<AttachPoint>,
    ) -> Result<KernelMap, MapError> {
        let (_, rec, map) = kdeploy::find_map_at(paths, name, dev, hook)?;
        Ok(KernelMap::from_record(&rec, map))
    }

    /// The map `map` recorded as `rec`.
    pub fn from_record(rec: &MapRecord, map: KMap) -> KernelMap {
        let info = info_of(rec, map.map_type());
        KernelMap { map, info }
    }
}

/// A recorded type description, if it reads back and has the size.
fn recorded(desc: Option<&str>, name: Option<&str>, size: u32) -> ValueType {
    desc.and_then(|d| serde_json::from_str::<ValueType>(d).ok())
        .filter(|t| t.size() == size)
        .unwrap_or_else(|| match name {
            Some(n) if n.starts_with("__be") && matches!(size, 2 | 4 | 8) => {
                ValueType::BeInt { size }
            }
            _ => ValueType::from_size(size),
        })
}

/// The key and value types of a recorded map (as [`MapAccess::info`]
/// gives them, without opening the map).
pub fn record_types(rec: &MapRecord) -> (ValueType, ValueType) {
    let key = recorded(
        rec.key_desc.as_deref(),
        rec.key_type.as_deref(),
        rec.key_size,
    );
    let value = recorded(
        rec.value_desc.as_deref(),
        rec.value_type.as_deref(),
        rec.value_size,
    );
    (key, value)
}

fn info_of(rec: &MapRecord, t: MapType) -> MapInfo {
    let (key, value) = record_types(rec);
    MapInfo {
        name: rec.name.clone(),
        map_type: rec.map_type.clone(),
        key_size: rec.key_size,
        value_size: rec.value_size,
        max_entries: rec.max_entries,
        per_cpu: is_per_cpu(t),
        is_array: matches!(t, MapType::Array | MapType::PercpuArray),
        key,
        value,
    }
}

impl MapAccess for KernelMap {
    fn info(&self) -> &MapInfo {
        &self.info
    }

    fn now_ns(&self) -> Option<u64> {
        Some(nfkit_kernel::monotonic_ns())
    }

    fn entries(&self) -> Result<Vec<Entry>, MapError> {
        kmap_entries(&self.map)
    }

    fn lookup(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, MapError> {
        kmap_lookup(&self.map, key)
    }

    fn update(&self, key: &[u8], value: &[u8]) -> Result<(), MapError> {
        kmap_update(&self.map, key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        kmap_delete(&self.map, &self.info, key)
    }
}

fn kmap_entries(map: &KMap) -> Result<Vec<Entry>, MapError> {
    let mut out = Vec::new();
    for k in map.keys() {
        if let Some(v) = kmap_lookup(map, &k)? {
            out.push((k, v));
        }
    }
    Ok(out)
}

fn kmap_lookup(map: &KMap, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, MapError> {
    Ok(if map.is_percpu() {
        map.lookup_percpu(key)?
    } else {
        map.lookup(key)?.map(|v| vec![v])
    })
}

fn kmap_update(map: &KMap, key: &[u8], value: &[u8]) -> Result<(), MapError> {
    if map.is_percpu() {
        let n = nfkit_kernel::possible_cpus()?;
        map.update_percpu(key, &vec![value.to_vec(); n], 0)?;
    } else {
        map.update(key, value, 0)?;
    }
    Ok(())
}

fn kmap_delete(map: &KMap, info: &MapInfo, key: &[u8]) -> Result<(), MapError> {
    // Absent keys are told apart first: the kernel's ENOENT would come
    // wrapped in OS error text.
    if kmap_lookup(map, key)?.is_none() {
        return Err(no_such_key_bytes(info, key));
    }
    map.delete(key)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_state_files_load_and_type_maps_by_size() {
        let old = r#"{"name": "seen", "pin": "/sys/fs/bpf/x", "map_type": "Hash",
            "key_size": 4, "value_size": 16, "max_entries": 8,
            "key_type": null, "value_type": "__be32"}"#;
        let rec: MapRecord = serde_json::from_str(old).unwrap();
        assert_eq!(rec.key_desc, None);
        let (k, v) = record_types(&rec);
        assert_eq!((k, v), (ValueType::uint(4), ValueType::Bytes { size: 16 }));
        let rec = MapRecord {
            key_desc: serde_json::to_string(&ValueType::Ipv4).ok(),
            ..rec
        };
        assert_eq!(record_types(&rec).0, ValueType::Ipv4);
    }
}
