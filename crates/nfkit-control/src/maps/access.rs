//! [`MapAccess`]: one way to read and write a map, whether it lives in
//! the kernel (a deployed, pinned map) or in the VM (a script run); and
//! the text-level operations the CLI and reports use on top of it.

use super::text::{self, ParseError};
use super::types::ValueType;
use nfkit_lang::ir::MapDecl;
use nfkit_object::{Btf, MapSpec, MapType};
use serde_json::{json, Value};

/// Why a map operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The key is not in the map (as the user wrote it).
    #[error("no such key {key}")]
    NoSuchKey { key: String },
    #[error("key {0}")]
    Key(ParseError),
    #[error("value {0}")]
    Value(ParseError),
    #[error(transparent)]
    Kernel(Box<nfkit_kernel::KernelError>),
    /// The VM's map refused.
    #[error(transparent)]
    Vm(#[from] nfkit_vm::MapError),
}

impl From<nfkit_kernel::KernelError> for MapError {
    fn from(e: nfkit_kernel::KernelError) -> MapError {
        MapError::Kernel(Box::new(e))
    }
}

/// What a map is: name, shape and the types of its keys and values.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MapInfo {
    pub name: String,
    /// `Hash`, `PercpuArray`, ... (nfkit-object's `MapType` names).
    pub map_type: String,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub per_cpu: bool,
    pub is_array: bool,
    pub key: ValueType,
    pub value: ValueType,
}

impl MapInfo {
    /// The info of `spec`: types from the script's declaration `decl`
    /// when given, else from the image's BTF, else from the sizes.
    pub fn from_spec(spec: &MapSpec, btf: Option<&Btf>, decl: Option<&MapDecl>) -> MapInfo {
        let from = |id: Option<u32>, size: u32| {
            id.zip(btf)
                .and_then(|(id, b)| super::btf::from_btf(b, id))
                .filter(|t| t.size() == size)
                .unwrap_or_else(|| ValueType::from_size(size))
        };
        let key = decl
            .map(ValueType::from_decl_key)
            .filter(|t| t.size() == spec.key_size)
            .unwrap_or_else(|| from(spec.key_type_id, spec.key_size));
        let value = decl
            .map(ValueType::from_decl_value)
            .filter(|t| t.size() == spec.value_size)
            .unwrap_or_else(|| from(spec.value_type_id, spec.value_size));
        MapInfo {
            name: spec.name.clone(),
            map_type: format!("{:?}", spec.map_type),
            key_size: spec.key_size,
            value_size: spec.value_size,
            max_entries: spec.max_entries,
            per_cpu: is_per_cpu(spec.map_type),
            is_array: matches!(spec.map_type, MapType::Array | MapType::PercpuArray),
            key,
            value,
        }
    }
}

/// Per-CPU map types (one value per CPU).
pub fn is_per_cpu(t: MapType) -> bool {
    matches!(
        t,
        MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
    )
}

/// A key and its value: one copy, or one per CPU.
pub type Entry = (Vec<u8>, Vec<Vec<u8>>);

/// Reading and writing one map, in the kernel or in the VM.
pub trait MapAccess {
    fn info(&self) -> &MapInfo;
    /// The time (ns, CLOCK_MONOTONIC or the run's pinned clock) that
    /// times in the map are shown against.
    fn now_ns(&self) -> Option<u64>;
    /// Every entry (values per CPU for per-CPU maps).
    fn entries(&self) -> Result<Vec<Entry>, MapError>;
    fn lookup(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, MapError>;
    /// Sets `key` to `value` (on every CPU for per-CPU maps).
    fn update(&self, key: &[u8], value: &[u8]) -> Result<(), MapError>;
    /// Deletes `key`; [`MapError::NoSuchKey`] when it is absent.
    fn delete(&self, key: &[u8]) -> Result<(), MapError>;
}

/// One entry, typed.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub key: Vec<u8>,
    pub values: Vec<Vec<u8>>,
    pub key_text: String,
    pub key_json: Value,
    pub value_text: String,
    pub value_json: Value,
}

impl Row {
    fn new(info: &MapInfo, now: Option<u64>, key: Vec<u8>, values: Vec<Vec<u8>>) -> Row {
        let (key_text, key_json) = text::show(&info.key, &key, now);
        let (value_text, value_json) = text::show_values(&info.value, &values, now);
        Row {
            key,
            values,
            key_text,
            key_json,
            value_text,
            value_json,
        }
    }

    /// `{"key": .., "value": ..}`.
    pub fn json(&self) -> Value {
        json!({"key": self.key_json, "value": self.value_json})
    }

    /// `key: value`.
    pub fn text(&self) -> String {
        format!("{}: {}", self.key_text, self.value_text)
    }
}

/// How [`dump`] lists a map.
#[derive(Clone, Copy, Debug, Default)]
pub struct DumpOptions {
    /// Leave out array entries whose value is all zeros.
    pub skip_zero_array: bool,
    /// Add up per-CPU integer values into one.
    pub sum_per_cpu: bool,
}

