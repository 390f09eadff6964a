//! Maps: shared, thread-safe key/value stores that programs reach through
//! helpers and the control plane reaches from Rust.
//!
//! Every map holding values keeps them in one VM memory buffer (a region of
//! the address space), preallocated like the kernel's maps: a value pointer
//! handed to a program is an address in that buffer, which lives as long
//! as the map, so it stays valid even when the control plane deletes the
//! entry meanwhile (the slot may be reused by a later insert, as in the
//! kernel's preallocated hash maps).
//!
//! * [`array`](mod@array): array and per-CPU array (and global data sections).
//! * [`hash`]: hash, per-CPU hash, LRU hash, LRU per-CPU hash, devmap,
//!   devmap_hash, cpumap and xskmap (keyed slots in a slab; the VM keeps
//!   an xskmap's values as given, there are no sockets behind them).
//! * [`lpm`]: longest-prefix-match trie.
//! * [`ringbuf`]: ring buffer with reserve/submit/discard.
//! * [`outer`]: array and hash of maps (slots naming other maps).
//! * [`ProgArray`]: tail-call targets (entry indices of the Image).

#![forbid(unsafe_code)]

pub mod array;
pub mod hash;
pub mod lpm;
pub mod outer;
pub mod ringbuf;

use crate::mem::GuardedBuf;
use nfkit_object::{MapKind, MapSpec, MapType};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Update flags (`BPF_ANY`, `BPF_NOEXIST`, `BPF_EXIST`).
pub const BPF_ANY: u64 = 0;
pub const BPF_NOEXIST: u64 = 1;
pub const BPF_EXIST: u64 = 2;

/// Errors of map operations, with the kernel's errno.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("no such entry (ENOENT)")]
    NotFound,
    #[error("entry exists (EEXIST)")]
    Exists,
    #[error("map is full or index out of range (E2BIG)")]
    Full,
    #[error("no space (ENOSPC)")]
    NoSpace,
    #[error("invalid argument (EINVAL): {0}")]
    Invalid(String),
    #[error("operation not supported on this map type (EOPNOTSUPP)")]
    Unsupported,
    #[error("no such CPU (ENODEV)")]
    NoDevice,
}

impl MapError {
    /// The kernel's (positive) errno for this error.
    pub fn errno(&self) -> i64 {
        match self {
            MapError::NotFound => 2,
            MapError::Exists => 17,
            MapError::Full => 7,
            MapError::NoSpace => 28,
            MapError::Invalid(_) => 22,
            MapError::Unsupported => 95,
            MapError::NoDevice => 19,
        }
    }
}

/// Rounds a value size up to 8 bytes (the kernel's per-element stride).
pub(crate) fn stride(value_size: u32) -> usize {
    (value_size as usize).div_ceil(8).max(1) * 8
}

/// The hasher of map keys: fast on short keys, and keyed with a random
/// seed per map (made when the map is): the switch's maps are keyed by
/// what the network sends, so collisions must not be choosable (HashDoS).
pub(crate) type KeyBuild = foldhash::fast::RandomState;

/// Tail-call targets: slot -> entry index of the Image.
#[derive(Debug)]
pub struct ProgArray {
    slots: Vec<AtomicU32>,
}

const EMPTY: u32 = u32::MAX;

/// The kernel's largest cpumap queue (`qsize` of `struct bpf_cpumap_val`).
const CPUMAP_MAX_QSIZE: u32 = 16384;

impl ProgArray {
    fn new(n: u32) -> ProgArray {
        ProgArray {
            slots: (0..n).map(|_| AtomicU32::new(EMPTY)).collect(),
        }
    }
    /// The entry in slot `i`, if set.
    pub fn get(&self, i: u32) -> Option<usize> {
        let v = self.slots.get(i as usize)?.load(Ordering::Acquire);
        (v != EMPTY).then_some(v as usize)
    }
}

/// The storage behind a map.
#[derive(Debug)]
pub enum Store {
    Array(array::ArrayMap),
    Hash(hash::HashMap),
    Lpm(lpm::LpmTrie),
    Ringbuf(ringbuf::RingBuf),
    ProgArray(ProgArray),
    Outer(outer::OuterMap),
    /// A `perf_event_array`: the VM keeps no events in it (every CPU's
    /// ring is open); `bpf_perf_event_output` records go to the run's
    /// result.
    PerfEvents,
}

