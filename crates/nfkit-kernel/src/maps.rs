//! Kernel maps: creation from an Image's [`MapSpec`]s (BTF key/value
//! types when the kernel takes them, global data sections as one-entry
//! arrays with their initial bytes, `.rodata` frozen) and [`KMap`], a
//! handle to read and write a map from Rust.

use crate::error::KernelError;
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType as LMapType};
use nfkit_object::{MapKind, MapSpec, MapType};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;

/// `BPF_F_RDONLY_PROG`: the program may only read the map.
const BPF_F_RDONLY_PROG: u32 = 1 << 7;

/// A map entry: key and value bytes.
pub type Entry = (Vec<u8>, Vec<u8>);
/// A per-CPU map entry: key and one value per possible CPU.
pub type PercpuEntry = (Vec<u8>, Vec<Vec<u8>>);

/// A kernel map, shared by the [`Loaded`](crate::Loaded) set it belongs
/// to and by every `KMap` cloned from it (the fd stays open while any
/// of them lives).
#[derive(Clone, Debug)]
pub struct KMap {
    name: String,
    map_type: MapType,
    handle: Arc<MapHandle>,
}

fn op_err<'a>(map: &'a str, op: &'static str) -> impl FnOnce(libbpf_rs::Error) -> KernelError + 'a {
    move |source| KernelError::MapOp {
        map: map.to_string(),
        op,
        cause: source,
    }
}

impl KMap {
    pub(crate) fn new(name: &str, handle: MapHandle) -> KMap {
        let map_type = MapType::from_kernel_id(handle.map_type() as u32).unwrap_or(MapType::Unspec);
        KMap {
            name: name.to_string(),
            map_type,
            handle: Arc::new(handle),
        }
    }

    /// The map's name in the Image (the kernel keeps at most 15 bytes).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn map_type(&self) -> MapType {
        self.map_type
    }

    pub fn key_size(&self) -> u32 {
        self.handle.key_size()
    }

    pub fn value_size(&self) -> u32 {
        self.handle.value_size()
    }

    pub fn max_entries(&self) -> u32 {
        self.handle.max_entries()
    }

    /// The map's fd (valid while this `KMap` lives).
    pub fn fd(&self) -> RawFd {
        self.handle.as_fd().as_raw_fd()
    }

    /// The kernel's id of the map.
    pub fn id(&self) -> Result<u32, KernelError> {
        self.handle
            .info()
            .map(|i| i.info.id)
            .map_err(op_err(&self.name, "info"))
    }

    /// The libbpf-rs handle (pinning, batch operations).
    pub fn handle(&self) -> &MapHandle {
        &self.handle
    }

    /// One value per CPU (per-CPU maps) rather than one value.
    pub fn is_percpu(&self) -> bool {
        matches!(
            self.map_type,
            MapType::PercpuArray
                | MapType::PercpuHash
                | MapType::LruPercpuHash
                | MapType::PercpuCgroupStorage
        )
    }

    /// The value of `key` (not for per-CPU maps: see [`KMap::lookup_percpu`]).
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KernelError> {
        self.handle
            .lookup(key, MapFlags::ANY)
            .map_err(op_err(&self.name, "lookup"))
    }

    /// The values of `key` on every possible CPU, each `value_size` bytes.
    pub fn lookup_percpu(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, KernelError> {
        self.handle
            .lookup_percpu(key, MapFlags::ANY)
            .map_err(op_err(&self.name, "lookup"))
    }

    /// Sets `key` to `value` with the kernel's `BPF_ANY`/`BPF_NOEXIST`/
    /// `BPF_EXIST` flags (`flags`).
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), KernelError> {
        self.handle
            .update(key, value, MapFlags::from_bits_retain(flags))
            .map_err(op_err(&self.name, "update"))
    }

    /// Sets `key` of a per-CPU map to one value per possible CPU.
    pub fn update_percpu(
        &self,
        key: &[u8],
        values: &[Vec<u8>],
        flags: u64,
    ) -> Result<(), KernelError> {
        self.handle
            .update_percpu(key, values, MapFlags::from_bits_retain(flags))
            .map_err(op_err(&self.name, "update"))
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &[u8]) -> Result<(), KernelError> {
        self.handle
            .delete(key)
            .map_err(op_err(&self.name, "delete"))
    }

    /// Every key, in the kernel's iteration order.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        self.handle.keys().collect()
    }

    /// Every `(key, value)` of a map that is not per-CPU.
    pub fn entries(&self) -> Result<Vec<Entry>, KernelError> {
        let mut out = Vec::new();
        for k in self.keys() {
            if let Some(v) = self.lookup(&k)? {
                out.push((k, v));
            }
        }
        Ok(out)
    }

    /// Every `(key, values per CPU)` of a per-CPU map.
    pub fn entries_percpu(&self) -> Result<Vec<PercpuEntry>, KernelError> {
        let mut out = Vec::new();
        for k in self.keys() {
            if let Some(v) = self.lookup_percpu(&k)? {
                out.push((k, v));
            }
        }
        Ok(out)
    }

    /// Makes the map read-only for user space (as for `.rodata`).
    pub fn freeze(&self) -> Result<(), KernelError> {
        self.handle.freeze().map_err(op_err(&self.name, "freeze"))
    }

    /// Pins the map at `path` (on bpffs).
    pub fn pin(&self, path: &std::path::Path) -> Result<(), KernelError> {
        // `pin` needs `&mut`; pin a second handle on the same map.
        let mut h = MapHandle::try_from(&*self.handle).map_err(op_err(&self.name, "pin"))?;
        h.pin(path).map_err(op_err(&self.name, "pin"))
    }
}

