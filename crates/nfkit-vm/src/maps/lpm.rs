//! Longest-prefix-match trie with the kernel's key layout
//! `{ u32 prefixlen; u8 data[] }` (data in network order, prefix bits
//! counted from the most significant bit of `data[0]`). Lookup tries the
//! stored prefix lengths from longest to shortest, each one a hash probe.

#![forbid(unsafe_code)]

use super::{stride, KeyBuild, MapError, BPF_EXIST, BPF_NOEXIST};
use crate::mem::GuardedBuf;
use nfkit_object::MapSpec;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// (prefix length, masked data).
type Prefix = (u32, Box<[u8]>);

#[derive(Debug, Default)]
struct Index {
    /// (prefix length, masked data) -> (slot, key as given).
    map: HashMap<Prefix, (u32, Box<[u8]>), KeyBuild>,
    free: Vec<u32>,
    /// Prefix lengths present, with their entry counts.
    lens: BTreeMap<u32, usize>,
}

#[derive(Debug)]
pub struct LpmTrie {
    pub buf: Arc<GuardedBuf>,
    stride: usize,
    value_size: usize,
    data_size: usize,
    index: RwLock<Index>,
}

fn mask(data: &[u8], bits: u32) -> Box<[u8]> {
    let mut out = data.to_vec();
    for (i, b) in out.iter_mut().enumerate() {
        let lo = i as u32 * 8;
        if bits <= lo {
            *b = 0;
        } else if bits < lo + 8 {
            *b &= 0xffu8 << (8 - (bits - lo));
        }
    }
    out.into_boxed_slice()
}

impl LpmTrie {
    pub fn new(spec: &MapSpec) -> Result<LpmTrie, String> {
        if spec.key_size <= 4 || spec.key_size > 4 + 256 {
            return Err("LPM trie keys are { u32 prefixlen; 1..256 bytes of data }".into());
        }
        let max = spec.max_entries;
        if max == 0 {
            return Err("max_entries must be positive".into());
        }
        let stride = stride(spec.value_size);
        let bytes = (max as usize)
            .checked_mul(stride)
            .filter(|&b| b <= 1 << 31)
            .ok_or("map too large")?;
        Ok(LpmTrie {
            buf: Arc::new(GuardedBuf::pooled(bytes).map_err(|e| e.to_string())?),
            stride,
            value_size: spec.value_size as usize,
            data_size: spec.key_size as usize - 4,
            index: RwLock::new(Index {
                free: (0..max).rev().collect(),
                ..Index::default()
            }),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }

    fn split<'k>(&self, key: &'k [u8]) -> Option<(u32, &'k [u8])> {
        if key.len() != 4 + self.data_size {
            return None;
        }
        let (p, d) = key.split_at(4);
        let mut b = [0u8; 4];
        b.copy_from_slice(p);
        Some((u32::from_le_bytes(b), d))
    }

    /// Byte offset of the value of the longest prefix matching `key`.
    pub fn lookup(&self, key: &[u8]) -> Option<usize> {
        let (plen, data) = self.split(key)?;
        let plen = plen.min(self.data_size as u32 * 8);
        let idx = self.read();
        for (&len, _) in idx.lens.range(..=plen).rev() {
            if let Some(&(slot, _)) = idx.map.get(&(len, mask(data, len))) {
                return Some(slot as usize * self.stride);
            }
        }
        None
    }

    /// Control-plane lookup (longest-prefix match, as the kernel's).
    pub fn read_exact(&self, key: &[u8]) -> Option<Vec<u8>> {
        let off = self.lookup(key)?;
        let mut v = vec![0u8; self.value_size];
        let _ = self.buf.read(off, &mut v);
        Some(v)
    }

    pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        if flags > BPF_EXIST {
            return Err(MapError::Invalid(format!("flags {flags:#x}")));
        }
        let (plen, data) = self
            .split(key)
            .ok_or_else(|| MapError::Invalid("bad key size".into()))?;
        if plen > self.data_size as u32 * 8 {
            return Err(MapError::Invalid(format!("prefix length {plen} too long")));
        }
        let v = value
            .get(..self.value_size)
            .ok_or_else(|| MapError::Invalid("value too short".into()))?;
        let k = (plen, mask(data, plen));
        let mut idx = self.write();
        if let Some((slot, orig)) = idx.map.get_mut(&k) {
            if flags == BPF_NOEXIST {
                return Err(MapError::Exists);
            }
            *orig = key.into();
            let _ = self.buf.write(*slot as usize * self.stride, v);
            return Ok(());
        }
        if flags == BPF_EXIST {
            return Err(MapError::NotFound);
        }
        let slot = idx.free.pop().ok_or(MapError::NoSpace)?;
        let _ = self.buf.write(slot as usize * self.stride, v);
        idx.map.insert(k, (slot, key.into()));
        *idx.lens.entry(plen).or_insert(0) += 1;
        Ok(())
    }

    pub fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        let (plen, data) = self
            .split(key)
            .ok_or_else(|| MapError::Invalid("bad key size".into()))?;
        let mut idx = self.write();
        let (slot, _) = idx
            .map
            .remove(&(plen, mask(data, plen)))
            .ok_or(MapError::NotFound)?;
        idx.free.push(slot);
        if let Some(n) = idx.lens.get_mut(&plen) {
            *n -= 1;
            if *n == 0 {
                idx.lens.remove(&plen);
            }
        }
        Ok(())
    }

    pub fn keys(&self) -> Vec<Vec<u8>> {
        // Sorted: the index's order depends on its random hash seed.
        let mut keys: Vec<Vec<u8>> = self.read().map.values().map(|(_, k)| k.to_vec()).collect();
        keys.sort_unstable();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfkit_object::{MapKind, MapType};

    fn spec() -> MapSpec {
        MapSpec {
            name: "t".into(),
            kind: MapKind::Declared,
            map_type: MapType::LpmTrie,
            key_size: 8,
            value_size: 4,
            max_entries: 16,
            flags: 1,
            key_type_id: None,
            value_type_id: None,
            data: None,
            pin_by_name: false,
            inner: None,
        }
    }

    fn key(p: u32, a: [u8; 4]) -> Vec<u8> {
        let mut k = p.to_le_bytes().to_vec();
        k.extend(a);
        k
    }

    #[test]
    fn longest_prefix_wins() {
        let t = LpmTrie::new(&spec()).expect("map");
        t.update(&key(8, [10, 0, 0, 0]), &1u32.to_le_bytes(), 0)
            .expect("insert");
        t.update(&key(24, [10, 1, 2, 0]), &2u32.to_le_bytes(), 0)
            .expect("insert");
        t.update(&key(0, [0, 0, 0, 0]), &3u32.to_le_bytes(), 0)
            .expect("insert");
        let get = |a| t.read_exact(&key(32, a)).map(|v| v[0]);
        assert_eq!(get([10, 1, 2, 3]), Some(2));
        assert_eq!(get([10, 1, 3, 3]), Some(1));
        assert_eq!(get([11, 1, 2, 3]), Some(3));
        assert_eq!(t.read_exact(&key(16, [10, 1, 2, 3])).map(|v| v[0]), Some(1));
        assert_eq!(
            t.update(&key(33, [0; 4]), &[0; 4], 0)
                .map_err(|e| e.errno()),
            Err(22)
        );
        assert_eq!(
            t.update(&key(8, [10, 9, 9, 9]), &[0; 4], BPF_NOEXIST),
            Err(MapError::Exists)
        );
        t.delete(&key(0, [1, 1, 1, 1])).expect("masked delete");
        assert_eq!(get([11, 1, 2, 3]), None);
    }
}
