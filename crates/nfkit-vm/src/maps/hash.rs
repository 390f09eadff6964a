//! Keyed maps over a preallocated slab of value slots: hash, per-CPU hash,
//! LRU hash (least recently used entry evicted at capacity), LRU per-CPU
//! hash, the devmaps, cpumap and xskmap (devmap, cpumap and xskmap keys
//! are indices below `max_entries`).
//! The key index is behind a read-write lock; values live in one shared
//! VM buffer, slot `s` of CPU `c` at `(s * ncpus + c) * stride`.

#![forbid(unsafe_code)]

use super::{stride, KeyBuild, MapError, BPF_EXIST, BPF_NOEXIST};
use crate::mem::GuardedBuf;
use nfkit_object::{MapSpec, MapType};
use std::collections::HashMap as StdHashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[derive(Debug, Default)]
struct Index {
    map: StdHashMap<Box<[u8]>, u32, KeyBuild>,
    free: Vec<u32>,
}

#[derive(Debug)]
pub struct HashMap {
    pub buf: Arc<GuardedBuf>,
    pub stride: usize,
    pub value_size: usize,
    pub key_size: usize,
    pub max: u32,
    pub ncpus: u32,
    lru: bool,
    devmap: bool,
    index: RwLock<Index>,
    /// Last use of each slot (LRU maps).
    stamps: Vec<AtomicU64>,
    tick: AtomicU64,
}

