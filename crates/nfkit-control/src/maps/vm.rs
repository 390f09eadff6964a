//! [`MapAccess`] for the VM's maps (a script run): per-CPU values split
//! into one copy per CPU, times shown against the run's pinned clock.

use super::access::{no_such_key_bytes, Entry, MapAccess, MapError, MapInfo};
use nfkit_vm::Map;

/// A map of a VM.
pub struct VmMap<'a> {
    map: &'a Map,
    info: MapInfo,
    now: Option<u64>,
}

impl<'a> VmMap<'a> {
    /// `map` typed as `info`; times shown against `now` (ns).
    pub fn new(map: &'a Map, info: MapInfo, now: Option<u64>) -> VmMap<'a> {
        VmMap { map, info, now }
    }

    /// One value per CPU: the VM gives per-CPU values padded to 8 bytes
    /// each, back to back.
    fn split(&self, v: Vec<u8>) -> Vec<Vec<u8>> {
        if !self.info.per_cpu {
            return vec![v];
        }
        let size = self.info.value_size as usize;
        let stride = size.div_ceil(8).max(1) * 8;
        v.chunks(stride)
            .map(|c| c.get(..size).unwrap_or(c).to_vec())
            .collect()
    }
}

impl MapAccess for VmMap<'_> {
    fn info(&self) -> &MapInfo {
        &self.info
    }

    fn now_ns(&self) -> Option<u64> {
        self.now
    }

    fn entries(&self) -> Result<Vec<Entry>, MapError> {
        Ok(self
            .map
            .entries()
            .into_iter()
            .map(|(k, v)| (k, self.split(v)))
            .collect())
    }

    fn lookup(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, MapError> {
        Ok(self.map.lookup(key)?.map(|v| self.split(v)))
    }

    fn update(&self, key: &[u8], value: &[u8]) -> Result<(), MapError> {
        Ok(self.map.update(key, value, 0)?)
    }

    fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        if self.map.lookup(key)?.is_none() {
            return Err(no_such_key_bytes(&self.info, key));
        }
        Ok(self.map.delete(key)?)
    }
}
