//! [`MapSource`]: the current contents of the program's maps, from which
//! lookups with packet-derived keys are expanded into rules.

use nfkit_vm::Vm;

/// Read access to maps by name.
pub trait MapSource {
    /// Every entry `(key, value)`, or `None` if there is no such map.
    fn entries(&self, map: &str) -> Option<Vec<(Vec<u8>, Vec<u8>)>>;
    /// The value of `key`, `Ok(None)` when absent, `Err` when the map is
    /// missing or refuses the key.
    fn lookup(&self, map: &str, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
}

impl MapSource for Vm {
    fn entries(&self, map: &str) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        self.map(map).map(|m| m.entries())
    }

    fn lookup(&self, map: &str, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let m = self.map(map).ok_or_else(|| format!("no map {map}"))?;
        m.lookup(key).map_err(|e| format!("{e:?}"))
    }
}

/// No maps at all (programs without maps).
pub struct NoMaps;

impl MapSource for NoMaps {
    fn entries(&self, _map: &str) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        None
    }

    fn lookup(&self, map: &str, _key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Err(format!("no map {map}"))
    }
}