/// One map.
#[derive(Debug)]
pub struct Map {
    pub spec: MapSpec,
    /// Index in the Image's map table.
    pub index: usize,
    pub store: Arc<Store>,
    /// Entries a `ProgArray` may name (the Image's entry count).
    n_entries: usize,
    /// The VM's CPUs (the keys a cpumap takes).
    cpus: u32,
}

fn u32_key(key: &[u8]) -> Result<u32, MapError> {
    let b: [u8; 4] = key
        .try_into()
        .map_err(|_| MapError::Invalid(format!("key is {} bytes, expected 4", key.len())))?;
    Ok(u32::from_le_bytes(b))
}

impl Map {
    /// Creates the map of `spec` for `ncpus` CPUs.
    pub fn new(index: usize, spec: &MapSpec, ncpus: u32, n_entries: usize) -> Result<Map, String> {
        let percpu = matches!(
            spec.map_type,
            MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
        );
        let cpus = ncpus.max(1);
        let ncpus = if percpu { cpus } else { 1 };
        let global = matches!(spec.kind, MapKind::Global { .. });
        let store = match spec.map_type {
            _ if global => Store::Array(array::ArrayMap::new(spec, 1)?),
            MapType::Array | MapType::PercpuArray => {
                Store::Array(array::ArrayMap::new(spec, ncpus)?)
            }
            MapType::Hash
            | MapType::PercpuHash
            | MapType::LruHash
            | MapType::LruPercpuHash
            | MapType::DevmapHash
            | MapType::Devmap
            | MapType::Cpumap
            | MapType::Xskmap => Store::Hash(hash::HashMap::new(spec, ncpus)?),
            MapType::LpmTrie => Store::Lpm(lpm::LpmTrie::new(spec)?),
            MapType::ArrayOfMaps | MapType::HashOfMaps => Store::Outer(outer::OuterMap::new(spec)?),
            MapType::Ringbuf => Store::Ringbuf(ringbuf::RingBuf::new(spec)?),
            MapType::ProgArray => {
                if spec.key_size != 4 || spec.value_size != 4 {
                    return Err("prog arrays need 4-byte keys and values".into());
                }
                Store::ProgArray(ProgArray::new(spec.max_entries))
            }
            MapType::PerfEventArray => Store::PerfEvents,
            t => return Err(format!("map type {} is not supported by the VM", t.name())),
        };
        if let Some(data) = &spec.data {
            // Global data, or a declared array's initial contents.
            if !global {
                nfkit_object::initial::check(spec, data.len())?;
            }
            if let Store::Array(a) = &store {
                a.init(data);
            }
        }
        Ok(Map {
            spec: spec.clone(),
            index,
            store: Arc::new(store),
            n_entries,
            cpus,
        })
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether a map of `spec` on `ncpus` CPUs may keep this map's
    /// entries: a declared data map (array, hash, LRU, LPM, per-CPU
    /// kinds) of the same name, type, key and value sizes, capacity and
    /// flags (and CPUs, per-CPU ones). Global data, prog arrays, maps of
    /// maps and the rest hold values tied to one Image: never shared.
    pub fn can_share(&self, spec: &MapSpec, ncpus: u32) -> bool {
        let a = &self.spec;
        let data = matches!(
            a.map_type,
            MapType::Array
                | MapType::PercpuArray
                | MapType::Hash
                | MapType::PercpuHash
                | MapType::LruHash
                | MapType::LruPercpuHash
                | MapType::LpmTrie
        );
        let percpu = matches!(
            a.map_type,
            MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
        );
        // Initial contents belong to one Image.
        data && a.kind == MapKind::Declared
            && a.data.is_none()
            && spec.data.is_none()
            && spec.kind == MapKind::Declared
            && a.name == spec.name
            && a.map_type == spec.map_type
            && a.key_size == spec.key_size
            && a.value_size == spec.value_size
            && a.max_entries == spec.max_entries
            && a.flags == spec.flags
            && (!percpu || self.ncpus() == ncpus.max(1))
    }

    /// Whether `self` and `other` hold the same entries (one map kept
    /// by two VMs).
    pub fn same_store(&self, other: &Map) -> bool {
        Arc::ptr_eq(&self.store, &other.store)
    }

    /// A map `bpf_redirect_map` takes: devmap, devmap_hash, cpumap, xskmap.
    pub fn is_redirect_map(&self) -> bool {
        matches!(
            self.spec.map_type,
            MapType::Devmap | MapType::DevmapHash | MapType::Cpumap | MapType::Xskmap
        )
    }

    /// The buffer programs reach values in, and whether they may write it.
    pub fn region(&self) -> Option<(Arc<GuardedBuf>, bool)> {
        self.value_buf().map(|(b, w)| (b.clone(), w))
    }

    /// [`Map::region`] without taking a reference.
    pub fn value_buf(&self) -> Option<(&Arc<GuardedBuf>, bool)> {
        let ro_prog = matches!(
            self.spec.kind,
            MapKind::Global {
                read_only: true,
                ..
            }
        ) || self.is_redirect_map();
        match &*self.store {
            Store::Array(a) => Some((&a.buf, !ro_prog)),
            Store::Hash(h) => Some((&h.buf, !ro_prog)),
            Store::Lpm(l) => Some((&l.buf, true)),
            Store::Ringbuf(r) => Some((&r.buf, true)),
            Store::ProgArray(_) | Store::Outer(_) | Store::PerfEvents => None,
        }
    }

    /// Number of value copies per key (CPUs for per-CPU maps, else 1).
    pub fn ncpus(&self) -> u32 {
        match &*self.store {
            Store::Array(a) => a.ncpus,
            Store::Hash(h) => h.ncpus,
            _ => 1,
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<(), MapError> {
        if key.len() != self.spec.key_size as usize {
            return Err(MapError::Invalid(format!(
                "key is {} bytes, map {} has {}-byte keys",
                key.len(),
                self.spec.name,
                self.spec.key_size
            )));
        }
        Ok(())
    }

    /// Program-side lookup: byte offset of the value of `key` for `cpu`
    /// in [`Map::region`].
    pub fn prog_lookup(&self, key: &[u8], cpu: u32) -> Option<usize> {
        let cpu = if self.ncpus() == 1 { 0 } else { cpu };
        match &*self.store {
            Store::Array(a) => a.offset(u32_key(key).ok()?, cpu),
            Store::Hash(h) => h.lookup(key, cpu),
            Store::Lpm(l) => l.lookup(key),
            _ => None,
        }
    }

    /// Program-side update (`bpf_map_update_elem`): per-CPU maps update
    /// the running CPU's value.
    pub fn prog_update(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        cpu: u32,
    ) -> Result<(), MapError> {
        // Single-CPU maps keep one slot, whatever CPU runs (as prog_lookup).
        let cpu = if self.ncpus() == 1 { 0 } else { cpu };
        match &*self.store {
            Store::Array(a) => a.update(u32_key(key)?, value, flags, Some(cpu)),
            Store::Hash(h) => h.update(key, value, flags, Some(cpu)),
            Store::Lpm(l) => l.update(key, value, flags),
            _ => Err(MapError::Unsupported),
        }
    }

    /// Looks `key` up; per-CPU maps give every CPU's value, each padded
    /// to 8 bytes, as the kernel's syscall does.
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>, MapError> {
        self.check_key(key)?;
        match &*self.store {
            Store::Array(a) => a.read_all(u32_key(key)?),
            Store::Hash(h) => Ok(h.read_all(key)),
            Store::Lpm(l) => Ok(l.read_exact(key)),
            Store::ProgArray(p) => Ok(p
                .get(u32_key(key)?)
                .map(|e| (e as u32).to_le_bytes().to_vec())),
            Store::Outer(o) => Ok(o.get(key).map(|i| i.to_le_bytes().to_vec())),
            Store::Ringbuf(_) | Store::PerfEvents => Err(MapError::Unsupported),
        }
    }

    /// The value of `key` on one CPU (per-CPU maps) or the value.
    pub fn lookup_cpu(&self, key: &[u8], cpu: u32) -> Result<Option<Vec<u8>>, MapError> {
        self.check_key(key)?;
        match &*self.store {
            Store::Array(a) => Ok(a.offset(u32_key(key)?, cpu).map(|o| a.read_value(o))),
            Store::Hash(h) => Ok(h.lookup(key, cpu).map(|o| h.read_value(o))),
            _ => self.lookup(key),
        }
    }

    /// Updates `key` (flags `BPF_ANY`/`BPF_NOEXIST`/`BPF_EXIST`). For
    /// per-CPU maps `value` is either one value (set on every CPU) or one
    /// 8-byte-padded value per CPU.
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        self.check_key(key)?;
        if self.spec.map_type == MapType::Cpumap {
            return self.cpumap_update(key, value, flags);
        }
        match &*self.store {
            Store::Array(a) => a.update(u32_key(key)?, value, flags, None),
            Store::Hash(h) => h.update(key, value, flags, None),
            Store::Lpm(l) => l.update(key, value, flags),
            Store::ProgArray(p) => {
                let i = u32_key(key)?;
                let e = u32_key(value)?;
                if flags > BPF_EXIST {
                    return Err(MapError::Invalid(format!("flags {flags:#x}")));
                }
                if e as usize >= self.n_entries {
                    return Err(MapError::Invalid(format!(
                        "entry {e} does not exist ({} entries)",
                        self.n_entries
                    )));
                }
                let slot = p.slots.get(i as usize).ok_or(MapError::Full)?;
                if flags == BPF_NOEXIST {
                    return Err(MapError::Exists);
                }
                slot.store(e, Ordering::Release);
                Ok(())
            }
            Store::Outer(o) => o.set(key, value, flags),
            Store::Ringbuf(_) | Store::PerfEvents => Err(MapError::Unsupported),
        }
    }

    /// A cpumap entry is `struct bpf_cpumap_val` (`qsize`, then an optional
    /// program fd the VM does not run), checked in the kernel's order: key
    /// below `max_entries` (`E2BIG`), no `BPF_NOEXIST` (`EEXIST`), queue
    /// size at most 16384, key a CPU of the VM (`ENODEV`); queue size 0
    /// clears the entry.
    fn cpumap_update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        let Store::Hash(h) = &*self.store else {
            return Err(MapError::Unsupported);
        };
        let cpu = u32_key(key)?;
        let qsize = u32_key(value.get(..4).unwrap_or_default())?;
        if flags > BPF_EXIST {
            return Err(MapError::Invalid(format!("flags {flags:#x}")));
        }
        if cpu >= h.max {
            return Err(MapError::Full);
        }
        if flags == BPF_NOEXIST {
            return Err(MapError::Exists);
        }
        if qsize > CPUMAP_MAX_QSIZE {
            return Err(MapError::Invalid(format!(
                "queue size {qsize} is above {CPUMAP_MAX_QSIZE}"
            )));
        }
        if cpu >= self.cpus {
            return Err(MapError::NoDevice);
        }
        if value.get(4..).is_some_and(|fd| fd.iter().any(|&b| b != 0)) {
            return Err(MapError::Invalid(
                "cpumap programs are not run by the VM".into(),
            ));
        }
        if qsize == 0 {
            return match h.delete(key) {
                Ok(()) | Err(MapError::NotFound) => Ok(()),
                Err(e) => Err(e),
            };
        }
        h.update(key, value, flags, None)
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        self.check_key(key)?;
        match &*self.store {
            Store::Array(_) => Err(MapError::Invalid("array elements cannot be deleted".into())),
            Store::Hash(h) => h.delete(key),
            Store::Lpm(l) => l.delete(key),
            Store::ProgArray(p) => {
                let slot = p.slots.get(u32_key(key)? as usize).ok_or(MapError::Full)?;
                if slot.swap(EMPTY, Ordering::AcqRel) == EMPTY {
                    Err(MapError::NotFound)
                } else {
                    Ok(())
                }
            }
            Store::Outer(o) => o.slots.delete(key),
            Store::Ringbuf(_) | Store::PerfEvents => Err(MapError::Unsupported),
        }
    }

    /// All keys (arrays: every index; hashes: in byte order).
    pub fn keys(&self) -> Vec<Vec<u8>> {
        match &*self.store {
            Store::Array(a) => (0..a.max).map(|i| i.to_le_bytes().to_vec()).collect(),
            Store::Hash(h) => h.keys(),
            Store::Lpm(l) => l.keys(),
            Store::ProgArray(p) => (0..p.slots.len() as u32)
                .filter(|&i| p.get(i).is_some())
                .map(|i| i.to_le_bytes().to_vec())
                .collect(),
            Store::Outer(o) => o.slots.keys(),
            Store::Ringbuf(_) | Store::PerfEvents => Vec::new(),
        }
    }

    /// All entries as (key, value) pairs, values as [`Map::lookup`] gives them.
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.keys()
            .into_iter()
            .filter_map(|k| match self.lookup(&k) {
                Ok(Some(v)) => Some((k, v)),
                _ => None,
            })
            .collect()
    }