impl HashMap {
    pub fn new(spec: &MapSpec, ncpus: u32) -> Result<HashMap, String> {
        let max = spec.max_entries;
        if max == 0 {
            return Err("max_entries must be positive".into());
        }
        if spec.key_size == 0 {
            return Err("key_size must be positive".into());
        }
        let stride = stride(spec.value_size);
        let bytes = (max as usize)
            .checked_mul(ncpus as usize)
            .and_then(|n| n.checked_mul(stride))
            .filter(|&b| b <= 1 << 31)
            .ok_or_else(|| format!("{max} entries of {} bytes are too large", spec.value_size))?;
        let lru = matches!(spec.map_type, MapType::LruHash | MapType::LruPercpuHash);
        Ok(HashMap {
            buf: Arc::new(GuardedBuf::pooled(bytes).map_err(|e| e.to_string())?),
            stride,
            value_size: spec.value_size as usize,
            key_size: spec.key_size as usize,
            max,
            ncpus,
            lru,
            devmap: matches!(
                spec.map_type,
                MapType::Devmap | MapType::Cpumap | MapType::Xskmap | MapType::ArrayOfMaps
            ),
            index: RwLock::new(Index {
                map: StdHashMap::default(),
                free: (0..max).rev().collect(),
            }),
            stamps: if lru {
                (0..max).map(|_| AtomicU64::new(0)).collect()
            } else {
                Vec::new()
            },
            tick: AtomicU64::new(1),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }

    #[inline]
    fn offset(&self, slot: u32, cpu: u32) -> usize {
        (slot as usize * self.ncpus as usize + cpu as usize) * self.stride
    }

    fn touch(&self, slot: u32) {
        if let Some(s) = self.stamps.get(slot as usize) {
            s.store(self.tick.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Byte offset of the value of `key` on `cpu`.
    pub fn lookup(&self, key: &[u8], cpu: u32) -> Option<usize> {
        if cpu >= self.ncpus {
            return None;
        }
        let slot = *self.read().map.get(key)?;
        if self.lru {
            self.touch(slot);
        }
        Some(self.offset(slot, cpu))
    }

    pub fn read_value(&self, off: usize) -> Vec<u8> {
        let mut v = vec![0u8; self.value_size];
        let _ = self.buf.read(off, &mut v);
        v
    }

    /// The value (per-CPU: every CPU's, each padded to 8 bytes).
    pub fn read_all(&self, key: &[u8]) -> Option<Vec<u8>> {
        let slot = *self.read().map.get(key)?;
        if self.ncpus == 1 {
            return Some(self.read_value(self.offset(slot, 0)));
        }
        let mut out = vec![0u8; self.stride * self.ncpus as usize];
        for c in 0..self.ncpus {
            let s = c as usize * self.stride;
            let _ = self
                .buf
                .read(self.offset(slot, c), &mut out[s..s + self.value_size]);
        }
        Some(out)
    }

    fn write_value(
        &self,
        slot: u32,
        value: &[u8],
        cpu: Option<u32>,
        fresh: bool,
    ) -> Result<(), MapError> {
        let vs = self.value_size;
        match cpu {
            Some(c) => {
                let v = value
                    .get(..vs)
                    .ok_or_else(|| MapError::Invalid("value too short".into()))?;
                for k in 0..self.ncpus {
                    if k == c {
                        let _ = self.buf.write(self.offset(slot, k), v);
                    } else if fresh {
                        let _ = self.buf.fill(self.offset(slot, k), vs, 0);
                    }
                }
            }
            None if value.len() == vs => {
                for k in 0..self.ncpus {
                    let _ = self.buf.write(self.offset(slot, k), value);
                }
            }
            None if self.ncpus > 1 && value.len() == self.stride * self.ncpus as usize => {
                for k in 0..self.ncpus {
                    let s = k as usize * self.stride;
                    let _ = self.buf.write(self.offset(slot, k), &value[s..s + vs]);
                }
            }
            None => {
                return Err(MapError::Invalid(format!(
                    "value is {} bytes, expected {vs}",
                    value.len()
                )))
            }
        }
        Ok(())
    }

    /// Inserts or updates `key`; `cpu` is the running CPU for program-side
    /// updates of per-CPU maps (other CPUs of a new entry are zeroed).
    pub fn update(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        cpu: Option<u32>,
    ) -> Result<(), MapError> {
        if flags > BPF_EXIST {
            return Err(MapError::Invalid(format!("flags {flags:#x}")));
        }
        if key.len() != self.key_size {
            return Err(MapError::Invalid("bad key size".into()));
        }
        if value.len() < self.value_size {
            return Err(MapError::Invalid("value too short".into()));
        }
        if self.devmap {
            let mut k = [0u8; 4];
            k.copy_from_slice(key.get(..4).ok_or(MapError::Full)?);
            if u32::from_le_bytes(k) >= self.max {
                return Err(MapError::Full);
            }
            if flags == BPF_NOEXIST {
                return Err(MapError::Exists);
            }
        }
        let mut idx = self.write();
        if let Some(&slot) = idx.map.get(key) {
            if flags == BPF_NOEXIST {
                return Err(MapError::Exists);
            }
            self.write_value(slot, value, cpu, false)?;
            if self.lru {
                self.touch(slot);
            }
            return Ok(());
        }
        if flags == BPF_EXIST {
            return Err(MapError::NotFound);
        }
        let slot = match idx.free.pop() {
            Some(s) => s,
            None if self.lru => {
                // Evict the least recently used entry.
                let victim = idx
                    .map
                    .iter()
                    .min_by_key(|(_, &s)| {
                        self.stamps
                            .get(s as usize)
                            .map_or(0, |a| a.load(Ordering::Relaxed))
                    })
                    .map(|(k, &s)| (k.clone(), s));
                match victim {
                    Some((k, s)) => {
                        idx.map.remove(&k);
                        s
                    }
                    None => return Err(MapError::Full),
                }
            }
            None => return Err(MapError::Full),
        };
        self.write_value(slot, value, cpu, true)?;
        idx.map.insert(key.into(), slot);
        if self.lru {
            self.touch(slot);
        }
        Ok(())
    }

    pub fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        let mut idx = self.write();
        match idx.map.remove(key) {
            Some(slot) => {
                idx.free.push(slot);
                Ok(())
            }
            None => Err(MapError::NotFound),
        }
    }

    pub fn keys(&self) -> Vec<Vec<u8>> {
        // Sorted: the index's order depends on its random hash seed.
        let mut keys: Vec<Vec<u8>> = self.read().map.keys().map(|k| k.to_vec()).collect();
        keys.sort_unstable();
        keys
    }

    pub fn len(&self) -> usize {
        self.read().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfkit_object::MapKind;

    fn spec() -> MapSpec {
        MapSpec {
            name: "h".into(),
            kind: MapKind::Declared,
            map_type: MapType::Hash,
            key_size: 4,
            value_size: 8,
            max_entries: 64,
            flags: 0,
            key_type_id: None,
            value_type_id: None,
            data: None,
            pin_by_name: false,
            inner: None,
        }
    }

    /// Keys come out in byte order whatever each map's random hash seed,
    /// and two maps given the same keys find every one of them.
    #[test]
    fn keys_sorted_whatever_the_seed() {
        let (a, b) = (
            HashMap::new(&spec(), 1).unwrap(),
            HashMap::new(&spec(), 1).unwrap(),
        );
        let keys: Vec<[u8; 4]> = (0..40u32).rev().map(|i| (i * 7919).to_be_bytes()).collect();
        for (n, k) in keys.iter().enumerate() {
            let v = (n as u64).to_le_bytes();
            a.update(k, &v, 0, None).unwrap();
            b.update(k, &v, 0, None).unwrap();
        }
        let mut want: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        want.sort();
        assert_eq!(a.keys(), want);
        assert_eq!(b.keys(), want);
        for (n, k) in keys.iter().enumerate() {
            let off = a.lookup(k, 0).unwrap();
            assert_eq!(a.read_value(off), (n as u64).to_le_bytes());
            assert!(b.lookup(k, 0).is_some());
        }
        assert!(a.lookup(&[1, 2, 3, 4], 0).is_none());
    }
}