/// Every entry of `m`, typed, sorted by key.
pub fn dump(m: &dyn MapAccess, opts: DumpOptions) -> Result<Vec<Row>, MapError> {
    let info = m.info();
    let mut entries = m.entries()?;
    if opts.skip_zero_array && info.is_array {
        entries.retain(|(_, vs)| vs.iter().any(|v| v.iter().any(|&b| b != 0)));
    }
    entries.sort_by_cached_key(|(k, _)| text::sort_key(&info.key, k));
    let now = m.now_ns();
    Ok(entries
        .into_iter()
        .map(|(k, vs)| {
            let vs = match (opts.sum_per_cpu, text::sum(&info.value, &vs)) {
                (true, Some(one)) => vec![one],
                _ => vs,
            };
            Row::new(info, now, k, vs)
        })
        .collect())
}

/// Map types whose entries are data both the kernel and the VM read back
/// alike (not program, device or socket references, not ring buffers).
pub fn has_data_entries(t: MapType) -> bool {
    matches!(
        t,
        MapType::Hash
            | MapType::Array
            | MapType::PercpuHash
            | MapType::PercpuArray
            | MapType::LruHash
            | MapType::LruPercpuHash
            | MapType::LpmTrie
    )
}

/// `m` as JSON, for comparing the VM's and the kernel's maps after a run:
/// name, type, sizes and, for maps of data ([`has_data_entries`]), every
/// entry sorted by key (array entries of all zeros left out, per-CPU
/// integers summed): `key` and `value` in hex (`values`, one per CPU,
/// when they cannot be summed) and `typed` as [`Row::json`] gives them.
pub fn snapshot_json(m: &dyn MapAccess, t: MapType) -> Value {
    let info = m.info();
    let mut out = json!({
        "name": info.name,
        "type": t.name(),
        "key_size": info.key_size,
        "value_size": info.value_size,
        "max_entries": info.max_entries,
    });
    if !has_data_entries(t) {
        return out;
    }
    let opts = DumpOptions {
        skip_zero_array: true,
        sum_per_cpu: true,
    };
    match dump(m, opts) {
        Ok(rows) => {
            let entries: Vec<Value> = rows
                .iter()
                .map(|r| {
                    let mut e = json!({ "key": text::hex(&r.key), "typed": r.json() });
                    match &r.values[..] {
                        [one] => e["value"] = json!(text::hex(one)),
                        vs => e["values"] = vs.iter().map(|v| text::hex(v)).collect(),
                    }
                    e
                })
                .collect();
            out["entries"] = Value::Array(entries);
        }
        Err(e) => out["error"] = json!(e.to_string()),
    }
    out
}

/// [`snapshot_json`] of a map of maps: its `slots`, each the key in hex
/// and the inner map's name as `name_of` finds it from the slot's value
/// (the kernel gives map ids, the VM indices of its map table).
pub fn outer_snapshot_json(
    m: &dyn MapAccess,
    t: MapType,
    name_of: &dyn Fn(u32) -> Option<String>,
) -> Value {
    let mut out = snapshot_json(m, t);
    match m.entries() {
        Ok(mut entries) => {
            entries.sort();
            let slots: Vec<Value> = entries
                .iter()
                .map(|(k, vs)| {
                    let v = vs
                        .first()
                        .and_then(|v| Some(u32::from_le_bytes(v.get(..4)?.try_into().ok()?)));
                    let name = v.and_then(name_of);
                    json!({ "key": text::hex(k), "map": name })
                })
                .collect();
            out["slots"] = Value::Array(slots);
        }
        Err(e) => out["error"] = json!(e.to_string()),
    }
    out
}

/// The entry of the key written `key`.
pub fn get(m: &dyn MapAccess, key: &str) -> Result<Row, MapError> {
    let info = m.info();
    let k = text::parse(&info.key, key).map_err(MapError::Key)?;
    let vs = m.lookup(&k)?.ok_or_else(|| no_such_key(key))?;
    Ok(Row::new(info, m.now_ns(), k, vs))
}

/// Sets the key written `key` to the value written `value`.
pub fn set(m: &dyn MapAccess, key: &str, value: &str) -> Result<(), MapError> {
    let info = m.info();
    let k = text::parse(&info.key, key).map_err(MapError::Key)?;
    let v = text::parse(&info.value, value).map_err(MapError::Value)?;
    m.update(&k, &v)
}

/// Deletes the key written `key`.
pub fn delete(m: &dyn MapAccess, key: &str) -> Result<(), MapError> {
    let k = text::parse(&m.info().key, key).map_err(MapError::Key)?;
    m.delete(&k).map_err(|e| match e {
        MapError::NoSuchKey { .. } => no_such_key(key),
        e => e,
    })
}

fn no_such_key(key: &str) -> MapError {
    MapError::NoSuchKey {
        key: key.trim().to_string(),
    }
}

/// [`MapError::NoSuchKey`] for key bytes `k`, shown typed.
pub(crate) fn no_such_key_bytes(info: &MapInfo, k: &[u8]) -> MapError {
    no_such_key(&text::show(&info.key, k, None).0)
}