/// The kernel's name for a map: at most 15 bytes of `[A-Za-z0-9_.]`.
pub(crate) fn kernel_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(15)
        .collect()
}

/// Map types whose BTF key/value the kernel checks (others refuse BTF).
fn takes_btf(t: MapType) -> bool {
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

/// The number of entries the kernel map of `spec` gets: a
/// `perf_event_array` declared with none gets one per possible CPU, as
/// libbpf gives it; every other map what it declares.
pub fn max_entries_of(spec: &MapSpec) -> Result<u32, KernelError> {
    if spec.map_type == MapType::PerfEventArray && spec.max_entries == 0 {
        let n = crate::possible_cpus()?;
        return Ok(u32::try_from(n).unwrap_or(u32::MAX));
    }
    Ok(spec.max_entries)
}

/// Creates the map of `spec` (BTF from `btf_fd` when given and taken,
/// else without); fills and freezes global-data maps, fills declared
/// arrays that have initial contents. Maps of maps start
/// empty: [`fill_outer`] puts their initial inner maps in.
pub(crate) fn create(spec: &MapSpec, btf_fd: Option<RawFd>) -> Result<KMap, KernelError> {
    let read_only = matches!(
        spec.kind,
        MapKind::Global {
            read_only: true,
            ..
        }
    );
    let mut flags = spec.flags;
    if read_only {
        flags |= BPF_F_RDONLY_PROG;
    }
    let ltype = LMapType::from(spec.map_type.kernel_id());
    let mut opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: flags,
        ..Default::default()
    };
    let name = kernel_name(&spec.name);
    let max_entries = max_entries_of(spec)?;
    // A map of maps is created from a map of its inner definition (its
    // `inner_map_fd`), closed once the outer map exists, as libbpf does.
    let template = match &spec.inner {
        Some(inner) => Some(create(&inner.template, None)?),
        None => None,
    };
    if let Some(t) = &template {
        opts.inner_map_fd = t.fd() as u32;
    }
    let mut handle = None;
    if let (Some(fd), Some(v), true) = (btf_fd, spec.value_type_id, takes_btf(spec.map_type)) {
        opts.btf_fd = fd as u32;
        opts.btf_key_type_id = spec.key_type_id.unwrap_or(0);
        opts.btf_value_type_id = v;
        handle = MapHandle::create(
            ltype,
            Some(&name),
            spec.key_size,
            spec.value_size,
            max_entries,
            &opts,
        )
        .ok();
        opts.btf_fd = 0;
        opts.btf_key_type_id = 0;
        opts.btf_value_type_id = 0;
    }
    let handle = match handle {
        Some(h) => h,
        None => MapHandle::create(
            ltype,
            Some(&name),
            spec.key_size,
            spec.value_size,
            max_entries,
            &opts,
        )
        .map_err(|source| KernelError::MapCreate {
            map: spec.name.clone(),
            map_type: spec.map_type.name().to_string(),
            key_size: spec.key_size,
            value_size: spec.value_size,
            max_entries,
            flags,
            cause: source,
        })?,
    };
    let map = KMap::new(&spec.name, handle);
    if let MapKind::Global { .. } = spec.kind {
        let mut data = spec.data.clone().unwrap_or_default();
        data.resize(spec.value_size as usize, 0);
        map.update(&0u32.to_le_bytes(), &data, 0)?;
        if read_only {
            map.freeze()?;
        }
    } else if let Some(data) = &spec.data {
        // A declared array's initial contents (nfkit_object::initial).
        nfkit_object::initial::check(spec, data.len()).map_err(|why| KernelError::MapData {
            map: spec.name.clone(),
            why,
        })?;
        for (k, v) in nfkit_object::initial::entries(data, spec.value_size) {
            map.update(&k.to_ne_bytes(), &v, 0)?;
        }
    }
    Ok(map)
}

