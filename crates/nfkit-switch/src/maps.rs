//! The running version's maps, by name, read and written while the
//! switch runs (`nfkit map ... --switch NAME`): keys and values written
//! as text per docs/abi.md "Map keys and values" (nfkit-control's typed
//! access). Writes go to the maps the workers use (the VM's maps are
//! safe under concurrent update); a reload keeps them by name.

use crate::Switch;
use nfkit_control::maps::{self, access, DumpOptions, MapError, MapInfo, Row};

/// Why a map operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum MapOpError {
    #[error("no map `{map}` in the running version (maps: {known})")]
    NoSuchMap { map: String, known: String },
    #[error("map `{map}`: {source}")]
    Map {
        map: String,
        #[source]
        source: MapError,
    },
}

impl Switch {
    /// The running version's maps (the script's, then its NFs').
    pub fn map_list(&self) -> Vec<MapInfo> {
        self.script().map_infos().cloned().collect()
    }

    /// Every entry of map `map`, sorted by key (per-CPU integers summed,
    /// array entries of value 0 left out, as `nfkit run` shows them).
    pub fn map_dump(&self, map: &str) -> Result<Vec<Row>, MapOpError> {
        let v = self.script();
        let m = v.map_access(map).ok_or_else(|| no_such_map(self, map))?;
        let opts = DumpOptions {
            skip_zero_array: true,
            sum_per_cpu: true,
        };
        maps::dump(&m, opts).map_err(in_map(map))
    }

    /// The entry of the key written `key`.
    pub fn map_get(&self, map: &str, key: &str) -> Result<Row, MapOpError> {
        let v = self.script();
        let m = v.map_access(map).ok_or_else(|| no_such_map(self, map))?;
        access::get(&m, key).map_err(in_map(map))
    }

    /// Sets the key written `key` to the value written `value` (on every
    /// worker for per-CPU maps).
    pub fn map_set(&self, map: &str, key: &str, value: &str) -> Result<(), MapOpError> {
        let v = self.script();
        let m = v.map_access(map).ok_or_else(|| no_such_map(self, map))?;
        access::set(&m, key, value).map_err(in_map(map))
    }

    /// Deletes the key written `key`.
    pub fn map_delete(&self, map: &str, key: &str) -> Result<(), MapOpError> {
        let v = self.script();
        let m = v.map_access(map).ok_or_else(|| no_such_map(self, map))?;
        access::delete(&m, key).map_err(in_map(map))
    }
}

fn no_such_map(sw: &Switch, map: &str) -> MapOpError {
    let names: Vec<String> = sw.map_list().into_iter().map(|i| i.name).collect();
    MapOpError::NoSuchMap {
        map: map.to_string(),
        known: if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        },
    }
}

fn in_map(map: &str) -> impl FnOnce(MapError) -> MapOpError + '_ {
    move |source| MapOpError::Map {
        map: map.to_string(),
        source,
    }
}