    /// Takes every submitted record out of a ring buffer (discarded
    /// records are skipped), oldest first.
    pub fn ringbuf_consume(&self) -> Result<Vec<Vec<u8>>, MapError> {
        match &*self.store {
            Store::Ringbuf(r) => Ok(r.consume()),
            _ => Err(MapError::Unsupported),
        }
    }

    /// The prog array behind this map, if it is one.
    pub fn prog_array(&self) -> Option<&ProgArray> {
        match &*self.store {
            Store::ProgArray(p) => Some(p),
            _ => None,
        }
    }

    /// The slots behind this map, if it is a map of maps.
    pub fn outer(&self) -> Option<&outer::OuterMap> {
        match &*self.store {
            Store::Outer(o) => Some(o),
            _ => None,
        }
    }

    /// The ring buffer behind this map, if it is one.
    pub fn ringbuf(&self) -> Option<&ringbuf::RingBuf> {
        match &*self.store {
            Store::Ringbuf(r) => Some(r),
            _ => None,
        }
    }
}

/// The maps of a VM, in the Image's order.
#[derive(Debug, Default)]
pub struct Maps {
    maps: Vec<Arc<Map>>,
}

impl Maps {
    /// Creates every map of the Image; maps of maps learn which maps fit
    /// their slots and get their initial slots.
    pub fn new(specs: &[MapSpec], ncpus: u32, n_entries: usize) -> Result<Maps, crate::LoadError> {
        Maps::new_keeping(specs, ncpus, n_entries, |_| None)
    }

