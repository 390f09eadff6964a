//! Initial contents of declared array maps ([`MapSpec::data`] on a
//! [`MapKind::Declared`] map): the values of entries 0, 1, ... back to
//! back, as a prefix (entries and bytes past its end start as zeros).
//! In an object each such map has a section of its own, named
//! [`SECTION_PREFIX`] + the map's name, not allocated (libbpf skips it;
//! nfkit's reader gives it back to the map).

use crate::image::{MapKind, MapSpec, MapType};

/// Name prefix of the sections holding declared maps' initial contents.
pub const SECTION_PREFIX: &str = ".nfkit.init.";

/// Why `spec` cannot start with `len` bytes of initial contents, if it
/// cannot: only declared (non-per-CPU) arrays take them, up to
/// `value_size * max_entries` bytes.
pub fn check(spec: &MapSpec, len: usize) -> Result<(), String> {
    if spec.kind != MapKind::Declared {
        return Ok(());
    }
    if spec.map_type != MapType::Array {
        return Err(format!(
            "initial contents are supported for array maps only, '{}' is a {}",
            spec.name,
            spec.map_type.name()
        ));
    }
    let cap = spec.value_size as u64 * spec.max_entries as u64;
    if len as u64 > cap {
        return Err(format!(
            "initial contents of '{}' are {len} bytes, the map holds {cap} ({} entries of {} bytes)",
            spec.name, spec.max_entries, spec.value_size
        ));
    }
    Ok(())
}

/// The entries `data` sets in a declared array of `value_size`-byte
/// values: `(key, value)`, the last one zero-padded.
pub fn entries(data: &[u8], value_size: u32) -> impl Iterator<Item = (u32, Vec<u8>)> + '_ {
    let vs = (value_size as usize).max(1);
    data.chunks(vs).enumerate().map(move |(k, c)| {
        let mut v = c.to_vec();
        v.resize(vs, 0);
        (k as u32, v)
    })
}