/// Writes the initial contents of declared array `spec` into `map`, an
/// existing map reused for it (a dynamic-mode swap, whose loaded NFs keep
/// the map): the entries the contents cover, and zeros in the others,
/// so the map holds what a fresh one would.
pub(crate) fn refill(spec: &MapSpec, map: &KMap) -> Result<(), KernelError> {
    let Some(data) = &spec.data else {
        return Ok(());
    };
    if !matches!(spec.kind, MapKind::Declared) {
        return Ok(());
    }
    nfkit_object::initial::check(spec, data.len()).map_err(|why| KernelError::MapData {
        map: spec.name.clone(),
        why,
    })?;
    let mut written = 0;
    for (k, v) in nfkit_object::initial::entries(data, spec.value_size) {
        map.update(&k.to_ne_bytes(), &v, 0)?;
        written = k + 1;
    }
    let zero = vec![0u8; spec.value_size as usize];
    for k in written..spec.max_entries {
        map.update(&k.to_ne_bytes(), &zero, 0)?;
    }
    Ok(())
}

/// Fills the initial slots of the maps of maps among `specs` (created as
/// `maps`, in the same order; `fresh`: created now rather than reused)
/// with the fds of the maps they name.
pub(crate) fn fill_outer(
    specs: &[MapSpec],
    maps: &[KMap],
    fresh: &[bool],
) -> Result<(), KernelError> {
    for ((spec, outer), _) in specs.iter().zip(maps).zip(fresh).filter(|(_, &f)| f) {
        let Some(inner) = &spec.inner else { continue };
        for slot in &inner.slots {
            let Some(m) = specs
                .iter()
                .position(|s| s.kind == MapKind::Declared && s.name == slot.map)
                .and_then(|i| maps.get(i))
            else {
                return Err(KernelError::MapSlot {
                    map: spec.name.clone(),
                    slot: slot.slot,
                    inner: slot.map.clone(),
                });
            };
            outer.update(&slot.slot.to_le_bytes(), &(m.fd() as u32).to_le_bytes(), 0)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_are_short_and_clean() {
        assert_eq!(kernel_name(".rodata"), ".rodata");
        assert_eq!(kernel_name("a-very-long-map-name-x"), "a_very_long_map");
    }
}