    /// [`Maps::new`], but map `i` takes the storage `keep(spec)` gives
    /// (a map of another VM), when that map [`Map::can_share`] `spec`
    /// on `ncpus` CPUs: both VMs then read and write the same entries.
    pub fn new_keeping<'a>(
        specs: &[MapSpec],
        ncpus: u32,
        n_entries: usize,
        keep: impl Fn(&MapSpec) -> Option<&'a Map>,
    ) -> Result<Maps, crate::LoadError> {
        let mut maps = Vec::with_capacity(specs.len());
        let bad = |i: usize, detail: String| crate::LoadError::Map {
            index: i,
            name: specs[i].name.clone(),
            detail,
        };
        for (i, s) in specs.iter().enumerate() {
            if let Some(old) = keep(s).filter(|old| old.can_share(s, ncpus)) {
                maps.push(Arc::new(Map {
                    spec: s.clone(),
                    index: i,
                    store: Arc::clone(&old.store),
                    n_entries,
                    cpus: ncpus.max(1),
                }));
                continue;
            }
            let mut m = Map::new(i, s, ncpus, n_entries).map_err(|d| bad(i, d))?;
            if let (Some(Store::Outer(o)), Some(inner)) = (Arc::get_mut(&mut m.store), &s.inner) {
                o.allowed = (0..specs.len())
                    .filter(|&j| {
                        specs[j].kind == MapKind::Declared
                            && outer::fits(&inner.template, &specs[j])
                    })
                    .map(|j| j as u32)
                    .collect();
                for slot in &inner.slots {
                    let j = specs
                        .iter()
                        .position(|x| x.kind == MapKind::Declared && x.name == slot.map)
                        .ok_or_else(|| {
                            bad(i, format!("slot {}: no map {}", slot.slot, slot.map))
                        })?;
                    o.set(&slot.slot.to_le_bytes(), &(j as u32).to_le_bytes(), BPF_ANY)
                        .map_err(|e| bad(i, format!("slot {} ({}): {e}", slot.slot, slot.map)))?;
                }
            }
            maps.push(Arc::new(m));
        }
        Ok(Maps { maps })
    }

    /// The map called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Map>> {
        self.maps.iter().find(|m| m.spec.name == name)
    }

    /// Map number `i`.
    pub fn by_index(&self, i: usize) -> Option<&Arc<Map>> {
        self.maps.get(i)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Map>> {
        self.maps.iter()
    }

    pub fn len(&self) -> usize {
        self.maps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }
}
