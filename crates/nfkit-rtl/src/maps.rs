//! The coprocessor's maps: which of an image's maps it holds (and the
//! refusals, by name, of those beyond its parameters), where their lines
//! are, and the host side of their contents (lookup, update, delete,
//! listing) through the model's line and value ports.

use crate::core::Core;
use crate::error::RtlError;
use crate::layout::{
    addr, KEY_BYTES, KEY_WORDS, LINES, LPM_DATA_BYTES, NMAPS, REGION_MAP_HANDLES, REGION_VALUE,
    VALUE_BASE, VAL_BYTES,
};
use crate::model::Line;
use nfkit_isa::{Insn, LddwKind};
use nfkit_object::{Image, MapType};

/// How the coprocessor serves a map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// Exact match on a CAM (hash maps).
    Exact,
    /// Longest-prefix match on a TCAM (LPM tries).
    Lpm,
    /// Indexed lines (arrays; a per-CPU array is the engine's own copy).
    Array,
    /// A devmap: lines keyed by the indices present, for
    /// `bpf_redirect_map` (map calls on it fault).
    Devmap,
    /// A map the program never references: no lines, never refused.
    Unused,
}

impl MapKind {
    fn code(self) -> u32 {
        match self {
            MapKind::Unused => 0,
            MapKind::Exact => 1,
            MapKind::Lpm => 2,
            MapKind::Array => 3,
            MapKind::Devmap => 4,
        }
    }

    /// Whether its lines hold keys (rather than indices).
    fn keyed(self) -> bool {
        matches!(self, MapKind::Exact | MapKind::Lpm | MapKind::Devmap)
    }
}

/// One map placed on the coprocessor's lines `[base, base + lines())`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDef {
    pub name: String,
    pub kind: MapKind,
    pub key_size: u32,
    pub value_size: u32,
    /// Entries the coprocessor holds (at most `declared`).
    pub max_entries: u32,
    /// Entries the object declares; more than `max_entries` when the
    /// loader sized the map down ([`MapTable::from_image_sized`]): a run
    /// that needs more faults with [`FaultKind::Capacity`](crate::FaultKind).
    pub declared: u32,
    pub base: u32,
    /// An LRU hash: the coprocessor keeps no use order, so an insert into
    /// its full lines is a capacity fault where the VM would evict.
    pub lru: bool,
    /// Initial values of an array (a global section's data; a declared
    /// array's entries back to back).
    pub init: Option<Vec<u8>>,
    /// A per-CPU array: each engine of a switch has its own copy (the
    /// host side reads and writes engine 0's, a single engine's only one).
    pub percpu: bool,
}

impl MapDef {
    /// The coprocessor's map type code.
    fn code(&self) -> u32 {
        match self.kind {
            MapKind::Array if self.percpu => 5,
            k => k.code(),
        }
    }

    /// Lines one entry takes: an array's value wider than a line's slot
    /// spans consecutive lines.
    pub fn stride(&self) -> u32 {
        self.value_size.div_ceil(VAL_BYTES as u32).max(1)
    }

    /// Lines the map takes.
    pub fn lines(&self) -> u32 {
        if self.kind == MapKind::Unused {
            return 0;
        }
        self.max_entries * self.stride()
    }

    /// The line of an array's entry `idx`.
    pub(crate) fn array_line(&self, idx: u32) -> u32 {
        self.base + idx * self.stride()
    }

    /// Whether the loader gave the map fewer entries than it declares.
    pub fn sized_down(&self) -> bool {
        self.max_entries < self.declared
    }

    /// Whether running out of lines is a capacity fault (not the map's
    /// own "full" answer): sized down, or LRU.
    fn trunc(&self) -> bool {
        self.sized_down() || self.lru
    }
}

/// The maps of a program, in the image's order (a program's map index).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapTable {
    pub maps: Vec<MapDef>,
}

/// Why the coprocessor cannot hold a map of `map_type` with these sizes.
fn refusal(map_type: MapType, key: u32, value: u32, entries: u32) -> Result<MapKind, String> {
    refusal_sized(map_type, key, value, entries, LINES as u32)
}

/// The maps `insns` reference (`lddw` of a map or of a map value).
fn referenced(insns: &[Insn]) -> Vec<usize> {
    let mut out: Vec<usize> = insns
        .iter()
        .filter_map(|i| match *i {
            Insn::Lddw {
                kind: LddwKind::MapIdx | LddwKind::MapIdxValue,
                imm,
                ..
            } if imm >= 0 => Some(imm as usize),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// As [`refusal`], entries up to `lines`.
fn refusal_sized(
    map_type: MapType,
    key: u32,
    value: u32,
    entries: u32,
    lines: u32,
) -> Result<MapKind, String> {
    let kind = match map_type {
        MapType::Hash => MapKind::Exact,
        MapType::LpmTrie => MapKind::Lpm,
        MapType::Array | MapType::PercpuArray => MapKind::Array,
        // Exact match without eviction (a full map faults: see MapDef::lru).
        MapType::LruHash | MapType::LruPercpuHash => MapKind::Exact,
        MapType::Devmap => MapKind::Devmap,
        other => return Err(format!("map type {other:?} is not in the coprocessor")),
    };
    let key_max = match kind {
        MapKind::Lpm => LPM_DATA_BYTES + 4,
        MapKind::Array | MapKind::Devmap | MapKind::Unused => 4,
        MapKind::Exact => KEY_BYTES,
    };
    if key as usize > key_max || key == 0 || (kind == MapKind::Lpm && key <= 4) {
        return Err(format!(
            "key of {key} bytes (the coprocessor's keys: up to {key_max})"
        ));
    }
    // Arrays' values may span lines; hash and LPM values fit one slot.
    let value_max = match kind {
        MapKind::Array => VAL_BYTES * 16,
        _ => VAL_BYTES,
    };
    if value as usize > value_max || value == 0 {
        return Err(format!(
            "value of {value} bytes (the coprocessor's values: up to {value_max})"
        ));
    }
    let stride = value.div_ceil(VAL_BYTES as u32).max(1);
    if entries.saturating_mul(stride) > lines || entries == 0 {
        return Err(format!(
            "{entries} entries (the coprocessor has {LINES} lines)"
        ));
    }
    Ok(kind)
}

impl MapTable {
    /// The image's maps, placed one after the other on the lines.
    pub fn from_image(image: &Image) -> Result<MapTable, RtlError> {
        MapTable::from_image_sized(image, None)
    }

    /// As [`from_image`](Self::from_image); with `cap`, a map declaring
    /// more than `cap` entries gets `cap` (the catalogue's tables declare
    /// 16384-65536, a run on a capture uses a few): a run needing more
    /// faults with [`FaultKind::Capacity`](crate::FaultKind) instead of
    /// answering differently from the VM.
    pub fn from_image_sized(image: &Image, cap: Option<u32>) -> Result<MapTable, RtlError> {
        MapTable::place(image, cap, None)
    }

    /// As [`from_image_sized`](Self::from_image_sized), placing only the
    /// maps `insns` reference: the others keep their index but take no
    /// lines and are not refused (an NF wrapper's objects declare 13-20
    /// maps, a program uses some).
    pub fn for_program(
        image: &Image,
        cap: Option<u32>,
        insns: &[Insn],
    ) -> Result<MapTable, RtlError> {
        MapTable::place(image, cap, Some(&referenced(insns)))
    }

    fn place(
        image: &Image,
        cap: Option<u32>,
        used: Option<&[usize]>,
    ) -> Result<MapTable, RtlError> {
        let mut table = MapTable::default();
        for (i, m) in image.maps.iter().enumerate() {
            if used.is_some_and(|u| !u.contains(&i)) {
                if table.maps.len() >= NMAPS {
                    return Err(RtlError::MapRefused {
                        name: m.name.clone(),
                        why: format!("the coprocessor holds {NMAPS} maps"),
                    });
                }
                table.maps.push(MapDef {
                    name: m.name.clone(),
                    kind: MapKind::Unused,
                    key_size: m.key_size,
                    value_size: m.value_size,
                    max_entries: 0,
                    declared: m.max_entries,
                    base: table.lines_used(),
                    lru: false,
                    init: None,
                    percpu: false,
                });
                continue;
            }
            let entries = match cap {
                Some(c) if m.max_entries > c => c,
                _ => m.max_entries,
            };
            table.push_sized(
                &m.name,
                m.map_type,
                m.key_size,
                m.value_size,
                entries,
                m.max_entries,
            )?;
            if let (Some(def), Some(data)) = (table.maps.last_mut(), m.data.as_ref()) {
                def.init = Some(data.clone());
            }
        }
        Ok(table)
    }

    /// Places one more map, or says by name why it does not fit.
    pub fn push(
        &mut self,
        name: &str,
        map_type: MapType,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> Result<usize, RtlError> {
        self.push_sized(
            name,
            map_type,
            key_size,
            value_size,
            max_entries,
            max_entries,
        )
    }

    /// Places a map declaring `declared` entries on lines for `entries`.
    pub fn push_sized(
        &mut self,
        name: &str,
        map_type: MapType,
        key_size: u32,
        value_size: u32,
        entries: u32,
        declared: u32,
    ) -> Result<usize, RtlError> {
        let max_entries = entries.min(declared);
        let refuse = |why: String| RtlError::MapRefused {
            name: name.to_string(),
            why,
        };
        if self.maps.len() >= NMAPS {
            return Err(refuse(format!("the coprocessor holds {NMAPS} maps")));
        }
        let kind = refusal(map_type, key_size, value_size, max_entries).map_err(refuse)?;
        let base = self.lines_used();
        let def = MapDef {
            name: name.to_string(),
            kind,
            key_size,
            value_size,
            max_entries,
            declared,
            base,
            lru: matches!(map_type, MapType::LruHash | MapType::LruPercpuHash),
            init: None,
            percpu: map_type == MapType::PercpuArray,
        };
        if (base + def.lines()) as usize > LINES {
            return Err(refuse(format!(
                "{max_entries} entries after {base} lines of other maps (the coprocessor has {LINES})"
            )));
        }
        self.maps.push(def);
        Ok(self.maps.len() - 1)
    }

    /// Lines the maps take.
    pub fn lines_used(&self) -> u32 {
        self.maps.iter().map(MapDef::lines).sum()
    }

    /// The program with its map references (`lddw` of a map or of a map
    /// value) made the constants the coprocessor answers to: a handle
    /// `1 << 32 | index`, or the address of an array's value 0 plus the
    /// offset.
    pub fn resolve(&self, insns: &[Insn]) -> Result<Vec<Insn>, RtlError> {
        let mut slot = 0;
        let mut out = Vec::with_capacity(insns.len());
        for insn in insns {
            let here = slot;
            slot += insn.slots();
            let Insn::Lddw {
                kind,
                dst,
                imm,
                next_imm,
            } = *insn
            else {
                out.push(*insn);
                continue;
            };
            let map = |idx: i32| {
                self.maps.get(idx as usize).ok_or(RtlError::NoMap {
                    slot: here,
                    index: idx,
                })
            };
            let v = match kind {
                LddwKind::MapIdx => {
                    map(imm)?;
                    addr(REGION_MAP_HANDLES, imm as u32 as u64)
                }
                LddwKind::MapIdxValue => {
                    let m = map(imm)?;
                    if m.kind != MapKind::Array || next_imm < 0 || next_imm as u32 >= m.value_size {
                        return Err(RtlError::NoMap {
                            slot: here,
                            index: imm,
                        });
                    }
                    addr(
                        REGION_VALUE,
                        (m.base as u64) * VAL_BYTES as u64 + next_imm as u64,
                    )
                }
                _ => {
                    out.push(*insn);
                    continue;
                }
            };
            out.push(Insn::lddw(dst, v));
        }
        Ok(out)
    }
}

/// A map entry: key and value bytes.
pub type Entry = (Vec<u8>, Vec<u8>);

/// A map operation from the host failed (the kernel's errno names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapOpError {
    #[error("no such entry (ENOENT)")]
    NotFound,
    #[error("entry exists (EEXIST)")]
    Exists,
    #[error("map is full or index out of range (E2BIG)")]
    Full,
    #[error("no space (ENOSPC)")]
    NoSpace,
    #[error("invalid argument (EINVAL)")]
    Invalid,
}

/// Key bytes into a line's words (zero-padded).
fn key_words(bytes: &[u8]) -> [u32; KEY_WORDS] {
    let mut b = [0u8; KEY_BYTES];
    let n = bytes.len().min(KEY_BYTES);
    b[..n].copy_from_slice(&bytes[..n]);
    let mut w = [0u32; KEY_WORDS];
    for (i, c) in b.chunks(4).enumerate() {
        w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    w
}

fn word_bytes(w: &[u32; KEY_WORDS]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The first `plen` bits of `data` (network order), the rest zero.
fn masked(data: &[u8], plen: u32) -> Vec<u8> {
    data.iter()
        .enumerate()
        .map(|(i, &b)| {
            let bits = plen.saturating_sub(i as u32 * 8).min(8);
            if bits == 0 {
                0
            } else {
                b & (0xffu8 << (8 - bits))
            }
        })
        .collect()
}

/// A host-side key: the line's `(plen, key words)`.
fn line_key(m: &MapDef, key: &[u8]) -> Result<(u32, [u32; KEY_WORDS]), MapOpError> {
    if key.len() != m.key_size as usize {
        return Err(MapOpError::Invalid);
    }
    match m.kind {
        MapKind::Lpm => {
            let plen = u32::from_le_bytes([key[0], key[1], key[2], key[3]]);
            if plen > (m.key_size - 4) * 8 {
                return Err(MapOpError::Invalid);
            }
            Ok((plen, key_words(&masked(&key[4..], plen))))
        }
        _ => Ok((m.key_size * 8, key_words(key))),
    }
}

/// A model whose coprocessor holds maps, as the host reaches it: the
/// maps' configuration and lines, and data memory bytes (the values).
pub(crate) trait MapHost {
    fn map_table(&self) -> &MapTable;
    fn host_map_config(&mut self, map: u32, c: [u32; 6]);
    fn host_line_write(&mut self, idx: u32, line: &Line);
    fn host_line_read(&mut self, idx: u32) -> Line;
    fn host_write_bytes(&mut self, at: usize, bytes: &[u8]);
    fn host_read_bytes(&mut self, at: usize, len: usize) -> Vec<u8>;
    /// Map `m`'s value slot `line` (a per-CPU array's: every engine's
    /// copy written, engine 0's read).
    fn host_write_value(&mut self, _m: &MapDef, line: u32, value: &[u8]) {
        self.host_write_bytes(VALUE_BASE + line as usize * VAL_BYTES, value);
    }
    fn host_read_value(&mut self, _m: &MapDef, line: u32, len: usize) -> Vec<u8> {
        self.host_read_bytes(VALUE_BASE + line as usize * VAL_BYTES, len)
    }
}

impl MapHost for Core {
    fn map_table(&self) -> &MapTable {
        &self.program().maps
    }
    fn host_map_config(&mut self, map: u32, c: [u32; 6]) {
        self.model.map_config(map, c);
    }
    fn host_line_write(&mut self, idx: u32, line: &Line) {
        self.model.line_write(idx, line);
    }
    fn host_line_read(&mut self, idx: u32) -> Line {
        self.model.line_read(idx)
    }
    fn host_write_bytes(&mut self, at: usize, bytes: &[u8]) {
        self.write_bytes(at, bytes);
    }
    fn host_read_bytes(&mut self, at: usize, len: usize) -> Vec<u8> {
        self.read_bytes(at, len)
    }
}

/// The host side of the maps on any [`MapHost`] (the engine's `Core`,
/// the `Switch`'s shared coprocessor), behind their `map_*` methods.
pub(crate) trait MapOps: MapHost {
    fn map_def(&self, map: usize) -> Result<MapDef, RtlError> {
        self.map_table()
            .maps
            .get(map)
            .cloned()
            .ok_or(RtlError::NoMap {
                slot: 0,
                index: map as i32,
            })
    }

    /// Writes the map table into the coprocessor and clears every line.
    fn configure_maps(&mut self, table: &MapTable) {
        for i in 0..NMAPS {
            let c = match table.maps.get(i) {
                Some(m) => [
                    m.code(),
                    m.key_size,
                    m.value_size,
                    m.base,
                    m.max_entries,
                    m.trunc() as u32,
                ],
                None => [0; 6],
            };
            self.host_map_config(i as u32, c);
        }
        for i in 0..LINES {
            if self.host_line_read(i as u32).valid != 0 {
                self.host_line_write(i as u32, &Line::default());
            }
        }
        // Values start zeroed, as the VM's.
        for m in &table.maps {
            let zero = vec![0u8; m.value_size as usize];
            for e in 0..m.max_entries {
                let line = match m.kind {
                    MapKind::Array => m.array_line(e),
                    _ => m.base + e,
                };
                self.write_value(m, line, &zero);
            }
            // Initial values (a global section; a declared array's
            // entries 0, 1, ... back to back).
            if let (MapKind::Array, Some(data)) = (m.kind, m.init.as_ref()) {
                for (e, chunk) in data.chunks(m.value_size as usize).enumerate() {
                    if (e as u32) < m.max_entries {
                        self.write_value(m, m.array_line(e as u32), chunk);
                    }
                }
            }
        }
    }

    fn write_value(&mut self, m: &MapDef, line: u32, value: &[u8]) {
        self.host_write_value(m, line, value);
    }

    fn read_value(&mut self, m: &MapDef, line: u32, len: u32) -> Vec<u8> {
        self.host_read_value(m, line, len as usize)
    }

    /// The line of `key` in map `m` (exact: the LPM entry of that prefix).
    fn find(&mut self, m: &MapDef, plen: u32, words: &[u32; KEY_WORDS]) -> Option<u32> {
        (m.base..m.base + m.max_entries).find(|&i| {
            let l = self.host_line_read(i);
            l.valid != 0 && l.map as usize == self.index_of(m) && l.plen == plen && l.key == *words
        })
    }

    fn index_of(&self, m: &MapDef) -> usize {
        self.map_table()
            .maps
            .iter()
            .position(|d| d.name == m.name && d.base == m.base)
            .unwrap_or(usize::MAX)
    }

    /// The value of `key` in map `map` (an LPM map: of that exact prefix).
    fn map_lookup(&mut self, map: usize, key: &[u8]) -> Result<Option<Vec<u8>>, RtlError> {
        let m = self.map_def(map)?;
        if m.kind == MapKind::Array {
            let idx = array_index(key)?;
            return Ok(
                (idx < m.max_entries).then(|| self.read_value(&m, m.array_line(idx), m.value_size))
            );
        }
        let (plen, words) = line_key(&m, key).map_err(|e| op(&m, e))?;
        Ok(self
            .find(&m, plen, &words)
            .map(|line| self.read_value(&m, line, m.value_size)))
    }

    /// Sets `key` to `value` in map `map` (flags as `bpf_map_update_elem`).
    fn map_update(
        &mut self,
        map: usize,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> Result<(), RtlError> {
        let m = self.map_def(map)?;
        if value.len() != m.value_size as usize || flags > 2 {
            return Err(op(&m, MapOpError::Invalid));
        }
        if m.kind == MapKind::Array {
            let idx = array_index(key)?;
            if idx >= m.max_entries {
                return Err(op(&m, MapOpError::Full));
            }
            if flags == 1 {
                return Err(op(&m, MapOpError::Exists));
            }
            self.write_value(&m, m.array_line(idx), value);
            return Ok(());
        }
        if m.kind == MapKind::Unused {
            return Err(op(&m, MapOpError::Invalid));
        }
        // A devmap's keys are indices below its size (the VM's check);
        // the kernel refuses BPF_NOEXIST on it.
        if m.kind == MapKind::Devmap {
            if array_index(key)? >= m.max_entries {
                return Err(op(&m, MapOpError::Full));
            }
            if flags == 1 {
                return Err(op(&m, MapOpError::Exists));
            }
        }
        let (plen, words) = line_key(&m, key).map_err(|e| op(&m, e))?;
        let line = match self.find(&m, plen, &words) {
            Some(_) if flags == 1 => return Err(op(&m, MapOpError::Exists)),
            Some(line) => line,
            None if flags == 2 => return Err(op(&m, MapOpError::NotFound)),
            None => {
                let free =
                    (m.base..m.base + m.max_entries).find(|&i| self.host_line_read(i).valid == 0);
                let Some(line) = free else {
                    let e = if m.kind == MapKind::Lpm {
                        MapOpError::NoSpace
                    } else {
                        MapOpError::Full
                    };
                    return Err(op(&m, e));
                };
                let l = Line {
                    valid: 1,
                    map: self.index_of(&m) as u32,
                    plen,
                    pad: 0,
                    key: words,
                };
                self.host_line_write(line, &l);
                line
            }
        };
        self.write_value(&m, line, value);
        Ok(())
    }

    /// Deletes `key` from map `map`.
    fn map_delete(&mut self, map: usize, key: &[u8]) -> Result<(), RtlError> {
        let m = self.map_def(map)?;
        if !m.kind.keyed() {
            return Err(op(&m, MapOpError::Invalid));
        }
        let (plen, words) = line_key(&m, key).map_err(|e| op(&m, e))?;
        let line = self
            .find(&m, plen, &words)
            .ok_or_else(|| op(&m, MapOpError::NotFound))?;
        self.host_line_write(line, &Line::default());
        Ok(())
    }

    /// Every entry of map `map` as `(key, value)`, sorted by key (arrays:
    /// every index; LPM keys: prefix length then the masked data).
    fn map_entries(&mut self, map: usize) -> Result<Vec<Entry>, RtlError> {
        let m = self.map_def(map)?;
        let mut out = Vec::new();
        for e in 0..m.max_entries {
            let line = match m.kind {
                MapKind::Array => m.array_line(e),
                _ => m.base + e,
            };
            let key = match m.kind {
                MapKind::Array => e.to_le_bytes().to_vec(),
                _ => {
                    let l = self.host_line_read(line);
                    if l.valid == 0 {
                        continue;
                    }
                    let bytes = word_bytes(&l.key);
                    match m.kind {
                        MapKind::Lpm => {
                            let mut k = l.plen.to_le_bytes().to_vec();
                            k.extend_from_slice(&bytes[..(m.key_size - 4) as usize]);
                            k
                        }
                        _ => bytes[..m.key_size as usize].to_vec(),
                    }
                }
            };
            let value = self.read_value(&m, line, m.value_size);
            out.push((key, value));
        }
        out.sort();
        Ok(out)
    }
}

impl<T: MapHost + ?Sized> MapOps for T {}

impl Core {
    /// The value of `key` in map `map` (an LPM map: of that exact prefix).
    pub fn map_lookup(&mut self, map: usize, key: &[u8]) -> Result<Option<Vec<u8>>, RtlError> {
        MapOps::map_lookup(self, map, key)
    }

    /// Sets `key` to `value` in map `map` (flags as `bpf_map_update_elem`).
    pub fn map_update(
        &mut self,
        map: usize,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> Result<(), RtlError> {
        MapOps::map_update(self, map, key, value, flags)
    }

    /// Deletes `key` from map `map`.
    pub fn map_delete(&mut self, map: usize, key: &[u8]) -> Result<(), RtlError> {
        MapOps::map_delete(self, map, key)
    }

    /// Every entry of map `map` as `(key, value)`, sorted by key (arrays:
    /// every index; LPM keys: prefix length then the masked data).
    pub fn map_entries(&mut self, map: usize) -> Result<Vec<Entry>, RtlError> {
        MapOps::map_entries(self, map)
    }
}

fn array_index(key: &[u8]) -> Result<u32, RtlError> {
    let b: [u8; 4] = key.try_into().map_err(|_| RtlError::MapOp {
        name: "array".into(),
        err: MapOpError::Invalid,
    })?;
    Ok(u32::from_le_bytes(b))
}

fn op(m: &MapDef, err: MapOpError) -> RtlError {
    RtlError::MapOp {
        name: m.name.clone(),
        err,
    }
}

/// Masks LPM data as the coprocessor stores it (for comparisons).
pub fn lpm_masked(data: &[u8], plen: u32) -> Vec<u8> {
    masked(data, plen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_maps_beyond_the_parameters_by_name() {
        let mut t = MapTable::default();
        t.push("ok", MapType::Hash, 16, 64, 1000).expect("fits");
        let e = t
            .push("big", MapType::Hash, 4, 8, 100)
            .expect_err("lines run out")
            .to_string();
        assert!(e.contains("`big`") && e.contains("1000 lines"), "{e}");
        let e = t
            .push("wide", MapType::Hash, 49, 8, 1)
            .expect_err("key too wide")
            .to_string();
        assert!(e.contains("`wide`") && e.contains("key of 49 bytes"), "{e}");
        let e = t
            .push("wide_lpm", MapType::LpmTrie, 21, 8, 1)
            .expect_err("LPM data too wide")
            .to_string();
        assert!(e.contains("key of 21 bytes"), "{e}");
        let e = t
            .push("progs", MapType::ProgArray, 4, 4, 1)
            .expect_err("no prog-array")
            .to_string();
        assert!(e.contains("`progs`") && e.contains("ProgArray"), "{e}");
        let lru = t.push("lru", MapType::LruHash, 48, 8, 1).expect("LRU fits");
        assert!(t.maps[lru].lru && t.maps[lru].trunc());
        assert!(t.push("lpm", MapType::LpmTrie, 20, 8, 2).is_ok());
    }

    #[test]
    fn places_only_the_referenced_maps() {
        use nfkit_isa::Reg;
        let spec = |name: &str, map_type, entries| nfkit_object::MapSpec {
            name: name.to_string(),
            kind: nfkit_object::MapKind::Declared,
            map_type,
            key_size: 4,
            value_size: 8,
            max_entries: entries,
            flags: 0,
            key_type_id: None,
            value_type_id: None,
            data: None,
            pin_by_name: false,
            inner: None,
        };
        let mut image = Image::from_insns("p", nfkit_object::ProgType::Xdp, Vec::new());
        image.maps = vec![
            spec("progs", MapType::ProgArray, 8),
            spec("used", MapType::Array, 4),
            spec("big", MapType::Hash, 100_000),
        ];
        let insns = [
            Insn::Lddw {
                kind: LddwKind::MapIdx,
                dst: Reg::R1,
                imm: 1,
                next_imm: 0,
            },
            Insn::Exit,
        ];
        let t = MapTable::for_program(&image, None, &insns).expect("only `used` placed");
        let kinds: Vec<MapKind> = t.maps.iter().map(|m| m.kind).collect();
        assert_eq!(kinds, [MapKind::Unused, MapKind::Array, MapKind::Unused]);
        assert_eq!(t.lines_used(), 4);
        let e = MapTable::from_image(&image).expect_err("every map placed");
        assert!(e.to_string().contains("`progs`"), "{e}");
    }

    #[test]
    fn masks_prefixes_in_network_order() {
        assert_eq!(masked(&[0xff, 0xff, 0xff], 12), vec![0xff, 0xf0, 0]);
        assert_eq!(masked(&[0xab], 0), vec![0]);
    }
}
